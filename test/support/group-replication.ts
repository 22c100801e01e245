// A throwaway 3-node MySQL Group Replication cluster on 127.0.0.1, from the MySQL chroot the
// harness builds (Debian's mysql-server-core ships group_replication.so). Single-primary, as
// InnoDB Cluster deploys it (node 1 bootstraps and is the first primary), or multi-primary. Each
// node has its own data directory inside the chroot, SQL port and group communication port; every
// wait is on a condition the nodes report (performance_schema.replication_group_members), never a
// fixed pause.
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import knexFactory, { type Knex } from 'knex';
import mysql from 'mysql2/promise';
import { CHROOTS, ensureChroot } from '../../harness/chroot.js';
import { parseMysqlUrl } from '../../harness/database.js';
import { freePort, privateTmpdir, runServer, stopProcess } from '../../harness/server.js';
import { errnoOf } from '../../src/sql/connection.js';
import { ServerReadOnlyError } from '../../src/index.js';

export type GroupMode = 'single-primary' | 'multi-primary';

export interface GrNode {
  index: number;
  port: number;
  /** mysql://root@127.0.0.1:port/ */
  url: string;
  process: ChildProcess | undefined;
}

export interface Member {
  port: number;
  state: string;
  role: string;
}

export interface GroupCluster {
  mode: GroupMode;
  nodes: GrNode[];
  /** SIGKILLs node `i` (0-based). */
  kill(i: number): Promise<void>;
  /**
   * Restarts node `i` on its data directory as it was left, once the others have expelled its
   * previous incarnation, and rejoins it to the group; resolves when it is ONLINE.
   */
  restart(i: number, timeoutMs?: number): Promise<void>;
  /** The membership as node `i` sees it; undefined when it cannot be asked. */
  members(i: number): Promise<Member[] | undefined>;
  /** Resolves when node `i` sees exactly `ports` ONLINE and no other member. */
  waitMembers(i: number, ports: number[], timeoutMs: number): Promise<void>;
  /** Index of the node that reports itself the writable PRIMARY, waiting for an election to finish. */
  primary(timeoutMs?: number): Promise<number>;
  stop(): Promise<void>;
}

const GROUP_NAME = 'aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee';

async function ask<T>(url: string, sql: string): Promise<T[] | undefined> {
  try {
    const conn = await mysql.createConnection({ ...parseMysqlUrl(url), connectTimeout: 2000 });
    try {
      return (await conn.query(sql))[0] as T[];
    } finally {
      await conn.end();
    }
  } catch {
    return undefined;
  }
}

/** The one statement that tells whether a server is the group's writable primary (or, multi-primary, an ONLINE writable member). */
const AM_I_PRIMARY = `SELECT m.MEMBER_STATE AS state, m.MEMBER_ROLE AS role, @@GLOBAL.super_read_only AS ro
  FROM performance_schema.replication_group_members m WHERE m.MEMBER_ID = @@GLOBAL.server_uuid`;

/**
 * Whether the server at `url` is the writable primary: a group member that reports itself the
 * ONLINE, writable PRIMARY; or, on a server that cannot answer that (MariaDB has neither the
 * group's table nor @@server_uuid, and an account may not read performance_schema: an SQL error,
 * not a lost connection), one that is not read_only — an asynchronous primary, or a replica once
 * promoted.
 * Undefined when the server cannot be asked.
 */
async function isPrimary(url: string): Promise<boolean | undefined> {
  let conn: mysql.Connection;
  try {
    conn = await mysql.createConnection({ ...parseMysqlUrl(url), connectTimeout: 2000 });
  } catch {
    return undefined;
  }
  try {
    try {
      const [rows] = await conn.query(AM_I_PRIMARY);
      const me = (rows as Array<{ state: string; role: string; ro: number }>)[0];
      return me?.state === 'ONLINE' && me.role === 'PRIMARY' && Number(me.ro) === 0;
    } catch (err) {
      // The server answered, but not the group's question: it has no group (see above).
      const e = err as { errno?: number; fatal?: boolean };
      if (typeof e.errno !== 'number' || e.fatal) throw err;
      const [rows] = await conn.query('SELECT @@GLOBAL.read_only AS ro');
      return Number((rows as Array<{ ro: number }>)[0]?.ro) === 0;
    }
  } catch {
    return undefined;
  } finally {
    await conn.end().catch(() => undefined);
  }
}

/** Of `urls`, the one whose server reports itself the writable primary (see isPrimary); undefined when none does (an election or a failover is going on). */
export async function findPrimary(urls: readonly string[]): Promise<string | undefined> {
  const answers = await Promise.all(urls.map(isPrimary));
  const i = answers.findIndex((yes) => yes === true);
  return i < 0 ? undefined : urls[i];
}

/**
 * A knex that follows the primary among `urls`: every new connection goes to the node that then
 * reports itself the writable primary. knex's connection-config provider cannot do this (once its
 * expiry says "stale", validation refuses every pooled connection until it says "fresh"), so the
 * instance's raw-connection factory asks first. A pooled connection to a node that stopped being
 * primary fails writes with 1290 (super_read_only); the caller then makes a new knex.
 */
export function connectFollowingPrimary(urls: readonly string[], database: string, poolMax: number): Knex {
  const knex = knexFactory({
    client: 'mysql2',
    connection: { ...parseMysqlUrl(urls[0]!), database },
    pool: { min: 0, max: poolMax },
  });
  const client = knex.client as unknown as { connectionSettings: object; acquireRawConnection(): Promise<unknown> };
  const acquire = client.acquireRawConnection.bind(client);
  client.acquireRawConnection = async () => {
    const url = await findPrimary(urls);
    if (!url)
      throw Object.assign(new Error(`no writable PRIMARY among ${urls.join(', ')} (an election is going on)`), {
        code: 'NO_PRIMARY',
      });
    client.connectionSettings = { ...parseMysqlUrl(url), database, connectTimeout: 3000 };
    return acquire();
  };
  return knex;
}

/** `mysqld --initialize-insecure` in the chroot, as a child process (the event loop keeps running). */
function initialise(root: string, server: string, datadir: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      'chroot',
      [
        root,
        server,
        '--no-defaults',
        '--initialize-insecure',
        `--datadir=${datadir}`,
        `--tmpdir=${privateTmpdir(datadir, root)}`,
        '--user=root',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-3000)));
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`initialising ${datadir} failed (${code}):\n${stderr}`)),
    );
  });
}

export const ER_OPTION_PREVENTS_STATEMENT = 1290;

/** A write refused by a node that is not (or no longer) a writable primary: the library's typed error, or a business statement's raw 1290. */
export function refusedAsReadOnly(err: unknown): boolean {
  return err instanceof ServerReadOnlyError || errnoOf(err) === ER_OPTION_PREVENTS_STATEMENT;
}

export async function startGroupReplication(options: {
  mode: GroupMode;
  log?: (line: string) => void;
}): Promise<GroupCluster> {
  const log = options.log ?? (() => undefined);
  const flavour = CHROOTS.mysql;
  const root = await ensureChroot(flavour, log);
  const inside = `/srv/rwlock-gr-${process.pid}-${Date.now().toString(36)}`;
  const hostDir = join(root, inside);
  mkdirSync(hostDir, { recursive: true });
  const ports = await Promise.all([0, 1, 2].map(async () => ({ sql: await freePort(), gcs: await freePort() })));
  const seeds = ports.map((p) => `127.0.0.1:${p.gcs}`).join(',');
  const multi = options.mode === 'multi-primary';
  const nodes: GrNode[] = ports.map((p, index) => ({
    index,
    port: p.sql,
    url: `mysql://root@127.0.0.1:${p.sql}/`,
    process: undefined,
  }));
  const datadir = (i: number): string => `${inside}/n${i + 1}`;
  const args = (i: number): string[] => [
    `--server-id=${i + 1}`,
    '--gtid-mode=ON',
    '--enforce-gtid-consistency=ON',
    '--binlog-checksum=NONE',
    '--innodb-buffer-pool-size=128M',
    '--max-connections=500',
    `--log-error=${datadir(i)}/error.log`,
    '--plugin-load-add=group_replication.so',
    `--group-replication-group-name=${GROUP_NAME}`,
    '--group-replication-start-on-boot=OFF',
    `--group-replication-local-address=127.0.0.1:${ports[i]!.gcs}`,
    `--group-replication-group-seeds=${seeds}`,
    '--group-replication-bootstrap-group=OFF',
    `--group-replication-single-primary-mode=${multi ? 'OFF' : 'ON'}`,
    `--group-replication-enforce-update-everywhere-checks=${multi ? 'ON' : 'OFF'}`,
    // A SIGKILLed member is expelled as soon as it is suspected, so the survivors elect and the
    // node can rejoin without waiting for the default 5 s grace.
    '--group-replication-member-expel-timeout=0',
    '--report-host=127.0.0.1',
    `--report-port=${ports[i]!.sql}`,
  ];
  const sql = async (i: number, statements: string[]): Promise<void> => {
    const conn = await mysql.createConnection({ ...parseMysqlUrl(nodes[i]!.url) });
    try {
      for (const s of statements) await conn.query(s);
    } finally {
      await conn.end();
    }
  };
  const start = async (i: number, extra: string[] = []): Promise<void> => {
    const server = await runServer(flavour.server, `${datadir(i)}/data`, nodes[i]!.port, [...args(i), ...extra], root);
    nodes[i]!.process = server.process;
  };
  const members = async (i: number): Promise<Member[] | undefined> => {
    const rows = await ask<{ port: number; state: string; role: string }>(
      nodes[i]!.url,
      'SELECT MEMBER_PORT AS port, MEMBER_STATE AS state, MEMBER_ROLE AS role FROM performance_schema.replication_group_members',
    );
    return rows?.map((r) => ({ port: Number(r.port), state: r.state, role: r.role }));
  };
  const waitMembers = async (i: number, want: number[], timeoutMs: number): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    const key = [...want].sort((a, b) => a - b).join(',');
    for (;;) {
      const seen = await members(i);
      const online = seen
        ?.filter((m) => m.state === 'ONLINE')
        .map((m) => m.port)
        .sort((a, b) => a - b)
        .join(',');
      if (seen && online === key && seen.length === want.length) return;
      if (Date.now() > deadline) {
        throw new Error(
          `node ${i + 1} sees ${JSON.stringify(seen)}, not ${key} ONLINE, after ${timeoutMs} ms; see ${hostDir}/n${i + 1}/error.log`,
        );
      }
      await sleep(200);
    }
  };
  const joinGroup = async (i: number, bootstrap: boolean): Promise<void> => {
    await sql(
      i,
      bootstrap
        ? [
            'SET GLOBAL group_replication_bootstrap_group = ON',
            'START GROUP_REPLICATION',
            'SET GLOBAL group_replication_bootstrap_group = OFF',
          ]
        : ['START GROUP_REPLICATION'],
    );
  };
  const errorLogTail = (i: number): string => {
    try {
      return readFileSync(join(hostDir, `n${i + 1}`, 'error.log'), 'utf8')
        .split('\n')
        .filter((l) => /\[(ERROR|Warning)\]/.test(l))
        .slice(-12)
        .join('\n');
    } catch {
      return '(no error log)';
    }
  };
  const online = (): number[] => nodes.filter((n) => n.process !== undefined).map((n) => n.port);

  const cluster: GroupCluster = {
    mode: options.mode,
    nodes,
    async kill(i) {
      const child = nodes[i]!.process;
      if (child) await stopProcess(child, 'SIGKILL');
      nodes[i]!.process = undefined;
    },
    async restart(i, timeoutMs = 120_000) {
      const deadline = Date.now() + timeoutMs;
      const survivor = nodes.findIndex((n) => n.process !== undefined);
      // The group must have expelled the killed incarnation before the same server_uuid rejoins.
      await waitMembers(survivor, online(), timeoutMs);
      // Clients reconnect as soon as the server listens: a write it took before rejoining would be
      // a transaction the group does not have, and the group would refuse the member. Group
      // Replication lifts super_read_only when the member is ONLINE (and writable: multi-primary).
      await start(i, ['--super-read-only=ON']);
      try {
        await joinGroup(i, false);
        await waitMembers(i, [...online()], Math.max(1000, deadline - Date.now()));
      } catch (err) {
        throw new Error(`node ${i + 1} did not rejoin: ${(err as Error).message}\n${errorLogTail(i)}`, { cause: err });
      }
    },
    members,
    waitMembers,
    async primary(timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const url = await findPrimary(nodes.filter((n) => n.process !== undefined).map((n) => n.url));
        if (url) return nodes.findIndex((n) => n.url === url);
        if (Date.now() > deadline) throw new Error(`no writable PRIMARY within ${timeoutMs} ms`);
        await sleep(200);
      }
    },
    async stop() {
      for (const node of [...nodes].reverse()) {
        if (node.process) await stopProcess(node.process, 'SIGKILL');
        node.process = undefined;
      }
      rmSync(hostDir, { recursive: true, force: true });
    },
  };

  try {
    const started = Date.now();
    // One data directory is initialised (seconds of CPU) and copied for the other two; without
    // auto.cnf each copy makes its own server_uuid on first start.
    for (let i = 0; i < 3; i++) mkdirSync(join(hostDir, `n${i + 1}`), { recursive: true });
    await initialise(root, flavour.server, `${datadir(0)}/data`);
    for (const i of [1, 2]) {
      cpSync(join(root, datadir(0), 'data'), join(root, datadir(i), 'data'), { recursive: true });
      rmSync(join(root, datadir(i), 'data', 'auto.cnf'));
    }
    const ready = Date.now();
    await Promise.all([0, 1, 2].map((i) => start(i)));
    // The recovery channel's account, made on each node outside the binary log so the joiners'
    // recovery does not replay it.
    for (let i = 0; i < 3; i++) {
      await sql(i, [
        'SET SQL_LOG_BIN = 0',
        "CREATE USER IF NOT EXISTS rpl@'%' IDENTIFIED BY 'rpl'",
        "GRANT REPLICATION SLAVE, CONNECTION_ADMIN, BACKUP_ADMIN, GROUP_REPLICATION_STREAM ON *.* TO rpl@'%'",
        'SET SQL_LOG_BIN = 1',
        "CHANGE REPLICATION SOURCE TO SOURCE_USER = 'rpl', SOURCE_PASSWORD = 'rpl' FOR CHANNEL 'group_replication_recovery'",
      ]);
    }
    await joinGroup(0, true);
    await waitMembers(0, [nodes[0]!.port], 60_000);
    for (const i of [1, 2]) {
      await joinGroup(i, false);
      await waitMembers(
        i,
        nodes.slice(0, i + 1).map((n) => n.port),
        120_000,
      );
    }
    log(
      `group replication (${options.mode}): data directories in ${ready - started} ms, 3 nodes ONLINE in ${Date.now() - started} ms on ports ${nodes.map((n) => n.port).join(', ')}`,
    );
    return cluster;
  } catch (err) {
    // Keep the directory: its error logs say why.
    for (const node of nodes) if (node.process) await stopProcess(node.process, 'SIGKILL').catch(() => undefined);
    throw err;
  }
}
