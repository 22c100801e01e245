// The messages a forked benchmark child sends, taken one at a time in order. One 'message' and one
// 'exit' listener for the child's whole life: a listener per awaited message would pile up on a
// child that answers thousands of them (MaxListenersExceededWarning, and every one kept until exit).
import type { ChildProcess } from 'node:child_process';

export interface ChildInbox {
  /** The next message; rejects once the child has exited without sending one. */
  next<T>(): Promise<T>;
}

export function childInbox(child: ChildProcess, what = 'child'): ChildInbox {
  const inbox: unknown[] = [];
  const waiting: Array<{ resolve(m: unknown): void; reject(e: Error): void }> = [];
  let failure: Error | undefined;
  child.on('message', (m) => {
    const w = waiting.shift();
    if (w) w.resolve(m);
    else inbox.push(m);
  });
  child.once('exit', (code, signal) => {
    failure = new Error(`${what} exited ${code ?? signal}${code === 0 ? ' before sending the message awaited' : ''}`);
    for (const w of waiting.splice(0)) w.reject(failure);
  });
  return {
    next: <T>() =>
      new Promise<T>((resolve, reject) => {
        if (inbox.length) return resolve(inbox.shift() as T);
        if (failure) return reject(failure);
        waiting.push({ resolve: resolve as (m: unknown) => void, reject });
      }),
  };
}
