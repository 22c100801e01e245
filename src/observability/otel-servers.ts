// The server and database an OpenTelemetry span names (`db.system.name`, `server.address`,
// `server.port`, `db.namespace`): those of the knex the call that made it ran on, each knex
// described once, its server's kind asked once.
import { context as otelContext, ROOT_CONTEXT, type Attributes, type Span } from '@opentelemetry/api';
import type { Knex } from 'knex';
import type { Grant } from '../contract/api.js';
import { parseConnectionUrl } from '../sql/connection-url.js';
import { query, withConnection } from '../sql/connection.js';

/** A server as its spans name it: from one knex's settings, and its kind once asked. */
export interface SpanServer {
  readonly attributes: Attributes;
  system: string | undefined;
  /** Settles when `system` is known, or its lookup failed. */
  known: Promise<void>;
}

export class SpanServers {
  readonly #byKnex = new WeakMap<Knex, SpanServer>();
  readonly #byGrant = new WeakMap<Grant, SpanServer>();
  readonly #lookups = new Set<Promise<void>>();

  /**
   * @param system `db.system.name` of every server, instead of asking each.
   * @param fallback The knex of a call that names none.
   */
  constructor(
    readonly system: string | undefined,
    readonly fallback: Knex | undefined,
  ) {
    if (fallback !== undefined) this.of(fallback);
  }

  /** The server of a call: its own knex's, else its grant's (from the acquire that made it), else the fallback's. */
  ofCall(knex: Knex | undefined, grant?: Grant): SpanServer | undefined {
    if (knex !== undefined) return this.of(knex);
    return (grant && this.#byGrant.get(grant)) ?? (this.fallback === undefined ? undefined : this.of(this.fallback));
  }

  /** Remembers a grant's server, for the contexts of that grant that name no knex. */
  granted(grant: Grant, server: SpanServer | undefined): void {
    if (server !== undefined) this.#byGrant.set(grant, server);
  }

  /** Settles when every lookup started so far has. */
  ready(): Promise<void> {
    return Promise.all(this.#lookups).then(() => undefined);
  }

  of(knex: Knex): SpanServer {
    let server = this.#byKnex.get(knex);
    if (server !== undefined) return server;
    const described: SpanServer = { attributes: serverAttributes(knex), system: this.system, known: Promise.resolve() };
    if (described.system === undefined) {
      const known = detectSystem(knex).then(
        (system) => void (described.system = system),
        () => undefined,
      );
      this.#lookups.add(known);
      void known.then(() => this.#lookups.delete(known));
      described.known = known;
    }
    server = described;
    this.#byKnex.set(knex, server);
    return server;
  }
}

/** The attributes a span starts with: the server's kind once known, its address, port and database. */
export function serverAttributesOf(server: SpanServer | undefined): Attributes {
  if (server === undefined) return {};
  return server.system === undefined ? server.attributes : { 'db.system.name': server.system, ...server.attributes };
}

/**
 * Ends a span with its server's kind: now when known, else when the lookup answers, at the time of
 * now (a span ends once, and an exporter reads its attributes when it ends).
 */
export function endWithServer(span: Span, server: SpanServer | undefined): void {
  if (server === undefined || server.system !== undefined) {
    if (server?.system !== undefined) span.setAttribute('db.system.name', server.system);
    span.end();
    return;
  }
  const endedAt = performance.now();
  void server.known.then(() => {
    if (server.system !== undefined) span.setAttribute('db.system.name', server.system);
    span.end(endedAt);
  });
}

/** `server.address`, `server.port` and `db.namespace` from knex's connection settings, when they are plain. */
function serverAttributes(knex: Knex): Attributes {
  let connection = (knex.client as { config?: { connection?: unknown } }).config?.connection;
  if (typeof connection === 'string') {
    try {
      connection = parseConnectionUrl(connection).connection;
    } catch {
      return {};
    }
  }
  if (typeof connection !== 'object' || connection === null) return {};
  const c = connection as { host?: unknown; port?: unknown; database?: unknown; socketPath?: unknown };
  const out: Attributes = {};
  if (typeof c.socketPath === 'string') out['server.address'] = c.socketPath;
  else {
    out['server.address'] = typeof c.host === 'string' ? c.host : 'localhost';
    out['server.port'] = typeof c.port === 'number' ? c.port : Number(c.port ?? 3306);
  }
  if (typeof c.database === 'string') out['db.namespace'] = c.database;
  return out;
}

/**
 * Asks the server its kind, on a pool connection past knex's query builder (so knex's own
 * instrumentation makes no span of it), outside the caller's trace.
 */
function detectSystem(knex: Knex): Promise<'mysql' | 'mariadb'> {
  return otelContext.with(ROOT_CONTEXT, () =>
    withConnection(knex, async (conn) => {
      const [row] = await query<Array<{ v: string }>>(conn, 'SELECT VERSION() AS v');
      return /mariadb/i.test(row?.v ?? '') ? 'mariadb' : 'mysql';
    }),
  );
}
