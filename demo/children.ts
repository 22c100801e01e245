// Every child process the demo starts, so that whatever way the demo ends (an error, a failed
// worker start) none is left behind: the reaper child has no IPC channel and would run forever.
import type { ChildProcess } from 'node:child_process';

const live = new Set<ChildProcess>();

export function track(child: ChildProcess): ChildProcess {
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});
