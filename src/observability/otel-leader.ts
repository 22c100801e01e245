// Leadership in OpenTelemetry, for `instrumentLocks` (otel.ts): a span per term, from its election to
// its end, and a gauge of this process's campaigns by name and state, both from the
// `mysql-rwlock:leader` channel (through campaign-states.ts, as the Prometheus gauge reads it).
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  type Meter,
  type ObservableCallback,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import type { LeaderEvent } from '../lock/leader/channel.js';
import { trackCampaigns } from './campaign-states.js';

/** The span of a term and the gauge of campaigns: their names. */
export const TERM_SPAN = 'rwlock.term';
export const CAMPAIGNS_GAUGE = 'rwlock.campaigns';

/** Ways a term ends that nobody chose: its span's status is ERROR. */
const UNCHOSEN = new Set(['lost', 'expired', 'failed']);

/**
 * Starts the term spans and the campaigns gauge; returns what stops both. A term span is a root
 * span: a term outlives the request that started its campaign, whose trace it would otherwise
 * stretch over hours. The leader name is recorded on both, unlike a lock's resource id: the names
 * an application campaigns for are its own few, and without them neither says anything.
 */
export function instrumentLeadership(tracer: Tracer, meter: Meter): { disable(): void } {
  const open = new Map<number, Span>();
  const onEvent = (m: LeaderEvent): void => {
    if (m.event === 'elected' && m.term !== null) {
      open.get(m.campaign)?.end(); // a term whose end this process missed: it cannot still lead
      const span = tracer.startSpan(
        TERM_SPAN,
        {
          kind: SpanKind.INTERNAL,
          attributes: { 'rwlock.leader.name': m.name, 'rwlock.term.id': m.term, 'rwlock.owner': m.owner },
        },
        ROOT_CONTEXT,
      );
      open.set(m.campaign, span);
    } else if (m.event === 'ended') {
      const span = open.get(m.campaign);
      if (span === undefined) return;
      open.delete(m.campaign);
      span.setAttribute('rwlock.term.ended', m.how ?? 'unknown');
      if (m.how !== undefined && UNCHOSEN.has(m.how))
        span.setStatus({ code: SpanStatusCode.ERROR, message: `term ${m.term} ended: ${m.how}` });
      span.end();
    }
  };
  const campaigns = trackCampaigns(onEvent);
  const gauge = meter.createObservableGauge(CAMPAIGNS_GAUGE, {
    description:
      "This process's campaigns for leadership, by name and state (leading, campaigning); the fleet's count is the sum over its processes",
    unit: '{campaign}',
  });
  const observe: ObservableCallback = (result) => {
    for (const c of campaigns.counts())
      result.observe(c.count, { 'rwlock.leader.name': c.name, 'rwlock.leader.state': c.state });
  };
  gauge.addCallback(observe);
  return {
    disable() {
      gauge.removeCallback(observe);
      campaigns.stop();
    },
  };
}
