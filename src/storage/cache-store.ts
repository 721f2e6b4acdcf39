// The cache store port. Adapters (sqlite, memory, redis) keep opaque JSON text under a string key; TTL and
// the byte budget are enforced by the store, everything else (key derivation, namespaces, what a value
// means) lives in core/cache-service.
export interface CacheRecord {
  /** `<namespace>:<sha256 hex>` */
  key: string;
  /** JSON text of a core/cached-response value. Stores never look inside. */
  value: string;
  /** epoch ms when the entry was written */
  createdAt: number;
  /** epoch ms after which the entry must not be returned */
  expiresAt: number;
}

export interface CacheStoreStats {
  entries: number;
  bytes: number;
}

export interface CacheStore {
  /** `sqlite`, `memory` or `redis` */
  readonly kind: string;
  /**
   * get() answers without waiting on I/O or timers (from memory, or a local file read synchronously), so a
   * timeout could never fire before it: callers need not arm one.
   */
  readonly readsInProcess: boolean;
  /**
   * A get() issued once set() has returned sees the record (the store keeps what it has yet to write in
   * memory and reads it from there), so callers need not keep their own copy of the entries being written.
   */
  readonly setsSeenAtOnce: boolean;
  /** The record, or undefined when absent or expired. Rejects with StoreUnavailableError when the backend fails. */
  get(key: string): Promise<CacheRecord | undefined>;
  /** Insert or replace. */
  set(record: CacheRecord): Promise<void>;
  delete(key: string): Promise<boolean>;
  /** Every live record (for export). Order is unspecified. */
  entries(): AsyncIterable<CacheRecord>;
  stats(): Promise<CacheStoreStats>;
  /** Resolves when the backend answers. */
  ping(): Promise<void>;
  /**
   * Gives back memory the store holds only to be faster (SQLite's page cache), in a quiet moment after a
   * burst (src/memory-trim.ts). Best effort and synchronous; what it dropped is read again when needed.
   */
  releaseMemory?(): void;
  close(): Promise<void>;
}
