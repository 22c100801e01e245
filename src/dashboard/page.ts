// The operator page: one HTML document with its CSS and script inline (no build step, no CDN),
// drawing with plain DOM and SVG. Every text from the database goes in through textContent or
// attribute setters, never as markup. Times are placed against the database clock the server sends.

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
      <span><i class="sw write"></i>write</span><span><i class="sw read"></i>read</span>
      <span><i class="sw live"></i>live (to now)</span><span><i class="sw stale"></i>stale</span>
      <span><i class="sw reaped"></i>reaped</span><span><i class="sw operator"></i>released by an operator</span>
    </div>
    <div class="tl-wrap"><svg id="timeline" width="100%" height="60" role="img" aria-label="Timeline of grants"></svg></div>
    <div id="tip" class="tip" hidden></div>
  </section>
  <div class="grid">
    <section class="panel">
      <div class="panel-head"><h2>Live holders <span class="muted" id="live-count"></span></h2></div>
      <div class="scroll"><table id="live" class="fixed"><colgroup><col style="width:76px"><col><col style="width:76px"><col><col style="width:84px"><col style="width:170px"><col style="width:100px"></colgroup><thead><tr><th>grant</th><th>resource</th><th>mode</th><th>owner</th><th class="num">age</th><th>state</th><th></th></tr></thead><tbody></tbody></table></div>
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
<script>${SCRIPT}</script>
</body>
</html>`;
}

const CSS = `
:root { --bg:#0e1217; --panel:#151b23; --line:#242e3b; --text:#d9e0e8; --muted:#8795a7; --write:#f5a524; --read:#4c9aff; --permit:#3ecf8e;
  --stale:#f0506e; --reaped:#f0506e; --operator:#b18cff; --ok:#3ecf8e; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--text); font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Ubuntu,sans-serif; }
header { display:flex; justify-content:space-between; align-items:center; padding:12px 24px; border-bottom:1px solid var(--line); background:#11161d; position:sticky; top:0; z-index:2; }
.brand { display:flex; align-items:center; gap:10px; } .brand .name { font-weight:650; font-size:16px; letter-spacing:.2px; }
.db { color:var(--muted); font-family:ui-monospace,SFMono-Regular,Menlo,monospace; font-size:12.5px; padding-left:10px; border-left:1px solid var(--line); }
.right { display:flex; align-items:center; gap:14px; color:var(--muted); font-size:12.5px; }
.badge { font-size:11.5px; padding:2px 8px; border-radius:10px; border:1px solid var(--line); color:var(--muted); }
.badge.rw { color:#ffd08a; border-color:#6b4b12; background:#2a1f0c; }
.dot { display:inline-block; width:8px; height:8px; border-radius:50%; background:var(--muted); margin-right:6px; vertical-align:1px; }
.dot.ok { background:var(--ok); box-shadow:0 0 0 3px rgba(62,207,142,.15); } .dot.bad { background:var(--stale); }
.error { margin:12px 24px 0; padding:10px 14px; border:1px solid #6b2332; background:#2a1218; color:#ffb3c1; border-radius:8px; }
main { padding:18px 24px 32px; display:flex; flex-direction:column; gap:18px; }
.cards { display:grid; grid-template-columns:repeat(6,minmax(0,1fr)); gap:12px; }
.card { background:var(--panel); border:1px solid var(--line); border-radius:10px; padding:12px 14px; }
.card .label { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.6px; }
.card .value { font-size:26px; font-weight:650; margin-top:2px; font-variant-numeric:tabular-nums; }
.card .sub { color:var(--muted); font-size:12px; }
.card.warn { border-color:#6b4b12; } .card.warn .value { color:var(--write); }
.card.alert { border-color:#6b2332; background:#1d1217; } .card.alert .value { color:var(--stale); }
.panel { background:var(--panel); border:1px solid var(--line); border-radius:10px; padding:14px 16px; min-width:0; }
.panel-head { display:flex; justify-content:space-between; align-items:center; gap:12px; flex-wrap:wrap; margin-bottom:8px; }
h2 { font-size:14px; margin:0; font-weight:620; } .muted { color:var(--muted); font-weight:400; }
.controls { display:flex; gap:8px; align-items:center; }
input { background:#0e1217; border:1px solid var(--line); color:var(--text); border-radius:6px; padding:5px 9px; width:250px; font:12.5px ui-monospace,Menlo,monospace; }
button { background:#1c2430; border:1px solid var(--line); color:var(--text); border-radius:6px; padding:4px 10px; font:inherit; font-size:12.5px; cursor:pointer; }
button:hover { border-color:#3b4a5e; } button.on { background:#22406b; border-color:#3d6bb0; color:#fff; }
.seg { display:inline-flex; } .seg button { border-radius:0; margin-left:-1px; } .seg button:first-child { border-radius:6px 0 0 6px; } .seg button:last-child { border-radius:0 6px 6px 0; }
.legend { display:flex; gap:16px; color:var(--muted); font-size:12px; margin:2px 0 8px; flex-wrap:wrap; }
.sw { display:inline-block; width:18px; height:9px; border-radius:2px; margin-right:6px; vertical-align:-1px; }
.sw.write { background:var(--write); } .sw.read { background:var(--read); }
.sw.live { background:linear-gradient(90deg,var(--read) 70%,#fff 70%,#fff 80%,var(--read) 80%); }
.sw.stale { background:var(--write); outline:2px solid var(--stale); outline-offset:0; }
.sw.reaped { background:repeating-linear-gradient(135deg,var(--write) 0 3px,var(--reaped) 3px 6px); }
.sw.operator { background:var(--read); box-shadow:inset -4px 0 0 var(--operator); }
.tl-wrap { overflow:hidden; } svg text { fill:var(--muted); font-size:11px; font-family:system-ui,sans-serif; }
svg .lane-label { fill:var(--text); font-family:ui-monospace,Menlo,monospace; font-size:11.5px; cursor:pointer; }
svg .lane-label:hover { fill:#fff; text-decoration:underline; }
svg .bar { cursor:default; } svg .bar.write { fill:var(--write); } svg .bar.read { fill:var(--read); } svg .bar.permit { fill:var(--permit); }
svg .bar.ended-holder { opacity:.78; } svg .bar.stale { stroke:var(--stale); stroke-width:2; }
svg .bar.ended-reaper { fill:url(#hatch-write); } svg .bar.read.ended-reaper, svg .bar.permit.ended-reaper { fill:url(#hatch-read); }
svg .bar.ended-operator { stroke:var(--operator); stroke-width:1.5; stroke-dasharray:3 2; }
svg .cap-reaper { fill:var(--reaped); } svg .cap-operator { fill:var(--operator); } svg .cap-live { fill:#fff; }
svg .grid-line { stroke:#1f2833; } svg .now-line { stroke:#9fb0c4; stroke-dasharray:2 3; } svg .lane-bg { fill:#121820; }
.tip { position:fixed; pointer-events:none; background:#0b0f14; border:1px solid #34404f; border-radius:6px; padding:7px 9px; font-size:12px; max-width:360px; z-index:5; box-shadow:0 6px 18px rgba(0,0,0,.45); white-space:pre-line; }
/* One table above the other: side by side, each would be too narrow for its ids, owners and reasons. */
.grid { display:grid; grid-template-columns:minmax(0,1fr); gap:18px; }
table { width:100%; border-collapse:collapse; font-size:12.5px; }
th { text-align:left; color:var(--muted); font-weight:500; font-size:11.5px; text-transform:uppercase; letter-spacing:.5px; padding:6px 8px; border-bottom:1px solid var(--line); }
td { padding:6px 8px; border-bottom:1px solid #1c242f; white-space:nowrap; overflow:hidden; text-overflow:ellipsis; max-width:260px; }
/* Fixed columns that fit the panel: long ids, owners and reasons wrap, and the last column (the
   release button) never scrolls out of view. */
table.fixed { table-layout:fixed; } table.fixed td { white-space:normal; overflow-wrap:break-word; max-width:none; vertical-align:top; }
table.fixed .pill, table.fixed .tag, td .release { white-space:nowrap; }
td.mono, .mono { font-family:ui-monospace,SFMono-Regular,Menlo,monospace; font-size:12px; } .num { text-align:right; font-variant-numeric:tabular-nums; }
tr.stale td { background:#22121a; } tr.stale td:first-child { box-shadow:inset 3px 0 0 var(--stale); }
a.res { color:var(--text); text-decoration:none; border-bottom:1px dotted #4a5a70; cursor:pointer; } a.res:hover { color:#fff; }
.pill { display:inline-block; padding:0 7px; border-radius:9px; font-size:11.5px; font-weight:600; }
.pill.write { background:#3a2a0c; color:var(--write); } .pill.read { background:#0f2644; color:var(--read); } .pill.permit { background:#0d3326; color:var(--permit); }
.tag { display:inline-block; padding:0 6px; border-radius:4px; font-size:11px; font-weight:650; letter-spacing:.3px; margin-right:4px; }
.tag.stale, .tag.reaper { background:#3b1420; color:#ff8aa0; } .tag.waiting { background:#3a2a0c; color:#ffc266; } .tag.operator { background:#281c45; color:#cdb4ff; } .tag.lease { background:#102a22; color:#6fe0b1; } .tag.section { background:#0f2238; color:#8cc8ff; }
button.release { padding:1px 8px; font-size:11.5px; color:#ffb3c1; border-color:#6b2332; background:#22121a; }
.empty { color:var(--muted); margin:10px 8px; } .scroll { overflow-x:auto; }
svg .lane-wait { fill:#ffc266; font-size:10.5px; }
dialog { background:var(--panel); color:var(--text); border:1px solid #34404f; border-radius:10px; padding:16px 18px; width:min(520px,92vw); box-shadow:0 12px 40px rgba(0,0,0,.6); }
dialog::backdrop { background:rgba(5,8,12,.6); }
dialog h3 { margin:0 0 6px; font-size:14px; overflow-wrap:anywhere; } dialog p { margin:0 0 10px; font-size:12.5px; }
dialog label { display:block; color:var(--muted); font-size:12px; margin:8px 0 4px; }
dialog input, dialog textarea { width:100%; background:#0e1217; border:1px solid var(--line); color:var(--text); border-radius:6px; padding:6px 9px; font:13px system-ui,sans-serif; }
dialog .hint { color:#ffb3c1; margin:6px 0 0; } dialog .actions { display:flex; justify-content:flex-end; gap:8px; margin-top:14px; }
@media (max-width:1100px) { .cards { grid-template-columns:repeat(3,minmax(0,1fr)); } }
@media (min-width:2000px) { .grid { grid-template-columns:minmax(0,1.1fr) minmax(0,1fr); } }
`;

// The page's script: no template literals inside, so it sits in this file's template as it is.
const SCRIPT = `
'use strict';
var CFG = JSON.parse(document.getElementById('config').textContent);
var POLL_MS = 2000;
var state = { resource: '', windowMs: CFG.windows[2], live: [], staleIds: new Set(), waiting: new Set() };
var SVGNS = 'http://www.w3.org/2000/svg';

function $(id) { return document.getElementById(id); }
function el(tag, attrs, kids) {
  var e = document.createElement(tag);
  for (var k in attrs || {}) { if (k === 'text') e.textContent = attrs[k]; else if (k === 'class') e.className = attrs[k]; else e.setAttribute(k, attrs[k]); }
  (kids || []).forEach(function (c) { if (c != null) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
  return e;
}
function sv(tag, attrs, text) {
  var e = document.createElementNS(SVGNS, tag);
  for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text != null) e.textContent = text;
  return e;
}
function dur(ms) {
  if (ms == null || isNaN(ms)) return '—';
  if (ms < 1000) return Math.round(ms) + ' ms';
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
  if (ms < 3600000) return Math.floor(ms / 60000) + 'm ' + String(Math.floor(ms / 1000) % 60).padStart(2, '0') + 's';
  if (ms < 86400000) return Math.floor(ms / 3600000) + 'h ' + String(Math.floor(ms / 60000) % 60).padStart(2, '0') + 'm';
  return Math.floor(ms / 86400000) + 'd ' + (Math.floor(ms / 3600000) % 24) + 'h';
}
function clock(t, ms) {
  var d = new Date(t);
  var s = String(d.getHours()).padStart(2, '0') + ':' + String(d.getMinutes()).padStart(2, '0') + ':' + String(d.getSeconds()).padStart(2, '0');
  return ms ? s + '.' + String(d.getMilliseconds()).padStart(3, '0') : s;
}
function windowLabel(ms) { return ms < 3600000 ? (ms / 60000) + ' min' : (ms / 3600000) + ' h'; }

$('db').textContent = CFG.database;
$('release-operator').maxLength = CFG.maxChars.operator;
$('release-reason').maxLength = CFG.maxChars.reason;
$('mode-badge').textContent = CFG.token ? 'release enabled' : 'read-only';
$('mode-badge').className = 'badge ' + (CFG.token ? 'rw' : 'ro');

CFG.windows.forEach(function (ms) {
  var b = el('button', { type: 'button', text: ms < 3600000 ? (ms / 60000) + 'm' : (ms / 3600000) + 'h', 'data-window': String(ms) });
  b.onclick = function () { state.windowMs = ms; markWindow(); refresh(); };
  $('windows').appendChild(b);
});
function markWindow() {
  Array.prototype.forEach.call($('windows').children, function (b) { b.classList.toggle('on', Number(b.getAttribute('data-window')) === state.windowMs); });
}
markWindow();
function showResource(id) { state.resource = id; $('resource').value = id; refresh(); }
$('resource').addEventListener('change', function () { showResource($('resource').value.trim()); });
$('resource').addEventListener('keydown', function (e) { if (e.key === 'Enter') showResource($('resource').value.trim()); });
$('busiest').onclick = function () { showResource(''); };

function card(label, value, sub, level) {
  return el('div', { class: 'card' + (level ? ' ' + level : '') }, [el('div', { class: 'label', text: label }), el('div', { class: 'value', text: String(value) }), el('div', { class: 'sub', text: sub || '\\u00a0' })]);
}
function drawCards(s) {
  var c = $('cards');
  c.replaceChildren(
    card('Write held', s.live.write, 'exclusive grants'),
    card('Read held', s.live.read, 'shared grants'),
    card('Stale', s.stale, 'older than ' + dur(s.staleAfterMs) + ', no lease', s.stale > 0 ? 'alert' : ''),
    card('Writers waiting', s.waitingWriters, 'held resources a writer waits for', s.waitingWriters > 0 ? 'warn' : ''),
    card('Oldest grant', s.oldestAgeMs == null ? '—' : dur(s.oldestAgeMs), s.leased + ' under an extended lease'),
    card('Released, last hour', s.lastHour.reaped + s.lastHour.operator, s.lastHour.reaped + ' by the reaper · ' + s.lastHour.operator + ' by operators', s.lastHour.reaped + s.lastHour.operator > 0 ? 'warn' : ''));
}

function resLink(id) {
  var a = el('a', { class: 'res mono', text: id, title: 'show on the timeline' });
  a.onclick = function () { showResource(id); window.scrollTo({ top: 0, behavior: 'smooth' }); };
  return a;
}
function drawLive(grants, truncated) {
  var body = $('live').tBodies[0];
  $('live-count').textContent = '(' + grants.length + (truncated ? '+' : '') + ')';
  $('live-empty').hidden = grants.length > 0;
  var list = $('resources');
  var seen = new Set(); // not an object: ids such as __proto__ or constructor are ids like any other
  list.replaceChildren();
  body.replaceChildren.apply(body, grants.map(function (g) {
    if (!seen.has(g.resourceId)) { seen.add(g.resourceId); list.appendChild(el('option', { value: g.resourceId })); }
    var tags = [];
    if (g.section) tags.push(el('span', { class: 'tag section', text: 'section in progress' }));
    if (g.stale) tags.push(el('span', { class: 'tag stale', text: 'STALE' }));
    if (g.writerWaiting) tags.push(el('span', { class: 'tag waiting', text: 'writer waiting' }));
    if (g.leaseUntil) tags.push(el('span', { class: 'tag lease', text: 'lease to ' + clock(Date.parse(g.leaseUntil)) }));
    var action = null;
    if (CFG.token && !g.section) {
      action = el('button', { class: 'release', type: 'button', text: 'Release…' });
      action.onclick = function () { release(g); };
    }
    return el('tr', { class: g.stale ? 'stale' : '', 'data-grant-id': String(g.id) }, [
      el('td', { class: 'mono', text: '#' + g.id }),
      el('td', {}, [resLink(g.resourceId)]),
      el('td', {}, [el('span', { class: 'pill ' + g.mode, text: g.mode })]),
      el('td', { class: 'mono', text: g.owner, title: g.owner }),
      el('td', { class: 'num', text: dur(g.ageMs) }),
      el('td', {}, tags.length ? tags : ['ok']),
      el('td', {}, [action]),
    ]);
  }));
}
function drawReleases(rows, now) {
  var body = $('releases').tBodies[0];
  $('releases-empty').hidden = rows.length > 0;
  body.replaceChildren.apply(body, rows.map(function (r) {
    var at = Date.parse(r.releasedAt);
    var held = r.createTime ? at - Date.parse(r.createTime) : null;
    return el('tr', { 'data-grant-id': String(r.grantId) }, [
      el('td', { title: clock(at, true) + ' (database clock)', text: dur(now - at) + ' ago' }),
      el('td', { class: 'mono', text: '#' + r.grantId }),
      el('td', {}, [r.resourceId == null ? '(purged)' : resLink(r.resourceId)]),
      el('td', {}, [r.mode ? el('span', { class: 'pill ' + r.mode, text: r.mode }) : '—']),
      el('td', {}, [el('span', { class: 'tag ' + r.releasedBy, text: r.releasedBy, title: r.releaser ? 'by ' + r.releaser : '' })]),
      el('td', { class: 'num', text: dur(held) }),
      el('td', { class: 'reason', text: r.reason || '', title: r.reason || '' }),
    ]);
  }));
}

function niceStep(windowMs) {
  var steps = [1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5, 18e5, 36e5, 72e5, 108e5, 216e5];
  for (var i = 0; i < steps.length; i++) if (windowMs / steps[i] <= 8) return steps[i];
  return steps[steps.length - 1];
}
function drawTimeline(t) {
  var svg = $('timeline');
  var W = Math.max(600, svg.clientWidth || svg.parentNode.clientWidth || 1000);
  var labelW = 190, right = 14, top = 24, rowH = 13, barH = 9, lanePad = 8;
  var plotW = W - labelW - right;
  var now = Date.parse(t.now), from = now - t.windowMs;
  function x(ms) { return labelW + Math.max(0, Math.min(1, (ms - from) / t.windowMs)) * plotW; }
  var laneRows = t.lanes.map(function (lane) {
    var ends = [];
    return lane.grants.map(function (g) {
      var s = Date.parse(g.createTime), e = g.releasedAt ? Date.parse(g.releasedAt) : now;
      var r = 0;
      while (r < ends.length && ends[r] > s) r++;
      ends[r] = e;
      return { g: g, s: s, e: e, row: r };
    });
  });
  var height = top + 6;
  var laneTops = laneRows.map(function (bars) {
    var rows = bars.reduce(function (m, b) { return Math.max(m, b.row + 1); }, 1);
    var y = height; height += Math.min(rows, 12) * rowH + lanePad * 2; return { y: y, h: Math.min(rows, 12) * rowH + lanePad * 2 };
  });
  height = Math.max(height + 4, 70);
  svg.setAttribute('height', String(height));
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + height);
  svg.replaceChildren();
  var defs = sv('defs');
  [['hatch-write', '#f5a524'], ['hatch-read', '#4c9aff']].forEach(function (p) {
    var pat = sv('pattern', { id: p[0], width: '6', height: '6', patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' });
    pat.appendChild(sv('rect', { width: '6', height: '6', fill: p[1] }));
    pat.appendChild(sv('rect', { width: '3', height: '6', fill: '#f0506e' }));
    defs.appendChild(pat);
  });
  svg.appendChild(defs);
  laneTops.forEach(function (l, i) { if (i % 2 === 0) svg.appendChild(sv('rect', { class: 'lane-bg', x: '0', y: String(l.y), width: String(W), height: String(l.h) })); });
  var step = niceStep(t.windowMs);
  for (var tick = Math.ceil(from / step) * step; tick <= now; tick += step) {
    svg.appendChild(sv('line', { class: 'grid-line', x1: String(x(tick)), x2: String(x(tick)), y1: String(top - 4), y2: String(height) }));
    if (x(now) - x(tick) > 44) svg.appendChild(sv('text', { x: String(x(tick)), y: '14', 'text-anchor': 'middle' }, clock(tick)));
  }
  svg.appendChild(sv('line', { class: 'now-line', x1: String(x(now)), x2: String(x(now)), y1: String(top - 4), y2: String(height) }));
  svg.appendChild(sv('text', { x: String(x(now) - 2), y: '14', 'text-anchor': 'end' }, 'now'));
  if (t.lanes.length === 0) {
    svg.appendChild(sv('text', { x: String(labelW + plotW / 2), y: '48', 'text-anchor': 'middle' }, state.resource ? 'No grants on this resource in the last ' + windowLabel(t.windowMs) + '.' : 'No grants in the last ' + windowLabel(t.windowMs) + '.'));
  }
  t.lanes.forEach(function (lane, i) {
    var lt = laneTops[i];
    var shown = lane.resourceId.length > 26 ? lane.resourceId.slice(0, 25) + '\\u2026' : lane.resourceId;
    var waits = state.waiting.has(lane.resourceId);
    var label = sv('text', { class: 'lane-label', x: '8', y: String(lt.y + lt.h / 2 + (waits ? -1 : 4)) }, shown);
    label.appendChild(sv('title', {}, lane.resourceId + ' (' + lane.grants.length + ' grants)'));
    label.addEventListener('click', function () { showResource(lane.resourceId); });
    svg.appendChild(label);
    if (waits) svg.appendChild(sv('text', { class: 'lane-wait', x: '8', y: String(lt.y + lt.h / 2 + 11) }, '\u25B2 writer waiting'));
    laneRows[i].forEach(function (b) {
      if (b.row >= 12) return;
      var g = b.g, x1 = x(b.s), x2 = x(b.e), y = lt.y + lanePad + b.row * rowH + (rowH - barH) / 2;
      var ended = g.releasedAt ? g.releasedBy || 'holder' : 'live';
      var stale = ended === 'live' && state.staleIds.has(g.id);
      var rect = sv('rect', { class: 'bar ' + g.mode + ' ended-' + ended + (stale ? ' stale' : ''), x: String(x1), y: String(y), width: String(Math.max(ended === 'live' ? 4 : 2, x2 - x1)), height: String(barH), rx: '2',
        'data-grant-id': String(g.id), 'data-ended': ended, 'data-mode': g.mode });
      var tip = '#' + g.id + ' ' + g.mode + ' on ' + lane.resourceId + '\\n' + g.owner + '\\ngranted ' + clock(b.s, true) + ', ' +
        (ended === 'live' ? 'held ' + dur(now - b.s) + ' so far' + (stale ? ' (STALE)' : '') : 'held ' + dur(b.e - b.s) + '\\n' + (ended === 'holder' ? 'released by its holder' : ended === 'reaper' ? 'REAPED (holder presumed dead)' : 'released by an operator' + (g.reason ? ': ' + g.reason : '')));
      rect.addEventListener('mousemove', function (ev) { var tp = $('tip'); tp.textContent = tip; tp.hidden = false; tp.style.left = (ev.clientX + 14) + 'px'; tp.style.top = (ev.clientY + 12) + 'px'; });
      rect.addEventListener('mouseleave', function () { $('tip').hidden = true; });
      svg.appendChild(rect);
      if (ended === 'reaper' || ended === 'operator') svg.appendChild(sv('rect', { class: 'cap-' + ended, x: String(Math.max(x1, x2 - 3)), y: String(y - 2), width: '3', height: String(barH + 4) }));
      if (ended === 'live') svg.appendChild(sv('rect', { class: 'cap-live', x: String(x2 - 2), y: String(y), width: '2', height: String(barH) }));
    });
  });
  var total = t.lanes.reduce(function (n, l) { return n + l.grants.length; }, 0);
  $('tl-caption').textContent = (state.resource ? state.resource : 'busiest resources') + ' · last ' + windowLabel(t.windowMs) + ' · ' + total + ' grants' + (t.truncated ? ' (newest shown)' : '');
}

async function getJson(path) {
  var res = await fetch(path, { headers: { accept: 'application/json' } });
  var body = await res.json().catch(function () { return {}; });
  if (!res.ok) throw new Error(body.error || ('HTTP ' + res.status));
  return body;
}
// The operator names themself once per browser (kept in localStorage); the page sends it with each release.
var OPERATOR_KEY = 'mysql-rwlock.operator';
function savedOperator() { try { return localStorage.getItem(OPERATOR_KEY) || ''; } catch (e) { return ''; } }
function release(g) {
  var d = $('release-dialog');
  $('release-title').textContent = 'Release grant #' + g.id + ' (' + g.mode + ' on ' + g.resourceId + ', held by ' + g.owner + ')?';
  $('release-operator').value = savedOperator();
  $('release-reason').value = '';
  $('release-hint').hidden = true;
  $('release-operator').oninput = function () { $('release-hint').hidden = true; };
  $('release-cancel').onclick = function () { d.close(); };
  $('release-confirm').onclick = function () {
    var operator = $('release-operator').value.trim();
    if (!operator) { $('release-hint').hidden = false; $('release-operator').focus(); return; }
    try { localStorage.setItem(OPERATOR_KEY, operator); } catch (e) { /* a private window: asked again next time */ }
    d.close();
    sendRelease(g, operator, $('release-reason').value);
  };
  d.showModal();
  (savedOperator() ? $('release-reason') : $('release-operator')).focus();
}
async function sendRelease(g, operator, reason) {
  try {
    var res = await fetch('/api/release', { method: 'POST', headers: { 'content-type': 'application/json', 'x-rwlock-token': CFG.token }, body: JSON.stringify({ grantId: g.id, operator: operator, reason: reason }) });
    var body = await res.json();
    if (!res.ok) throw new Error(body.error);
    if (!body.released) window.alert('Grant #' + g.id + ' was no longer live.');
  } catch (e) { showError('Release failed: ' + e.message); }
  refresh();
}
function showError(msg) { var e = $('error'); e.textContent = msg; e.hidden = !msg; }

var inflight = false, timer = null;
async function refresh() {
  if (inflight) return;
  inflight = true;
  clearTimeout(timer);
  try {
    var q = '/api/timeline?window=' + state.windowMs + (state.resource ? '&resource=' + encodeURIComponent(state.resource) : '');
    var both = await Promise.all([getJson('/api/state'), getJson(q)]);
    var s = both[0], t = both[1];
    state.staleIds = new Set(s.live.filter(function (g) { return g.stale; }).map(function (g) { return g.id; }));
    state.waiting = new Set(s.live.filter(function (g) { return g.writerWaiting; }).map(function (g) { return g.resourceId; }));
    drawCards(s.stats);
    drawLive(s.live, s.liveTruncated);
    drawReleases(s.releases, Date.parse(t.now));
    drawTimeline(t);
    $('updated').textContent = 'live · database clock ' + clock(Date.parse(t.now));
    $('dot').className = 'dot ok';
    document.body.setAttribute('data-updated', String(Date.now()));
    showError('');
  } catch (e) {
    $('dot').className = 'dot bad';
    showError('Cannot refresh: ' + e.message);
  } finally {
    inflight = false;
    timer = setTimeout(refresh, POLL_MS);
  }
}
window.addEventListener('resize', function () { refresh(); });
refresh();
`;
