import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const DEMO_DIR = dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = resolve(DEMO_DIR, '..');
export const WORKER_SCRIPT = join(DEMO_DIR, 'worker.ts');
export const REAPER_SCRIPT = join(REPO_ROOT, 'jobs/reaper.ts');
/** Child processes run TypeScript through tsx's loader, as `npm run demo` itself does. */
export const TSX_EXEC_ARGV: readonly string[] = ['--import', 'tsx'];
