// The operator page: one HTML document with its CSS and script inline (no build step, no CDN),
// drawing with plain DOM and SVG. Every text from the database goes in through textContent or
// attribute setters, never as markup. Times are placed against the database clock the server sends.
// The stylesheet is in page-style.ts, the script in page-script.ts (the Leaders section's in
// page-script-leaders.ts).
import { SCRIPT } from './page-script.js';
import { LEADERS_SCRIPT } from './page-script-leaders.js';
import { CSS } from './page-style.js';

export interface PageConfig {
  /** The per-start release token; null: read-only (no release buttons). */
  token: string | null;
  database: string;
  staleAfterMs: number;
  windows: readonly number[];
  /** The longest operator name and reason a release takes, in characters. */
  maxChars: { operator: number; reason: number };
}

/** JSON safe inside a <script> element. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

export function renderPage(config: PageConfig): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mysql-rwlock · locks</title>
<style>${CSS}</style>
</head>
<body>
<header>
  <div class="brand">
    <svg width="22" height="22" viewBox="0 0 24 24" aria-hidden="true"><rect x="4" y="10" width="16" height="11" rx="2" fill="#f5a524"/><path d="M8 10V7a4 4 0 0 1 8 0v3" fill="none" stroke="#d6dde6" stroke-width="2"/></svg>
    <span class="name">mysql-rwlock</span><span class="db" id="db"></span>
  </div>
  <div class="right">
    <span id="mode-badge" class="badge"></span>
    <span class="updated"><span id="dot" class="dot"></span><span id="updated">connecting…</span></span>
  </div>
</header>
<div id="error" class="error" hidden></div>
<main>
  <section class="cards" id="cards"></section>
  <section class="panel">
    <div class="panel-head">
      <h2>Timeline <span class="muted" id="tl-caption"></span></h2>
      <div class="controls">
        <input id="resource" list="resources" placeholder="resource id (blank: busiest)" spellcheck="false" autocomplete="off">
        <datalist id="resources"></datalist>
        <button id="busiest" type="button">Busiest</button>
        <span class="seg" id="windows"></span>
      </div>
    </div>
    <div class="legend">
      <span><i class="sw write"></i>write</span><span><i class="sw read"></i>read</span><span><i class="sw permit"></i>permit (semaphore)</span>
      <span><i class="sw live"></i>live (to now)</span><span><i class="sw stale"></i>stale</span>
      <span><i class="sw reaped"></i>reaped</span><span><i class="sw operator"></i>released by an operator</span>
    </div>
    <p class="fold-note muted">The fires of a node-cron task share one lane, and an exclusive job's <span class="mono">#run</span> grants share its lane: the line under the name says so.</p>
    <div class="tl-wrap"><svg id="timeline" width="100%" height="60" role="img" aria-label="Timeline of grants"></svg></div>
    <div id="tip" class="tip" hidden></div>
  </section>
  <section class="panel" id="jobs-panel">
    <div class="panel-head"><h2>Jobs <span class="muted" id="jobs-caption"></span></h2></div>
    <div class="scroll"><table id="jobs" class="fixed"><colgroup><col style="width:92px"><col><col style="width:120px"><col style="width:190px"><col><col style="width:84px"><col style="width:190px"><col style="width:64px"><col style="width:70px"></colgroup><thead><tr><th>kind</th><th>job</th><th>last run</th><th>outcome</th><th>holder</th><th class="num">held</th><th>next fire</th><th class="num">runs</th><th class="num">reaped</th></tr></thead><tbody></tbody></table></div>
    <p class="empty" id="jobs-empty" hidden>No node-cron task or exclusive job in the last day. Exclusive jobs without <span class="mono">lockAtLeastFor</span> are shown when named (<span class="mono">--job NAME</span>).</p>
  </section>
  <section class="panel" id="leaders-panel">
    <div class="panel-head"><h2>Leaders <span class="muted" id="leaders-caption"></span></h2></div>
    <div class="scroll"><table id="leaders" class="fixed"><colgroup><col style="width:18%"><col style="width:22%"><col style="width:84px"><col style="width:90px"><col style="width:170px"><col></colgroup><thead><tr><th>name</th><th>leader</th><th>term</th><th class="num">since</th><th class="num">lease</th><th>earlier terms (newest first)</th></tr></thead><tbody></tbody></table></div>
    <p class="empty" id="leaders-empty" hidden>No leader names: no live write grant holds a lease. A name with no term leading is shown when named (<span class="mono">--leader NAME</span>).</p>
    <p class="fold-note muted" style="margin:8px 0 0">A name's writer-intent mark says a campaigner waits; who waits is in no database: each process's campaigns gauge counts its own (<span class="mono">mysql_rwlock_campaigns</span>).</p>
  </section>
  <div class="grid">
    <section class="panel">
      <div class="panel-head"><h2>Live holders <span class="muted" id="live-count"></span></h2></div>
      <div class="scroll"><table id="live" class="fixed"><colgroup><col style="width:76px"><col><col style="width:112px"><col><col style="width:84px"><col style="width:170px"><col style="width:100px"></colgroup><thead><tr><th>grant</th><th>resource</th><th>mode</th><th>owner</th><th class="num">age</th><th>state</th><th></th></tr></thead><tbody></tbody></table></div>
      <p class="empty" id="live-empty" hidden>No live grants.</p>
    </section>
    <section class="panel">
      <div class="panel-head"><h2>Recent reaper and operator releases</h2></div>
      <div class="scroll"><table id="releases" class="fixed"><colgroup><col style="width:96px"><col style="width:76px"><col style="width:24%"><col style="width:76px"><col style="width:100px"><col style="width:80px"><col></colgroup><thead><tr><th>released</th><th>grant</th><th>resource</th><th>mode</th><th>by</th><th class="num">held</th><th>reason</th></tr></thead><tbody></tbody></table></div>
      <p class="empty" id="releases-empty" hidden>None yet: every grant so far was released by its holder.</p>
    </section>
  </div>
</main>
<dialog id="release-dialog" aria-labelledby="release-title">
  <h3 id="release-title"></h3>
  <p class="muted">Its holder's commit will be refused. The release is recorded with your name and reason.</p>
  <label for="release-operator">Your name</label>
  <input id="release-operator" autocomplete="name" spellcheck="false">
  <p id="release-hint" class="hint" hidden>Say who releases: the name is recorded with the release.</p>
  <label for="release-reason">Reason</label>
  <textarea id="release-reason" rows="3"></textarea>
  <div class="actions"><button id="release-cancel" type="button">Cancel</button><button id="release-confirm" class="release" type="button">Release</button></div>
</dialog>
<script type="application/json" id="config">${scriptJson(config)}</script>
<script>${SCRIPT}${LEADERS_SCRIPT}</script>
</body>
</html>`;
}
