// Imports go downward only: http → core → storage/upstream → errors/config. core never sees fastify
// or a driver; storage never sees http or core.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(__dirname, '../../src');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

const FORBIDDEN: Record<string, RegExp[]> = {
  core: [/from '(fastify|@fastify\/[^']+|better-sqlite3|pg|keyv|@keyv\/[^']+|undici|@opentelemetry\/[^']+)'/, /from '\.\.\/(http|app|server|cli|command|tracing)[/.]/],
  storage: [/from '(fastify|@fastify\/[^']+)'/, /from '\.\.\/(http|core|app|server|cli|command)[/.]/],
  upstream: [/from '(fastify|@fastify\/[^']+)'/, /from '\.\.\/(http|core|app|server|cli|command)[/.]/],
  http: [/from '\.\.\/(app|server|cli|command)[/.]/],
  // tracing: OpenTelemetry on both sides of the report worker; core's plain data in, never the http layer
  tracing: [/from '(fastify|@fastify\/[^']+)'/, /from '\.\.\/(http|app|server|cli|command)[/.]/],
};

describe('architecture', () => {
  it('imports only go downward', () => {
    const bad: string[] = [];
    for (const file of files(SRC)) {
      const layer = relative(SRC, file).split('/')[0]!;
      const rules = FORBIDDEN[layer] ?? [];
      const text = readFileSync(file, 'utf8');
      for (const line of text.split('\n').filter((l) => /^\s*(import|export) .* from '/.test(l))) {
        if (rules.some((r) => r.test(line))) bad.push(`${relative(SRC, file)}: ${line.trim()}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('only config.ts reads process.env (and memory-trim.ts, glibc\'s own variables), and src has no console output', () => {
    for (const file of files(SRC)) {
      const text = readFileSync(file, 'utf8');
      if (file.endsWith('memory-trim.ts')) {
        // MALLOC_ARENA_MAX and GLIBC_TUNABLES are the C library's, not relay settings: read and set as the
        // process starts again (restartForMemory), and nowhere else
        expect(text.match(/process\.env/g), file).toHaveLength(1);
        expect(text, file).toMatch(/env: NodeJS\.ProcessEnv = process\.env/);
      } else if (!file.endsWith('config.ts')) expect(text, file).not.toMatch(/process\.env/);
      expect(text, file).not.toMatch(/console\.(log|error|warn|info|debug)/);
    }
  });
});
