#!/usr/bin/env node
// The llm-relay command's entry. First the process starts again, once, with few malloc arenas and the event
// loop's young generation capped (glibc reads MALLOC_ARENA_MAX, and V8 its semi-space size, only as a
// process starts; memory-trim.ts says why and when it does not): before anything
// else loads, so the restart costs a bare Node start-up. Then the command itself (command.ts).
import { restartForMemory } from './memory-trim.js';

restartForMemory();
await import('./command.js');
