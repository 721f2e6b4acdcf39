// Group commit with a durable fallback, in two steps. A durable write (a direct-API report, acknowledged with
// a 201) is made durable first: with a journal (the SQLite store's, report-journal.ts), its line is appended
// and synced together with the others that arrived in the same turn (or within `flushMs`), and the write
// resolves; without one, its batch is committed to the store with an fsync before it resolves. Reports
// then reach the store in batches: a report nobody waits on (a proxied call's, or one the journal already
// holds) may wait up to `lazyMs` for others, so a busy relay writes its pages once per batch of hundreds,
// not once per handful. `flush` (reads call it first) writes everything at once.
// A store that writes on this thread (SQLite: `slice`) takes a long queue that holds durable writes a slice
// at a time, with a turn of the thread's event loop between slices, so that durable writes arriving meanwhile
// are journaled and acknowledged instead of waiting behind the whole insert; the slices commit without a
// sync of their own, and the drain's last write commits durably for them all (only then is the journal
// emptied).
// When the store fails, batches go to the outbox file instead (durable too), and every later report follows
// them there until a delivery loop has handed the whole outbox to the store, in order. Only a report that
// neither the store nor the outbox took is dropped (and counted); a journaled one stays in the journal and
// is offered again at the next start.
import type { OutboxFile } from '../storage/outbox-file.js';
import type { ReportJournal } from '../storage/report-journal.js';
import type { ReportStore, StoredReport } from '../storage/report-store.js';

export interface ReportWriterOptions {
  store: ReportStore;
  outbox?: OutboxFile;
  /** makes durable writes durable before the store commits them (cheaper than a store commit each) */
  journal?: ReportJournal;
  /** reports an earlier run journaled that the store may not hold: written first */
  replay?: StoredReport[];
  /** window for durable writes to gather before they are synced (0: those that arrived in the same turn) */
  flushMs: number;
  /** how long a report nobody waits on may wait to be written with others (0: at once) */
  lazyMs?: number;
  batchMax: number;
  /**
   * For a store that writes on this thread: a queue longer than this is written this many at a time, with a
   * turn of the event loop between the writes (0 or absent: whole batches)
   */
  slice?: number;
  /** wait between delivery attempts while the store is down */
  retryMs: number;
  onStoreError?: (err: unknown) => void;
  onDelivered?: (count: number) => void;
  onQuarantined?: (count: number) => void;
}

export interface ReportWriter {
  /**
   * Resolves once the report is durable: `durable` (a direct-API report, acknowledged with a 201) in the
   * journal or the store; the others (proxied calls, acknowledged to nobody) once the store has them.
   * `line` is the report's JSON text when the caller has it already.
   */
  write(report: StoredReport, durable?: boolean, line?: string): Promise<void>;
  /** A report nobody waits on (a proxied call's): queued for the store, its failure only counted. */
  add(report: StoredReport): void;
  /** Resolves when everything queued before the call is in the store (or the outbox), or failed. */
  flush(): Promise<void>;
  /** Stops the delivery loop; what is left in the outbox is delivered at the next start. */
  close(): Promise<void>;
  /** reports accepted and not yet in the store */
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

/** A durable write waiting for the journal. */
interface Acking {
  report: StoredReport;
  line: string | undefined;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** A report on its way to the store. */
interface Queued {
  report: StoredReport;
  /** the journal holds it: the store batch that takes it must be durable before the journal is emptied */
  journaled: boolean;
  /** its write waits for the store (resolved once there); absent when it was acknowledged already */
  settle?: { resolve: () => void; reject: (err: unknown) => void; durable: boolean };
}

/** With `slice`: most reports one drain writes in slices, in batches of batchMax. */
const SLICED_BATCHES = 4;

export function createReportWriter(opts: ReportWriterOptions): ReportWriter {
  const { store, outbox, journal } = opts;
  const lazyMs = opts.lazyMs ?? 0;
  let acking: Acking[] = [];
  let queue: Queued[] = [];
  /** journaled reports not yet durable in the store or the outbox */
  let journaledOutstanding = 0;
  /** queued reports whose writes wait for a durable store commit (no journal) */
  let urgent = 0;
  /** cancels the store write that is due (a durable one's window, or the end of this turn) */
  let soon: (() => void) | undefined;
  /** the lazy window of reports nobody waits on */
  let lazyTimer: NodeJS.Timeout | undefined;
  let ackTimer: (() => void) | undefined;
  let inFlight: Promise<void> | undefined;
  let written = 0;
  let dropped = 0;
  let quarantined = 0;
  let delivering: Promise<void> | undefined;
  let closed = false;
  let retryTimer: NodeJS.Timeout | undefined;
  let wakeRetry: (() => void) | undefined;

  /**
   * Runs `run` after the window; without one, at the end of this turn (a batch then takes what arrived
   * while the last one was written). Returns what cancels it.
   */
  function after(window: number, run: () => void): () => void {
    if (window > 0) {
      const t = setTimeout(run, window);
      return () => clearTimeout(t);
    }
    const i = setImmediate(run);
    return () => clearImmediate(i);
  }

  // ---- durable writes: the journal

  function scheduleAck(): void {
    if (ackTimer) return;
    ackTimer = after(opts.flushMs, () => {
      ackTimer = undefined;
      ack();
    });
  }

  function ack(): void {
    if (acking.length === 0) return;
    const batch = acking;
    acking = [];
    try {
      journal!.append(batch.map((a) => a.line ?? JSON.stringify(a.report)));
    } catch (err) {
      for (const a of batch) a.reject(err);
      return;
    }
    journaledOutstanding += batch.length;
    for (const a of batch) {
      queue.push({ report: a.report, journaled: true });
      a.resolve();
    }
    scheduleStore();
  }

  // ---- the store

  /** Whether the queue is to be written now rather than at the end of the lazy window. */
  function due(): boolean {
    return lazyMs === 0 || urgent > 0 || queue.length >= opts.batchMax;
  }

  function scheduleStore(): void {
    if (inFlight || soon || queue.length === 0) return; // a batch in flight picks the queue up when it ends
    if (!due()) {
      lazyTimer ??= setTimeout(() => void drain(true), lazyMs);
      return;
    }
    soon = after(urgent > 0 && queue.length < opts.batchMax ? opts.flushMs : 0, () => {
      soon = undefined;
      void drain();
    });
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

  /** Reports a slice wrote without a sync that wait for the drain's durable write (see `slice`). */
  let unsynced: Queued[] = [];

  /** Whether a queued report's write must be durable before it counts as done. */
  const needsSync = (q: Queued): boolean => q.journaled || q.settle?.durable === true;

  /** These reports are durable in the store (or the outbox): their writes are done. */
  function settled(batch: Queued[]): void {
    journaledOutstanding -= batch.filter((q) => q.journaled).length;
    if (journal && journaledOutstanding === 0 && journal.depth > 0) journal.clear();
    for (const q of batch) q.settle?.resolve();
  }

  /**
   * Writes the queue in batches; `force` (the lazy window is over, or a flush) writes what is not due too.
   * With `slice`, a queue longer than a slice that holds durable writes goes a slice at a time, each followed
   * by a turn of the event loop; at most SLICED_BATCHES batches' worth so in one drain, so that its durable
   * write comes even while reports keep arriving as fast as slices go.
   */
  async function drain(force = false): Promise<void> {
    soon?.();
    soon = undefined;
    clearTimeout(lazyTimer);
    lazyTimer = undefined;
    const slice = opts.slice ?? 0;
    let sliced = 0;
    while (queue.length > 0 && !inFlight) {
      if (!force && !due()) {
        scheduleStore();
        return;
      }
      // (only while a durable write waits on it: reports nobody waits on go whole, a commit a batch)
      const slicing =
        slice > 0 &&
        queue.length > slice &&
        sliced < SLICED_BATCHES * opts.batchMax &&
        (unsynced.length > 0 || queue.some(needsSync));
      const batch = queue.slice(0, slicing ? slice : opts.batchMax);
      queue = queue.slice(batch.length);
      for (const q of batch) if (q.settle?.durable) urgent--;
      // A slice commits without a sync; the write after it syncs for it too.
      const durable = !slicing && (unsynced.length > 0 || batch.some(needsSync));
      inFlight = writeBatch(
        batch.map((q) => q.report),
        durable,
      ).then(
        () => {
          if (durable) {
            const done = unsynced.length > 0 ? [...unsynced, ...batch] : batch;
            unsynced = [];
            return settled(done);
          }
          for (const q of batch) {
            if (needsSync(q)) unsynced.push(q);
            else q.settle?.resolve();
          }
        },
        (err: unknown) => {
          // A journaled report is not lost: the journal keeps it for the next start. (Reports of slices
          // written before stay unsynced: the next durable write settles them.)
          dropped += batch.filter((q) => !q.journaled).length;
          for (const q of batch) q.settle?.reject(err);
        },
      );
      if (slicing) {
        sliced += batch.length;
        // The rest of this drain goes on after the turn, due or not: its slices wait for the durable write.
        // (inFlight stays set through the turn: nothing else starts a drain meanwhile.)
        force = true;
        const written = inFlight;
        inFlight = written.then(() => new Promise<void>((resolve) => setImmediate(resolve)));
      }
      await inFlight;
      inFlight = undefined;
    }
  }

  // ---- the outbox

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

  // Reports an earlier run journaled go first; those it left in the outbox are delivered from the start.
  if (opts.replay && opts.replay.length > 0) {
    journaledOutstanding += opts.replay.length;
    for (const report of opts.replay) queue.push({ report, journaled: true });
    soon = after(0, () => {
      soon = undefined;
      void drain(true);
    });
  }
  if (outbox && outbox.depth > 0) startDelivery();

  return {
    write(report, durable = true, line) {
      return new Promise<void>((resolve, reject) => {
        if (durable && journal) {
          acking.push({ report, line, resolve, reject });
          scheduleAck();
          return;
        }
        queue.push({ report, journaled: false, settle: { resolve, reject, durable } });
        if (durable) urgent++;
        scheduleStore();
      });
    },
    add(report) {
      queue.push({ report, journaled: false });
      scheduleStore();
    },
    async flush() {
      ackTimer?.();
      ackTimer = undefined;
      ack();
      while (queue.length > 0 || inFlight) {
        if (inFlight) await inFlight;
        else await drain(true);
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
      return acking.length + queue.length + (inFlight ? 1 : 0);
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
