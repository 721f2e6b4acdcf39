// The data dir's own mkdir: parents made 0700, an existing dir taken as it is, and the errors a bad path gives.
// (A path under /proc, where Node's recursive mkdir loops forever, is tested on the command in a child process:
// test/integration/data-dir.test.ts.)
import { chmodSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makePrivateDir } from '../../../src/storage/private-files.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function newDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'relay-private-'));
  dirs.push(d);
  return d;
}

describe('makePrivateDir', () => {
  it('makes the dir and the parents it lacks, each 0700', async () => {
    const root = await newDir();
    makePrivateDir(join(root, 'a', 'b', 'c'));
    for (const d of ['a', 'a/b', 'a/b/c']) {
      const st = statSync(join(root, d));
      expect(st.isDirectory()).toBe(true);
      expect(st.mode & 0o777).toBe(0o700);
    }
  });

  it('takes a dir that exists as it is (its mode kept), also through a path ending in a slash', async () => {
    const root = await newDir();
    const mine = join(root, 'shared');
    mkdirSync(mine);
    chmodSync(mine, 0o755);
    makePrivateDir(mine);
    makePrivateDir(`${mine}/`);
    makePrivateDir(root);
    expect(statSync(mine).mode & 0o777).toBe(0o755);
  });

  it('refuses a path through or onto a file, naming the problem', async () => {
    const root = await newDir();
    const file = join(root, 'file');
    writeFileSync(file, 'x');
    expect(() => makePrivateDir(file)).toThrow(expect.objectContaining({ code: 'EEXIST' }));
    expect(() => makePrivateDir(join(file, 'data'))).toThrow(expect.objectContaining({ code: 'ENOTDIR' }));
  });

});
