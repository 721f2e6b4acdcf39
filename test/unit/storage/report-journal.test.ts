// The report journal: what it acknowledged comes back after a crash (a torn last line does not), emptying it
// leaves nothing to replay, appends do not grow the file each time, and a clean close leaves an empty file.
import { appendFileSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openReportJournal } from '../../../src/storage/report-journal.js';
import type { StoredReport } from '../../../src/storage/report-store.js';
import { tempDir } from '../../helpers/relay.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function journalPath(): Promise<string> {
  const dir = await tempDir('llm-relay-journal-');
  dirs.push(dir);
  return join(dir, 'reports.journal');
}

const line = (i: number) => JSON.stringify({ id: `r${i}`, request: { timestamp: 't', body: { i } } });
const ids = (reports: StoredReport[]) => reports.map((r) => r.id);

describe('report journal', () => {
  it('gives back after a crash every line it acknowledged, in order', async () => {
    const path = await journalPath();
    const first = openReportJournal(path);
    expect(first.left).toEqual([]);
    first.journal.append([line(1), line(2)]);
    first.journal.append([line(3)]);
    expect(first.journal.depth).toBe(3);
    // no close: the process died
    const again = openReportJournal(path);
    expect(ids(again.left)).toEqual(['r1', 'r2', 'r3']);
    expect(again.journal.depth).toBe(3);
    again.journal.close();
    first.journal.close();
  });

  it('drops a torn last line, and a line appended after it does not join it', async () => {
    const path = await journalPath();
    const first = openReportJournal(path);
    first.journal.append([line(1)]);
    first.journal.close();
    appendFileSync(path, '{"id":"torn","req'); // a crash mid-append: never acknowledged
    const second = openReportJournal(path);
    expect(ids(second.left)).toEqual(['r1']);
    second.journal.append([line(2)]);
    const third = openReportJournal(path);
    expect(ids(third.left)).toEqual(['r1', 'r2']);
    third.journal.close();
    second.journal.close();
  });

  it('reads the lines up to the preallocated zeros, and a torn line among zeros is dropped', async () => {
    const path = await journalPath();
    writeFileSync(path, Buffer.concat([Buffer.from(`${line(1)}\n{"id":"to`), Buffer.alloc(4096)]));
    const opened = openReportJournal(path);
    expect(ids(opened.left)).toEqual(['r1']);
    opened.journal.append([line(2)]);
    expect(ids(openReportJournal(path).left)).toEqual(['r1', 'r2']);
    opened.journal.close();
  });

  it('once emptied, has nothing to give back', async () => {
    const path = await journalPath();
    const first = openReportJournal(path);
    first.journal.append([line(1), line(2)]);
    first.journal.clear();
    expect(first.journal.depth).toBe(0);
    expect(openReportJournal(path).left).toEqual([]);
    first.journal.append([line(3)]);
    expect(ids(openReportJournal(path).left)).toEqual(['r3']);
    first.journal.close();
  });

  it('appends into room made beforehand (the file does not grow with each append), and a clean close empties the file', async () => {
    const path = await journalPath();
    const { journal } = openReportJournal(path);
    journal.append([line(1)]);
    const size = statSync(path).size;
    expect(size).toBeGreaterThanOrEqual(1 << 20);
    for (let i = 2; i < 200; i++) journal.append([line(i)]);
    expect(statSync(path).size).toBe(size);
    // past the room made: more is made, and every line is still there
    const big = 'x'.repeat(3 << 20);
    journal.append([JSON.stringify({ id: 'big', pad: big })]);
    expect(statSync(path).size).toBeGreaterThan(size);
    expect(openReportJournal(path).left).toHaveLength(200);
    journal.clear();
    journal.close();
    expect(readFileSync(path).length).toBe(0);
  });

  it('keeps what is waiting when it is closed with reports not yet in the store', async () => {
    const path = await journalPath();
    const { journal } = openReportJournal(path);
    journal.append([line(1)]);
    journal.close();
    expect(ids(openReportJournal(path).left)).toEqual(['r1']);
  });
});
