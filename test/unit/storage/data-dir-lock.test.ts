// The data-dir lock in one process: a second lock is refused naming the holder, a refused attempt leaves
// the holder's lock in place, and release gives the dir to the next one.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { DataDirInUseError, type DataDirLock, lockDataDir } from '../../../src/storage/data-dir-lock.js';
import { driverPackage } from '../../../src/storage/sqlite-driver.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const dirs: string[] = [];
const locks: DataDirLock[] = [];

afterEach(async () => {
  for (const l of locks.splice(0)) l.release();
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function newDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'relay-lock-'));
  dirs.push(d);
  return join(d, 'data'); // not there yet: lockDataDir makes it
}

function lock(dir: string, role: 'relay' | 'cache import' = 'relay'): DataDirLock {
  const l = lockDataDir(dir, { role, version: '9.9.9' });
  locks.push(l);
  return l;
}

function refusal(fn: () => unknown): DataDirInUseError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DataDirInUseError);
    return err as DataDirInUseError;
  }
  throw new Error('expected a DataDirInUseError');
}

/** Whether another process can take the lock (it exits 0 if it can, 3 if the dir is held). */
async function freeForAnotherProcess(dir: string): Promise<boolean> {
  const script = `
    const Database = require(${JSON.stringify(driverPackage())});
    const db = new Database(${JSON.stringify(join(dir, 'relay.lock'))}, { timeout: 0 });
    try { db.pragma('journal_mode = MEMORY'); db.exec('BEGIN EXCLUSIVE'); process.exit(0); } catch { process.exit(3); }`;
  return run(process.execPath, ['-e', script], { cwd: ROOT }).then(
    () => true,
    (e: { code: number }) => {
      if (e.code !== 3) throw e;
      return false;
    },
  );
}

describe('lockDataDir', () => {
  it('refuses a second lock in the same process, naming the holder, and keeps the first one held', async () => {
    const dir = await newDir();
    const first = lock(dir);
    const holder = JSON.parse(readFileSync(join(dir, 'relay.lock.json'), 'utf8'));
    expect(holder).toEqual({ role: 'relay', pid: process.pid, host: hostname(), startedAt: expect.any(String), version: '9.9.9' });
    expect(new Date(holder.startedAt).toISOString()).toBe(holder.startedAt);

    first.update({ url: 'http://127.0.0.1:8787' });
    const err = refusal(() => lock(dir));
    expect(err.message).toBe(
      `the data dir ${dir} is in use by a running relay (pid ${process.pid} on ${hostname()}, llm-relay 9.9.9, ` +
        `started ${holder.startedAt}, listening on http://127.0.0.1:8787); stop it first, or give this one its own data dir (RELAY_DATA_DIR, --data-dir)`,
    );
    expect(err.holder).toEqual({ ...holder, url: 'http://127.0.0.1:8787' });
    // The refused attempt closed its connection; the first lock is still held, here and for other processes.
    refusal(() => lock(dir, 'cache import'));
    expect(await freeForAnotherProcess(dir)).toBe(false);
  });

  it('release gives the dir up (and removes the holder file); the next lock writes its own', async () => {
    const dir = await newDir();
    const first = lock(dir);
    first.release();
    first.release(); // idempotent
    expect(existsSync(join(dir, 'relay.lock.json'))).toBe(false);
    expect(await freeForAnotherProcess(dir)).toBe(true);
    lock(dir, 'cache import');
    expect(JSON.parse(readFileSync(join(dir, 'relay.lock.json'), 'utf8'))).toMatchObject({ role: 'cache import', pid: process.pid });
    expect(await freeForAnotherProcess(dir)).toBe(false);
  });

  it('makes the data dir 0700 and its lock and holder files 0600', async () => {
    const dir = await newDir();
    lock(dir);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, 'relay.lock')).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'relay.lock.json')).mode & 0o777).toBe(0o600);
  });

  it('a holder that has not written its holder file yet is "another process"', async () => {
    const dir = await newDir();
    lock(dir);
    await rm(join(dir, 'relay.lock.json'));
    expect(refusal(() => lock(dir)).message).toBe(
      `the data dir ${dir} is in use by another process (it has not written relay.lock.json yet); stop it first, or give this one its own data dir (RELAY_DATA_DIR, --data-dir)`,
    );
  });
});
