// A TCP proxy between MySQL clients and a server that can cut a connection at a chosen command:
// it reads the client's packets (3-byte length, sequence byte, payload), and when a COM_QUERY
// matches an armed pattern it either cuts before forwarding (the server never sees it) or
// forwards it and cuts before the reply reaches the client (the outcome is unknown to the client),
// or forwards it (or another statement in its place) and hands the client an error packet instead
// of the server's reply: an error a server or cluster can reply whether or not the statement took effect.
import type { Knex } from 'knex';
import { createServer, Socket, type Server } from 'node:net';
import { afterAll, beforeAll } from 'vitest';
import { connectKnex, parseMysqlUrl } from '../../harness/database.js';

export type CutMode = 'before-forward' | 'before-reply';

/** An error packet to hand the client in place of a reply. */
export interface ReplyError {
  errno: number;
  sqlState: string;
  message: string;
}

interface Arm {
  pattern: RegExp;
  mode: CutMode | 'error-reply';
  error?: ReplyError;
  sendInstead?: string;
  fired: (sql: string) => void;
  /** Only the connection whose server thread id (from the handshake) is this one; any when undefined. */
  threadId?: number;
}

/** An arm aimed at one server thread; `cancel()` withdraws it if it has not fired. */
export interface ThreadArm {
  fired: Promise<string>;
  cancel(): void;
}

const COM_QUERY = 0x03;
/** Capability flag: COM_QUERY carries query attributes before the SQL text (MySQL 8.0.23+). */
const CLIENT_QUERY_ATTRIBUTES = 1 << 27;

/** A length-encoded integer at `offset`: its value and the offset after it. */
function lengthEncoded(buf: Buffer, offset: number): [number, number] {
  const first = buf[offset] ?? 0;
  if (first < 0xfb) return [first, offset + 1];
  if (first === 0xfc) return [buf.readUInt16LE(offset + 1), offset + 3];
  if (first === 0xfd) return [buf.readUIntLE(offset + 1, 3), offset + 4];
  return [Number(buf.readBigUInt64LE(offset + 1)), offset + 9];
}

/**
 * The SQL text of a COM_QUERY payload (after the command byte). With query attributes negotiated
 * it follows a parameter count and a parameter-set count; clients that send no attributes (mysql2
 * does not) have a count of 0 and nothing else before the text.
 */
function queryText(payload: Buffer, queryAttributes: boolean): string | undefined {
  if (!queryAttributes) return payload.toString('utf8');
  const [params, afterCount] = lengthEncoded(payload, 0);
  if (params !== 0) return undefined; // attributes with values: not something this proxy needs to read
  const [, afterSets] = lengthEncoded(payload, afterCount);
  return payload.subarray(afterSets).toString('utf8');
}

/** A COM_QUERY packet whose SQL text `sql` (at its end) is replaced by `text`: same prefix, same sequence number. */
function withQueryText(packet: Buffer, sql: string, text: string): Buffer {
  const payload = Buffer.concat([
    packet.subarray(4, packet.length - Buffer.byteLength(sql, 'utf8')),
    Buffer.from(text, 'utf8'),
  ]);
  const header = Buffer.alloc(4);
  header.writeUIntLE(payload.length, 0, 3);
  header[3] = packet[3]!;
  return Buffer.concat([header, payload]);
}

/** An ERR packet (protocol 4.1): 0xff, the error number, '#', the SQL state, the message. */
function errorPacket(error: ReplyError, sequence: number): Buffer {
  const payload = Buffer.concat([
    Buffer.from([0xff, error.errno & 0xff, error.errno >> 8]),
    Buffer.from(`#${error.sqlState}${error.message}`, 'utf8'),
  ]);
  const header = Buffer.alloc(4);
  header.writeUIntLE(payload.length, 0, 3);
  header[3] = sequence;
  return Buffer.concat([header, payload]);
}

export class FaultProxy {
  readonly #target: { host: string; port: number };
  readonly #sockets = new Set<Socket>();
  /** Called when the last open socket closed (closeWhenClientsLeft). */
  #onEmpty: (() => void) | undefined;
  #arms: Arm[] = [];
  #server: Server | undefined;
  #stalled = false;
  port = 0;

  constructor(targetHost: string, targetPort: number) {
    this.#target = { host: targetHost, port: targetPort };
  }

  async listen(): Promise<number> {
    this.#server = createServer((client) => this.#accept(client));
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve));
    const address = this.#server.address();
    this.port = typeof address === 'object' && address ? address.port : 0;
    return this.port;
  }

  /** Cuts the first connection whose next query matches `pattern`; resolves with that SQL. */
  armOnce(pattern: RegExp, mode: CutMode): Promise<string> {
    return new Promise((resolve) => this.#arms.push({ pattern, mode, fired: resolve }));
  }

  /**
   * Forwards the first query matching `pattern` (or, with `sendInstead`, that statement in its
   * place), then gives its client `error` instead of the server's reply; the connection stays open.
   * Resolves with the SQL the client sent.
   */
  armErrorReply(pattern: RegExp, error: ReplyError, sendInstead?: string): Promise<string> {
    return new Promise((resolve) =>
      this.#arms.push({ pattern, mode: 'error-reply', error, sendInstead, fired: resolve }),
    );
  }

  /**
   * Cuts the connection of server thread `threadId` (CONNECTION_ID() as the client sees it) at its
   * next query matching `pattern`, so several clients can share the proxy and only the chosen one is hit.
   */
  armThread(threadId: number, pattern: RegExp, mode: CutMode): ThreadArm {
    let arm: Arm | undefined;
    const fired = new Promise<string>((resolve) => {
      arm = { pattern, mode, fired: resolve, threadId };
      this.#arms.push(arm);
    });
    return {
      fired,
      cancel: () => {
        this.#arms = this.#arms.filter((a) => a !== arm);
      },
    };
  }

  /**
   * Stalls the link: nothing is forwarded either way on open or new connections (they stay open,
   * as behind a partition that drops packets) until `resume()`.
   */
  stall(): void {
    this.#stalled = true;
    for (const s of this.#sockets) s.pause();
  }

  /** Forwards again what `stall()` held back, and everything after it. */
  resume(): void {
    this.#stalled = false;
    for (const s of this.#sockets) s.resume();
  }

  /** Drops every open connection (as a server-side network failure would). */
  cutAll(): void {
    for (const s of this.#sockets) s.destroy();
  }

  async close(): Promise<void> {
    this.cutAll();
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()));
  }

  /**
   * Closes once the clients have closed their own connections (or after `boundMs`, then cutting what is
   * left). For a pool that may be opening a connection as it ends: the mariadb connector 3.4 (the one
   * @prisma/adapter-mariadb pins) rejects a promise no one holds when a connection is cut during its
   * init queries, which would fail the test file as an unhandled rejection.
   */
  async closeWhenClientsLeft(boundMs = 10_000): Promise<void> {
    if (this.#sockets.size > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, boundMs);
        function done(): void {
          clearTimeout(timer);
          resolve();
        }
        this.#onEmpty = done;
      });
      this.#onEmpty = undefined;
    }
    await this.close();
  }

  #accept(client: Socket): void {
    const server = new Socket();
    this.#sockets.add(client).add(server);
    if (this.#stalled) {
      // Explicitly paused: the 'data' listeners below do not start the flow again.
      client.pause();
      server.pause();
    }
    const cut = (): void => {
      client.destroy();
      server.destroy();
    };
    const left = (): void => {
      if (this.#sockets.size === 0) this.#onEmpty?.();
    };
    client.on('close', () => {
      if (this.#sockets.delete(client)) server.end();
      left();
    });
    server.on('close', () => {
      if (this.#sockets.delete(server)) client.destroy();
      left();
    });
    client.on('error', cut);
    server.on('error', cut);
    let swallowReply = false;
    let replaceReply: ReplyError | undefined;
    let held = Buffer.alloc(0);
    let threadId: number | undefined;
    // Negotiated capabilities are those both sides offer: the server's handshake and the client's
    // handshake response (its first packet). MariaDB reuses bit 27 of the client's flags, so the
    // client's word alone is not enough.
    let serverCapabilities = 0;
    let capabilities: number | undefined;
    server.on('data', (chunk: Buffer) => {
      // The server speaks first: after the version string come the thread id (4), the first part
      // of the auth data (8), a filler (1), the low capability word (2), the character set (1),
      // the status (2) and the high capability word (2).
      if (threadId === undefined && chunk.length > 5) {
        const end = chunk.indexOf(0, 5);
        if (end > 0 && chunk.length >= end + 5) threadId = chunk.readUInt32LE(end + 1);
        if (end > 0 && chunk.length >= end + 21) {
          serverCapabilities = chunk.readUInt16LE(end + 14) | (chunk.readUInt16LE(end + 19) << 16);
        }
      }
      if (swallowReply) return cut();
      if (replaceReply === undefined) return client.write(chunk);
      // The reply's first packet, whole, becomes the error packet, with the same sequence number.
      held = Buffer.concat([held, chunk]);
      if (held.length < 4 || held.length < 4 + held.readUIntLE(0, 3)) return;
      const rest = held.subarray(4 + held.readUIntLE(0, 3));
      client.write(Buffer.concat([errorPacket(replaceReply, held[3]!), rest]));
      replaceReply = undefined;
      held = Buffer.alloc(0);
    });
    server.connect(this.#target.port, this.#target.host);
    let pending = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 4) {
        const length = pending.readUIntLE(0, 3);
        if (pending.length < 4 + length) break;
        const packet = pending.subarray(0, 4 + length);
        pending = pending.subarray(4 + length);
        if (capabilities === undefined && packet.length >= 8)
          capabilities = packet.readUInt32LE(4) & serverCapabilities;
        const arm = this.#match(packet, threadId, ((capabilities ?? 0) & CLIENT_QUERY_ATTRIBUTES) !== 0);
        const sql = arm
          ? (queryText(packet.subarray(5), ((capabilities ?? 0) & CLIENT_QUERY_ATTRIBUTES) !== 0) ?? '')
          : '';
        if (arm?.mode === 'before-forward') {
          cut();
          arm.fired(sql);
          return;
        }
        if (arm?.mode === 'before-reply') swallowReply = true;
        if (arm?.mode === 'error-reply') replaceReply = arm.error;
        arm?.fired(sql);
        server.write(arm?.sendInstead === undefined ? packet : withQueryText(packet, sql, arm.sendInstead));
      }
    });
  }

  #match(packet: Buffer, threadId: number | undefined, queryAttributes: boolean): Arm | undefined {
    if (packet.length < 5 || packet[4] !== COM_QUERY) return undefined;
    const sql = queryText(packet.subarray(5), queryAttributes);
    if (sql === undefined) return undefined;
    const index = this.#arms.findIndex(
      (a) => (a.threadId === undefined || a.threadId === threadId) && a.pattern.test(sql),
    );
    if (index < 0) return undefined;
    const [arm] = this.#arms.splice(index, 1);
    return arm;
  }
}

/** A listening proxy in front of the server of `serverUrl`, and that URL with the proxy in its place. */
export async function proxyFor(serverUrl: string): Promise<{ proxy: FaultProxy; url: URL }> {
  const target = parseMysqlUrl(serverUrl);
  const proxy = new FaultProxy(target.host, target.port);
  const url = new URL(serverUrl);
  url.hostname = '127.0.0.1';
  url.port = String(await proxy.listen());
  return { proxy, url };
}

/**
 * For a test file or a describe block: a proxy in front of `db`'s server and a knex pool of
 * `poolMax` connections through it, opened before the block's tests and closed after them.
 */
export function useProxiedKnex(
  db: { url: string; name: string },
  poolMax = 4,
): { readonly proxy: FaultProxy; readonly knex: Knex } {
  let proxy: FaultProxy | undefined;
  let knex: Knex | undefined;
  beforeAll(async () => {
    const front = await proxyFor(db.url);
    proxy = front.proxy;
    knex = connectKnex(front.url.toString(), db.name, { poolMax });
  });
  afterAll(async () => {
    await knex?.destroy();
    await proxy?.close();
  });
  return {
    get proxy() {
      return proxy!;
    },
    get knex() {
      return knex!;
    },
  };
}
