// Command-line flags of `npm run demo`, validated once. Bad flags are a UsageError: one line, exit 2.
import { parseArgs } from 'node:util';

export type Scenario = 'lending' | 'stock';

export interface FaultPlan {
  kind: 'kill' | 'pause';
  /** Seconds after the workers start. */
  atSec: number;
}

export interface DemoConfig {
  scenario: Scenario;
  workers: number;
  /** Concurrent operations inside each worker process. */
  concurrency: number;
  durationSec: number;
  loans: number;
  investors: number;
  claims: number;
  stock: number;
  unsafe: boolean;
  reaperCutoffMs: number;
  reaperPeriodSec: number;
  faults: FaultPlan[];
  json: string | undefined;
  keep: boolean;
  seed: number;
}

/** A bad flag or flag value; main prints its message as one line and exits 2. */
export class UsageError extends Error {}

export const EXIT = Object.freeze({ pass: 0, fail: 1, usage: 2, error: 3 });

const HELP = `npm run demo -- [flags]

Runs the lending scenario (or the stock one) with worker processes, the reaper job and injected faults
on a fresh database, then checks the outcome from the database alone.

Server: the first of
  1. MYSQL_URL, e.g. mysql://root:password@127.0.0.1:3306/ (a user that may create and drop databases;
     the demo creates a database of its own and drops it unless the run FAILs or --keep is given);
  2. a MySQL 8.4 container through testcontainers, when a Docker engine answers;
  3. a throwaway mariadbd or mysqld from PATH or /usr/sbin in a temporary data directory
     (apt-get install mariadb-server gives you one).

Flags:
  --scenario lending|stock   what to run (default lending)
  --workers N                worker processes (default 4)
  --concurrency N            operations in flight per worker (default 2)
  --duration S               seconds of load, lending only (default 40)
  --loans N --investors N --claims N   size of the lending book (default 50 / 500 / 5000)
  --stock N                  units in stock, stock scenario (default 100)
  --unsafe                   stock: take the lock inside the transaction (shows the oversell)
  --reaper-cutoff MS         grants older than this are reaped (default 3000)
  --reaper-period S          reaper runs every S seconds (default 1)
  --faults LIST              e.g. kill@10,pause@20 (seconds into the run); "none" for no faults
                             (default: kill at 25% and pause at 50% of the duration)
  --json FILE                write the full report as JSON
  --keep                     keep the demo database afterwards (it is kept anyway on FAIL)
  --seed N                   random seed of the book (default 42)
  -h, --help                 print this help

Exit codes: ${EXIT.pass} PASS, ${EXIT.fail} FAIL (a check failed), ${EXIT.usage} bad flags, ${EXIT.error} the demo could not run.`;

function int(name: string, raw: string | undefined, fallback: number, min: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min)
    throw new UsageError(`--${name} must be an integer >= ${min}, got ${JSON.stringify(raw)}`);
  return n;
}

export function parseFaults(raw: string | undefined, durationSec: number): FaultPlan[] {
  if (raw === undefined) {
    return [
      { kind: 'kill', atSec: Math.max(1, Math.round(durationSec * 0.25)) },
      { kind: 'pause', atSec: Math.max(2, Math.round(durationSec * 0.5)) },
    ];
  }
  if (raw === 'none' || raw === '') return [];
  return raw.split(',').map((part) => {
    const m = /^(kill|pause)@(\d+(?:\.\d+)?)s?$/.exec(part.trim());
    if (!m) throw new UsageError(`--faults: expected kill@SECONDS or pause@SECONDS, got ${JSON.stringify(part)}`);
    const atSec = Number(m[2]);
    if (atSec >= durationSec)
      throw new UsageError(`--faults: ${part} is not before the end of the run (${durationSec} s)`);
    return { kind: m[1] as FaultPlan['kind'], atSec };
  });
}

const OPTIONS = {
  scenario: { type: 'string' },
  workers: { type: 'string' },
  concurrency: { type: 'string' },
  duration: { type: 'string' },
  loans: { type: 'string' },
  investors: { type: 'string' },
  claims: { type: 'string' },
  stock: { type: 'string' },
  unsafe: { type: 'boolean' },
  'reaper-cutoff': { type: 'string' },
  'reaper-period': { type: 'string' },
  faults: { type: 'string' },
  json: { type: 'string' },
  keep: { type: 'boolean' },
  seed: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Parses argv; prints help and exits on --help. Throws UsageError, naming the flag, on bad input. */
export function parseConfig(argv: string[]): DemoConfig {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, strict: true, allowPositionals: false, options: OPTIONS }));
  } catch (err) {
    throw new UsageError((err as Error).message); // node:util's message names the flag: "Unknown option '--bogus'"
  }
  if (values.help) {
    console.log(HELP);
    process.exit(EXIT.pass);
  }
  const scenario = values.scenario ?? 'lending';
  if (scenario !== 'lending' && scenario !== 'stock')
    throw new UsageError(`--scenario must be lending or stock, got ${JSON.stringify(scenario)}`);
  const durationSec = int('duration', values.duration, 40, 2);
  const loans = int('loans', values.loans, 50, 1);
  const claims = int('claims', values.claims, 5000, loans);
  const config: DemoConfig = {
    scenario,
    workers: int('workers', values.workers, 4, 1),
    concurrency: int('concurrency', values.concurrency, 2, 1),
    durationSec,
    loans,
    investors: int('investors', values.investors, 500, 2),
    claims,
    stock: int('stock', values.stock, 100, 1),
    unsafe: values.unsafe ?? false,
    reaperCutoffMs: int('reaper-cutoff', values['reaper-cutoff'], 3000, 100),
    reaperPeriodSec: int('reaper-period', values['reaper-period'], 1, 1),
    faults: scenario === 'lending' ? parseFaults(values.faults, durationSec) : [],
    json: values.json,
    keep: values.keep ?? false,
    seed: int('seed', values.seed, 42, 0),
  };
  if (config.unsafe && scenario !== 'stock') throw new UsageError('--unsafe applies to --scenario stock only');
  if (config.faults.length > 0 && config.workers < 2)
    throw new UsageError('--faults need at least 2 workers (one keeps working while another is faulted)');
  return config;
}
