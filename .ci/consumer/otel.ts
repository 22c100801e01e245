// `import ... from 'mysql-rwlock/otel'` as an app writes it: every name the entry exports is imported
// and used (see index.ts beside this file for why and how to update it). @opentelemetry/api is the
// app's, an optional peer of mysql-rwlock.
import type { Knex } from 'knex';
import { metrics, trace } from '@opentelemetry/api';
import {
  instrumentLocks,
  SPANS,
  TRACER_NAME,
  type LockInstrumentation,
  type LockInstrumentationOptions,
} from 'mysql-rwlock/otel';

export async function spans(db: Knex): Promise<string> {
  const options: LockInstrumentationOptions = {
    tracerProvider: trace.getTracerProvider(),
    knex: db,
    dbSystem: 'mariadb',
    recordResourceIds: false,
    meterProvider: metrics.getMeterProvider(),
  };
  const handle: LockInstrumentation = instrumentLocks(options);
  await handle.ready;
  handle.disable();
  return `${TRACER_NAME}: ${SPANS.acquire} ${SPANS.hold} ${SPANS.fence} ${SPANS.release} ${SPANS.reap} ${SPANS.term}`;
}
