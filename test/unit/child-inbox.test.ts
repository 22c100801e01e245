// The benchmark's inbox of a forked child's messages (bench/lib/child-inbox.ts), with a real child
// process that echoes what it is sent: messages in order, one 'exit' listener however many are
// awaited, and a child's exit rejecting the message awaited. Negative control: the hand-over case's
// former inbox, an 'exit' listener per awaited message, is caught by the same count.
// covers: bench/lib/child-inbox.ts
import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { childInbox, type ChildInbox } from '../../bench/lib/child-inbox.js';

const ECHO = "process.on('message', (m) => (m === 'exit' ? process.exit(3) : process.send(m)));";
const children: ChildProcess[] = [];

function echoChild(): ChildProcess {
  const child = spawn(process.execPath, ['-e', ECHO], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  children.push(child);
  return child;
}

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill();
});

/** The hand-over case's inbox before: it added an 'exit' listener each time it waited. */
function leakyInbox(proc: ChildProcess): ChildInbox {
  const inbox: unknown[] = [];
  const waiting: Array<(m: unknown) => void> = [];
  proc.on('message', (m) => (waiting.length ? waiting.shift()!(m) : inbox.push(m)));
  return {
    next: <T>() =>
      new Promise<T>((resolve) => {
        if (inbox.length) return resolve(inbox.shift() as T);
        waiting.push(resolve as (m: unknown) => void);
        proc.once('exit', () => undefined);
      }),
  };
}

/** Sends 50 messages one at a time, awaiting each echo: what a benchmark phase does, much shortened. */
async function roundTrips(
  child: ChildProcess,
  inbox: ChildInbox,
): Promise<{ echoed: number[]; exitListeners: number; leakWarnings: number }> {
  const warnings: Error[] = [];
  const onWarning = (w: Error): void => void warnings.push(w);
  process.on('warning', onWarning);
  try {
    const before = child.listenerCount('exit');
    const echoed: number[] = [];
    for (let i = 0; i < 50; i++) {
      child.send(i);
      echoed.push(await inbox.next<number>());
    }
    // process emits 'warning' on a later tick than the listener that crossed the limit.
    await new Promise((resolve) => setImmediate(resolve));
    return {
      echoed,
      exitListeners: child.listenerCount('exit') - before,
      leakWarnings: warnings.filter((w) => w.name === 'MaxListenersExceededWarning').length,
    };
  } finally {
    process.off('warning', onWarning);
  }
}

describe('childInbox', () => {
  it('50 messages awaited one at a time: in order, no listener added per message, no warning', async () => {
    const child = echoChild();
    const inbox = childInbox(child);
    expect(await roundTrips(child, inbox)).toEqual({
      echoed: [...Array(50).keys()],
      exitListeners: 0,
      leakWarnings: 0,
    });
  });

  it('negative control: an exit listener per awaited message is caught by the same checks', async () => {
    const child = echoChild();
    expect(await roundTrips(child, leakyInbox(child))).toMatchObject({ exitListeners: 50, leakWarnings: 1 });
  });

  it("a child's exit rejects the message awaited, and every later one", async () => {
    const child = echoChild();
    const inbox = childInbox(child, 'echo child');
    child.send('exit');
    await expect(inbox.next()).rejects.toThrow('echo child exited 3');
    await expect(inbox.next()).rejects.toThrow('echo child exited 3');
  });
});
