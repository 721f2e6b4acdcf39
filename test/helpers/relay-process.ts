// Runs the built relay (dist/cli.js, as `npm start` does) as a child process, for tests that kill it.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

export interface RelayProcess {
  url: string;
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** `nodeArgs`: Node's own options, before the script (V8's flags, which NODE_OPTIONS does not take) */
export async function spawnRelay(env: Record<string, string>, args: string[] = [], cwd?: string, nodeArgs: string[] = []): Promise<RelayProcess> {
  const child = spawn(process.execPath, [...nodeArgs, CLI, ...args], {
    ...(cwd ? { cwd } : {}),
    env: { PATH: process.env.PATH ?? '', PORT: '0', RELAY_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      // a relay that never said it listens is not left running behind the test
      child.kill('SIGKILL');
      reject(new Error(`relay did not start:\n${out}`));
    }, 20_000);
    const onData = () => {
      // the start-up banner's first line (JSON or pretty)
      const m = /listening on http:\/\/(127\.0\.0\.1|0\.0\.0\.0):(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        child.stdout!.off('data', onData);
        resolve(`http://127.0.0.1:${m[2]}`);
      }
    };
    child.stdout!.on('data', onData);
    void exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`relay exited with ${code} before listening:\n${out}`));
    });
  });
  return { url, child, output: () => out, exited };
}

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The built command (`llm-relay …`), with this stdin, to its exit. `onSpawn` sees the child (a test that
 * must kill what is left behind keeps it).
 */
export function runCli(args: string[], opts: { env?: Record<string, string>; stdin?: string; onSpawn?: (child: ChildProcess) => void } = {}): Promise<CliRun> {
  const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...opts.env } });
  opts.onSpawn?.(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  child.stdin!.end(opts.stdin ?? '');
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}
