// `npm run build` (also run through `prepare` by `npm pack`/`npm publish`, by `npm ci`/`npm install` in a
// checkout, and by npm when the package is installed from git): a clean dist/ from
// tsconfig.build.json, and the reaper bin made executable so `./node_modules/.bin/…` and a
// checkout's `dist/jobs/reaper.js` can be run directly (npm sets the mode on install as well).
import { execFileSync } from 'node:child_process';
import { chmodSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

process.chdir(fileURLToPath(new URL('..', import.meta.url)));
rmSync('dist', { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
for (const bin of Object.values(pkg.bin)) {
  if (!readFileSync(bin, 'utf8').startsWith('#!/usr/bin/env node\n'))
    throw new Error(`${bin} lacks the #!/usr/bin/env node line`);
  chmodSync(bin, 0o755);
}
