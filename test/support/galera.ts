// A throwaway 3-node MariaDB Galera cluster on 127.0.0.1 for the reliability suite (Debian's
// mariadb-server + galera-4 + rsync). Each node has its own datadir, SQL port, socket and
// gcomm/IST/SST ports; the nodes run as the mysql user because rsync SST drops root privileges,
// so the datadirs belong to mysql. Node 1 bootstraps the cluster; joiners start from an empty
// datadir and receive state by rsync SST. A node SIGKILLed mid-run is restarted with the same
// flags and rejoins by IST or SST.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll } from 'vitest';
import { connectKnex } from '../../harness/database.js';
import { findBinary, freePort, stopProcess } from '../../harness/server.js';
import { migrate } from '../../src/admin/index.js';

export const GALERA_PROVIDER = '/usr/lib/galera/libgalera_smm.so';

export interface GaleraNode {
  index: number;
  port: number;
  /** mysql://root@127.0.0.1:port/ */
  url: string;
  datadir: string;
  process: ChildProcess | undefined;
}

export interface GaleraCluster {
  nodes: GaleraNode[];
  dir: string;
  /** SIGKILLs node `i` (0-based). */
  kill(i: number): Promise<void>;
  /** Restarts node `i` with its datadir as it was left and waits until it is Synced. */
  restart(i: number, timeoutMs?: number): Promise<void>;
  /** wsrep_cluster_size as seen from node `i`. */
  clusterSize(i: number): Promise<number>;
  stop(): Promise<void>;
}

/** What is missing for a Galera cluster on this machine, or undefined when everything is there. */
export function galeraMissing(): string | undefined {
  const missing: string[] = [];
  if (!findBinary(['mariadbd'])) missing.push('mariadbd (apt-get install mariadb-server)');
  if (!findBinary(['mariadb-install-db'])) missing.push('mariadb-install-db (apt-get install mariadb-server)');
  if (!existsSync(GALERA_PROVIDER)) missing.push(`${GALERA_PROVIDER} (apt-get install galera-4)`);
  if (!findBinary(['rsync'])) missing.push('rsync (apt-get install rsync)');
  if (spawnSync('id', ['-u', 'mysql']).status !== 0) missing.push('a mysql system user (created by mariadb-server)');
  if (process.getuid?.() !== 0) missing.push('root (the nodes are started as the mysql user)');
  return missing.length > 0 ? `Galera cluster needs: ${missing.join('; ')}` : undefined;
}

async function wsrepState(port: number): Promise<string | undefined> {
  try {
    const conn = await mysql.createConnection({ host: '127.0.0.1', port, user: 'root', connectTimeout: 2000 });
    try {
      const [rows] = await conn.query("SHOW STATUS LIKE 'wsrep_local_state_comment'");
      return (rows as Array<{ Value: string }>)[0]?.Value;
    } finally {
      await conn.end();
    }
  } catch {
    return undefined;
  }
}

export async function startGalera(options: { log?: (line: string) => void } = {}): Promise<GaleraCluster> {
  const missing = galeraMissing();
  if (missing) throw new Error(missing);
  const log = options.log ?? (() => undefined);
  const mariadbd = findBinary(['mariadbd'])!;
  const installer = findBinary(['mariadb-install-db'])!;
  const dir = mkdtempSync(join(tmpdir(), 'rwlock-galera-'));
  chmodSync(dir, 0o755);
  const ports = await Promise.all(
    [0, 1, 2].map(async () => ({
      sql: await freePort(),
      gcomm: await freePort(),
      ist: await freePort(),
      sst: await freePort(),
    })),
  );
  const gcomm = `gcomm://${ports.map((p) => `127.0.0.1:${p.gcomm}`).join(',')}`;
  const nodes: GaleraNode[] = ports.map((p, index) => ({
    index,
    port: p.sql,
    url: `mysql://root@127.0.0.1:${p.sql}/`,
    datadir: join(dir, `d${index + 1}`),
    process: undefined,
  }));
  // Each node's own tmpdir: a MariaDB server deletes every #sql* file in its tmpdir as it starts.
  const nodeTmpdir = (i: number): string => join(dir, `tmp${i + 1}`);
  for (const i of [0, 1, 2]) mkdirSync(nodeTmpdir(i), { recursive: true });
  // The bootstrap runs as mysql (--user) before the chown of the whole directory below.
  spawnSync('chown', ['-R', 'mysql:mysql', ...[0, 1, 2].map(nodeTmpdir)]);

  const install = spawnSync(
    installer,
    [
      '--no-defaults',
      `--datadir=${nodes[0]!.datadir}`,
      `--tmpdir=${nodeTmpdir(0)}`,
      '--user=mysql',
      '--auth-root-authentication-method=normal',
      '--skip-test-db',
    ],
    { encoding: 'utf8' },
  );
  if (install.status !== 0) throw new Error(`mariadb-install-db failed:\n${install.stdout}\n${install.stderr}`);
  for (const node of nodes) mkdirSync(node.datadir, { recursive: true });
  spawnSync('chown', ['-R', 'mysql:mysql', dir]);

  const start = (i: number, bootstrap: boolean): void => {
    const node = nodes[i]!;
    const p = ports[i]!;
    const args = [
      '--no-defaults',
      `--datadir=${node.datadir}`,
      `--tmpdir=${nodeTmpdir(i)}`,
      '--user=mysql',
      `--port=${p.sql}`,
      '--bind-address=127.0.0.1',
      `--socket=${join(node.datadir, 'sock')}`,
      `--pid-file=${join(node.datadir, 'pid')}`,
      '--skip-log-bin',
      '--binlog_format=ROW',
      '--default-storage-engine=InnoDB',
      '--innodb_autoinc_lock_mode=2',
      '--innodb-buffer-pool-size=128M',
      '--max-connections=500',
      '--skip-name-resolve',
      '--wsrep_on=ON',
      `--wsrep_provider=${GALERA_PROVIDER}`,
      '--wsrep_cluster_name=rwlock',
      `--wsrep_cluster_address=${gcomm}`,
      `--wsrep_node_address=127.0.0.1:${p.gcomm}`,
      `--wsrep_node_name=n${i + 1}`,
      '--wsrep_sst_method=rsync',
      `--wsrep_provider_options=gmcast.listen_addr=tcp://127.0.0.1:${p.gcomm};ist.recv_addr=127.0.0.1:${p.ist}`,
      `--wsrep_sst_receive_address=127.0.0.1:${p.sst}`,
      ...(bootstrap ? ['--wsrep-new-cluster'] : []),
    ];
    const out = openSync(join(dir, `log${i + 1}`), 'a');
    node.process = spawn(mariadbd, args, { stdio: ['ignore', out, out] });
  };

  const waitSynced = async (i: number, timeoutMs: number): Promise<void> => {
    const node = nodes[i]!;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if ((await wsrepState(node.port)) === 'Synced') return;
      const child = node.process;
      if (child && (child.exitCode !== null || child.signalCode !== null)) {
        throw new Error(
          `galera node ${i + 1} exited (${child.exitCode ?? child.signalCode}); see ${join(dir, `log${i + 1}`)}`,
        );
      }
      if (Date.now() > deadline)
        throw new Error(`galera node ${i + 1} not Synced within ${timeoutMs} ms; see ${join(dir, `log${i + 1}`)}`);
      await sleep(250);
    }
  };

  const cluster: GaleraCluster = {
    nodes,
    dir,
    async kill(i) {
      const child = nodes[i]!.process;
      if (child) await stopProcess(child, 'SIGKILL');
      nodes[i]!.process = undefined;
    },
    async restart(i, timeoutMs = 120_000) {
      start(i, false);
      await waitSynced(i, timeoutMs);
    },
    async clusterSize(i) {
      const conn = await mysql.createConnection({ host: '127.0.0.1', port: nodes[i]!.port, user: 'root' });
      try {
        const [rows] = await conn.query("SHOW STATUS LIKE 'wsrep_cluster_size'");
        return Number((rows as Array<{ Value: string }>)[0]?.Value ?? 0);
      } finally {
        await conn.end();
      }
    },
    async stop() {
      // Joiners first, so the last node standing shuts down cleanly.
      for (const node of [...nodes].reverse()) {
        if (node.process) await stopProcess(node.process, 'SIGTERM');
        node.process = undefined;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };

  try {
    const started = Date.now();
    start(0, true);
    await waitSynced(0, 60_000);
    for (const i of [1, 2]) {
      start(i, false);
      await waitSynced(i, 120_000);
    }
    log(`galera: 3 nodes Synced in ${Date.now() - started} ms on ports ${nodes.map((n) => n.port).join(', ')}`);
    return cluster;
  } catch (err) {
    // Keep the directory: its logs say why.
    for (const node of nodes) if (node.process) await stopProcess(node.process, 'SIGKILL').catch(() => undefined);
    throw err;
  }
}

export interface GaleraDatabase {
  readonly cluster: GaleraCluster;
  /** A knex pool on node `i` (0-based) of the cluster, on the database. */
  node(i: number): Knex;
}

/**
 * For one test file: a 3-node cluster started before its tests and stopped after them, a database
 * on it migrated through node 1, and a knex pool on each node.
 */
export function useGaleraDatabase(database: string, label: string): GaleraDatabase {
  let cluster: GaleraCluster | undefined;
  const pools: Knex[] = [];
  beforeAll(async () => {
    cluster = await startGalera({ log: (l) => console.log(`[${label}] ${l}`) });
    const admin = await mysql.createConnection({ host: '127.0.0.1', port: cluster.nodes[0]!.port, user: 'root' });
    await admin.query(`CREATE DATABASE ${database}`);
    await admin.end();
    for (const node of cluster.nodes) pools.push(connectKnex(node.url, database, { poolMax: 4 }));
    await migrate(pools[0]!);
  });
  afterAll(async () => {
    await Promise.all(pools.map((k) => k.destroy()));
    await cluster?.stop();
  });
  return {
    get cluster(): GaleraCluster {
      if (!cluster) throw new Error('cluster not started: use it inside tests or hooks');
      return cluster;
    },
    node(i: number): Knex {
      const pool = pools[i];
      if (!pool) throw new Error(`no pool on node ${i}: use it inside tests or hooks`);
      return pool;
    },
  };
}
