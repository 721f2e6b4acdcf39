// A strict reader of the Prometheus text format 0.0.4 for tests: any line it does not understand fails.
import { expect } from 'vitest';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = `[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"`;
// Values are read by Go's strconv.ParseFloat, which takes NaN in any case: prom-client writes `Nan`.
const VALUE = '[-+]?(?:[0-9]*\\.?[0-9]+(?:[eE][-+]?[0-9]+)?|Inf)|[Nn][Aa][Nn]';
const SAMPLE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL})(?:,${LABEL})*,?)?\\})? (${VALUE})(?: -?[0-9]+)?$`);
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/** A strict reader of the Prometheus text format 0.0.4: any line it does not understand fails the test. */
export function parse(text: string): Sample[] {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  const seen = new Set<string>();
  expect(text.endsWith('\n')).toBe(true);
  for (const line of text.slice(0, -1).split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      const m = new RegExp(`^# (HELP|TYPE) (${NAME}) (.*)$`).exec(line);
      expect(m, line).not.toBeNull();
      if (m![1] === 'TYPE') {
        expect(TYPES.has(m![3]!), line).toBe(true);
        expect(types.has(m![2]!), `second TYPE for ${m![2]}`).toBe(false);
        types.set(m![2]!, m![3]!);
      }
      continue;
    }
    const m = SAMPLE.exec(line);
    expect(m, `not a sample line: ${line}`).not.toBeNull();
    const [, name, labelText, valueText] = m!;
    const family = types.has(name!) ? name! : name!.replace(/_(bucket|sum|count)$/, '');
    expect(types.has(family), `no TYPE for ${name}`).toBe(true);
    if (family !== name) expect(['histogram', 'summary']).toContain(types.get(family));
    const labels: Record<string, string> = {};
    for (const l of (labelText ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    expect(seen.has(key), `duplicate series ${line}`).toBe(false);
    seen.add(key);
    samples.push({ name: name!, labels, value: /^nan$/i.test(valueText!) ? NaN : Number(valueText!.replace('Inf', 'Infinity')) });
  }
  return samples;
}

export function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  expect(found.length, `${name} ${JSON.stringify(labels)} matches ${found.length} series`).toBeLessThanOrEqual(1);
  return found[0]?.value;
}
