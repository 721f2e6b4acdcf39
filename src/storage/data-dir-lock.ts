// One relay per data dir. The SQLite cache keeps recently used entries in memory and the outbox is
// appended and truncated by its one owner, so a second relay on the same dir would make the first one's
// view stale without a word. lockDataDir takes the dir before any store is opened and refuses, naming the
// holder, while another process (or another relay in this process) has it.
//
// The lock is an OS lock the kernel drops with the process, so a crash (SIGKILL included) never leaves a
// stale lock behind, and no pid needs checking (in a container the pid is 1 every time): an exclusive
// SQLite transaction on `relay.lock`, held for the relay's lifetime. SQLite locks with fcntl, and keeps
// track of its own connections, so a second connection in the same process is refused too.
//
// Two rules keep the lock held: the connection must stay referenced (better-sqlite3 closes a connection
// that is garbage-collected, which would release it), and nothing in this process may open and close
// `relay.lock` through node:fs (closing any descriptor of a file drops this process's fcntl locks on it).
// Who holds the dir is in `relay.lock.json`, written once the lock is taken, for the refusal's message.
import { hostname } from 'node:os';
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PRIVATE_FILE_MODE, makePrivateDir, preparePrivateFile } from './private-files.js';
import { Database } from './sqlite-driver.js';

export const LOCK_FILE = 'relay.lock';
export const HOLDER_FILE = 'relay.lock.json';

export interface DataDirHolder {
  /** what holds the dir: the relay itself, or `cache import` */
  role: 'relay' | 'cache import';
  pid: number;
  host: string;
  /** ISO date-time */
  startedAt: string;
  version: string;
  /** where that relay listens, once it does */
  url?: string;
}

export interface DataDirLock {
  readonly dir: string;
  /** Adds what became known after the lock was taken (the listening URL) to the holder file. */
  update(info: Pick<DataDirHolder, 'url'>): void;
  /** Gives the dir up; idempotent. */
  release(): void;
}

/** A data dir another relay (or `cache import`) holds. `holder` is unknown in the moment between its lock and its holder file. */
export class DataDirInUseError extends Error {
  readonly dir: string;
  readonly holder: DataDirHolder | undefined;
  constructor(dir: string, holder: DataDirHolder | undefined, options: { cause?: unknown; message?: string } = {}) {
    super(
      options.message ??
        `the data dir ${dir} is in use by ${describeHolder(holder)}; stop it first, or give this one its own data dir (RELAY_DATA_DIR, --data-dir)`,
      { cause: options.cause },
    );
    this.name = 'DataDirInUseError';
    this.dir = dir;
    this.holder = holder;
  }
}

export function describeHolder(holder: DataDirHolder | undefined): string {
  if (holder === undefined) return `another process (it has not written ${HOLDER_FILE} yet)`;
  const who = holder.role === 'relay' ? 'a running relay' : '`llm-relay cache import`';
  const where = holder.url ? `, listening on ${holder.url}` : '';
  return `${who} (pid ${holder.pid} on ${holder.host}, llm-relay ${holder.version}, started ${holder.startedAt}${where})`;
}

/** Takes the data dir (creating it, 0700, if missing); throws DataDirInUseError when it is held. */
export function lockDataDir(dir: string, who: { role: DataDirHolder['role']; version: string }): DataDirLock {
  makePrivateDir(dir);
  const lockFile = join(dir, LOCK_FILE);
  const holderFile = join(dir, HOLDER_FILE);
  preparePrivateFile(lockFile);
  let db: Database | undefined;
  try {
    // timeout 0: a held lock is an answer, not something to wait for.
    db = new Database(lockFile, { timeout: 0 });
    // Nothing is ever written; no journal file needed.
    db.pragma('journal_mode = MEMORY');
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
  } catch (err) {
    // Closing our connection keeps the holder's lock when the holder is this process: SQLite defers
    // closing the descriptor while another of its connections holds a lock on the file.
    db?.close();
    if ((err as { code?: string }).code === 'SQLITE_BUSY') throw new DataDirInUseError(dir, readHolder(holderFile), { cause: err });
    throw err;
  }
  const conn = db;

  let holder: DataDirHolder = { role: who.role, pid: process.pid, host: hostname(), startedAt: new Date().toISOString(), version: who.version };
  writeHolder(holderFile, holder);
  let released = false;
  return {
    dir,
    update(info) {
      if (released) return;
      holder = { ...holder, ...info };
      writeHolder(holderFile, holder);
    },
    release() {
      if (released) return;
      released = true;
      // The holder file goes first, so the next holder's is never mistaken for a stale one of ours.
      rmSync(holderFile, { force: true });
      conn.close();
    },
  };
}

function readHolder(file: string): DataDirHolder | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as DataDirHolder;
  } catch {
    return undefined;
  }
}

/** Written whole and renamed into place: a reader never sees half a file. Only the holder writes it. */
function writeHolder(file: string, holder: DataDirHolder): void {
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(holder)}\n`, { mode: PRIVATE_FILE_MODE });
  renameSync(tmp, file);
}
