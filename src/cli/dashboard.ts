// `mysql-rwlock dashboard`: serves the operator page (src/dashboard/serve.ts) until SIGINT/SIGTERM.
import { DASHBOARD_DEFAULTS, serveDashboard } from '../dashboard/serve.js';
import { EXIT, STALE_AFTER, wholeNumber, type Command } from './command.js';
import { json } from './format.js';

export const DASHBOARD_COMMAND: Command = {
  name: 'dashboard',
  summary:
    'serve the operator page: live holders, permits, waiting writers, jobs, leaders, recent releases, a timeline',
  args: [],
  options: {
    port: {
      type: 'string',
      value: 'N',
      help: `port to listen on (default ${DASHBOARD_DEFAULTS.port}; 0 picks a free one)`,
    },
    host: {
      type: 'string',
      value: 'ADDR',
      help: `address to bind (default ${DASHBOARD_DEFAULTS.host}: this machine only)`,
    },
    'allowed-host': {
      type: 'string',
      multiple: true,
      value: 'NAME',
      help: 'a host name or address the page is opened by, besides loopback names and --host (repeatable); other Host headers get 421',
    },
    job: {
      type: 'string',
      multiple: true,
      value: 'NAME',
      help: 'an exclusive job the Jobs section shows by name (repeatable); node-cron tasks and jobs with lockAtLeastFor are found without',
    },
    leader: {
      type: 'string',
      multiple: true,
      value: 'NAME',
      help: 'a leader name (locks.campaign) the Leaders section shows even when no term leads it (repeatable); names with a leased write grant are found without',
    },
    'allow-release': {
      type: 'boolean',
      help: 'offer a release button on live grants (requests from other sites are refused)',
    },
    ...STALE_AFTER,
  },
  details:
    "Prints the page's URL (with --json: { url, allowRelease }) and serves it until SIGINT or SIGTERM, then exits 0. Read-only unless --allow-release.\n" +
    'The page answers only requests naming an accepted host: --host itself, the loopback names when --host is loopback or 0.0.0.0/::, and each --allowed-host; others get 421.',
  async run({ db, values, repeated, staleAfterMs, json: asJson, io }) {
    const port = wholeNumber('--port', values.port) ?? DASHBOARD_DEFAULTS.port;
    const allowRelease = values['allow-release'] === true;
    const page = await serveDashboard({
      knex: db(),
      port,
      allowRelease,
      ...(typeof values.host === 'string' ? { host: values.host } : {}),
      allowedHosts: repeated['allowed-host'],
      jobs: repeated.job,
      leaders: repeated.leader,
      staleAfterMs,
    });
    io.out(
      asJson
        ? json({ url: page.url, allowRelease })
        : `mysql-rwlock dashboard: ${page.url} (${allowRelease ? 'release enabled' : 'read-only'}); Ctrl-C stops it`,
    );
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
    await page.close();
    return EXIT.done;
  },
};
