// Report ids are UUIDv7 (RFC 9562): time-ordered, so ids sort like the reports they name, and unique
// across relay instances without coordination. The random bits come from randomUUID, which draws from a
// cached entropy pool (much cheaper per call than randomBytes).
import { randomUUID } from 'node:crypto';

/** the millisecond of the last id, and its first 15 characters (the time, the version digit) */
let lastMs = -1;
let timePart = '';

export function uuidv7(now: number = Date.now()): string {
  const ms = Math.max(0, Math.floor(now));
  // Under load many ids share a millisecond: its hex is written once for them.
  if (ms !== lastMs) {
    const ts = ms.toString(16).padStart(12, '0').slice(-12);
    timePart = `${ts.slice(0, 8)}-${ts.slice(8, 12)}-7`;
    lastMs = ms;
  }
  const r = randomUUID(); // xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx, V already the RFC variant
  return `${timePart}${r.slice(15, 18)}-${r.slice(19)}`;
}
