// Which better-sqlite3 the relay runs on. Two majors are dependencies (13 an optional one, which npm leaves
// out on Node 20), and this Node's major picks one:
//
// - better-sqlite3 12 (`better-sqlite3`) is built at install against this Node's own headers. Built against
//   Node 24's, it aborts the process: Node 24's `node::ObjectWrap` registers an environment cleanup hook for
//   every wrapped object and removes it in the destructor, which asserts that a Node environment is current;
//   when V8 collects a statement or a connection outside any JavaScript context (a collection that V8's own
//   tasks start, a worker thread stopping: the cases reported upstream), there is none, and the process
//   dies of `Assertion failed: (env) != nullptr` in `RemoveEnvironmentCleanupHook` (seen here in the test
//   suite on Node 24.21: relays aborting as they started, test processes that open SQLite themselves dying;
//   WiseLibs/better-sqlite3#1515).
// - better-sqlite3 13 (`better-sqlite3-napi`, an npm alias) is built on Node-API, shipped prebuilt, and has
//   no such hook; it requires Node 22 or later (its binary crashes Node 20: seen here).
//
// So 13 wherever it runs (Node 22 and later), 12 on Node 20. The JavaScript API is the same; the types are
// 12's (@types/better-sqlite3).
import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';
import { NODE_MAJOR } from '../node-major.js';

export type Database = BetterSqlite3.Database;
export type DatabaseConstructor = typeof BetterSqlite3;

/** The first Node major better-sqlite3 13 runs on. */
export const NAPI_FROM_MAJOR = 22;

/** The package name for this Node's major (`better-sqlite3-napi` is better-sqlite3 13). */
export function driverPackage(nodeMajor: number = NODE_MAJOR): string {
  return nodeMajor >= NAPI_FROM_MAJOR ? 'better-sqlite3-napi' : 'better-sqlite3';
}

const require = createRequire(import.meta.url);

function load(): DatabaseConstructor {
  const name = driverPackage();
  try {
    return require(name) as DatabaseConstructor;
  } catch (err) {
    // (an optional dependency: npm leaves it out where it cannot be installed)
    throw new Error(
      `${name} could not be loaded (${(err as Error).message}); run \`npm ci\` again with this Node (${process.version})`,
      { cause: err },
    );
  }
}

/** better-sqlite3's Database constructor, the one this Node runs safely. */
export const Database: DatabaseConstructor = load();
