// A network round trip on loopback: latency-proxy.c, compiled once with the machine's C compiler and
// started as a process of its own, in front of a server port. See that file for why it is C.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const SOURCE = fileURLToPath(new URL('./latency-proxy.c', import.meta.url));
const BINARY = fileURLToPath(new URL('../../.tmp/bench/latency-proxy', import.meta.url));

export interface LatencyProxy {
  /** The port on 127.0.0.1 that reaches the target through the delay. */
  port: number;
  /** The round trip it adds, ms (twice the one-way delay). */
  roundTripMs: number;
  stop(): Promise<void>;
}

/** Compiles the proxy if its binary is missing or older than its source; the reason when it cannot. */
export function buildLatencyProxy(): { ok: true } | { ok: false; reason: string } {
  if (existsSync(BINARY) && statSync(BINARY).mtimeMs >= statSync(SOURCE).mtimeMs) return { ok: true };
  mkdirSync(fileURLToPath(new URL('../../.tmp/bench/', import.meta.url)), { recursive: true });
  const cc = spawnSync('cc', ['-O2', '-o', BINARY, SOURCE], { encoding: 'utf8' });
  if (cc.error) return { ok: false, reason: `no C compiler (cc: ${cc.error.message})` };
  if (cc.status !== 0) return { ok: false, reason: `cc failed: ${cc.stderr.trim().split('\n')[0]}` };
  return { ok: true };
}

/** Starts a proxy to 127.0.0.1:targetPort adding `roundTripMs` (half each way); resolves once it listens. */
export async function startLatencyProxy(targetPort: number, roundTripMs: number): Promise<LatencyProxy> {
  const built = buildLatencyProxy();
  if (!built.ok) throw new Error(built.reason);
  const oneWayUs = Math.round((roundTripMs * 1000) / 2);
  const child: ChildProcess = spawn(BINARY, ['0', String(targetPort), String(oneWayUs)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`latency-proxy exited with ${code} before it listened`)));
    lines.once('line', (line) => {
      const m = /^listening (\d+)$/.exec(line);
      if (m) resolve(Number(m[1]));
      else reject(new Error(`latency-proxy: unexpected output ${line}`));
    });
  });
  return {
    port,
    roundTripMs,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
