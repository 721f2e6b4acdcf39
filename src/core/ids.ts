// Report ids are UUIDv7 (RFC 9562): time-ordered, so ids sort like the reports they name, and unique
// across relay instances without coordination. The random bits come from randomUUID, which draws from a
// cached entropy pool (much cheaper per call than randomBytes).
import { randomUUID } from 'node:crypto';

export function uuidv7(now: number = Date.now()): string {
  const ts = Math.max(0, Math.floor(now)).toString(16).padStart(12, '0').slice(-12);
  const r = randomUUID(); // xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx, V already the RFC variant
  return `${ts.slice(0, 8)}-${ts.slice(8, 12)}-7${r.slice(15, 18)}-${r.slice(19)}`;
}
