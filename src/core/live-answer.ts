// A streamed answer that identical calls arriving while it runs join from its first event (single flight,
// DESIGN §3: "or join the stream"). A joiner reads the events so far, then the rest as they arrive. The
// upstream call goes on while anyone still reads it: it is aborted only when the leader's client and every
// joiner have left. A joiner that falls too far behind its share is cut off rather than buffered without end.
import { PassThrough, type Readable } from 'node:stream';
import type { ClientGone } from './proxy-types.js';

/** How a joiner's answer ended, for its report. */
export type JoinEnd = 'complete' | 'stream-error' | 'client-abort';

export interface LiveAnswer {
  readonly status: number;
  /** the headers a joiner is answered with (those a cached answer replays) */
  readonly headers: Record<string, string>;
  /** the report of the call that is being shared */
  readonly reportId: string;
  /** the span of the call that is being shared (with tracing on), for a joiner's link */
  readonly trace?: { traceId: string; spanId: string } | undefined;
  /**
   * The whole answer for one more reader, or undefined when it cannot be joined (it failed, nobody reads
   * it, its copy outgrew the cache's entry limit, or this caller already left). `onEnd` is called once,
   * with the whole answer's bytes when it is complete.
   */
  join(gone: ClientGone, onEnd: (how: JoinEnd, bytes?: Buffer) => void): Readable | undefined;
  /**
   * Hands the answer so far, every chunk after it, and then its end or failure to an observer that is not
   * a reader (the fleet mirror, fleet-flight.ts): it neither keeps the upstream call going nor is cut off.
   */
  tap(observer: LiveTap): void;
}

export interface LiveTap {
  chunk(bytes: Buffer): void;
  end(): void;
  fail(): void;
}

/** The leader's side: what the upstream sends, passed on to the joiners. */
export interface LiveFeed extends LiveAnswer {
  write(chunk: Buffer): void;
  end(): void;
  fail(): void;
}

export interface LiveOptions {
  status: number;
  headers: Record<string, string>;
  reportId: string;
  trace?: { traceId: string; spanId: string } | undefined;
  /** the answer so far; undefined once the copy outgrew its limit */
  copy(): Buffer | undefined;
  /** a joiner with more than this many bytes not yet taken by its client is cut off */
  maxLagBytes: number;
  /** one more reader of the upstream answer */
  enter(): void;
  /** a reader left before the end (the upstream call is aborted when it was the last one) */
  leave(): void;
  /** whether anyone still reads the answer */
  reading(): boolean;
}

interface Joiner {
  out: PassThrough;
  done(how: JoinEnd, bytes?: Buffer): void;
}

export function createLiveFeed(opts: LiveOptions): LiveFeed {
  let state: 'open' | 'ended' | 'failed' = 'open';
  const joiners = new Set<Joiner>();
  const taps: LiveTap[] = [];
  /** the complete answer, for the joiners' reports */
  const whole = (): Buffer | undefined => opts.copy();

  function drop(j: Joiner, how: JoinEnd): void {
    joiners.delete(j);
    j.done(how);
    opts.leave();
  }

  return {
    status: opts.status,
    headers: opts.headers,
    reportId: opts.reportId,
    trace: opts.trace,

    join(gone, onEnd) {
      // (a caller that left while it waited for the answer to start is not a reader either)
      if (state === 'failed' || !opts.reading() || gone.aborted) return undefined;
      const sofar = opts.copy();
      if (!sofar) return undefined;
      const out = new PassThrough();
      if (sofar.length > 0) out.write(sofar);
      let finished = false;
      const done = (how: JoinEnd, bytes?: Buffer): void => {
        if (finished) return;
        finished = true;
        onEnd(how, bytes);
      };
      if (state === 'ended') {
        out.end();
        done('complete', whole());
        return out;
      }
      const j: Joiner = { out, done };
      joiners.add(j);
      opts.enter();
      gone.once('abort', () => {
        if (!joiners.has(j)) return;
        out.destroy();
        drop(j, 'client-abort');
      });
      return out;
    },

    tap(observer) {
      // (the answer so far is all there is to start from: one whose copy outgrew its limit cannot be mirrored)
      const sofar = opts.copy();
      if (state === 'failed' || !sofar) return observer.fail();
      if (sofar.length > 0) observer.chunk(Buffer.from(sofar));
      if (state === 'ended') observer.end();
      else taps.push(observer);
    },

    write(chunk) {
      for (const t of taps) t.chunk(chunk);
      for (const j of joiners) {
        j.out.write(chunk);
        if (j.out.writableLength + j.out.readableLength > opts.maxLagBytes) {
          j.out.destroy(new Error('the client fell too far behind a shared streamed answer'));
          drop(j, 'stream-error');
        }
      }
    },

    end() {
      state = 'ended';
      for (const t of taps.splice(0)) t.end();
      const bytes = joiners.size > 0 ? whole() : undefined;
      for (const j of joiners) {
        j.out.end();
        j.done('complete', bytes);
      }
      joiners.clear();
    },

    fail() {
      if (state !== 'open') return;
      state = 'failed';
      for (const t of taps.splice(0)) t.fail();
      for (const j of joiners) {
        j.out.destroy(new Error('the upstream answer was cut short'));
        j.done('stream-error');
      }
      joiners.clear();
    },
  };
}
