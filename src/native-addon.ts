// The project's addons (native/, built by `npm ci` with the C compiler node-gyp finds): each loaded once;
// undefined when it was not built, and then the relay goes on without what it gives.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const loaded = new Map<string, unknown>();

/** The addon `native/build/Release/<name>.node`, or undefined when it was not built (`npm run build:native`). */
export function loadAddon<T>(name: string): T | undefined {
  if (!loaded.has(name)) {
    let addon: unknown = null;
    try {
      addon = require(`../native/build/Release/${name}.node`);
    } catch {
      // not built (no compiler at install), or built for another Node
    }
    loaded.set(name, addon);
  }
  return (loaded.get(name) ?? undefined) as T | undefined;
}
