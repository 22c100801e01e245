// `mysql-rwlock dashboard`: the operator page, served by node:http with no build step. One HTML
// page (src/dashboard/page.ts) polls JSON endpoints. Read-only unless `allowRelease`; then a
// release must carry the per-start token embedded in the page, as JSON, from the page's own origin.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import type { Knex } from 'knex';
import { query, withConnection } from '../sql/connection.js';
import { InvalidOptionsError, RwLockError } from '../errors.js';
import { createLockManager, type LockManager } from '../lock/manager/manager.js';
import {
  LIMITS,
  booleanOption,
  integerOption,
  knexOption,
  optionsObject,
  staleAfterOption,
  textOption,
  keysOf,
} from '../options.js';
import { resourceKey } from '../lock/durable/resource-id.js';
import { recentReleases, timeline } from './queries.js';
import { JOBS_VIEW_DEFAULTS, jobsView } from '../sql/jobs.js';
import { LEADERS_VIEW_DEFAULTS, leadersView } from '../sql/terms.js';
import { renderPage } from './page.js';

export interface DashboardOptions {
  knex: Knex;
  /** @defaultValue `DASHBOARD_DEFAULTS.port` (7300); 0 picks a free port */
  port?: number;
  /** Address to bind. @defaultValue `DASHBOARD_DEFAULTS.host` ('127.0.0.1'): only this machine can open the page */
  host?: string;
  /**
   * Host names (or addresses) the page answers to besides the loopback names (`localhost`,
   * `127.0.0.1`, `::1`: when bound to loopback or to all interfaces) and the bound address itself.
   * A request naming any other host gets 421, on every path (DNS rebinding). Needed for a page
   * bound to 0.0.0.0 or `::` that is opened by a name or address of the machine. @defaultValue []
   */
  allowedHosts?: readonly string[];
  /**
   * Show a release button on live grants and accept releases. Each release names who made it: the
   * page asks for a name, recorded as the release note's releaser (`NAME via dashboard@HOST`).
   * @defaultValue `DASHBOARD_DEFAULTS.allowRelease` (false)
   */
  allowRelease?: boolean;
  /** Age from which a live grant is shown as stale: use the reaper's STALE_AFTER_MS. @defaultValue `DEFAULTS.staleAfterMs` */
  staleAfterMs?: number;
  /**
   * Exclusive jobs (`runExclusive`, `@Exclusive`) the Jobs section shows by name. node-cron tasks
   * run through `createRunCoordinator`, and exclusive jobs with `lockAtLeastFor`, are found without.
   * @defaultValue []
   */
  jobs?: readonly string[];
  /**
   * Leader names (`locks.campaign`) the Leaders section shows even when no term leads them. Names
   * whose live write grant holds a lease are found without. @defaultValue []
   */
  leaders?: readonly string[];
}

export interface Dashboard {
  url: string;
  port: number;
  close(): Promise<void>;
}

export const DASHBOARD_DEFAULTS = Object.freeze({ port: 7300, host: '127.0.0.1', allowRelease: false });

/** Timeline windows the page offers, ms. */
export const WINDOWS_MS = Object.freeze([60_000, 300_000, 900_000, 3_600_000, 21_600_000, 86_400_000]);
/** The longest operator name a release from the page takes. */
export const OPERATOR_MAX_CHARS = 100;
const LIVE_ROWS = 500;
const RELEASE_ROWS = 30;
const LANES = 12;
const BARS = 3_000;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Starts the page's server; resolves once it listens. */
export async function serveDashboard(options: DashboardOptions): Promise<Dashboard> {
  const o = optionsObject(
    'serveDashboard',
    options,
    keysOf<DashboardOptions>()([
      'knex',
      'port',
      'host',
      'allowedHosts',
      'allowRelease',
      'staleAfterMs',
      'jobs',
      'leaders',
    ]),
  );
  const knex = knexOption('knex', o.knex);
  const port = integerOption('port', o.port ?? DASHBOARD_DEFAULTS.port, 0, 65535);
  const host = o.host === undefined ? DASHBOARD_DEFAULTS.host : textOption('host', o.host, 255).toString('utf8');
  const accepted = acceptedHosts(host, o.allowedHosts);
  const allowRelease = booleanOption('allowRelease', o.allowRelease, DASHBOARD_DEFAULTS.allowRelease);
  const staleAfterMs = staleAfterOption(o.staleAfterMs);
  const jobs = resourceNames('jobs', o.jobs);
  const leaders = resourceNames('leaders', o.leaders);
  const page = `dashboard@${hostname()}`;
  const locks = createLockManager({ knex, staleAfterMs, owner: page });
  const token = randomBytes(24).toString('hex');
  const [server0] = await withConnection(knex, (conn) =>
    query<Array<{ db: string | null; version: string }>>(conn, 'SELECT DATABASE() AS db, VERSION() AS version'),
  );
  const database = `${server0?.db ?? '(no database)'} · ${server0?.version ?? ''}`;
  const served: Served = { knex, locks, staleAfterMs, allowRelease, token, page, database, accepted, jobs, leaders };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://dashboard');
    void answer(served, url, req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const actual = (server.address() as AddressInfo).port;
  const shown = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
  return {
    url: `http://${host === '::' ? '[::1]' : shown}:${actual}/`,
    port: actual,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** What the page's requests need, made once per start. */
interface Served {
  knex: Knex;
  /** The page's own manager: its reads, and the owner `dashboard@HOST`. */
  locks: LockManager;
  staleAfterMs: number;
  allowRelease: boolean;
  /** The per-start token embedded in the page, which a release must carry. */
  token: string;
  /** `dashboard@HOST`: where a release was given, recorded beside who gave it. */
  page: string;
  /** The database and server version the page's header names. */
  database: string;
  /** The Host names the page answers to. */
  accepted: Set<string>;
  /** Exclusive jobs shown by name. */
  jobs: readonly string[];
  /** Leader names shown whether a term leads them or not. */
  leaders: readonly string[];
}

/** One request: its Host checked first (DNS rebinding), then its route; every failure answered as JSON. */
async function answer(served: Served, url: URL, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const { accepted, allowRelease, token, database, staleAfterMs } = served;
  const send = (status: number, type: string, body: string): void => {
    res
      .writeHead(status, {
        'content-type': type,
        'cache-control': 'no-store',
        'x-content-type-options': 'nosniff',
        'x-frame-options': 'DENY',
        'referrer-policy': 'no-referrer',
        'content-security-policy':
          "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
      })
      .end(body);
  };
  const json = (status: number, value: unknown): void =>
    send(status, 'application/json; charset=utf-8', JSON.stringify(value));
  try {
    // DNS rebinding: another site's name pointed at this address must not read the page.
    if (!accepted.has(hostName(req.headers.host)))
      throw new HttpError(
        421,
        'unexpected Host header: start the dashboard with --allowed-host NAME for each name it is opened by',
      );
    if (req.method === 'GET' && url.pathname === '/') {
      send(
        200,
        'text/html; charset=utf-8',
        renderPage({
          token: allowRelease ? token : null,
          database,
          staleAfterMs,
          windows: WINDOWS_MS,
          maxChars: { operator: OPERATOR_MAX_CHARS, reason: LIMITS.maxReasonChars },
        }),
      );
    } else if (req.method === 'GET' && url.pathname === '/api/state') {
      json(200, await pageState(served));
    } else if (req.method === 'GET' && url.pathname === '/api/jobs') {
      json(200, await readJobs(served));
    } else if (req.method === 'GET' && url.pathname === '/api/leaders') {
      json(200, await readLeaders(served));
    } else if (req.method === 'GET' && url.pathname === '/api/timeline') {
      json(200, await readTimeline(served, url.searchParams));
    } else if (req.method === 'POST' && url.pathname === '/api/release') {
      json(200, await releaseFromPage(served, req));
    } else {
      throw new HttpError(
        url.pathname === '/api/release' || url.pathname === '/' || url.pathname.startsWith('/api/') ? 405 : 404,
        'not here',
      );
    }
  } catch (err) {
    if (err instanceof HttpError) json(err.status, { error: err.message });
    else
      json(500, {
        error: err instanceof RwLockError ? err.message : `the database refused: ${(err as Error).message}`,
      });
  }
}

/** `GET /api/state`: the cards and the two tables. */
async function pageState({ knex, locks }: Served) {
  const [stats, live, releases] = await Promise.all([
    locks.stats(),
    locks.list({ limit: LIVE_ROWS }),
    withConnection(knex, (conn) => recentReleases(conn, RELEASE_ROWS)),
  ]);
  return { stats, live: live.grants, liveTruncated: live.next !== null, releases };
}

/** `GET /api/timeline?window=MS&resource=ID`: the grants of the busiest resources, or of one, over the window. */
async function readTimeline({ knex }: Served, params: URLSearchParams) {
  const windowMs = Number(params.get('window') ?? WINDOWS_MS[2]);
  if (!WINDOWS_MS.includes(windowMs)) throw new HttpError(400, `window must be one of ${WINDOWS_MS.join(', ')}`);
  const resourceId = params.get('resource') ?? '';
  let resource: Buffer | undefined;
  if (resourceId !== '') {
    try {
      resource = resourceKey(resourceId);
    } catch (err) {
      throw new HttpError(400, (err as Error).message);
    }
  }
  return withConnection(knex, (conn) => timeline(conn, { resource, windowMs, maxResources: LANES, maxGrants: BARS }));
}

/** `GET /api/jobs`: the jobs of the last day, each with its last run (src/sql/jobs.ts). */
async function readJobs({ knex, jobs }: Served) {
  return withConnection(knex, (conn) =>
    jobsView(conn, { windowMs: JOBS_VIEW_DEFAULTS.windowMs, names: jobs, maxJobs: JOBS_VIEW_DEFAULTS.maxJobs }),
  );
}

/** `GET /api/leaders`: each leader name with its leader and its latest terms (src/sql/terms.ts). */
async function readLeaders({ knex, leaders }: Served) {
  return withConnection(knex, (conn) =>
    leadersView(conn, {
      names: leaders,
      termsPerName: LEADERS_VIEW_DEFAULTS.termsOnPage,
      maxNames: LEADERS_VIEW_DEFAULTS.maxNames,
    }),
  );
}

/** `jobs`, `leaders`: resource ids, checked as any resource id is. */
function resourceNames(option: 'jobs' | 'leaders', names: unknown): string[] {
  const what = option === 'jobs' ? 'job' : 'leader';
  if (names === undefined) return [];
  if (!Array.isArray(names))
    throw new InvalidOptionsError(`${option} must be an array of ${what} names, got ${typeof names}`);
  return names.map((name: unknown) => {
    if (typeof name !== 'string') throw new InvalidOptionsError(`${option}: each ${what} name must be a string`);
    resourceKey(name);
    return name;
  });
}

/**
 * `POST /api/release`: refused unless the dashboard allows releases, the request carries the
 * page's token, comes from the page's origin and is JSON; then the grant is released as the operator named.
 */
async function releaseFromPage({ knex, staleAfterMs, allowRelease, token, page }: Served, req: http.IncomingMessage) {
  if (!allowRelease) throw new HttpError(403, 'read-only: start the dashboard with --allow-release to release grants');
  // A cross-site page can send a POST but cannot read the token, send JSON without a preflight,
  // or set a custom header; a browser always names the origin of a cross-site POST.
  const sent = Buffer.from(String(req.headers['x-rwlock-token'] ?? ''));
  if (sent.length !== token.length || !timingSafeEqual(sent, Buffer.from(token)))
    throw new HttpError(403, 'missing or wrong token');
  // The page's origin is the accepted Host it was opened at (checked before any path is served).
  if (
    req.headers.origin !== undefined &&
    req.headers.origin.toLowerCase() !== `http://${String(req.headers.host).toLowerCase()}`
  ) {
    throw new HttpError(403, `cross-origin request from ${req.headers.origin}`);
  }
  if (!/^application\/json\b/.test(String(req.headers['content-type'] ?? '')))
    throw new HttpError(415, 'send application/json');
  const body = await readBody(req, 4096);
  let input: { grantId?: unknown; operator?: unknown; reason?: unknown };
  try {
    input = JSON.parse(body) as typeof input;
  } catch {
    throw new HttpError(400, 'the body is not JSON');
  }
  if (input === null || typeof input !== 'object' || Array.isArray(input))
    throw new HttpError(400, 'the body must be a JSON object: { "grantId": N, "operator": NAME, "reason": TEXT }');
  try {
    const reason =
      typeof input.reason === 'string' && input.reason.trim() !== '' ? input.reason : 'released from the dashboard';
    // Who clicked, as the page asked them: the note records it beside the page's host.
    const as = createLockManager({ knex, staleAfterMs, owner: releaserOf(input.operator, page) });
    return { released: await as.forceRelease(input.grantId as number, { reason }) };
  } catch (err) {
    if (err instanceof InvalidOptionsError) throw new HttpError(400, err.message);
    throw err;
  }
}

/** `NAME via dashboard@HOST`: the name the page asked for, checked, and where it was given. */
function releaserOf(operator: unknown, page: string): string {
  const name = typeof operator === 'string' ? operator.trim() : '';
  if (name === '' || /\p{Cc}/u.test(name))
    throw new InvalidOptionsError(
      `operator: the name of who releases is required (the page asks for it), without control characters`,
    );
  textOption('operator', name, OPERATOR_MAX_CHARS);
  return [...`${name} via ${page}`].slice(0, LIMITS.maxOwnerChars).join('');
}

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1'];
const WILDCARD = ['0.0.0.0', '::'];

/**
 * The Host names the page answers to: the bound address (unless a wildcard), the loopback names
 * when bound to loopback or to all interfaces (loopback reaches it then), and `allowedHosts`.
 * Bad names are refused with InvalidOptionsError before anything listens.
 */
function acceptedHosts(bound: string, allowed: unknown): Set<string> {
  const list = allowed === undefined ? [] : allowed;
  if (!Array.isArray(list))
    throw new InvalidOptionsError(`allowedHosts must be an array of host names, got ${typeof list}`);
  const names = new Set<string>();
  const b = bound.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (!WILDCARD.includes(b)) names.add(b);
  if (WILDCARD.includes(b) || LOOPBACK_NAMES.includes(b)) for (const n of LOOPBACK_NAMES) names.add(n);
  for (const item of list as unknown[]) {
    const name = typeof item === 'string' ? item.toLowerCase().replace(/^\[(.*)\]$/, '$1') : '';
    if (!/^[a-z0-9._-]{1,253}$/.test(name) && !/^(?=.*:.*:)[0-9a-f:.]{2,45}$/.test(name)) {
      throw new InvalidOptionsError(
        `allowedHosts: ${JSON.stringify(item)} is not a host name or address (no port, no scheme)`,
      );
    }
    names.add(name);
  }
  return names;
}

/** The name in a Host header: without the port and the brackets of an IPv6 address, lower case. */
function hostName(header: string | undefined): string {
  return (header ?? '')
    .replace(/:\d+$/, '')
    .replace(/^\[(.*)\]$/, '$1')
    .toLowerCase();
}

function readBody(req: http.IncomingMessage, max: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) reject(new HttpError(413, 'body too large'));
      else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
