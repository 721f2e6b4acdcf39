// The major version of the Node running the relay: what the SQLite driver (storage/sqlite-driver.ts) and the
// restart's semi-space cap (memory-trim.ts) are chosen by. No imports: memory-trim.ts loads it before anything else.
export const NODE_MAJOR = Number(process.versions.node.split('.')[0]);
