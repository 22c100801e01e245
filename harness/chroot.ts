// Servers Debian's stable suite does not ship (Oracle MySQL, a newer MariaDB) come from Debian's
// sid suite, installed with debootstrap into a chroot that is built once and cached. The chroot
// shares the host's network, so a server started in it answers on 127.0.0.1 like any other.
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ChrootFlavour {
  /** Directory name under the cache. */
  name: string;
  /** Debian packages to install (comma-separated for debootstrap --include). */
  packages: string;
  /** The server binary inside the chroot. */
  server: string;
}

export const CHROOTS = Object.freeze({
  mysql: { name: 'mysql-sid', packages: 'mysql-server-core,mysql-client-core', server: '/usr/sbin/mysqld' },
  mariadb: { name: 'mariadb-sid', packages: 'mariadb-server-core,mariadb-client-core', server: '/usr/sbin/mariadbd' },
} satisfies Record<string, ChrootFlavour>);

const MIRROR = 'http://deb.debian.org/debian';

/**
 * debootstrap leaves no /etc/hosts: without one, localhost does not resolve in the chroot, and
 * mariadb-install-db refuses to run and MySQL cannot match root@localhost.
 */
function withHosts(root: string): string {
  const hosts = join(root, 'etc', 'hosts');
  if (!existsSync(hosts)) writeFileSync(hosts, '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n');
  return root;
}

/** Where chroots are cached: RWLOCK_CACHE_DIR, else ~/.cache/mysql-rwlock. */
export function cacheDir(): string {
  return process.env.RWLOCK_CACHE_DIR || join(homedir(), '.cache', 'mysql-rwlock');
}

function run(cmd: string, args: string[], what: string): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0)
    throw new Error(
      `${what} failed (${r.status ?? r.signal}):\n${(r.stderr || r.stdout || String(r.error ?? '')).slice(-3000)}`,
    );
}

function ensureDebootstrap(log: (line: string) => void): void {
  if (spawnSync('debootstrap', ['--version']).status === 0 || existsSync('/usr/sbin/debootstrap')) return;
  if (process.getuid?.() !== 0)
    throw new Error(
      'building a server chroot needs debootstrap and root: apt-get install debootstrap, and run as root',
    );
  log('installing debootstrap');
  run('apt-get', ['update', '-qq'], 'apt-get update');
  run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'debootstrap'], 'apt-get install debootstrap');
}

/**
 * The root of a chroot holding `flavour`'s server, built on first use (~45 s, ~650 MB) and reused
 * after. Building goes to a temporary directory renamed into place, under a lock file, so
 * concurrent callers never see or build a half-made chroot.
 */
export async function ensureChroot(
  flavour: ChrootFlavour,
  log: (line: string) => void = () => undefined,
): Promise<string> {
  const dir = cacheDir();
  const root = join(dir, flavour.name);
  if (existsSync(join(root, flavour.server))) return withHosts(root);
  if (process.getuid?.() !== 0) throw new Error(`${root} is missing and building it needs root (debootstrap, chroot)`);
  mkdirSync(dir, { recursive: true });
  const lock = join(dir, `${flavour.name}.lock`);
  for (;;) {
    try {
      closeSync(openSync(lock, 'wx'));
      break;
    } catch {
      // another process is building it
      if (existsSync(join(root, flavour.server))) return withHosts(root);
      await sleep(1000);
    }
  }
  try {
    if (existsSync(join(root, flavour.server))) return withHosts(root);
    ensureDebootstrap(log);
    const building = `${root}.building`;
    rmSync(building, { recursive: true, force: true });
    log(`building ${root} with debootstrap (sid: ${flavour.packages}); once, about a minute`);
    const started = Date.now();
    run(
      'debootstrap',
      ['--variant=minbase', `--include=${flavour.packages}`, 'sid', building, MIRROR],
      `debootstrap of ${flavour.name}`,
    );
    rmSync(root, { recursive: true, force: true });
    renameSync(building, root);
    log(`built ${root} in ${Math.round((Date.now() - started) / 1000)} s`);
    return withHosts(root);
  } finally {
    unlinkSync(lock);
  }
}
