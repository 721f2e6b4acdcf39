// Group commit with a durable fallback. Reports that arrive while a batch is being written, or within
// `flushMs` of the first one (0: those that arrived in the same turn of the event loop), are written
// together in one transaction; each write resolves only when its
// batch is durable, so the direct API can answer 201 honestly without an fsync per report.
// When the store fails, batches go to the outbox file instead (durable too), and every later report
// follows them there until a delivery loop has handed the whole outbox to the store, in order. Only a
// report that neither the store nor the outbox took is dropped (and counted).
import type { OutboxFile } from '../storage/outbox-file.js';
import type { ReportStore, StoredReport } from '../storage/report-store.js';

export interface ReportWriterOptions {
  store: ReportStore;
  outbox?: OutboxFile;
  flushMs: number;
  batchMax: number;
  /** wait between delivery attempts while the store is down */
  retryMs: number;
  onStoreError?: (err: unknown) => void;
  onDelivered?: (count: number) => void;
  onQuarantined?: (count: number) => void;
}

export interface ReportWriter {
  /**
   * Resolves once the report is written. `durable` (a direct-API report, acknowledged with a 201): its batch
   * commits with an fsync; the others (proxied calls, acknowledged to nobody) may ride on the next one.
   */
  write(report: StoredReport, durable?: boolean): Promise<void>;
  /** Resolves when everything queued before the call is written (or failed). */
  flush(): Promise<void>;
  /** Stops the delivery loop; what is left in the outbox is delivered at the next start. */
  close(): Promise<void>;
  /** reports accepted and not yet durable */
  readonly pending: number;
  /** reports the store has taken (directly or from the outbox) */
  readonly written: number;
  /** reports neither the store nor the outbox took */
  readonly dropped: number;
  /** reports waiting in the outbox */
  readonly outboxDepth: number;
  /** reports the store refused while up, kept in the outbox's quarantine file */
  readonly quarantined: number;
}

interface Waiting {
  report: StoredReport;
  durable: boolean;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export function createReportWriter(opts: ReportWriterOptions): ReportWriter {
  const { store, outbox } = opts;
  let queue: Waiting[] = [];
  let timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  let inFlight: Promise<void> | undefined;
  let written = 0;
  let dropped = 0;
  let quarantined = 0;
  let delivering: Promise<void> | undefined;
  let closed = false;
  let retryTimer: NodeJS.Timeout | undefined;
  let wakeRetry: (() => void) | undefined;

  function schedule(): void {
    if (inFlight || timer) return; // the batch in flight picks the queue up when it ends
    if (queue.length >= opts.batchMax) {
      void drain();
      return;
    }
    const run = (): void => {
      timer = undefined;
      void drain();
    };
    // Without a window, a batch takes what has arrived by the end of this turn: on the report worker that
    // is every batch of records the event loop sent while the last commit (and its fsync) held the thread.
    timer = opts.flushMs > 0 ? setTimeout(run, opts.flushMs) : setImmediate(run);
  }

  async function writeBatch(reports: StoredReport[], durable: boolean): Promise<void> {
    if (!outbox || outbox.depth === 0) {
      try {
        await store.insertMany(reports, { durable });
        written += reports.length;
        return;
      } catch (err) {
        if (!outbox) throw err;
        opts.onStoreError?.(err);
      }
    }
    // The store is down, or older reports still wait in the outbox: keep the order, go behind them.
    await outbox.append(reports);
    startDelivery();
  }

  async function drain(): Promise<void> {
    if (timer) {
      if (opts.flushMs > 0) clearTimeout(timer as NodeJS.Timeout);
      else clearImmediate(timer as NodeJS.Immediate);
      timer = undefined;
    }
    while (queue.length > 0 && !inFlight) {
      const batch = queue.slice(0, opts.batchMax);
      queue = queue.slice(batch.length);
      inFlight = writeBatch(
        batch.map((w) => w.report),
        batch.some((w) => w.durable),
      ).then(
        () => {
          for (const w of batch) w.resolve();
        },
        (err: unknown) => {
          dropped += batch.length;
          for (const w of batch) w.reject(err);
        },
      );
      await inFlight;
      inFlight = undefined;
    }
  }

  function startDelivery(): void {
    if (!outbox || delivering || closed) return;
    delivering = deliver().finally(() => {
      delivering = undefined;
      // An append that raced with the last ack starts the loop again.
      if (outbox.depth > 0 && !closed) startDelivery();
    });
  }

  /**
   * A batch the store refuses while it answers pings holds a report it will never take (a bug, not an
   * outage): the batch is split so that report is set aside in the quarantine file (durable, for a human)
   * instead of blocking every report behind it. Returns how many the store took, or undefined when the
   * store itself is down.
   */
  async function deliverOneByOne(batch: StoredReport[]): Promise<number | undefined> {
    try {
      await store.ping();
    } catch {
      return undefined;
    }
    let taken = 0;
    const refused: StoredReport[] = [];
    for (const report of batch) {
      try {
        await store.insertMany([report]);
        taken++;
      } catch (err) {
        opts.onStoreError?.(err);
        refused.push(report);
      }
    }
    // If it took none, the store refuses writes altogether (a full disk answers pings): an outage, retried.
    // Only reports refused beside others it took are singled out.
    if (taken === 0) return undefined;
    if (refused.length > 0) {
      await outbox!.quarantine(refused);
      quarantined += refused.length;
      opts.onQuarantined?.(refused.length);
    }
    return taken;
  }

  async function deliver(): Promise<void> {
    while (outbox && outbox.depth > 0 && !closed) {
      const batch = await outbox.peek(opts.batchMax);
      if (batch.length === 0) return;
      let taken: number | undefined = batch.length;
      try {
        await store.insertMany(batch);
      } catch (err) {
        opts.onStoreError?.(err);
        taken = await deliverOneByOne(batch);
      }
      if (taken === undefined) {
        await new Promise<void>((resolve) => {
          wakeRetry = resolve;
          retryTimer = setTimeout(resolve, opts.retryMs);
        });
        continue;
      }
      written += taken;
      await outbox.ack(batch.length);
      opts.onDelivered?.(taken);
    }
  }

  // Reports left in the outbox by an earlier run are delivered from the start.
  if (outbox && outbox.depth > 0) startDelivery();

  return {
    write(report, durable = true) {
      return new Promise<void>((resolve, reject) => {
        queue.push({ report, durable, resolve, reject });
        schedule();
      });
    },
    async flush() {
      while (queue.length > 0 || inFlight) {
        if (inFlight) await inFlight;
        else await drain();
      }
    },
    async close() {
      await this.flush();
      closed = true;
      clearTimeout(retryTimer);
      wakeRetry?.();
      await delivering;
    },
    get pending() {
      return queue.length + (inFlight ? 1 : 0);
    },
    get written() {
      return written;
    },
    get dropped() {
      return dropped;
    },
    get outboxDepth() {
      return outbox?.depth ?? 0;
    },
    get quarantined() {
      return quarantined;
    },
  };
}
