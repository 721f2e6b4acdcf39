// One scratch buffer per thread, for bytes that live only as long as one synchronous call: a stream's copy
// rebuilt to be read as text, a cache value's UTF-8 on its way to DEFLATE. Each of those made a buffer of its
// own per answer before, held outside V8's heap until a collection found it: a thousand streams ending within
// a second left ~15 KB each of them behind at once (docs/benchmarks.md, "Scratch bytes, and a stream's copy
// rebuilt into the batch").

/** Above this a caller gets a buffer of its own: the scratch buffer is kept for the thread's whole life. */
export const SCRATCH_MAX = 256 * 1024;
const SCRATCH_MIN = 64 * 1024;

let scratch: Buffer | undefined;

/**
 * `size` bytes to write and read within the caller's synchronous call, and not to keep or hand on: the next
 * call, from anywhere on the thread, overwrites them. A buffer of its own when `size` is above SCRATCH_MAX.
 */
export function scratchBytes(size: number): Buffer {
  if (size > SCRATCH_MAX) return Buffer.allocUnsafeSlow(size);
  if (scratch === undefined || scratch.length < size) scratch = Buffer.allocUnsafeSlow(Math.min(SCRATCH_MAX, Math.max(size, SCRATCH_MIN, 2 * (scratch?.length ?? 0))));
  return scratch.subarray(0, size);
}

/** The UTF-8 of `text`, in the scratch bytes when it fits there (the same rules as scratchBytes). */
export function scratchUtf8(text: string): Buffer {
  // UTF-8 takes at most 3 bytes for each UTF-16 unit; the exact length is counted only when that bound is over
  const most = text.length * 3;
  const room = scratchBytes(most <= SCRATCH_MAX ? most : Buffer.byteLength(text));
  return room.subarray(0, room.write(text));
}
