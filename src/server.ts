// The process: build the app, listen, and shut down gracefully on SIGTERM/SIGINT — stop accepting, let
// in-flight calls finish within the grace period, flush every report, close the stores, exit 0.
import type { RelayConfig } from './config.js';
import { type AppOverrides, type Relay, buildApp } from './app.js';

/** How long after the grace period a shutdown may still take (flushing reports, closing stores). */
const HARD_EXIT_AFTER_GRACE_MS = 10_000;
/** How often a draining server closes the connections that have gone idle. */
const IDLE_SWEEP_MS = 100;

export async function startServer(config: Readonly<RelayConfig>, overrides: AppOverrides = {}): Promise<Relay> {
  const relay = await buildApp(config, overrides);
  const { app } = relay;
  await app.listen({ port: config.port, host: config.host });
  if (config.apiTokens.length === 0 && !isLoopback(config.host)) {
    app.log.warn(
      { host: config.host },
      'listening on a non-loopback address without RELAY_API_TOKENS: anyone who can reach this port can use it',
    );
  }

  let closing = false;
  const shutdown = (signal: NodeJS.Signals): void => {
    if (closing) return;
    closing = true;
    app.log.info({ signal, graceMs: config.shutdownGraceMs }, 'shutting down');
    const force = setTimeout(() => {
      app.log.warn('grace period over: closing the remaining connections');
      app.server.closeAllConnections();
    }, config.shutdownGraceMs);
    force.unref();
    // Last resort: a close that still hangs (a store that never answers) must not keep the process alive.
    const hard = setTimeout(() => {
      app.log.error('shutdown did not finish: exiting');
      process.exit(1);
    }, config.shutdownGraceMs + HARD_EXIT_AFTER_GRACE_MS);
    hard.unref();
    // A keep-alive connection whose last answer (a stream, say) ends during the drain would otherwise stay
    // open until its keep-alive timeout, holding the close for the whole grace period.
    const idle = setInterval(() => app.server.closeIdleConnections(), IDLE_SWEEP_MS);
    idle.unref();
    app.close().then(
      () => {
        clearInterval(idle);
        clearTimeout(force);
        clearTimeout(hard);
        app.log.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        app.log.error({ err }, 'shutdown failed');
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
