// A relay built in this process with tracing configured the only way it can be: OTEL_* variables, read by
// loadConfig exactly as `npm start` reads them from the environment.
import type { RelayConfig } from '../../src/config.js';
import { type TestRelay, startRelay } from './relay.js';

export function startTracedRelay(otel: Record<string, string>, settings: Partial<RelayConfig> = {}): Promise<TestRelay> {
  return startRelay(settings, {}, otel);
}
