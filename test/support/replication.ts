// A throwaway MariaDB primary and one asynchronous replica on 127.0.0.1, for the reliability
// suite's failover lane. The primary writes a row-based binary log; the replica follows it by GTID
// (MASTER_USE_GTID=slave_pos), keeps a binary log of its own (log_slave_updates) so that once
// promoted it could serve replicas in turn, and runs read_only until it is promoted. A failover
// here is what a failover tool does: the primary is SIGKILLed and abandoned, the replica applies
// what it had received, stops replicating, forgets its primary and becomes writable. Every wait is
// on a condition the servers report (SHOW SLAVE STATUS, the GTID positions), never a fixed pause.
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import mysql from 'mysql2/promise';
import { findBinary, freePort, initDataDir, runServer, stopProcess, type RunningServer } from '../../harness/server.js';

/**
 * The account workers and reapers use. root may write on a read_only server (MariaDB exempts
 * holders of READ ONLY ADMIN, which ALL PRIVILEGES ON *.* includes), so a replica that is to refuse
 * the clients' writes before its promotion must see them come from an account without it: this one
 * has every privilege on the suite's databases (`faults_%`) and no global one. Its writes on the
 * replica fail with 1290 (ER_OPTION_PREVENTS_STATEMENT), as on a Group Replication secondary.
 */
export const CLIENT_USER = 'rwl';

export interface ReplicaStatus {
  io: string;
  sql: string;
  /** GTIDs the IO thread has received (written to the relay log). */
  ioPos: string;
  /** GTIDs the SQL thread has applied (@@gtid_slave_pos). */
  applied: string;
  lastError: string;
}

export interface Promotion {
  /** What the replica had received and applied when it was promoted (they are equal then). */
  applied: string;
  /** From the call to the replica taking writes. */
  ms: number;
  /** now()-clock time just before read_only was lifted: no write can have committed on the replica before it. */
  writableFrom: number;
}

export interface AsyncPair {
  /** root URLs, for the orchestrator (database setup, checks). */
  primaryUrl: string;
  replicaUrl: string;
  /** CLIENT_USER URLs, for workers and reapers. */
  primaryClientUrl: string;
  replicaClientUrl: string;
  primaryPort: number;
  replicaPort: number;
  /** The primary's @@gtid_binlog_pos (what it has committed); undefined when it cannot be asked. */
  primaryPosition(): Promise<string | undefined>;
  replicaStatus(): Promise<ReplicaStatus>;
  /** Resolves once the replica has applied `position` (a GTID list), with the milliseconds it took. */
  waitApplied(position: string, timeoutMs: number): Promise<number>;
  /** Stops the replica's IO thread: what the primary commits from now on does not reach it. */
  cutLink(): Promise<void>;
  /** SIGKILLs the primary. It is not restarted: a failover abandons it. */
  killPrimary(): Promise<void>;
  /**
   * Waits until the replica has applied everything it received (its IO thread stopped or
   * reconnecting to a dead primary), then STOP SLAVE; RESET SLAVE ALL; read_only OFF.
   */
  promote(timeoutMs?: number, clock?: () => number): Promise<Promotion>;
  stop(): Promise<void>;
}

/** The sequence number of domain 0 in a GTID list such as '0-1-123'; 0 when absent. */
export function gtidSeq(list: string | undefined): number {
  const m = /(?:^|,)\s*0-\d+-(\d+)/.exec(list ?? '');
  return m ? Number(m[1]) : 0;
}

async function withConn<T>(url: string, fn: (c: mysql.Connection) => Promise<T>): Promise<T> {
  const u = new URL(url);
  const conn = await mysql.createConnection({
    host: u.hostname,
    port: Number(u.port),
    user: decodeURIComponent(u.username || 'root'),
    connectTimeout: 3000,
  });
  try {
    return await fn(conn);
  } finally {
    await conn.end().catch(() => undefined);
  }
}

async function one<T>(url: string, sql: string, values: unknown[] = []): Promise<T | undefined> {
  return withConn(url, async (c) => ((await c.query(sql, values))[0] as T[])[0]);
}

export async function startAsyncReplication(options: { log?: (line: string) => void } = {}): Promise<AsyncPair> {
  const log = options.log ?? (() => undefined);
  const binary = findBinary(['mariadbd']);
  if (!binary) throw new Error('the async replication lane needs mariadbd (apt-get install mariadb-server)');
  const dir = mkdtempSync(join(tmpdir(), 'rwlock-async-'));
  const started = Date.now();
  const common = [
    '--innodb-buffer-pool-size=128M',
    '--log-bin=node-bin',
    '--binlog-format=ROW',
    '--log-slave-updates=ON',
  ];
  // One data directory is initialised and copied: both servers start from the same empty state, so
  // the replica follows from the primary's first GTID.
  initDataDir(binary, join(dir, 'primary'));
  cpSync(join(dir, 'primary'), join(dir, 'replica'), { recursive: true });
  const [primaryPort, replicaPort] = [await freePort(), await freePort()];
  let primary: RunningServer | undefined;
  let replica: RunningServer | undefined;
  const primaryUrl = `mysql://root@127.0.0.1:${primaryPort}/`;
  const replicaUrl = `mysql://root@127.0.0.1:${replicaPort}/`;
  const clientUrl = (port: number): string => `mysql://${CLIENT_USER}@127.0.0.1:${port}/`;
  const exec = (url: string, statements: string[]): Promise<void> =>
    withConn(url, async (c) => {
      for (const s of statements) await c.query(s);
    });

  const replicaStatus = async (): Promise<ReplicaStatus> =>
    withConn(replicaUrl, async (c) => {
      const [rows] = await c.query('SHOW SLAVE STATUS');
      const s = (rows as Array<Record<string, string>>)[0];
      const [pos] = await c.query('SELECT @@GLOBAL.gtid_slave_pos AS p');
      const applied = String((pos as Array<{ p: string }>)[0]?.p ?? '');
      return {
        io: s?.Slave_IO_Running ?? 'none',
        sql: s?.Slave_SQL_Running ?? 'none',
        ioPos: s?.Gtid_IO_Pos ?? '',
        applied,
        lastError: [s?.Last_IO_Error, s?.Last_SQL_Error].filter(Boolean).join('; '),
      };
    });

  const pair: AsyncPair = {
    primaryUrl,
    replicaUrl,
    primaryClientUrl: clientUrl(primaryPort),
    replicaClientUrl: clientUrl(replicaPort),
    primaryPort,
    replicaPort,
    async primaryPosition() {
      try {
        return (await one<{ p: string }>(primaryUrl, 'SELECT @@GLOBAL.gtid_binlog_pos AS p'))?.p;
      } catch {
        return undefined;
      }
    },
    replicaStatus,
    async waitApplied(position, timeoutMs) {
      const t0 = Date.now();
      // MASTER_GTID_WAIT: 0 once the SQL thread has applied `position`, -1 on timeout.
      const r = await one<{ r: number }>(replicaUrl, 'SELECT MASTER_GTID_WAIT(?, ?) AS r', [
        position,
        timeoutMs / 1000,
      ]);
      if (Number(r?.r) !== 0)
        throw new Error(
          `the replica did not apply ${position} within ${timeoutMs} ms: ${JSON.stringify(await replicaStatus())}`,
        );
      return Date.now() - t0;
    },
    async cutLink() {
      await exec(replicaUrl, ['STOP SLAVE IO_THREAD']);
    },
    async killPrimary() {
      if (primary) await stopProcess(primary.process, 'SIGKILL');
      primary = undefined;
    },
    async promote(timeoutMs = 60_000, clock = Date.now) {
      const t0 = Date.now();
      const deadline = t0 + timeoutMs;
      // What the IO thread received must be applied first: the relay log is the only copy left.
      let s = await replicaStatus();
      while (!(s.ioPos === s.applied || gtidSeq(s.applied) >= gtidSeq(s.ioPos))) {
        if (Date.now() > deadline)
          throw new Error(`the replica did not apply its relay log within ${timeoutMs} ms: ${JSON.stringify(s)}`);
        await sleep(20);
        s = await replicaStatus();
      }
      await exec(replicaUrl, ['STOP SLAVE', 'RESET SLAVE ALL']);
      const writableFrom = clock();
      await exec(replicaUrl, ['SET GLOBAL read_only = OFF']);
      return { applied: s.applied, ms: Date.now() - t0, writableFrom };
    },
    async stop() {
      for (const s of [primary, replica]) if (s) await stopProcess(s.process, 'SIGKILL');
      primary = undefined;
      replica = undefined;
      rmSync(dir, { recursive: true, force: true });
    },
  };

  try {
    [primary, replica] = await Promise.all([
      runServer(binary, join(dir, 'primary'), primaryPort, [...common, '--server-id=1']),
      runServer(binary, join(dir, 'replica'), replicaPort, [...common, '--server-id=2', '--read-only=ON']),
    ]);
    // Accounts made on each server outside the binary log (the replica must not replay them).
    for (const url of [primaryUrl, replicaUrl]) {
      await exec(url, [
        'SET SQL_LOG_BIN = 0',
        "CREATE USER IF NOT EXISTS repl@'%' IDENTIFIED BY 'repl'",
        "GRANT REPLICATION SLAVE ON *.* TO repl@'%'",
        `CREATE USER IF NOT EXISTS ${CLIENT_USER}@'%'`,
        `GRANT ALL PRIVILEGES ON \`faults\\_%\`.* TO ${CLIENT_USER}@'%'`,
        'SET SQL_LOG_BIN = 1',
      ]);
    }
    await exec(replicaUrl, [
      `CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = ${primaryPort}, MASTER_USER = 'repl', MASTER_PASSWORD = 'repl', MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1`,
      'START SLAVE',
    ]);
    const deadline = Date.now() + 60_000;
    for (;;) {
      const s = await replicaStatus();
      if (s.io === 'Yes' && s.sql === 'Yes') break;
      if (Date.now() > deadline) throw new Error(`the replica did not start replicating: ${JSON.stringify(s)}`);
      await sleep(100);
    }
    await pair.waitApplied((await pair.primaryPosition()) ?? '', 30_000);
    log(
      `async replication: MariaDB primary on ${primaryPort}, replica on ${replicaPort}, replicating after ${Date.now() - started} ms`,
    );
    return pair;
  } catch (err) {
    for (const s of [primary, replica]) if (s) await stopProcess(s.process, 'SIGKILL').catch(() => undefined);
    throw err;
  }
}
