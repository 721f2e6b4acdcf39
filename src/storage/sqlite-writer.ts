// Runs the SQLite report store's inserts on a worker thread (sqlite-write-worker.js) and hands back a
// promise per batch. A worker that dies fails its pending batches (the writer's outbox takes them) and
// is started again for the next one.
import { Worker } from 'node:worker_threads';

export type Row = unknown[];

export interface SqliteWriter {
  insert(rows: Row[]): Promise<void>;
  close(): Promise<void>;
}

interface Pending {
  resolve: () => void;
  reject: (err: Error) => void;
}

const WORKER_URL = new URL('./sqlite-write-worker.js', import.meta.url);

export function createSqliteWriter(opts: { file: string; insertSql: string; busyTimeoutMs: number }): SqliteWriter {
  let worker: Worker | undefined;
  let nextId = 0;
  const pending = new Map<number, Pending>();

  function failAll(err: Error): void {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  }

  function start(): Worker {
    const w = new Worker(WORKER_URL, { workerData: opts });
    w.on('message', (msg: { id: number; ok: boolean; message?: string }) => {
      const p = pending.get(msg.id);
      if (!p) return;
      pending.delete(msg.id);
      if (pending.size === 0) w.unref();
      if (msg.ok) p.resolve();
      else p.reject(new Error(msg.message));
    });
    w.on('error', (err) => failAll(err));
    w.on('exit', (code) => {
      if (worker === w) worker = undefined;
      failAll(new Error(`the SQLite writer thread exited (${code})`));
    });
    // An idle thread must not keep the process alive, but a batch in flight must: at shutdown, after the
    // server has closed, it may be the only thing left, and its reports would be lost if the process ended.
    w.unref();
    return w;
  }

  function send(msg: object): Promise<void> {
    worker ??= start();
    const id = nextId++;
    return new Promise<void>((resolve, reject) => {
      pending.set(id, { resolve, reject });
      worker!.ref();
      worker!.postMessage({ id, ...msg });
    });
  }

  return {
    insert: (rows) => send({ rows }),
    async close() {
      if (!worker) return;
      const w = worker;
      await send({ close: true }).catch(() => undefined);
      await w.terminate();
      worker = undefined;
    },
  };
}
