// Keyset pagination shared by every report store: a page ends at (requestTimeMs, id) and the next page
// starts strictly after it in (requestTimeMs DESC, id DESC) order.
import { RELAY_ERR_INVALID_CURSOR } from '../errors.js';

export interface CursorPosition {
  t: number;
  id: string;
}

export function encodeCursor(pos: CursorPosition): string {
  return Buffer.from(JSON.stringify([pos.t, pos.id]), 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): CursorPosition {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw new RELAY_ERR_INVALID_CURSOR('not a cursor returned by this API');
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 2 ||
    !Number.isSafeInteger(parsed[0]) ||
    typeof parsed[1] !== 'string'
  ) {
    throw new RELAY_ERR_INVALID_CURSOR('not a cursor returned by this API');
  }
  return { t: parsed[0] as number, id: parsed[1] as string };
}

/**
 * Epoch ms of an RFC 3339 date-time, or NaN. A leap second (`23:59:60`, valid RFC 3339 that Date.parse
 * refuses) counts as the last millisecond before it.
 */
export function timestampMs(iso: string): number {
  const t = Date.parse(iso);
  if (!Number.isNaN(t)) return t;
  return Date.parse(iso.replace(/T(\d\d):(\d\d):60(?:\.\d+)?/, 'T$1:$2:59.999'));
}

/** Epoch ms of the report's request time, for the indexed request-time column. */
export function requestTimeMs(report: { request: { timestamp: string } }): number {
  const t = timestampMs(report.request.timestamp);
  return Number.isFinite(t) ? t : 0;
}
