// `mysql-rwlock jobs`: the scheduled jobs the grant log shows (src/sql/jobs.ts), each with its last run.
import { withConnection } from '../sql/connection.js';
import { JOBS_VIEW_DEFAULTS, jobsView, type JobRun, type JobSummary } from '../sql/jobs.js';
import { EXIT, wholeNumber, type Command } from './command.js';
import { cell, duration, json, table, time } from './format.js';

/** A run's outcome for people; `finished` says no more than the log knows. */
export function outcomeText(run: JobRun): string {
  const kept = run.heldAfterRun ? ', grant kept (lockAtLeastFor)' : '';
  return {
    running: 'running',
    finished: `finished${kept}`,
    reaped: 'REAPED (holder presumed dead)',
    operator: 'released by an operator',
    unknown: 'ended (unknown)',
  }[run.outcome];
}

function nextText(job: JobSummary): string {
  if (job.kind === 'exclusive') return '-';
  if (job.nextFire === null) return 'unknown (fires not evenly spaced)';
  return `${time(job.nextFire)} (every ${duration(job.periodMs)})`;
}

export const JOBS_COMMAND: Command = {
  name: 'jobs',
  summary: 'scheduled jobs (node-cron tasks, exclusive jobs) with their last run, its outcome and holder',
  args: [],
  options: {
    job: {
      type: 'string',
      multiple: true,
      value: 'NAME',
      help: 'an exclusive job (runExclusive, @Exclusive) to show by its name (repeatable); those with lockAtLeastFor are found without',
    },
    window: {
      type: 'string',
      value: 'MS',
      help: `look for jobs among the grants of this long ago (default ${JOBS_VIEW_DEFAULTS.windowMs}, a day)`,
    },
  },
  details:
    "node-cron tasks run through createRunCoordinator are found by their fires' keys (NAME:fire time); exclusive jobs by their #run grants (lockAtLeastFor) and by --job. " +
    "OUTCOME is how the run's grant ended: running, finished (its holder released it: committed, or failed and rolled back; the log does not say which), REAPED, or released by an operator. " +
    'NEXT FIRE is estimated from the spacing of the last three fires (the schedule is not in the database).\n' +
    'With --json: { now, windowMs, jobs: [{ kind, name, runs, reaped, last: { grantId, resourceId, fireTime, holder, startedAt, endedAt, outcome, reason, heldAfterRun }, nextFire, periodMs }], truncated }. Exit 0 also when no job was found.',
  async run({ db, values, repeated, json: asJson, io }) {
    const windowMs = wholeNumber('--window', values.window) ?? JOBS_VIEW_DEFAULTS.windowMs;
    const view = await withConnection(db(), (conn) =>
      jobsView(conn, { windowMs, names: repeated.job ?? [], maxJobs: JOBS_VIEW_DEFAULTS.maxJobs }),
    );
    if (asJson) {
      io.out(json(view));
      return EXIT.done;
    }
    if (view.jobs.length === 0) {
      io.out(`no jobs in the last ${duration(windowMs)} (exclusive jobs without lockAtLeastFor: name them with --job)`);
      return EXIT.done;
    }
    const now = view.now.getTime();
    io.out(
      table(
        ['KIND', 'JOB', 'LAST RUN', 'OUTCOME', 'HOLDER', 'HELD', 'NEXT FIRE', 'RUNS', 'REAPED'],
        view.jobs.map((j) => [
          j.kind,
          cell(j.name),
          j.last === null ? '-' : time(j.last.fireTime ?? j.last.startedAt),
          j.last === null ? 'no run in the log' : outcomeText(j.last),
          j.last === null ? '-' : cell(j.last.holder),
          j.last === null ? '-' : duration((j.last.endedAt?.getTime() ?? now) - j.last.startedAt.getTime()),
          nextText(j),
          String(j.runs),
          String(j.reaped),
        ]),
      ),
    );
    if (view.truncated) io.out(`more than ${JOBS_VIEW_DEFAULTS.maxJobs} jobs: the first by name are shown`);
    return EXIT.done;
  },
};
