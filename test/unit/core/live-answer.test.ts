// The shared streamed answer on its own: who may join, what a joiner reads, and when the upstream call
// loses its last reader.
import type { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { type JoinEnd, createLiveFeed } from '../../../src/core/live-answer.js';
import { ClientGone } from '../../../src/core/proxy-types.js';

function feed(maxLagBytes = 1024) {
  const parts: Buffer[] = [];
  let copyWhole = true;
  let readers = 1;
  const live = createLiveFeed({
    status: 200,
    headers: { 'content-type': 'text/event-stream' },
    reportId: 'r-1',
    copy: () => (copyWhole ? Buffer.concat(parts) : undefined),
    maxLagBytes,
    enter: () => void readers++,
    leave: () => void readers--,
    reading: () => readers > 0,
  });
  return {
    live,
    get readers() {
      return readers;
    },
    set readers(n: number) {
      readers = n;
    },
    send(text: string) {
      const chunk = Buffer.from(text);
      parts.push(chunk);
      live.write(chunk);
    },
    outgrow() {
      copyWhole = false;
    },
  };
}

async function readAll(out: Readable): Promise<string> {
  let text = '';
  for await (const chunk of out) text += chunk;
  return text;
}

describe('live answer', () => {
  it('a joiner reads what came before it joined, then the rest, and ends complete', async () => {
    const f = feed();
    f.send('data: 1\n\n');
    const ends: JoinEnd[] = [];
    const answers: Array<string | undefined> = [];
    const out = f.live.join(new ClientGone(), (how, bytes) => {
      ends.push(how);
      answers.push(bytes?.toString());
    })!;
    expect(f.readers).toBe(2);
    f.send('data: 2\n\n');
    f.live.end();
    expect(await readAll(out)).toBe('data: 1\n\ndata: 2\n\n');
    expect(ends).toEqual(['complete']);
    // the whole answer, for the joiner's report
    expect(answers).toEqual(['data: 1\n\ndata: 2\n\n']);
  });

  it('a joiner after the end gets the whole answer and does not count as a reader', async () => {
    const f = feed();
    f.send('data: 1\n\n');
    f.live.end();
    const ends: JoinEnd[] = [];
    const out = f.live.join(new ClientGone(), (how) => ends.push(how))!;
    expect(await readAll(out)).toBe('data: 1\n\n');
    expect(ends).toEqual(['complete']);
    expect(f.readers).toBe(1);
  });

  it('cannot be joined once it failed, once nobody reads it, once its copy outgrew the limit, or by a caller that left', () => {
    const failed = feed();
    failed.live.fail();
    expect(failed.live.join(new ClientGone(), () => undefined)).toBeUndefined();
    const abandoned = feed();
    abandoned.readers = 0;
    expect(abandoned.live.join(new ClientGone(), () => undefined)).toBeUndefined();
    const big = feed();
    big.outgrow();
    expect(big.live.join(new ClientGone(), () => undefined)).toBeUndefined();
    const open = feed();
    const left = new ClientGone();
    left.abort(); // its caller left while it waited for the answer to start
    expect(open.live.join(left, () => undefined)).toBeUndefined();
    expect(open.readers).toBe(1);
  });

  it('a failure cuts every joiner with an error', async () => {
    const f = feed();
    const ends: JoinEnd[] = [];
    const out = f.live.join(new ClientGone(), (how) => ends.push(how))!;
    f.send('data: 1\n\n');
    f.live.fail();
    await expect(readAll(out)).rejects.toThrow('the upstream answer was cut short');
    expect(ends).toEqual(['stream-error']);
  });

  it('a joiner whose client leaves stops counting as a reader, once', () => {
    const f = feed();
    const gone = new ClientGone();
    const ends: JoinEnd[] = [];
    const out = f.live.join(gone, (how) => ends.push(how))!;
    expect(f.readers).toBe(2);
    gone.abort();
    gone.emit('abort');
    expect(out.destroyed).toBe(true);
    expect(f.readers).toBe(1);
    f.live.end();
    expect(ends).toEqual(['client-abort']);
  });

  it('a joiner that falls too far behind is cut off instead of buffering without end', async () => {
    const f = feed(64);
    const ends: JoinEnd[] = [];
    const out = f.live.join(new ClientGone(), (how) => ends.push(how))!; // never read
    f.send('x'.repeat(40));
    expect(ends).toEqual([]);
    f.send('x'.repeat(40));
    expect(ends).toEqual(['stream-error']);
    expect(out.destroyed).toBe(true);
    expect(f.readers).toBe(1);
    await expect(readAll(out)).rejects.toThrow('fell too far behind');
  });

  it('a tap (the fleet mirror) sees the answer so far, then every chunk and the end, without counting as a reader', () => {
    const f = feed();
    f.send('data: 1\n\n');
    const seen: string[] = [];
    const tap = { chunk: (b: Buffer) => seen.push(b.toString()), end: () => seen.push('END'), fail: () => seen.push('FAIL') };
    f.live.tap(tap);
    expect(f.readers).toBe(1);
    f.send('data: 2\n\n');
    f.live.end();
    expect(seen).toEqual(['data: 1\n\n', 'data: 2\n\n', 'END']);

    const broken = feed();
    const told: string[] = [];
    broken.live.tap({ chunk: () => told.push('chunk'), end: () => told.push('END'), fail: () => told.push('FAIL') });
    broken.live.fail();
    expect(told).toEqual(['FAIL']);
    // one that cannot be mirrored from its start (its copy outgrew the limit) fails at once
    const big = feed();
    big.outgrow();
    const late: string[] = [];
    big.live.tap({ chunk: () => late.push('chunk'), end: () => late.push('END'), fail: () => late.push('FAIL') });
    expect(late).toEqual(['FAIL']);
  });
});
