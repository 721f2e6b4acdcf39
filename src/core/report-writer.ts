// Group commit: reports that arrive while a batch is being written, or within `flushMs` of the first one,
// are written together in one transaction. Each write resolves only when its batch is durable, so the
// direct API can answer 201 honestly without an fsync per report.
import type { ReportStore, StoredReport } from '../storage/report-store.js';

export interface ReportWriterOptions {
  store: ReportStore;
  flushMs: number;
  batchMax: number;
}

export interface ReportWriter {
  write(report: StoredReport): Promise<void>;
  /** Resolves when everything queued before the call is written (or failed). */
  flush(): Promise<void>;
  /** reports accepted and not yet written */
  readonly pending: number;
  readonly written: number;
}

interface Waiting {
  report: StoredReport;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export function createReportWriter(opts: ReportWriterOptions): ReportWriter {
  let queue: Waiting[] = [];
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> | undefined;
  let written = 0;

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

  async function drain(): Promise<void> {
    if (timer) {
      clearTimeout(timer);
      timer = undefined;
    }
    while (queue.length > 0 && !inFlight) {
      const batch = queue.slice(0, opts.batchMax);
      queue = queue.slice(batch.length);
      inFlight = opts.store.insertMany(batch.map((w) => w.report)).then(
        () => {
          written += batch.length;
          for (const w of batch) w.resolve();
        },
        (err: unknown) => {
          for (const w of batch) w.reject(err);
        },
      );
      await inFlight;
      inFlight = undefined;
    }
  }

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
    get pending() {
      return queue.length + (inFlight ? 1 : 0);
    },
    get written() {
      return written;
    },
  };
}
