import type { Knex } from 'knex';

export interface Counted {
  knex: Knex;
  /** The commands `op` sent on the pool's one connection. */
  commandsOf(op: () => Promise<unknown>): Promise<number>;
  /** The SQL of the commands `op` sent, in order. */
  sqlOf(op: () => Promise<unknown>): Promise<string[]>;
  /** The same for an `op` that rejects, with what it rejected with. */
  sqlOfFailing(op: () => Promise<unknown>): Promise<{ sql: string[]; error: unknown }>;
}

/**
 * A knex of one pooled connection (from `connect`) whose commands are counted: exact round trips,
 * whatever the machine's load.
 */
export async function countedKnex(connect: (o: { poolMax: number }) => Knex): Promise<Counted> {
  const knex = connect({ poolMax: 1 });
  const client = knex.client as {
    acquireConnection(): Promise<{ addCommand(cmd: { sql?: unknown }): unknown }>;
    releaseConnection(conn: unknown): Promise<void>;
  };
  const conn = await client.acquireConnection();
  await client.releaseConnection(conn);
  let commands = 0;
  const sent: string[] = [];
  const send = conn.addCommand.bind(conn);
  conn.addCommand = (cmd) => {
    commands++;
    sent.push(String(cmd.sql ?? ''));
    return send(cmd);
  };
  return {
    knex,
    async commandsOf(op) {
      const before = commands;
      await op();
      return commands - before;
    },
    async sqlOf(op) {
      const before = sent.length;
      await op();
      return sent.slice(before);
    },
    async sqlOfFailing(op) {
      const before = sent.length;
      const error = await op().then(
        () => new Error('expected a rejection'),
        (e: unknown) => e,
      );
      return { sql: sent.slice(before), error };
    },
  };
}

/** The procedures `sql` called, in order. */
export function calls(sql: string[]): string[] {
  return sql.flatMap((q) => /^CALL (rwlock_\w+)/.exec(q)?.[1] ?? []);
}
