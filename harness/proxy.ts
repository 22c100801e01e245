// A TCP proxy between MySQL clients and a server that can cut a connection at a chosen command:
// it reads the client's packets (3-byte length, sequence byte, payload), and when a COM_QUERY
// matches an armed pattern it either cuts before forwarding (the server never sees it) or
// forwards it and cuts before the reply reaches the client (the outcome is unknown to the client).
import { createServer, Socket, type Server } from 'node:net';

export type CutMode = 'before-forward' | 'before-reply';

interface Arm {
  pattern: RegExp;
  mode: CutMode;
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

export class FaultProxy {
  readonly #target: { host: string; port: number };
  readonly #sockets = new Set<Socket>();
  #arms: Arm[] = [];
  #server: Server | undefined;
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

  /** Drops every open connection (as a server-side network failure would). */
  cutAll(): void {
    for (const s of this.#sockets) s.destroy();
  }

  async close(): Promise<void> {
    this.cutAll();
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()));
  }

  #accept(client: Socket): void {
    const server = new Socket();
    this.#sockets.add(client).add(server);
    const cut = (): void => {
      client.destroy();
      server.destroy();
    };
    client.on('close', () => this.#sockets.delete(client) && server.end());
    server.on('close', () => this.#sockets.delete(server) && client.destroy());
    client.on('error', cut);
    server.on('error', cut);
    let swallowReply = false;
    let threadId: number | undefined;
    server.on('data', (chunk: Buffer) => {
      // The server speaks first: its handshake carries the connection (thread) id after the version string.
      if (threadId === undefined && chunk.length > 5) {
        const end = chunk.indexOf(0, 5);
        if (end > 0 && chunk.length >= end + 5) threadId = chunk.readUInt32LE(end + 1);
      }
      if (swallowReply) cut();
      else client.write(chunk);
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
        const arm = this.#match(packet, threadId);
        if (arm?.mode === 'before-forward') {
          cut();
          arm.fired(packet.subarray(5).toString('utf8'));
          return;
        }
        if (arm?.mode === 'before-reply') {
          swallowReply = true;
          arm.fired(packet.subarray(5).toString('utf8'));
        }
        server.write(packet);
      }
    });
  }

  #match(packet: Buffer, threadId: number | undefined): Arm | undefined {
    if (packet.length < 5 || packet[4] !== COM_QUERY) return undefined;
    const sql = packet.subarray(5).toString('utf8');
    const index = this.#arms.findIndex((a) => (a.threadId === undefined || a.threadId === threadId) && a.pattern.test(sql));
    if (index < 0) return undefined;
    const [arm] = this.#arms.splice(index, 1);
    return arm;
  }
}
