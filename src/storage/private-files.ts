// The data dir holds prompts and answers (cache entries, reports, the outbox): only its owner may read it.
// A data dir the relay creates is 0700 and every file it creates there 0600, whatever the umask. SQLite
// gives a database's -wal, -shm and -journal files the mode of the database file, so creating that file
// first (empty, 0600: an empty file is an empty database) covers them. Files an older relay left readable
// by others are tightened when they are opened again. A data dir that already exists keeps its mode: it
// may be a directory the user chose for more than the relay.
import { chmodSync, closeSync, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/** SQLite's companion files of a database, tightened with it when an older relay left them open to others. */
export function sqliteCompanions(file: string): string[] {
  return [`${file}-wal`, `${file}-shm`, `${file}-journal`];
}

/**
 * Makes `dir` and the parents it lacks (each 0700), walking up once. Not `mkdirSync(…, { recursive: true })`:
 * Node's loops forever (at full CPU) where mkdir says ENOENT under a parent that exists, as in /proc or /sys,
 * so a data dir mistyped there would hang the start instead of failing it. Here the second ENOENT is thrown.
 */
export function makePrivateDir(dir: string): void {
  if (mkdirOrMissing(dir) === undefined) return;
  makePrivateDir(dirname(dir));
  const again = mkdirOrMissing(dir);
  if (again) throw again;
}

/**
 * Makes `dir` (a directory there already, made by anyone, will do); returns mkdir's ENOENT when a parent is
 * missing, and throws every other failure.
 */
function mkdirOrMissing(dir: string): NodeJS.ErrnoException | undefined {
  try {
    mkdirSync(dir, { mode: PRIVATE_DIR_MODE });
    return undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && isDirectory(dir)) return undefined;
    if (code === 'ENOENT' && dirname(dir) !== dir) return err as NodeJS.ErrnoException;
    throw err;
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Creates `file` empty with mode 0600 when it is missing; otherwise tightens its mode (and that of the
 * `companions` present) to 0600. An existing file is never opened here: closing a descriptor of a file
 * drops every POSIX lock this process holds on it, and SQLite keeps its locks (the data-dir lock's too)
 * that way. A missing file has no lock to lose.
 */
export function preparePrivateFile(file: string, companions: readonly string[] = []): void {
  try {
    closeSync(openSync(file, 'wx', PRIVATE_FILE_MODE));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    tighten(file);
  }
  for (const c of companions) tighten(c);
}

function tighten(file: string): void {
  try {
    if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, PRIVATE_FILE_MODE);
  } catch {
    // Missing (a companion SQLite has not made), or not ours to change: the open that follows says more.
  }
}
