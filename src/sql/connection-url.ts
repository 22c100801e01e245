// The one parser of connection URLs (MYSQL_URL, the CLI's --url): what the reaper job, the CLI
// and the operator page connect with. Its messages never hold any part of the user or password.
import { InvalidOptionsError } from '../errors.js';

/** What knex (client mysql2) and mysql2 accept as `connection`: decoded, never a URL string. */
export interface MysqlConnection {
  host: string;
  port: number;
  user?: string;
  password?: string;
  database: string;
  /** Query parameters (`?ssl=...&connectTimeout=5000`), read as mysql2 reads them: JSON if it parses, else text. */
  [option: string]: unknown;
}

export interface ParsedConnectionUrl {
  connection: MysqlConnection;
  /** Where it connects, for log lines: `host:port/database`, with no part of the user or password. */
  target: string;
}

export const URL_EXAMPLE = 'mysql://user:password@host:3306/database';

/** Keys a query parameter cannot set: the URL's own parts. */
const URL_PARTS = new Set(['host', 'port', 'user', 'password', 'database']);

/**
 * Parses `mysql://user:password@host:port/database?option=value` (or `mariadb://`). The user and
 * password are everything before the LAST `@`, split at their first `:`; `%` starts
 * percent-encoding (write a literal `%` as `%25`). User, password and database are percent-decoded.
 * A URL that knex, given the same string as `connection`, would read otherwise is refused (see
 * `knexReading`): a password with `/ # ?` unencoded, a database name with percent-encoding. So one
 * MYSQL_URL serves the application's `knex({ connection: url })` and this parser alike. Throws
 * InvalidOptionsError whose message starts with `name` and never repeats any part of what precedes
 * the last `@`.
 *
 * knex would read a string it cannot parse as a sqlite file name, which mysql2 then ignores: a typo
 * would become an anonymous connection to localhost:3306. Hence a checked object, not the string.
 */
export function parseConnectionUrl(raw: string | undefined, name = 'MYSQL_URL'): ParsedConnectionUrl {
  const bad = (what: string): InvalidOptionsError =>
    new InvalidOptionsError(`${name} ${what}; expected ${URL_EXAMPLE}`);
  if (raw === undefined || raw === '') throw new InvalidOptionsError(`${name} is required, e.g. ${URL_EXAMPLE}`);
  const schemeMatch = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(raw);
  const scheme = schemeMatch?.[1]!.toLowerCase();
  if (scheme !== 'mysql' && scheme !== 'mariadb') {
    // What it starts with is not repeated: without a scheme the text may begin `user:password@`.
    throw new InvalidOptionsError(`${name} must start with mysql:// (or mariadb://); e.g. ${URL_EXAMPLE}`);
  }
  const rest = raw.slice(schemeMatch![0].length);
  const at = rest.lastIndexOf('@');
  const userinfo = at < 0 ? undefined : rest.slice(0, at);
  const afterUser = at < 0 ? rest : rest.slice(at + 1);

  const hostPort = /^(\[[0-9A-Fa-f:.]*\]|[^:/?#[\]]*)(?::([^/?#]*))?/.exec(afterUser)!;
  const host = hostPort[1]!.replace(/^\[(.*)\]$/, '$1');
  if (host === '') throw bad('has no host');
  if (!/^[A-Za-z0-9._-]+$/.test(host) && !(hostPort[1]!.startsWith('[') && host.includes(':')))
    throw bad('has a host that is not a host name or address');
  const portText = hostPort[2];
  if (portText !== undefined && !(/^\d{1,5}$/.test(portText) && Number(portText) >= 1 && Number(portText) <= 65535)) {
    throw bad('has a port that is not a number from 1 to 65535');
  }
  const port = portText === undefined ? 3306 : Number(portText);

  let tail = afterUser.slice(hostPort[0].length);
  if (tail.includes('#')) throw bad('has a # after the host (write # in the database name as %23)');
  const q = tail.indexOf('?');
  const search = q < 0 ? '' : tail.slice(q + 1);
  tail = q < 0 ? tail : tail.slice(0, q);
  const path = tail.replace(/^\//, '');
  if (path === '' || path.includes('/')) throw bad('names no database (the path after the host)');

  const decode = (text: string, what: string): string => {
    try {
      return decodeURIComponent(text);
    } catch {
      throw new InvalidOptionsError(`${name} has ${what} that is not valid percent-encoding (write % as %25)`);
    }
  };
  const database = decode(path, 'a database name');
  const connection: MysqlConnection = { host, port, database };
  for (const [key, value] of new URLSearchParams(search)) {
    if (URL_PARTS.has(key)) continue;
    try {
      connection[key] = JSON.parse(value) as unknown;
    } catch {
      connection[key] = value;
    }
  }
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(':');
    const user = decode(colon < 0 ? userinfo : userinfo.slice(0, colon), 'a user or password');
    const password = colon < 0 ? undefined : decode(userinfo.slice(colon + 1), 'a user or password');
    if (user !== '') connection.user = user;
    if (password !== undefined && password !== '') connection.password = password;
  }
  const differing = partsKnexReadsOtherwise(raw, connection);
  if (differing.length > 0) {
    throw new InvalidOptionsError(
      `${name} is read otherwise by knex({ connection: url }) (its ${differing.join(', ')}): ` +
        'percent-encode / # ? in the user and password (# as %23, / as %2F, ? as %3F), and name a database ' +
        'that needs no percent-encoding, so that the application and this tool connect alike',
    );
  }
  return { connection, target: `${hostPort[1]}:${port}/${database}` };
}

/** The parts of a connection knex and mysql2 read. */
type KnexRead = { host?: string; port?: string; user?: string; password?: string; database: string };

/**
 * What knex 3 makes of a connection URL string given as `connection` (its parse-connection: the
 * WHATWG URL parser, user and password percent-decoded, the database name as written), or null
 * where it reads none (knex then takes the string for a sqlite file name, and mysql2 connects
 * to localhost anonymously) or throws. test/connection-url.test.ts holds it to the real knex.
 */
export function knexReading(raw: string): KnexRead | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  try {
    return {
      database: url.pathname.replace(/^\//, ''),
      ...(url.hostname ? { host: url.hostname } : {}),
      ...(url.port ? { port: url.port } : {}),
      ...(url.username || url.password ? { user: decodeURIComponent(url.username) } : {}),
      ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    };
  } catch {
    return null;
  }
}

/** The names of the parts knex reads otherwise than `ours`; none of their values. */
function partsKnexReadsOtherwise(raw: string, ours: MysqlConnection): string[] {
  const theirs = knexReading(raw);
  if (theirs === null) return ['every part: knex finds no URL in it and connects to localhost without a user'];
  const parts: Array<[string, boolean]> = [
    ['host', (theirs.host ?? '').replace(/^\[(.*)\]$/, '$1') === ours.host],
    ['port', (theirs.port === undefined ? 3306 : Number(theirs.port)) === ours.port],
    ['user', (theirs.user ?? '') === (ours.user ?? '')],
    ['password', (theirs.password ?? '') === (ours.password ?? '')],
    ['database', theirs.database === ours.database],
  ];
  return parts.filter(([, same]) => !same).map(([part]) => part);
}

/**
 * The password of a connection URL as written and as decoded, for scrubbing messages of other
 * origins (a driver's error) before they are printed; split as parseConnectionUrl splits it, and
 * found even when the URL is otherwise invalid. Empty when there is none.
 */
export function connectionSecrets(raw: string | undefined): string[] {
  const rest = raw?.replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\//, '') ?? '';
  const at = rest.lastIndexOf('@');
  if (at < 0) return [];
  const userinfo = rest.slice(0, at);
  const colon = userinfo.indexOf(':');
  const written = colon < 0 ? '' : userinfo.slice(colon + 1);
  let decoded = written;
  try {
    decoded = decodeURIComponent(written);
  } catch {
    // not valid percent-encoding: parseConnectionUrl refuses it; the text as written is scrubbed
  }
  return [...new Set([written, decoded, encodeURIComponent(decoded)])].filter((s) => s !== '');
}
