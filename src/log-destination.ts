// Where the relay's log lines go. JSON on stdout by default: one object per line, for a file, a collector
// or `docker logs`. For a person at a terminal (RELAY_LOG_FORMAT=auto and stdout is a TTY, or =pretty),
// pino-pretty's readable lines instead. pino-pretty is imported only then, so a relay whose output goes
// to a pipe or a file (a service, a container, the tests) never loads it. Redaction happens in pino before
// a line is written, so pretty lines are redacted like JSON ones.
import type { DestinationStream } from 'pino';
import type { RelayConfig } from './config.js';

/** undefined: pino's own stdout, JSON. */
export async function logDestination(format: RelayConfig['logFormat']): Promise<DestinationStream | undefined> {
  const pretty = format === 'pretty' || (format === 'auto' && process.stdout.isTTY === true);
  if (!pretty) return undefined;
  const { default: pinoPretty } = await import('pino-pretty');
  return pinoPretty({
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,startup', // `startup` is the banner's data, already in its text
    singleLine: true, // a line's fields beside it; a multi-line message (the banner) stays as it is
    sync: true, // written before the process exits (`stopped`, then exit)
  });
}
