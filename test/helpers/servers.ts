// The real Redis and PostgreSQL the team-store tests use. When one is down, the tests fail with a message
// saying how to start it: they are never skipped.
import { connect } from 'node:net';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

function reachable(url: string, defaultPort: number): Promise<boolean> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: u.hostname, port: Number(u.port || defaultPort) });
    socket.setTimeout(2000);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

export async function requireRedis(): Promise<void> {
  if (!(await reachable(REDIS_URL, 6379)))
    throw new Error(
      `Redis is not reachable at ${REDIS_URL}. Start it with: redis-server --daemonize yes --port 6379 --save "" --appendonly no (or set REDIS_URL)`,
    );
}

export async function requirePostgres(): Promise<void> {
  if (!(await reachable(DATABASE_URL, 5432)))
    throw new Error(
      `PostgreSQL is not reachable at ${DATABASE_URL}. Start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start (or set DATABASE_URL)`,
    );
}
