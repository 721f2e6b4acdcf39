// After each test file, the directories it made through tempDir (data dirs, SQLite files, config files) go:
// a test run leaves nothing behind in the system's temp dir. Registered before the file's own hooks, so it
// runs after them (vitest runs after-hooks in reverse), once every relay and store the file opened is closed.
import { afterAll } from 'vitest';
import { removeTempDirs } from '../helpers/relay.js';

afterAll(removeTempDirs);
