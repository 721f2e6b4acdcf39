// The part of the content-addressed body store that both report stores share: what a report row keeps (its
// JSON with the bodies left out, and the hashes of the bodies' root blobs), which blobs a batch must write,
// and how a row read back gets its bodies again. The stores differ only in the SQL.
//
// Every blob has a `last_ms`: the newest receivedAt of a report that uses it, or the time it was written if
// later. Reports are pruned oldest first, so a blob whose last_ms is older than every report that still
// has its bodies is used by none of them: the sweep is one range delete, needs no reference counts and no
// list of which skeleton names which message, and is right after any crash (it reads only committed rows).
// To keep writes cheap, a blob used again within KNOWN_FRESH_MS of its recorded last_ms is not touched; the
// sweep keeps that much (and the time a batch takes) in hand, see sweepBefore.
import { LRUCache } from 'lru-cache';
import { type Blob, type Hash, type InlineBody, MissingBlobError, assembleBody, childrenOf, splitBody, type SplitBody } from './body-codec.js';
import type { StoredReport } from './report-store.js';
import { type VariantOf, variantOf } from './report-variant.js';

/** How stale a blob's recorded last_ms may be before a new use writes it again. */
export const KNOWN_FRESH_MS = 60 * 60 * 1000;

/** The newest last_ms the sweep may delete now: never one that a batch in progress may still be using. */
export function sweepBefore(oldestWithBodiesMs: number | null, now: number): number {
  return Math.min(oldestWithBodiesMs ?? Number.POSITIVE_INFINITY, now - 2 * KNOWN_FRESH_MS) - KNOWN_FRESH_MS;
}

/** A report as its row keeps it. */
export interface PlannedReport {
  report: StoredReport;
  /** what the report is a variant of (report-variant.ts), when its row was made from its base's */
  variant?: VariantOf;
  /** the report's JSON (text, or a store's packed form), each body replaced by 0 (the key stays in its place) */
  data: string | Buffer;
  /** the body's root blob, or its JSON text when it is kept in the row (see createBodyKeeper's `inlineBelow`) */
  request: Hash | string | null;
  response: Hash | string | null;
  receivedMs: number;
  blobs: Blob[];
}

export interface BlobWrite {
  blob: Blob;
  ms: number;
}

export interface BodyKeeper {
  plan(report: StoredReport): PlannedReport;
  /** The blobs the inserted reports need written (or their last_ms raised), one per hash, newest ms. */
  writes(inserted: PlannedReport[], now: number): BlobWrite[];
  /** After the batch committed: these blobs are known to be stored with at least this last_ms. */
  committed(writes: BlobWrite[]): void;
  /** After a sweep: what was known may be gone. */
  forget(): void;
}

/** Known blobs remembered by the writer: enough for a busy relay's recent conversations. */
const KNOWN_HASHES = 50_000;

/** The report's JSON as a row keeps it, each body written as 0. */
export type RowEncoder = (report: StoredReport) => string | Buffer;

/**
 * How a store encodes the variants of a report (report-variant.ts) from a template made once from their
 * base; the result must be what its RowEncoder makes of the variant.
 */
export interface VariantEncoder<T> {
  template(base: StoredReport): T | undefined;
  encode(template: T, report: StoredReport, of: VariantOf): string | Buffer;
}

/** A base's template, and its plan: a variant's row takes the bodies' roots and blobs from it, unchanged. */
interface BasePlan {
  template: unknown;
  plan: PlannedReport;
}

/** The report as JSON text with each body replaced by 0 (the key stays, so it keeps its place). */
export function jsonWithoutBodies(report: StoredReport): string {
  const request = report.request;
  const response = report.response;
  return JSON.stringify(report, function (this: unknown, key: string, value: unknown) {
    return key === 'body' && (this === request || this === response) && value !== undefined ? 0 : value;
  });
}

/**
 * `inlineBelow` (characters; 0: never): a body whose JSON text is shorter is kept in the report's row as that
 * text instead of as blobs (a store whose body columns take text as well as hashes: SQLite's).
 */
export function createBodyKeeper<T>(encode: RowEncoder = jsonWithoutBodies, variants?: VariantEncoder<T>, inlineBelow = 0): BodyKeeper {
  const known = new LRUCache<string, number>({ max: KNOWN_HASHES });
  const basePlans = new WeakMap<StoredReport, BasePlan | null>();
  // The variants of a hit's report (report-variant.ts) carry their base's bodies, the same objects: split once.
  const splits = new WeakMap<object, SplitBody | InlineBody>();

  function split(body: unknown): SplitBody | InlineBody | null {
    if (body === undefined) return null;
    if (typeof body !== 'object' || body === null) return splitBody(body, inlineBelow);
    let s = splits.get(body);
    if (!s) {
      s = splitBody(body, inlineBelow);
      splits.set(body, s);
    }
    return s;
  }

  function planOf(report: StoredReport): PlannedReport {
    const req = split(report.request?.body);
    const res = split(report.response?.body);
    const data = encode(report);
    const blobs = [...(req?.blobs ?? []), ...(res?.blobs ?? [])];
    // Every plan has the same keys, `variant` included: a variant's plan is a spread of its base's with its
    // own values set, and a spread that then adds a key takes V8's slow path (~1.5 µs a plan, measured; a
    // spread whose keys are all there already, ~0.1 µs).
    return { report, variant: undefined, data, request: kept(req), response: kept(res), receivedMs: receivedMs(report), blobs };
  }

  return {
    plan(report) {
      const of = variants ? variantOf(report) : undefined;
      if (!of) return planOf(report);
      let b = basePlans.get(of.base);
      if (b === undefined) {
        const template = variants!.template(of.base);
        b = template === undefined ? null : { template, plan: planOf(of.base) };
        basePlans.set(of.base, b);
      }
      if (!b) return planOf(report);
      // The base's bodies and blobs, the variant's own row data and time.
      return { ...b.plan, report, variant: of, data: variants!.encode(b.template as T, report, of), receivedMs: of.fields.receivedMs };
    },

    writes(inserted, now) {
      // The variants of one base share its list of blobs (plan): each list is walked once, at its newest time.
      const lists = new Map<PlannedReport['blobs'], number>();
      for (const p of inserted) {
        // The write's own time when the report is older (one delivered late from the outbox): a blob that
        // was just written must not look sweepable to a pruner running beside this batch.
        const ms = Math.max(p.receivedMs, now);
        const had = lists.get(p.blobs);
        if (had === undefined || had < ms) lists.set(p.blobs, ms);
      }
      const out = new Map<string, BlobWrite>();
      for (const [blobs, ms] of lists) {
        for (const blob of blobs) {
          const hex = (blob.hex ??= blob.hash.toString('hex'));
          const kept = known.get(hex);
          if (kept !== undefined && kept >= ms - KNOWN_FRESH_MS) continue;
          const w = out.get(hex);
          if (!w) out.set(hex, { blob, ms });
          else if (w.ms < ms) w.ms = ms;
        }
      }
      return [...out.values()];
    },

    committed(writes) {
      for (const w of writes) {
        const hex = (w.blob.hex ??= w.blob.hash.toString('hex'));
        known.set(hex, Math.max(known.get(hex) ?? 0, w.ms));
      }
    },

    forget() {
      known.clear();
    },
  };
}

/** What a row keeps of a body: its root's hash, or its text. */
function kept(body: SplitBody | InlineBody | null): Hash | string | null {
  return body === null ? null : body.inline ?? body.root;
}

function receivedMs(report: StoredReport): number {
  const t = Date.parse(report.receivedAt);
  if (Number.isFinite(t)) return t;
  const r = Date.parse(report.request?.timestamp);
  return Number.isFinite(r) ? r : 0;
}

/** A row as read back: its JSON, its bodies' root hashes (or texts), and whether the pruner took its bodies. */
export interface BodyRow {
  data: string | object;
  request: Hash | string | null;
  response: Hash | string | null;
  expired: boolean;
}

/** Unpacked blob bytes by hex hash. */
export type BlobMap = Map<string, Buffer>;

/** Reads the blobs of these hashes that exist (unpacked). */
export type FetchBlobs = (hashes: Hash[]) => Promise<BlobMap> | BlobMap;

/** The reports of these rows with their bodies re-assembled; two reads of blobs at most (roots, then messages). */
export async function restoreReports(rows: BodyRow[], fetch: FetchBlobs): Promise<StoredReport[]> {
  const roots = new Map<string, Hash>();
  for (const row of rows) {
    if (row.request && typeof row.request !== 'string') roots.set(row.request.toString('hex'), row.request);
    if (row.response && typeof row.response !== 'string') roots.set(row.response.toString('hex'), row.response);
  }
  const blobs: BlobMap = roots.size > 0 ? new Map(await fetch([...roots.values()])) : new Map();
  const children = new Map<string, Hash>();
  for (const bytes of blobs.values()) {
    for (const child of childrenOf(bytes)) {
      const hex = child.toString('hex');
      if (!blobs.has(hex)) children.set(hex, child);
    }
  }
  if (children.size > 0) for (const [hex, bytes] of await fetch([...children.values()])) blobs.set(hex, bytes);
  return rows.map((row) => restoreReport(row, blobs));
}

function restoreReport(row: BodyRow, blobs: BlobMap): StoredReport {
  const report = (typeof row.data === 'string' ? JSON.parse(row.data) : row.data) as StoredReport;
  if (row.expired) return expire(report);
  try {
    const get = (h: Hash): Buffer | undefined => blobs.get(h.toString('hex'));
    const body = (kept: Hash | string): unknown => (typeof kept === 'string' ? JSON.parse(kept) : assembleBody(kept, get));
    if (row.request) report.request.body = body(row.request);
    if (row.response) report.response.body = body(row.response);
  } catch (err) {
    // Never expected (a body is swept only after every report using it lost its bodies), but a report
    // whose body is gone is still a report: it reads like one past body retention.
    if (err instanceof MissingBlobError) return expire(report);
    throw err;
  }
  return report;
}

/** A report past body retention: its bodies are gone, everything else stays. */
function expire(report: StoredReport): StoredReport {
  if (report.request && 'body' in report.request) delete report.request.body;
  if (report.response && 'body' in report.response) delete report.response.body;
  report['bodiesExpired'] = true;
  return report;
}
