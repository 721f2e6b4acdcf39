// The durable outbox: an append-only NDJSON file of reports the report store could not take. An append
// resolves only after fdatasync, so a report in it is as safe as one in the store. Delivery reads from a
// byte offset and acknowledges what the store took; once everything is delivered the file is truncated.
// After a crash the whole file is offered again: the store's insert is idempotent by id, so nothing is
// stored twice.
import { open, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { makePrivateDir, preparePrivateFile } from './private-files.js';
import type { StoredReport } from './report-store.js';

export interface OutboxFile {
  /** Appends the reports and resolves once they are on disk. */
  append(reports: StoredReport[]): Promise<void>;
  /** The oldest undelivered reports, at most `max`, in the order they were appended. */
  peek(max: number): Promise<StoredReport[]>;
  /** Marks the first `n` reports of the last peek as delivered. */
  ack(n: number): Promise<void>;
  /** Keeps reports the store refuses although it answers (a bug, not an outage) in `<name>.rejected.ndjson`. */
  quarantine(reports: StoredReport[]): Promise<void>;
  /** reports waiting */
  readonly depth: number;
  close(): Promise<void>;
}

const NEWLINE = 0x0a;
const READ_CHUNK = 1 << 20;

export async function openOutboxFile(path: string): Promise<OutboxFile> {
  makePrivateDir(dirname(path));
  preparePrivateFile(path);
  const fh: FileHandle = await open(path, 'a+');
  let size = (await fh.stat()).size;
  let readOffset = 0;
  let depth = 0;
  let peeked: number[] = []; // byte length of each line of the last peek
  let chain: Promise<unknown> = Promise.resolve();

  // Count the waiting lines; a torn last line (a crash mid-append, never acknowledged) is cut off.
  let lastNewline = -1;
  for (let pos = 0; pos < size; pos += READ_CHUNK) {
    const { buffer, bytesRead } = await fh.read(Buffer.alloc(Math.min(READ_CHUNK, size - pos)), 0, Math.min(READ_CHUNK, size - pos), pos);
    for (let i = 0; i < bytesRead; i++) {
      if (buffer[i] === NEWLINE) {
        depth++;
        lastNewline = pos + i;
      }
    }
  }
  if (lastNewline + 1 !== size) {
    await fh.truncate(lastNewline + 1);
    size = lastNewline + 1;
  }

  /** Operations run one at a time, in call order. */
  function serial<T>(op: () => Promise<T>): Promise<T> {
    const next = chain.then(op, op);
    chain = next.catch(() => undefined);
    return next;
  }

  return {
    get depth() {
      return depth;
    },
    append: (reports) =>
      serial(async () => {
        if (reports.length === 0) return;
        const buf = Buffer.from(reports.map((r) => `${JSON.stringify(r)}\n`).join(''));
        await fh.write(buf, 0, buf.length, null);
        await fh.datasync();
        size += buf.length;
        depth += reports.length;
      }),
    peek: (max) =>
      serial(async () => {
        const out: StoredReport[] = [];
        peeked = [];
        let pos = readOffset;
        let carry = Buffer.alloc(0);
        while (out.length < max && pos < size) {
          const len = Math.min(READ_CHUNK, size - pos);
          const { buffer } = await fh.read(Buffer.alloc(len), 0, len, pos);
          pos += len;
          let data = carry.length ? Buffer.concat([carry, buffer]) : buffer;
          let start = 0;
          for (let i = 0; i < data.length && out.length < max; i++) {
            if (data[i] !== NEWLINE) continue;
            out.push(JSON.parse(data.subarray(start, i).toString('utf8')) as StoredReport);
            peeked.push(i + 1 - start);
            start = i + 1;
          }
          carry = data.subarray(start);
          data = Buffer.alloc(0);
        }
        return out;
      }),
    ack: (n) =>
      serial(async () => {
        const done = peeked.splice(0, n);
        readOffset += done.reduce((a, b) => a + b, 0);
        depth -= done.length;
        if (readOffset >= size) {
          await fh.truncate(0);
          await fh.datasync();
          readOffset = 0;
          size = 0;
          depth = 0;
        }
      }),
    quarantine: (reports) =>
      serial(async () => {
        const rejected = path.replace(/\.ndjson$/, '') + '.rejected.ndjson';
        preparePrivateFile(rejected);
        const q = await open(rejected, 'a');
        try {
          await q.write(reports.map((r) => `${JSON.stringify(r)}\n`).join(''));
          await q.datasync();
        } finally {
          await q.close();
        }
      }),
    close: () => serial(() => fh.close()),
  };
}
