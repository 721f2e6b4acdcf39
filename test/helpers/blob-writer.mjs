// A process that writes reports into a SQLite report store without end, with a small blob-merge threshold, so
// that a test can kill it in the middle of a merge (test/integration/blob-merge-crash.test.ts). Uses the built
// store (dist/), as a relay would. Prints `ack FROM COUNT` once a batch is committed and, after it, `merging
// THROUGH` while a merge is under way (THROUGH: the last blob id the merges before it covered).
//
//   node test/helpers/blob-writer.mjs FILE PASS MERGE_AT SLICE
import { pathToFileURL } from 'node:url';
import { storedReport } from './stored-report.mjs';

const DAY = 86_400_000;
const T = Date.parse('2025-06-01T00:00:00.000Z');
/** Messages every pass's reports share: stored once, whichever pass wrote them first. */
const SHARED = Array.from({ length: 40 }, (_, i) => ({ role: 'system', content: `shared prompt ${i}. `.repeat(12) }));

/** Report `i` of pass `pass`: a shared prompt, the question of the pass before's report `i` (so a pass
 * finds blobs the killed one wrote, merged or in the tail), a question and an answer of its own. */
export function crashReport(pass, i) {
  const at = new Date(T + pass * DAY + i * 1000).toISOString();
  const question = (p) => ({ role: 'user', content: `pass ${p} question ${i}, long enough to be a blob of its own` });
  const messages = [SHARED[i % SHARED.length], ...(pass > 0 ? [question(pass - 1)] : []), question(pass)];
  return storedReport(
    `r${pass}-${String(i).padStart(6, '0')}`,
    at,
    { client: 'merge-crash', environment: 'test' },
    { model: 'gpt-4o-mini', messages },
    { id: `c${pass}-${i}`, choices: [{ index: 0, message: { role: 'assistant', content: `answer ${pass}/${i}` } }] },
  );
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [file, pass, mergeAt, slice] = process.argv.slice(2);
  const dist = new URL('../../dist/storage/', import.meta.url);
  const { createSqliteReportStore } = await import(new URL('sqlite-report-store.js', dist).href);
  const { Database } = await import(new URL('sqlite-driver.js', dist).href);
  const store = createSqliteReportStore({ file, blobMergeAt: Number(mergeAt), blobMergeSlice: Number(slice) });
  const look = new Database(file, { readonly: true });
  const through = look.prepare('SELECT through FROM body_index');
  const started = look.prepare('SELECT EXISTS (SELECT 1 FROM body_hashes WHERE id > (SELECT through FROM body_index)) AS yes');
  for (let i = 0; ; i += 10) {
    await store.insertMany(Array.from({ length: 10 }, (_, k) => crashReport(Number(pass), i + k)));
    process.stdout.write(`ack ${i} 10\n`);
    if (started.get().yes) {
      process.stdout.write(`merging ${through.get().through}\n`);
      // (a little slower while a merge is under way, so the test's kill lands in it on a busy machine too)
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
}
