// Finds a MySQL-compatible server for tests, the demo and the benchmarks, in this order:
//   1. MYSQL_URL;
//   2. RWLOCK_TEST_SERVER=mariadb-10.11 | mysql-9.7 | mariadb-11.8: a throwaway server of that
//      flavour (10.11 from the host, the others from a cached Debian sid chroot, see chroot.ts);
//   3. a testcontainers MySQL when a Docker engine answers;
//   4. a throwaway mariadbd/mysqld from PATH in a temporary data directory on a free port.
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import mysql from 'mysql2/promise';
import { CHROOTS, ensureChroot } from './chroot.js';

/** The server flavours RWLOCK_TEST_SERVER chooses from, with the version each must report. */
export const FLAVOURS = Object.freeze({
  'mariadb-10.11': { version: /^10\.11\./, chroot: undefined },
  'mysql-9.7': { version: /^9\.7\./, chroot: CHROOTS.mysql },
  'mariadb-11.8': { version: /^11\.8\./, chroot: CHROOTS.mariadb },
});
export type Flavour = keyof typeof FLAVOURS;

/** RWLOCK_TEST_SERVER, checked; undefined when unset. */
export function chosenFlavour(): Flavour | undefined {
  const value = process.env.RWLOCK_TEST_SERVER;
  if (!value) return undefined;
  if (!(value in FLAVOURS))
    throw new Error(`RWLOCK_TEST_SERVER=${value}: choose one of ${Object.keys(FLAVOURS).join(', ')}`);
  return value as Flavour;
}

export interface FoundServer {
  /** mysql://user:password@host:port/ with privileges to create databases. */
  url: string;
  kind: 'MYSQL_URL' | 'testcontainers' | 'local' | 'chroot';
  description: string;
  stop(): Promise<void>;
}

export interface LocalServerOptions {
  /** Extra server flags, e.g. ['--innodb-buffer-pool-size=1G']. */
  extraArgs?: string[];
  /** Extra environment for the server process, e.g. `{ TZ: 'Europe/Berlin' }` for its system time zone. */
  env?: Record<string, string>;
  log?: (line: string) => void;
}

const HOW_TO_GET_ONE = [
  'No MySQL-compatible server found. Do one of:',
  '  - set MYSQL_URL=mysql://root:password@127.0.0.1:3306/ (a user that may create databases);',
  '  - start a Docker engine (a MySQL container is then started by testcontainers);',
  '  - install a server binary: apt-get install mariadb-server (mariadbd must be on PATH or in /usr/sbin).',
].join('\n');

export async function findServer(options: LocalServerOptions = {}): Promise<FoundServer> {
  const log = options.log ?? (() => undefined);
  const fromEnv = process.env.MYSQL_URL;
  if (fromEnv)
    return {
      url: fromEnv,
      kind: 'MYSQL_URL',
      description: `MYSQL_URL (${redact(fromEnv)})`,
      stop: async () => undefined,
    };
  const flavour = chosenFlavour();
  if (flavour) return startFlavour(flavour, options);
  if (await dockerAnswers()) {
    log('starting a MySQL container through testcontainers');
    const { MySqlContainer } = await import('@testcontainers/mysql');
    const container = await new MySqlContainer('mysql:8.4').start();
    return {
      url: `mysql://root:${container.getRootPassword()}@${container.getHost()}:${container.getPort()}/`,
      kind: 'testcontainers',
      description: 'testcontainers mysql:8.4',
      stop: async () => void (await container.stop()),
    };
  }
  const binary = findBinary(['mariadbd', 'mysqld']);
  if (binary) return startLocalServer(binary, options);
  throw new Error(HOW_TO_GET_ONE);
}

function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}

async function dockerAnswers(): Promise<boolean> {
  const socket = process.env.DOCKER_HOST ?? '/var/run/docker.sock';
  if (!process.env.DOCKER_HOST && !existsSync(socket)) return false;
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    const timeout = new AbortController();
    const client = await Promise.race([
      getContainerRuntimeClient(),
      sleep(10_000, null, { signal: timeout.signal }).catch(() => null),
    ]);
    timeout.abort();
    return client !== null;
  } catch {
    return false;
  }
}

export function findBinary(names: string[]): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/local/sbin', '/usr/local/mysql/bin'];
  for (const name of names) {
    for (const dir of dirs) {
      const candidate = join(dir, name);
      if (dir && existsSync(candidate)) return candidate;
    }
  }
  return undefined;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

const isRoot = process.getuid?.() === 0;

/**
 * A server's own temporary directory, beside its data directory (MySQL's --initialize wants an
 * empty one). A MariaDB server deletes every `#sql*` file in its tmpdir as it starts: with the
 * shared /tmp, a server starting in one test file removed the temporary tables of a
 * mariadb-install-db bootstrapping in another ("Unknown table 'mysql.tmp_user_sys'").
 */
export function privateTmpdir(datadir: string, chroot?: string): string {
  const dir = `${datadir}-tmp`;
  mkdirSync(chroot ? join(chroot, dir) : dir, { recursive: true });
  return dir;
}

/**
 * Creates a data directory for `binary` (mariadbd or mysqld) with a passwordless root. With
 * `chroot`, both are paths inside that root and the initialisation runs there.
 */
export function initDataDir(binary: string, datadir: string, chroot?: string): void {
  const exec = (cmd: string, args: string[]): ReturnType<typeof spawnSync> =>
    chroot
      ? spawnSync('chroot', [chroot, cmd, ...args], { encoding: 'utf8' })
      : spawnSync(cmd, args, { encoding: 'utf8' });
  const version = String(exec(binary, ['--version']).stdout ?? '');
  const userArgs = isRoot ? ['--user=root'] : [];
  let result;
  if (/mariadb/i.test(version)) {
    const installer = chroot ? '/usr/bin/mariadb-install-db' : findBinary(['mariadb-install-db', 'mysql_install_db']);
    if (!installer) throw new Error(`found ${binary} but not mariadb-install-db to initialise a data directory`);
    // A minimal chroot cannot resolve its host name; grant tables then name hosts by address.
    result = exec(installer, [
      '--no-defaults',
      `--datadir=${datadir}`,
      `--tmpdir=${privateTmpdir(datadir, chroot)}`,
      '--auth-root-authentication-method=normal',
      '--skip-test-db',
      ...(chroot ? ['--skip-name-resolve'] : []),
      ...userArgs,
    ]);
  } else {
    result = exec(binary, [
      '--no-defaults',
      '--initialize-insecure',
      `--datadir=${datadir}`,
      `--tmpdir=${privateTmpdir(datadir, chroot)}`,
      ...userArgs,
    ]);
  }
  if (result.status !== 0) throw new Error(`initialising ${datadir} failed:\n${result.stdout}\n${result.stderr}`);
}

export interface RunningServer {
  port: number;
  process: ChildProcess;
  datadir: string;
}

/** Starts `binary` on `datadir` and resolves once it accepts connections. */
/**
 * Starts `binary` on `datadir` and resolves once it accepts connections. With `chroot`, both are
 * paths inside that root, and the server runs there (it shares the host's network). `env`
 * replaces the server's environment (a time zone, a preloaded libfaketime).
 */
export async function runServer(
  binary: string,
  datadir: string,
  port: number,
  extraArgs: string[] = [],
  chroot?: string,
  env?: NodeJS.ProcessEnv,
): Promise<RunningServer> {
  const isMysql = /mysqld$/.test(binary);
  const args = [
    '--no-defaults',
    `--datadir=${datadir}`,
    `--tmpdir=${privateTmpdir(datadir, chroot)}`,
    `--socket=${join(datadir, 'server.sock')}`,
    `--port=${port}`,
    '--bind-address=127.0.0.1',
    `--pid-file=${join(datadir, 'server.pid')}`,
    '--max-connections=1000',
    '--innodb-buffer-pool-size=512M',
    ...(isRoot ? ['--user=root'] : []),
    // MySQL's initialised root is root@localhost only: without name resolution a TCP client from 127.0.0.1 is not it.
    ...(isMysql ? [] : ['--skip-name-resolve']),
    // A minimal chroot lacks the packaged secure-file-priv directory; MySQL's X plugin would take a second port.
    ...(chroot ? ['--secure-file-priv='] : []),
    ...(chroot && isMysql ? ['--mysqlx=OFF'] : []),
    ...extraArgs,
  ];
  const spawnOptions: SpawnOptions = { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } };
  const child = chroot ? spawn('chroot', [chroot, binary, ...args], spawnOptions) : spawn(binary, args, spawnOptions);
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${binary} exited with ${child.exitCode}:\n${stderr}`);
    try {
      const conn = await mysql.createConnection({ host: '127.0.0.1', port, user: 'root' });
      await conn.end();
      return { port, process: child, datadir };
    } catch {
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`${binary} did not accept connections within 60 s:\n${stderr}`);
      }
      await sleep(100);
    }
  }
}

export async function stopProcess(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  const escalate = setTimeout(() => child.kill('SIGKILL'), 30_000);
  await exited;
  clearTimeout(escalate);
}

/** A throwaway server of `flavour`, checked to report its version: for a test that needs a second server. */
export async function startFlavour(flavour: Flavour, options: LocalServerOptions = {}): Promise<FoundServer> {
  const spec = FLAVOURS[flavour];
  const log = options.log ?? (() => undefined);
  let found: FoundServer;
  if (spec.chroot) {
    const root = await ensureChroot(spec.chroot, log);
    const inside = `/srv/rwlock-${process.pid}-${Date.now().toString(36)}`;
    const hostDir = join(root, inside);
    mkdirSync(hostDir, { recursive: true });
    try {
      log(`initialising a throwaway ${flavour} in ${hostDir}`);
      initDataDir(spec.chroot.server, join(inside, 'data'), root);
      const port = await freePort();
      const server = await runServer(
        spec.chroot.server,
        join(inside, 'data'),
        port,
        ['--innodb-buffer-pool-size=256M', ...(options.extraArgs ?? [])],
        root,
        options.env,
      );
      found = {
        url: `mysql://root@127.0.0.1:${port}/`,
        kind: 'chroot',
        description: `throwaway ${flavour} (${spec.chroot.name} chroot) on 127.0.0.1:${port}`,
        stop: async () => {
          await stopProcess(server.process);
          rmSync(hostDir, { recursive: true, force: true });
        },
      };
    } catch (err) {
      rmSync(hostDir, { recursive: true, force: true });
      throw err;
    }
  } else {
    const binary = findBinary(['mariadbd']);
    if (!binary)
      throw new Error(`RWLOCK_TEST_SERVER=${flavour} needs the host's mariadbd: apt-get install mariadb-server`);
    found = await startLocalServer(binary, options);
  }
  const conn = await mysql.createConnection(found.url);
  const [rows] = await conn.query('SELECT VERSION() AS v');
  await conn.end();
  const version = (rows as Array<{ v: string }>)[0]?.v ?? '';
  if (!spec.version.test(version)) {
    await found.stop();
    throw new Error(`RWLOCK_TEST_SERVER=${flavour} started a server that reports version ${version}`);
  }
  log(`${flavour}: ${version}`);
  return { ...found, description: `${found.description}, ${version}` };
}

async function startLocalServer(binary: string, options: LocalServerOptions): Promise<FoundServer> {
  const dir = mkdtempSync(join(tmpdir(), 'mysql-rwlock-'));
  const datadir = join(dir, 'data');
  const log = options.log ?? (() => undefined);
  try {
    log(`initialising a throwaway ${binary} in ${datadir}`);
    initDataDir(binary, datadir);
    const port = await freePort();
    const server = await runServer(binary, datadir, port, options.extraArgs, undefined, options.env);
    log(`throwaway server listening on 127.0.0.1:${port}`);
    return {
      url: `mysql://root@127.0.0.1:${port}/`,
      kind: 'local',
      description: `throwaway ${binary} on 127.0.0.1:${port}`,
      stop: async () => {
        await stopProcess(server.process);
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}
