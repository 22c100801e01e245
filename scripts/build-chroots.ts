// Builds the sid chroots the MySQL 9.7 and MariaDB 11.8 lanes start their servers from, so that .ci/run can
// download them in the background while the steps before those lanes use the CPU. Each build is under the
// harness's own lock: a test run that needs a chroot first waits for it rather than building it twice.
import { CHROOTS, ensureChroot } from '../harness/chroot.js';

for (const flavour of Object.values(CHROOTS)) {
  await ensureChroot(flavour, (line) => console.log(`[chroots] ${line}`));
}
console.log('[chroots] ready');
