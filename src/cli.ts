#!/usr/bin/env node
// The llm-relay command: `llm-relay [options]` starts the relay; --help lists every option.
import { ConfigError, helpText, loadConfig } from './config.js';
import { startServer } from './server.js';
import { VERSION } from './version.js';

async function main(argv: string[]): Promise<number | undefined> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(helpText(VERSION));
    return 0;
  }
  if (argv.includes('--version')) {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  const config = loadConfig({ argv });
  await startServer(config);
  return undefined; // keep running
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== undefined) process.exit(code);
  },
  (err: unknown) => {
    if (err instanceof ConfigError) {
      process.stderr.write(`llm-relay: ${err.message}\n`);
      process.exit(2);
    }
    const e = err as Error;
    process.stderr.write(`llm-relay: could not start: ${e.message}\n`);
    process.exit(1);
  },
);
