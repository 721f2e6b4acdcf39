// Group commit with a durable fallback. Reports that arrive while a batch is being written, or within
// `flushMs` of the first one, are written together in one transaction; each write resolves only when its
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
}

export interface ReportWriter {
  write(report: StoredReport): Promise<void>;
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
}

interface Waiting {
  report: StoredReport;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export function createReportWriter(opts: ReportWriterOptions): ReportWriter {
  const { store, outbox } = opts;
  let queue: Waiting[] = [];
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> | undefined;
  let written = 0;
  let dropped = 0;
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
    timer = setTimeout(() => {
      timer = undefined;
      void drain();
    }, opts.flushMs);
  }

  async function writeBatch(reports: StoredReport[]): Promise<void> {
    if (!outbox || outbox.depth === 0) {
      try {
        await store.insertMany(reports);
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
      clearTimeout(timer);
      timer = undefined;
    }
    while (queue.length > 0 && !inFlight) {
      const batch = queue.slice(0, opts.batchMax);
      queue = queue.slice(batch.length);
      inFlight = writeBatch(batch.map((w) => w.report)).then(
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

  async function deliver(): Promise<void> {
    while (outbox && outbox.depth > 0 && !closed) {
      const batch = await outbox.peek(opts.batchMax);
      if (batch.length === 0) return;
      try {
        await store.insertMany(batch);
      } catch (err) {
        opts.onStoreError?.(err);
        await new Promise<void>((resolve) => {
          wakeRetry = resolve;
          retryTimer = setTimeout(resolve, opts.retryMs);
        });
        continue;
      }
      written += batch.length;
      await outbox.ack(batch.length);
      opts.onDelivered?.(batch.length);
    }
  }

  // Reports left in the outbox by an earlier run are delivered from the start.
  if (outbox && outbox.depth > 0) startDelivery();

  return {
    write(report) {
      return new Promise<void>((resolve, reject) => {
        queue.push({ report, resolve, reject });
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
  };
}
