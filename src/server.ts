// The process: build the app, listen, and shut down gracefully on SIGTERM/SIGINT — stop accepting, let
// in-flight calls finish within the grace period, flush every report, close the stores, exit 0.
import { setTimeout as sleep } from 'node:timers/promises';
import type { RelayConfig } from './config.js';
import { type AppOverrides, type Relay, buildApp } from './app.js';
import { giveBackAfterStart, loadTrimBinding, startMemoryTrim, toMb } from './memory-trim.js';
import { warmUpstreamParser } from './upstream/parser-warmup.js';

/** The longest a start waits for undici's parser to be compiled (~0.2 s here) before it listens anyway. */
const PARSER_WAIT_MS = 2_000;

/** How long after the grace period a shutdown may still take (flushing reports, closing stores). */
const HARD_EXIT_AFTER_GRACE_MS = 10_000;

export async function startServer(config: Readonly<RelayConfig>, overrides: AppOverrides = {}): Promise<Relay> {
  // undici's parser compiled as the relay starts, not in its first busy minute (parser-warmup.ts), on V8's
  // threads while the app is built; not for a relay that never calls upstream. The relay listens once it is
  // done: its compiler memory (~35 MB for ~0.1 s) is given back by then, so a relay that says it listens is at
  // its idle size.
  const started = performance.now();
  const parser = config.upstreamParser ? warmUpstreamParser(config.upstreamParser) : undefined;
  const relay = await buildApp(config, overrides);
  const { log, server } = relay;
  if (parser) {
    const module = await Promise.race([parser, sleep(PARSER_WAIT_MS, undefined, { ref: false })]);
    // (what the compiler freed lies between the blocks the start allocated meanwhile: handed back here)
    const trimmed = loadTrimBinding()?.trim();
    log.debug({ compiled: module !== undefined, ms: Math.round(performance.now() - started), trimmed }, 'upstream parser compiled');
  }
  const usage = process.memoryUsage();
  const gaveBackMs = giveBackAfterStart(usage);
  if (gaveBackMs !== undefined)
    log.debug({ ms: Math.round(gaveBackMs), rssBeforeMb: toMb(usage.rss), rssAfterMb: toMb(process.memoryUsage.rss()) }, "the start's heap given back before listening");
  try {
    await relay.listen(config.port, config.host);
  } catch (err) {
    await relay.close();
    throw err;
  }
  if (config.apiTokens.length === 0 && !isLoopback(config.host)) {
    log.warn(
      { host: config.host },
      'listening on a non-loopback address without RELAY_API_TOKENS: anyone who can reach this port can use it',
    );
  }

  const trimmer = startMemoryTrim({
    release: () => relay.releaseMemory(),
    onTrim: (before, after, released) => log.debug({ rssBeforeMb: toMb(before), rssAfterMb: toMb(after), released }, 'memory handed back (malloc_trim)'),
  });
  if (!loadTrimBinding() && process.platform === 'linux')
    log.info('native/malloc_trim is not built (`npm run build:native` builds it): memory a burst freed stays with the C library');

  let closing = false;
  const shutdown = (signal: NodeJS.Signals): void => {
    if (closing) return;
    closing = true;
    trimmer?.stop();
    log.info({ signal, graceMs: config.shutdownGraceMs }, 'shutting down');
    const force = setTimeout(() => {
      log.warn('grace period over: closing the remaining connections');
      server.closeAllConnections();
    }, config.shutdownGraceMs);
    force.unref();
    // Last resort: a close that still hangs (a store that never answers) must not keep the process alive.
    const hard = setTimeout(() => {
      log.error('shutdown did not finish: exiting');
      process.exit(1);
    }, config.shutdownGraceMs + HARD_EXIT_AFTER_GRACE_MS);
    hard.unref();
    relay.close().then(
      () => {
        clearTimeout(force);
        clearTimeout(hard);
        log.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
  return relay;
}

function isLoopback(host: string): boolean {
  return host === '127.0.0.1' || host === '::1' || host === 'localhost' || host.startsWith('127.');
}
