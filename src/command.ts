// The llm-relay command (started by cli.ts): `llm-relay [options]` starts the relay; `llm-relay cache export|import` moves
// cache entries as NDJSON (core/cache-transfer.ts) on the configured cache store, without a server;
// --help lists every option. Exit status: 0 done, 2 bad configuration or arguments, 1 any other failure.
import { open } from 'node:fs/promises';
import { ConfigError, type RelayConfig, helpText, loadConfig, splitArgv } from './config.js';
import { exportEntries, importEntries, ndjsonLines } from './core/cache-transfer.js';
import type { CacheStore } from './storage/cache-store.js';
import { type DataDirLock, DataDirInUseError, describeHolder, lockDataDir } from './storage/data-dir-lock.js';
import { VERSION } from './version.js';

/** A mistake in how the command was called: exit 2, like a bad configuration. */
class UsageError extends Error {}

/** What the command was doing, for the message of a failure. */
let doing = 'could not start';

async function main(argv: string[]): Promise<number | undefined> {
  const { positionals, options } = splitArgv(argv);
  if (options.includes('--help') || options.includes('-h')) {
    process.stdout.write(helpText(VERSION));
    return 0;
  }
  if (options.includes('--version')) {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  if (positionals[0] === 'cache') return cacheCommand(positionals.slice(1), options);
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}" (see --help)`);
  const config = loadConfig({ argv: options });
  // Loaded only now: --help, --version and a bad configuration answer without loading the server.
  const { startServer } = await import('./server.js');
  await startServer(config);
  return undefined; // keep running
}

async function cacheCommand([sub, ...args]: string[], options: string[]): Promise<number> {
  if (sub === 'export') {
    doing = 'cache export failed';
    if (args.length > 0) throw new UsageError(`unexpected argument "${args[0]}" (see --help)`);
    const config = loadConfig({ argv: options });
    return withStore(config, exportToStdout, 'export');
  }
  if (sub === 'import') {
    doing = 'cache import failed';
    const [file, ...extra] = args;
    if (file === undefined) throw new UsageError('cache import needs the NDJSON file to read (or - for stdin)');
    if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}" (see --help)`);
    const config = loadConfig({ argv: options });
    // Opened before the store, so a missing file changes nothing.
    const input = file === '-' ? process.stdin : (await open(file, 'r')).createReadStream();
    const lock = lockForImport(config, file);
    try {
      return await withStore(config, async (store) => {
        const { imported, skipped } = await importEntries(store, ndjsonLines(input));
        process.stderr.write(`imported ${imported} entries, skipped ${skipped}\n`);
        return 0;
      });
    } finally {
      lock?.release();
    }
  }
  throw new UsageError(
    sub === undefined ? 'cache needs a subcommand: export or import (see --help)' : `unknown cache subcommand "${sub}": use export or import`,
  );
}

/**
 * An import into a SQLite cache holds the data dir like a relay: a relay running on it would not see the
 * entries in its memory (and its byte count would be off), so the import is refused and sent to that
 * relay's HTTP route; a relay that starts meanwhile is refused. Export only reads, and needs no lock.
 */
function lockForImport(config: Readonly<RelayConfig>, file: string): DataDirLock | undefined {
  if (config.cacheUrl !== 'sqlite') return undefined; // Redis is shared by design; memory lives in this process only
  try {
    return lockDataDir(config.dataDir, { role: 'cache import', version: VERSION });
  } catch (err) {
    if (!(err instanceof DataDirInUseError) || err.holder?.role !== 'relay') throw err;
    const base = err.holder.url ?? 'http://HOST:PORT';
    const body = file === '-' ? '@-' : `@${file}`;
    throw new DataDirInUseError(err.dir, err.holder, {
      cause: err,
      message:
        `the data dir ${err.dir} is in use by ${describeHolder(err.holder)}; import through it instead ` +
        `(POST /api/cache/v1/import): curl -s ${base}/api/cache/v1/import -H 'content-type: application/x-ndjson' --data-binary ${body}`,
    });
  }
}

async function withStore(config: Readonly<RelayConfig>, work: (store: CacheStore) => Promise<number>, use: 'all' | 'export' = 'all'): Promise<number> {
  const { openCacheStore } = await import('./app.js');
  const store = await openCacheStore(config, use);
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

async function exportToStdout(store: CacheStore): Promise<number> {
  const out = process.stdout;
  let failed: Error | undefined;
  const onError = (err: Error) => (failed = err); // e.g. EPIPE when the reader went away
  out.on('error', onError);
  let count = 0;
  try {
    for await (const line of exportEntries(store)) {
      if (failed) throw failed;
      count++;
      if (!out.write(`${line}\n`)) await drained(out);
    }
    // Everything handed to stdout is written before the process exits.
    await new Promise<void>((resolve, reject) => out.write('', (err) => (err ? reject(err) : resolve())));
    if (failed) throw failed;
  } finally {
    out.off('error', onError);
  }
  process.stderr.write(`exported ${count} entries\n`);
  return 0;
}

/** Resolves when the stream wants more, rejects when it fails; leaves no listener behind. */
function drained(out: NodeJS.WritableStream): Promise<void> {
  return new Promise((resolve, reject) => {
    const onDrain = () => {
      out.off('error', onFail);
      resolve();
    };
    const onFail = (err: Error) => {
      out.off('drain', onDrain);
      reject(err);
    };
    out.once('drain', onDrain);
    out.once('error', onFail);
  });
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== undefined) process.exit(code);
  },
  (err: unknown) => {
    if (err instanceof ConfigError || err instanceof UsageError) {
      process.stderr.write(`llm-relay: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`llm-relay: ${doing}: ${failureText(err as ListenError)}\n`);
    process.exit(1);
  },
);

/** What Node's listen() throws: its code, and the address and port it was asked for. */
type ListenError = Error & { code?: string; syscall?: string; address?: string; port?: number };

/** A failure in words: the two ways listening fails at start say what to do about them. */
function failureText(e: ListenError): string {
  if (e.syscall === 'listen' && e.port !== undefined) {
    const where = `${e.address?.includes(':') ? `[${e.address}]` : e.address}:${e.port}`;
    if (e.code === 'EADDRINUSE')
      return `${where} is in use by another program (another relay?): stop it, or give this relay another port (PORT, --port; 0 picks a free one)`;
    if (e.code === 'EACCES') return `listening on ${where} is not allowed to this user (ports below 1024 need privileges): use a port from 1024 up (PORT, --port)`;
  }
  return e.message;
}
