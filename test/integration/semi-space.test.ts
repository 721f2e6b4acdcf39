// The event loop's young generation capped by the restart's flag, and the report worker's its own: V8's
// `--max-semi-space-size` holds for every isolate started while it is set, and outweighs a worker's
// `resourceLimits` (memory-trim.ts, releaseSemiSpaceCap). Checked on real isolates: a Node started with the
// cap grows garbage on its event loop and in a worker, and prints both new spaces' committed sizes.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const MEMORY_TRIM = fileURLToPath(new URL('../../dist/memory-trim.js', import.meta.url));

// what each isolate runs: short-lived objects in bulk, so that its new space grows to what it may (dynamic
// imports only: a worker's eval'd code runs as a module here, under the parent's --input-type)
const CHURN = `function churn(){let keep=[];for(let i=0;i<3e6;i++){keep.push({a:i,b:'x'+i});if(keep.length>200000)keep=[];}}
const newSpaceMb=async()=>(await import('node:v8')).default.getHeapSpaceStatistics().find((s)=>s.space_name==='new_space').space_size/2**20;`;

const SCRIPT = `
const { Worker } = await import('node:worker_threads');
${CHURN}
churn();
const loop = await newSpaceMb();
if (process.argv[1] === 'release') (await import(${JSON.stringify(MEMORY_TRIM)})).releaseSemiSpaceCap();
const worker = await new Promise((resolve, reject) => {
  const w = new Worker(${JSON.stringify(`${CHURN} churn(); newSpaceMb().then(async (mb) => (await import('node:worker_threads')).parentPort.postMessage(mb));`)}, { eval: true, resourceLimits: { maxYoungGenerationSizeMb: 8 } });
  w.once('message', (mb) => { resolve(mb); w.terminate(); });
  w.once('error', reject);
});
churn();
console.log(JSON.stringify({ loop, worker, loopAfter: await newSpaceMb() }));
`;

async function newSpaces(release: boolean): Promise<{ loop: number; worker: number; loopAfter: number }> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--max-semi-space-size=8', '--input-type=module', '-e', SCRIPT, release ? 'release' : 'keep'], {
    timeout: 60_000,
  });
  return JSON.parse(stdout) as { loop: number; worker: number; loopAfter: number };
}

describe('the semi-space cap (memory-trim.ts)', () => {
  it('holds for the event loop, and the report worker gets its own young generation once it is taken back', async () => {
    // (Node's default on 20 and 22 would let the event loop's new space grow to 32 MB)
    const released = await newSpaces(true);
    expect(released).toEqual({ loop: 16, worker: 8, loopAfter: 16 });
    // without taking it back, the flag outweighs what the worker asks for
    const kept = await newSpaces(false);
    expect(kept).toEqual({ loop: 16, worker: 16, loopAfter: 16 });
  }, 120_000);
});
