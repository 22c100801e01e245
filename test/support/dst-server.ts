// A throwaway server whose time zone observes daylight saving time (TZ=Europe/Berlin, the
// server's default time_zone=SYSTEM) and whose clock a test sets: libfaketime, preloaded into the
// server, reads its offset from a file at most a second old. The lane's flavour: the host's
// mariadbd, or MySQL 9.7 / MariaDB 11.8 from their chroot.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureChroot } from '../../harness/chroot.js';
import {
  chosenFlavour,
  findBinary,
  FLAVOURS,
  freePort,
  initDataDir,
  runServer,
  stopProcess,
} from '../../harness/server.js';

export interface DstServer {
  url: string;
  /** Moves the server's clock so that it reads `utcMs` now (whole seconds; seen within a second). */
  setClock(utcMs: number): void;
  stop(): Promise<void>;
}

const LIBFAKETIME = [
  '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1',
  '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1',
  '/usr/lib/faketime/libfaketime.so.1',
];

export async function startDstServer(zone: string, clockAtStartMs: number): Promise<DstServer> {
  const lib = LIBFAKETIME.find((p) => existsSync(p));
  if (!lib) throw new Error('this test needs libfaketime: apt-get install faketime');
  const flavour = chosenFlavour();
  const chroot = flavour ? FLAVOURS[flavour].chroot : undefined;
  const root = chroot ? await ensureChroot(chroot) : undefined;
  // Paths as the server sees them (inside the chroot) and as this process writes them.
  const inside = chroot ? `/srv/rwlock-dst-${process.pid}-${Date.now().toString(36)}` : undefined;
  const hostDir = root && inside ? join(root, inside) : mkdtempSync(join(tmpdir(), 'mysql-rwlock-dst-'));
  const serverDir = inside ?? hostDir;
  mkdirSync(hostDir, { recursive: true });
  const clockFile = join(hostDir, 'faketime');
  const setClock = (utcMs: number): void => {
    const offset = Math.round((utcMs - Date.now()) / 1000);
    writeFileSync(clockFile, `${offset >= 0 ? '+' : ''}${offset}s\n`);
  };
  try {
    const binary = chroot ? chroot.server : findBinary(['mariadbd']);
    if (!binary) throw new Error('a DST server needs the host mariadbd: apt-get install mariadb-server');
    initDataDir(binary, join(serverDir, 'data'), root);
    copyFileSync(lib, join(hostDir, 'libfaketime.so.1'));
    setClock(clockAtStartMs);
    const port = await freePort();
    const server = await runServer(
      binary,
      join(serverDir, 'data'),
      port,
      ['--innodb-buffer-pool-size=128M', '--max-connections=200'],
      root,
      {
        PATH: process.env.PATH,
        TZ: zone,
        LD_PRELOAD: join(serverDir, 'libfaketime.so.1'),
        FAKETIME_TIMESTAMP_FILE: join(serverDir, 'faketime'),
        FAKETIME_CACHE_DURATION: '1',
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
        // Its glibc workaround makes pthread_cond_timedwait time out late under an offset clock:
        // mysqld's start then stalls for most of a minute.
        FAKETIME_FORCE_MONOTONIC_FIX: '0',
      },
    );
    return {
      url: `mysql://root@127.0.0.1:${port}/`,
      setClock,
      stop: async () => {
        await stopProcess(server.process);
        rmSync(hostDir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(hostDir, { recursive: true, force: true });
    throw err;
  }
}
