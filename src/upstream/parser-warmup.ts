// undici reads the upstream's responses with llhttp compiled to WebAssembly. V8 compiles that module with its
// baseline compiler (Liftoff) at the first call upstream and compiles it again with its optimizing one
// (TurboFan) once enough bytes have gone through the parser; for its main function that second compile takes
// ~0.5 s of a background thread and ~30 MB of compiler memory (--trace-wasm-compilation-times here: 565 ms,
// 29.5 MB at its peak). It happens in the first busy minute of a fresh relay — 1,000 responses at once make the
// parser hot — so the memory lands on top of everything that burst holds, and glibc keeps the arena it grew
// (docs/benchmarks.md, "The burst, found"). Until it is done the parser runs in the slower baseline code.
//
// So a relay that will call upstream compiles the module with TurboFan as it starts (server.ts: on V8's
// background threads while the app is built, ~0.2 s of CPU, the event loop free meanwhile; it listens once the
// compile is done and the compiler's ~35 MB are handed back with a trim). V8 keeps one compiled copy of a
// module per process (its native module cache, by the module's bytes), so when undici compiles the same bytes
// at the first call it gets this compiled code — no Liftoff, no tier-up. V8 has no per-module switch for that:
// its compiler flags are set for the compile and set back when it is done (a module some other code compiles
// meanwhile is compiled the same way; the relay compiles no other). A compile of the same bytes meanwhile
// waits for this one.
import { createRequire } from 'node:module';
import v8 from 'node:v8';

const require = createRequire(import.meta.url);

/** a compiled WebAssembly module (the project's TypeScript libs declare no WebAssembly: the one call is typed here) */
export type WasmModule = object;
const wasm = (globalThis as unknown as { WebAssembly: { compile(bytes: Uint8Array): Promise<WasmModule> } }).WebAssembly;

/** The two builds of llhttp undici 7 ships (its lib/dispatcher/client-h1.js loads one of them). */
export const LLHTTP_FILES = {
  simd: 'undici/lib/llhttp/llhttp_simd-wasm.js',
  plain: 'undici/lib/llhttp/llhttp-wasm.js',
} as const;

export type LlhttpBuild = keyof typeof LLHTTP_FILES;

/**
 * Whether undici compiles the SIMD build first, as its client-h1.js decides: yes, unless
 * UNDICI_NO_WASM_SIMD=1 (undici's own variable), or on ppc64 before Node 24.12 (where V8's SIMD is broken)
 * unless UNDICI_NO_WASM_SIMD=0.
 */
export function undiciUsesSimd(env: NodeJS.ProcessEnv, arch: string = process.arch, nodeVersion: string = process.versions.node): boolean {
  if (env.UNDICI_NO_WASM_SIMD === '1') return false;
  if (env.UNDICI_NO_WASM_SIMD === '0') return true;
  if (arch !== 'ppc64') return true;
  const [major = 0, minor = 0] = nodeVersion.split('.').map((n) => Number.parseInt(n, 10));
  return major > 24 || (major === 24 && minor >= 12);
}

/**
 * Whether the operator chose how V8 compiles WebAssembly (a Liftoff, lazy-compilation or tier-up flag on the
 * command line or in NODE_OPTIONS): then the warm-up leaves V8's flags alone — setting them back afterwards
 * would undo that choice.
 */
export function wasmFlagsGiven(nodeOptions: readonly string[]): boolean {
  return nodeOptions.some((a) => /--(no-)?(liftoff|wasm-lazy-compilation|wasm-tier-up|wasm-dynamic-tiering)\b/.test(a));
}

/**
 * The llhttp build to compile at start (config.ts reads the environment, and calls this): the one undici will
 * compile, or undefined when the operator gave WebAssembly flags of their own.
 */
export function upstreamParserFromEnv(env: NodeJS.ProcessEnv, execArgv: readonly string[] = process.execArgv): LlhttpBuild | undefined {
  if (wasmFlagsGiven([...execArgv, env.NODE_OPTIONS ?? ''])) return undefined;
  return undiciUsesSimd(env) ? 'simd' : 'plain';
}

/** the compiled module, kept: V8's cache holds a module only while something references it */
let compiled: Promise<WasmModule | undefined> | undefined;

/**
 * Compiles undici's llhttp (`build`, and the plain one should this V8 refuse the SIMD build, as undici falls
 * back) with TurboFan, off the event loop, once per process: later calls return the same promise. Resolves with
 * the module, or undefined when it could not be done (undici's files moved: then undici compiles it as it
 * always did).
 */
export function warmUpstreamParser(build: LlhttpBuild): Promise<WasmModule | undefined> {
  compiled ??= compileOptimized(build === 'simd' ? [LLHTTP_FILES.simd, LLHTTP_FILES.plain] : [LLHTTP_FILES.plain]);
  return compiled;
}

/**
 * V8's defaults, set back after the compile (V8 has no way to read a flag; the warm-up runs only when the operator
 * set none of these, so the defaults are what was in force). A test holds them to `node --v8-options`.
 */
export const V8_WASM_DEFAULTS = ['--liftoff', '--wasm-lazy-compilation'] as const;

async function compileOptimized(files: readonly string[]): Promise<WasmModule | undefined> {
  v8.setFlagsFromString('--no-liftoff');
  v8.setFlagsFromString('--no-wasm-lazy-compilation');
  try {
    for (const file of files) {
      try {
        // (V8 reads the flags as the compile proceeds, not as it is called: they stay set until it is done)
        return await wasm.compile(require(file) as Buffer);
      } catch {
        // undici falls back the same way when this V8 cannot compile the SIMD build
      }
    }
    return undefined;
  } finally {
    for (const flag of V8_WASM_DEFAULTS) v8.setFlagsFromString(flag);
  }
}
