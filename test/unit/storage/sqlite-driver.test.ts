import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { Database, NAPI_FROM_MAJOR, driverPackage } from '../../../src/storage/sqlite-driver.js';

const require = createRequire(import.meta.url);

describe('the SQLite driver (sqlite-driver.ts)', () => {
  it('is better-sqlite3 12 on Node 20, and 13 (Node-API, never built against Node 24 headers) from Node 22 on', () => {
    expect(NAPI_FROM_MAJOR).toBe(22);
    expect(driverPackage(20)).toBe('better-sqlite3');
    expect(driverPackage(21)).toBe('better-sqlite3');
    expect(driverPackage(22)).toBe('better-sqlite3-napi');
    expect(driverPackage(24)).toBe('better-sqlite3-napi');
    expect(driverPackage(26)).toBe('better-sqlite3-napi');
  });

  it("is the package this Node's major names, of the major that package is meant to be", () => {
    const name = driverPackage();
    expect(Database).toBe(require(name));
    const { version } = require(`${name}/package.json`) as { version: string };
    expect(Number(version.split('.')[0])).toBe(name === 'better-sqlite3' ? 12 : 13);
  });

  it('opens, writes in a transaction and reads back', () => {
    const db = new Database(':memory:');
    try {
      db.exec('CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB)');
      const put = db.prepare('INSERT INTO t VALUES (?, ?)');
      db.transaction((n: number) => {
        for (let i = 0; i < n; i++) put.run(`k${i}`, Buffer.from([i % 256]));
      })(300);
      expect(db.prepare('SELECT count(*) AS n, sum(length(v)) AS bytes FROM t').get()).toEqual({ n: 300, bytes: 300 });
      expect(db.prepare('SELECT v FROM t WHERE k = ?').get('k257')).toEqual({ v: Buffer.from([1]) });
    } finally {
      db.close();
    }
  });
});
