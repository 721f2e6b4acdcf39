// Command-line conventions shared by bench/run.mjs, bench/soak.mjs and bench/hop.mjs: -h/--help prints the usage and exits 0,
// --relay-env K=V is repeatable, and bad options (unknown ones too) are listed, followed by the usage, with exit status 2.
import { parseArgs } from 'node:util';

/** parseArgs (strict) with -h/--help added; on --help, print the usage and exit 0. Returns the values. */
export function parseCommandLine(argv, options, help) {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { ...options, help: { type: 'boolean', short: 'h' } },
      strict: true,
    }));
  } catch (err) {
    // an unknown option, a missing value: the usage, not a stack trace
    process.stderr.write(`${err.message}\n\n${help}`);
    process.exit(2);
  }
  if (values.help) {
    process.stdout.write(help);
    process.exit(0);
  }
  return values;
}

/** The --relay-env KEY=VALUE list as an object; a malformed entry is added to problems. */
export function parseRelayEnv(list = [], problems) {
  const env = {};
  for (const kv of list) {
    const eq = kv.indexOf('=');
    if (eq <= 0) problems.push(`--relay-env expects KEY=VALUE, got "${kv}"`);
    else env[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  return env;
}

/** With any problems: `tag: problem` (one a line, aligned), the usage, exit 2. */
export function exitOnProblems(tag, problems, help) {
  if (problems.length === 0) return;
  process.stderr.write(`${tag}: ${problems.join(`\n${' '.repeat(tag.length + 2)}`)}\n\n${help}`);
  process.exit(2);
}
