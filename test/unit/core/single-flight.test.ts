// One upstream call for identical concurrent requests: the leader's flight, joined by the others, settles
// once; its result is kept for those who joined, and for nobody else (see RunningFlight).
import { describe, expect, it } from 'vitest';
import { createSingleFlight } from '../../../src/core/single-flight.js';

describe('single flight', () => {
  it('shares the result with every call that joined, whether it asked before or after the settle', async () => {
    const flights = createSingleFlight<string, string>();
    const leader = flights.lead('k');
    const early = flights.join('k')!;
    const late = flights.join('k')!;
    expect(early).toBe(late);
    const asked = early.result;
    leader.settle('answer');
    await expect(asked).resolves.toBe('answer');
    await expect(late.result).resolves.toBe('answer');
    await expect(early.started).resolves.toBeUndefined();
    expect(flights.join('k')).toBeUndefined();
    expect(flights.size).toBe(0);
  });

  it('hands a published live answer to its joiners, and settles once', async () => {
    const flights = createSingleFlight<string, string>();
    const leader = flights.lead('k');
    const joined = flights.join('k')!;
    leader.publish('live');
    leader.settle('first');
    leader.settle('second');
    await expect(joined.started).resolves.toBe('live');
    await expect(joined.result).resolves.toBe('first');
  });

  it('a flight nobody joined ends with its settle; a new lead on the key is a new flight', async () => {
    const flights = createSingleFlight<string, string>();
    const first = flights.lead('k');
    first.settle('gone');
    expect(flights.size).toBe(0);
    const second = flights.lead('k');
    const joined = flights.join('k')!;
    // the first flight's late settle does not touch the second one
    first.settle('stale');
    expect(flights.join('k')).toBe(joined);
    second.settle(undefined);
    await expect(joined.result).resolves.toBeUndefined();
  });
});
