// Run by `npm run build` after tsc: writes each BPE encoding's rank tables as one file under dist/ranks, which
// the report worker reads at once instead of parsing gpt-tokenizer's rank file (bpe-count.ts, loadRanks).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { ENCODINGS, packRanks, rankFile, readTiktoken, tablesFile } from './core/bpe-count.js';

for (const encoding of ENCODINGS) {
  const file = tablesFile(encoding);
  mkdirSync(new URL('.', file), { recursive: true });
  writeFileSync(file, packRanks(encoding, readTiktoken(readFileSync(rankFile(encoding)))));
}
