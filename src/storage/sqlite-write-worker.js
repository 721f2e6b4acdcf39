// The write side of the SQLite report store, on its own thread: a batch commits with synchronous=FULL
// (an fsync), and that wait must not stop the event loop that serves requests. Plain JavaScript so the
// same file runs from src/ (tests) and dist/ (tsc copies it). Messages: {id, rows} → {id, ok, message?}.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

const db = new Database(workerData.file);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
db.pragma(`busy_timeout = ${workerData.busyTimeoutMs}`);
const insert = db.prepare(workerData.insertSql);
const insertBatch = db.transaction((rows) => {
  for (const row of rows) insert.run(row);
});

parentPort.on('message', (msg) => {
  if (msg.close) {
    db.close();
    parentPort.postMessage({ id: msg.id, ok: true });
    parentPort.close();
    return;
  }
  try {
    insertBatch(msg.rows);
    parentPort.postMessage({ id: msg.id, ok: true });
  } catch (err) {
    parentPort.postMessage({ id: msg.id, ok: false, message: err instanceof Error ? err.message : String(err) });
  }
});
