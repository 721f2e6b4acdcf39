// Report ids are UUIDv7 (RFC 9562): time-ordered, so ids sort like the reports they name, and unique
// across relay instances without coordination. Every proxied call and every direct-API report takes one on
// the event loop, so an id is written as bytes into one buffer and read out as a single flat string: the
// random bits come from a pool that crypto's randomFillSync refills (10 bytes an id, a fill every ~400
// ids), and the time's hex is written once per millisecond. Measured against the former `randomUUID` and
// template-string version, with the id then used as a header value and a map key: 0.25-0.45 µs an id
// against 0.83-1.27 (docs/benchmarks.md, "the report id").
import { randomFillSync } from 'node:crypto';

const HEX = Buffer.from('0123456789abcdef', 'latin1');
/** random bytes, used 10 at a time from `at` */
const pool = Buffer.alloc(4096);
let at = pool.length;
/** the id being written: its time part (characters 0-14) stays until the millisecond changes */
const text = Buffer.alloc(36);
text[8] = text[13] = text[18] = text[23] = 0x2d; // '-'
text[14] = 0x37; // the version: '7'
let lastMs = -1;

export function uuidv7(now: number = Date.now()): string {
  const ms = Math.max(0, Math.floor(now));
  // Under load many ids share a millisecond: its hex (its low 48 bits, as RFC 9562 keeps them) is written once for them.
  if (ms !== lastMs) {
    const ts = ms.toString(16).padStart(12, '0').slice(-12);
    text.write(ts.slice(0, 8), 0, 'latin1');
    text.write(ts.slice(8, 12), 9, 'latin1');
    lastMs = ms;
  }
  if (at + 10 > pool.length) {
    randomFillSync(pool);
    at = 0;
  }
  const p = pool;
  let i = at;
  at += 10;
  // 12 bits of rand_a after the version; then the variant (binary 10) and 62 bits of rand_b
  text[15] = HEX[p[i]! & 15]!;
  text[16] = HEX[p[i + 1]! >> 4]!;
  text[17] = HEX[p[i + 1]! & 15]!;
  text[19] = HEX[8 | (p[i + 2]! & 3)]!;
  text[20] = HEX[p[i + 2]! >> 4]!;
  text[21] = HEX[p[i + 3]! >> 4]!;
  text[22] = HEX[p[i + 3]! & 15]!;
  i += 4;
  for (let o = 24; o < 36; o += 2, i++) {
    text[o] = HEX[p[i]! >> 4]!;
    text[o + 1] = HEX[p[i]! & 15]!;
  }
  return text.toString('latin1', 0, 36);
}
