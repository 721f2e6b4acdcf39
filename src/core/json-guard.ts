// Checks a JSON text before JSON.parse sees it: nesting depth is bounded (a 100k-deep array would blow the
// stack in parse, canonicalize or the store) without building anything. A single pass over the characters,
// skipping string contents.
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJ = 0x7b;
const OPEN_ARR = 0x5b;
const CLOSE_OBJ = 0x7d;
const CLOSE_ARR = 0x5d;

/** The deepest nesting of objects/arrays in a JSON text (0 for a scalar). Stops early past `limit`. */
export function jsonDepth(text: string, limit: number): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
      continue;
    }
    if (c === QUOTE) inString = true;
    else if (c === OPEN_OBJ || c === OPEN_ARR) {
      depth++;
      if (depth > max) {
        max = depth;
        if (max > limit) return max;
      }
    } else if (c === CLOSE_OBJ || c === CLOSE_ARR) depth--;
  }
  return max;
}
