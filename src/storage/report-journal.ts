// The report journal: what makes a 201 cheap. A direct-API report is acknowledged once its line is in this
// append-only file and fdatasync'd (one write and one sync per group of reports), not once the report
// store has committed it with an fsync of its own (which, for SQLite, writes every page the insert touched
// into the WAL, for every small group). The store then takes the reports in larger batches; when a batch
// that holds journaled reports has committed durably, the journal is emptied. After a crash, whatever the
// journal still holds is offered to the store again at start (its insert is idempotent by id), so an
// acknowledged report is never lost. It runs on the report worker thread, synchronously: a sync blocks
// only that thread, and the reports that arrive meanwhile form the next group.
//
// The file is kept at a preallocated size (written with zeros) and lines are written over the zeros: an
// fdatasync that does not change the file's size need not commit metadata, which here makes it 2-3 times
// cheaper. The lines end at the first zero byte. Emptying the journal writes zeros over what it held; it is
// cut to nothing when the relay stops with nothing waiting.
import { closeSync, fdatasyncSync, fstatSync, ftruncateSync, openSync, readSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { makePrivateDir, preparePrivateFile } from './private-files.js';
import type { StoredReport } from './report-store.js';

export interface ReportJournal {
  /** Appends these reports' JSON lines and syncs them to disk; returns when they are durable. */
  append(lines: readonly string[]): void;
  /** Lines appended since the journal was last emptied. */
  readonly depth: number;
  /** Everything in it is durable in the store now. */
  clear(): void;
  close(): void;
}

const NEWLINE = 0x0a;
/** Room made at a time (written with zeros, so that appends into it do not change the file's size). */
const PREALLOCATE = 1 << 20;
const ZEROS = Buffer.alloc(64 * 1024);

export interface OpenedJournal {
  journal: ReportJournal;
  /** reports an earlier run acknowledged that the store may not have durably (torn last line dropped) */
  left: StoredReport[];
}

export function openReportJournal(path: string): OpenedJournal {
  makePrivateDir(dirname(path));
  preparePrivateFile(path);
  const fd = openSync(path, 'r+');
  const size = fstatSync(fd).size;
  const left: StoredReport[] = [];
  // Appends go after the last whole line: a torn tail (a crash mid-append, never acknowledged) is cut off.
  let end = 0;
  if (size > 0) {
    const all = Buffer.allocUnsafe(size);
    let got = 0;
    while (got < size) got += readSync(fd, all, got, size - got, got);
    let start = 0;
    for (let i = 0; i < size; i++) {
      if (all[i] === 0) break; // the preallocated rest
      if (all[i] !== NEWLINE) continue;
      // A line that does not parse can only be a torn write (never acknowledged): it is left out.
      try {
        left.push(JSON.parse(all.toString('utf8', start, i)) as StoredReport);
      } catch {
        // skipped
      }
      start = i + 1;
    }
    end = start;
  }
  let position = end;
  let depth = left.length;
  let allocated = size;
  // What follows the last whole line becomes zeros again (a torn line must never join the next one).
  zero(end, size);

  function zero(from: number, to: number): void {
    for (let at = from; at < to; ) at += writeSync(fd, ZEROS, 0, Math.min(ZEROS.length, to - at), at);
  }

  /** Makes room for `n` more bytes at `position` without growing the file on every append. */
  function reserve(n: number): void {
    if (position + n <= allocated) return;
    const target = Math.ceil((position + n + PREALLOCATE) / PREALLOCATE) * PREALLOCATE;
    zero(allocated, target);
    fdatasyncSync(fd);
    allocated = target;
  }

  return {
    journal: {
      append(lines) {
        if (lines.length === 0) return;
        const bytes = Buffer.from(`${lines.join('\n')}\n`);
        reserve(bytes.length);
        let written = 0;
        while (written < bytes.length) written += writeSync(fd, bytes, written, bytes.length - written, position + written);
        position += bytes.length;
        fdatasyncSync(fd);
        depth += lines.length;
      },
      get depth() {
        return depth;
      },
      clear() {
        if (position === 0) return;
        // Not synced here (the next append's sync takes it along): if the machine dies before that, the
        // reports are offered again at start, and the store keeps each once.
        zero(0, position);
        position = 0;
        depth = 0;
      },
      close() {
        // Nothing waiting: the file goes back to nothing rather than keep its preallocated room.
        if (depth === 0) ftruncateSync(fd, 0);
        closeSync(fd);
      },
    },
    left,
  };
}
