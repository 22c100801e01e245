// Writers are not starved: 16 readers holding overlapping 10 ms read locks, and a writer in another
// process (no shared in-process queue) asking every ~200 ms, with writer preference on and off.
import { fork } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Family } from '../lib/family.js';
import { fmt } from '../lib/format.js';
import { percentile, runFor, sortedCopy, stats, type Stats } from '../lib/run.js';

const READ_HOLD = 10;

export const writers: Family = {
  groups: ['writers'],
  async run({ server, dbName, locks, seconds, rounds, log }, results) {
    const holds: number[] = [];
    const reader = async (): Promise<void> => {
      const g = await locks.acquireRead('rw-hot', { waitMs: 60_000 });
      const t0 = performance.now();
      await sleep(READ_HOLD);
      await g.release();
      holds.push(performance.now() - t0);
    };
    const tryReader = async (): Promise<boolean> => {
      const g = await locks.tryAcquireRead('rw-hot');
      if (!g) return false;
      await sleep(READ_HOLD);
      await g.release();
      return true;
    };
    const phaseMs = seconds * 1000 * Math.max(2, rounds);
    const withWriterChild = async (
      intentMs: number,
      waitMs: number,
    ): Promise<{ readers: Stats; waits: number[]; timeouts: number }> => {
      const child = fork(
        fileURLToPath(new URL('./writer-child.ts', import.meta.url)),
        [server.url, dbName, 'rw-hot', String(phaseMs), '200', String(intentMs), String(waitMs)],
        { execArgv: ['--import', 'tsx'] },
      );
      const ready = new Promise<void>((resolve) => child.once('message', () => resolve()));
      const done = new Promise<{ waits: number[]; timeouts: number }>((resolve, reject) => {
        child.on(
          'message',
          (m: { waits?: number[]; timeouts?: number }) =>
            m.waits && resolve({ waits: m.waits, timeouts: m.timeouts ?? 0 }),
        );
        child.once('exit', (code) => (code === 0 ? undefined : reject(new Error(`writer child exited ${code}`))));
      });
      await ready;
      const readersStats = stats(await runFor(phaseMs, 16, reader, 0));
      return { readers: readersStats, ...(await done) };
    };
    log('[bench] writers: 16 readers alone (acquireRead, and tryAcquireRead as the no-wait-machinery baseline)');
    const aloneA = stats(await runFor(phaseMs / 2, 16, reader));
    const tryA = stats(await runFor(phaseMs / 2, 16, tryReader));
    log('[bench] writers: 16 readers + a writer in another process every ~200 ms (writer preference on)');
    const on = await withWriterChild(1000, 30_000);
    log('[bench] writers: the same with writer preference off (writerIntentMs 0, waitMs 2000)');
    const off = await withWriterChild(0, 2000);
    log('[bench] writers: 16 readers alone again');
    const aloneB = stats(await runFor(phaseMs / 2, 16, reader));
    const tryB = stats(await runFor(phaseMs / 2, 16, tryReader));
    const aloneOps = (aloneA.opsPerSec + aloneB.opsPerSec) / 2;
    const tryOps = (tryA.opsPerSec + tryB.opsPerSec) / 2;
    const sw = sortedCopy(on.waits);
    const swOff = sortedCopy(off.waits);
    const sh = sortedCopy(holds);
    results.set('writers', {
      readHoldMs: READ_HOLD,
      readersAloneOpsPerSec: aloneOps,
      readersAloneTryAcquireOpsPerSec: tryOps,
      waitingMachineryCost: 1 - aloneOps / tryOps,
      readersWithWriterOpsPerSec: on.readers.opsPerSec,
      readerDrop: 1 - on.readers.opsPerSec / aloneOps,
      readHoldP99: percentile(sh, 99),
      readHoldMax: sh[sh.length - 1],
      writerGrants: on.waits.length,
      writerWaitP50: percentile(sw, 50),
      writerWaitP99: percentile(sw, 99),
      writerWaitMax: sw[sw.length - 1],
    });
    results.set('writers.intentOff', {
      readersOpsPerSec: off.readers.opsPerSec,
      writerGrants: off.waits.length,
      writerTimeouts2s: off.timeouts,
      writerWaitP50: percentile(swOff, 50),
      writerWaitMax: swOff[swOff.length - 1],
    });
  },
  summary(results) {
    const w = results.get('writers');
    const off = results.get('writers.intentOff');
    if (!w || !off) return [];
    return [
      `writers: readers alone ${fmt(w.readersAloneOpsPerSec)}/s, with a writer ${fmt(w.readersWithWriterOpsPerSec)}/s (drop ${fmt(100 * w.readerDrop!, 1)}%);` +
        ` read hold p99 ${fmt(w.readHoldP99, 1)} ms max ${fmt(w.readHoldMax, 1)} ms; writer waits (${w.writerGrants}) p50 ${fmt(w.writerWaitP50, 1)} ms, p99 ${fmt(w.writerWaitP99, 1)} ms, max ${fmt(w.writerWaitMax, 1)} ms`,
      `writers, no wait machinery: tryAcquireRead readers ${fmt(w.readersAloneTryAcquireOpsPerSec)}/s vs acquireRead ${fmt(w.readersAloneOpsPerSec)}/s;` +
        ` writer preference OFF: ${off.writerGrants} writer grants, ${off.writerTimeouts2s} timeouts after 2 s, wait p50 ${fmt(off.writerWaitP50, 1)} ms max ${fmt(off.writerWaitMax, 1)} ms, readers ${fmt(off.readersOpsPerSec)}/s`,
    ];
  },
  targets: [
    {
      id: 'writers/writer-wait',
      label: 'writer max wait ÷ (2 × longest read hold)',
      of: { case: 'writers', metric: 'writerWaitMax' },
      per: { case: 'writers', metric: 'readHoldMax' },
      factor: 2,
      atMost: 1,
    },
    {
      id: 'writers/wait-path',
      label: 'reader throughput cost of the wait path, no writers (acquireRead vs tryAcquireRead)',
      of: { case: 'writers', metric: 'waitingMachineryCost' },
      atMost: 0.1,
    },
    {
      id: 'writers/reader-drop',
      label: 'reader throughput drop with a writer every ~200 ms',
      of: { case: 'writers', metric: 'readerDrop' },
    },
  ],
};
