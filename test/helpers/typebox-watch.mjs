// Loaded with `node --import` into a relay process by a test: writes a line to stderr for each of TypeBox's
// modules the process resolves (TypeBox is ES modules only, and every ES module passes the resolve hook).
import { register } from 'node:module';

const hooks = `
import { writeSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  if (resolved.url.includes('/node_modules/typebox/')) writeSync(2, 'typebox module: ' + resolved.url + '\\n');
  return resolved;
}`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);
