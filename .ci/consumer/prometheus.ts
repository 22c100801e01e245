// `import ... from 'mysql-rwlock/prometheus'` as an app writes it: every name the entry exports is
// imported and used (see index.ts beside this file for why and how to update it).
import type { Knex } from 'knex';
import { Registry } from 'prom-client';
import { METRICS, registerLockMetrics, type AcquireOutcome, type LockMetricsOptions } from 'mysql-rwlock/prometheus';

export async function metrics(db: Knex): Promise<string> {
  const options: LockMetricsOptions = { registry: new Registry(), knex: db, staleAfterMs: 600_000 };
  const registered = registerLockMetrics(options);
  const outcome: AcquireOutcome = 'granted';
  const text = await options.registry.getSingleMetricAsString(METRICS.acquireWait);
  registered.unregister();
  return `${outcome} ${text}`;
}
