#!/usr/bin/env node
// The llm-relay command's entry. First the process starts again, once, with few malloc arenas (glibc reads
// MALLOC_ARENA_MAX only as a process starts; memory-trim.ts says why and when it does not): before anything
// else loads, so the restart costs a bare Node start-up. Then the command itself (command.ts).
import { restartWithFewArenas } from './memory-trim.js';

restartWithFewArenas();
await import('./command.js');
