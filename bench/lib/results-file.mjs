// bench/results.md holds two sections written by two runners: the throughput run (run.mjs) and the cost
// run (cost.mjs). Each replaces only its own section, between its markers, so one never erases the other.
import { readFile, writeFile } from 'node:fs/promises';

const TITLE = '# llm-relay benchmark results\n';

export async function writeSection(file, name, markdown) {
  const open = `<!-- ${name}: written by bench/${name === 'cost' ? 'cost' : 'run'}.mjs -->`;
  const close = `<!-- /${name} -->`;
  const block = `${open}\n${markdown.trim()}\n${close}`;
  let text = '';
  try {
    text = await readFile(file, 'utf8');
  } catch {
    // first run
  }
  const start = text.indexOf(open);
  const end = text.indexOf(close);
  if (start >= 0 && end > start) text = text.slice(0, start) + block + text.slice(end + close.length);
  else if (text.startsWith(TITLE)) text = `${text.trimEnd()}\n\n${block}\n`;
  else text = `${TITLE}\n${block}\n`;
  // the cost section first: it carries the targets of the cost issue
  await writeFile(file, text.endsWith('\n') ? text : `${text}\n`);
}
