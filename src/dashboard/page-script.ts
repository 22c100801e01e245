// The operator page's script, inlined into its <script> element by renderPage (page.ts): it polls
// the JSON endpoints and draws the cards, the tables and the timeline. No template literals inside,
// so it sits in this file's template as it is.
export const SCRIPT = `
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
function drawCards(s, live, truncated) {
  var c = $('cards');
  var permits = 0, semaphores = new Set();
  live.forEach(function (g) { if (g.mode === 'permit') { permits += g.permits || 1; semaphores.add(g.resourceId); } });
  c.replaceChildren(
    card('Write held', s.live.write, 'exclusive grants'),
    card('Read held', s.live.read, 'shared grants'),
    card('Permits held', s.live.permit, permits + (truncated ? '+' : '') + ' permits of ' + semaphores.size + (semaphores.size === 1 ? ' semaphore' : ' semaphores')),
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
      el('td', {}, [el('span', { class: 'pill ' + g.mode, text: modeText(g), title: g.mode === 'permit' ? g.permits + ' of ' + g.permitLimit + ' permits of the semaphore' : '' })]),
      el('td', { class: 'mono', text: g.owner, title: g.owner }),
      el('td', { class: 'num', text: dur(g.ageMs) }),
      el('td', {}, tags.length ? tags : ['ok']),
      el('td', {}, [action]),
    ]);
  }));
}
function modeText(g) { return g.mode === 'permit' && g.permits ? 'permit \u00d7 ' + g.permits + (g.permitLimit ? '/' + g.permitLimit : '') : g.mode; }
function shorten(text, max) { return text.length <= max ? text : text.slice(0, Math.ceil(max / 2) - 1) + '\u2026' + text.slice(text.length - Math.floor(max / 2)); }
var OUTCOME = { running: 'running', finished: 'finished', reaped: 'REAPED', operator: 'released by an operator', unknown: 'ended (unknown)' };
function drawJobs(v) {
  var body = $('jobs').tBodies[0];
  var now = Date.parse(v.now);
  $('jobs-empty').hidden = v.jobs.length > 0;
  $('jobs-caption').textContent = '(' + v.jobs.length + (v.truncated ? '+' : '') + ' in the last ' + windowLabel(v.windowMs) + ')';
  body.replaceChildren.apply(body, v.jobs.map(function (j) {
    var r = j.last;
    var started = r ? Date.parse(r.startedAt) : null;
    var outcome = r ? [el('span', { class: 'tag ' + r.outcome, text: OUTCOME[r.outcome], title: r.outcome === 'finished' ? 'its holder released the grant: committed, or failed and rolled back (the log does not say which)' : (r.reason || '') })] : ['no run in the log'];
    if (r && r.heldAfterRun) outcome.push(el('span', { class: 'tag lease', text: 'kept (lockAtLeastFor)' }));
    var next = j.kind === 'exclusive' ? '\u2014' : j.nextFire ? clock(Date.parse(j.nextFire)) + ' (every ' + dur(j.periodMs) + ')' : 'unknown';
    return el('tr', { 'data-job': j.name }, [
      el('td', { class: 'kind', text: j.kind }),
      el('td', {}, [resLink(j.name)]),
      el('td', { title: r ? 'granted ' + clock(started, true) + (r.fireTime ? ', fire of ' + clock(Date.parse(r.fireTime)) : '') : '', text: r ? dur(now - started) + ' ago' : '\u2014' }),
      el('td', {}, outcome),
      el('td', { class: 'mono', text: r ? r.holder : '\u2014', title: r ? r.holder : '' }),
      el('td', { class: 'num', text: r ? dur((r.endedAt ? Date.parse(r.endedAt) : now) - started) : '\u2014' }),
      el('td', { text: next, title: j.kind === 'exclusive' ? '' : 'from the spacing of the last three fires: the schedule is not in the database' }),
      el('td', { class: 'num', text: String(j.runs) }),
      el('td', { class: 'num' + (j.reaped > 0 ? ' alert-text' : ''), text: String(j.reaped) }),
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
    // Cut in the middle: ids often share a prefix and differ at the end (tenant-7, tenant-8).
    var shown = shorten(lane.resourceId, 26);
    var waits = state.waiting.has(lane.resourceId);
    var sub = waits ? '\u25B2 writer waiting' : lane.fold === 'cron' ? 'node-cron task \u00b7 ' + new Set(lane.grants.map(function (g) { return g.resourceId; })).size + ' fires' : lane.fold === 'job' ? 'job \u00b7 with its #run grants' : '';
    var label = sv('text', { class: 'lane-label', x: '8', y: String(lt.y + lt.h / 2 + (sub ? -1 : 4)) }, shown);
    label.appendChild(sv('title', {}, lane.resourceId + ' (' + lane.grants.length + ' grants)'));
    label.addEventListener('click', function () { showResource(lane.resourceId); });
    svg.appendChild(label);
    if (sub) svg.appendChild(sv('text', { class: waits ? 'lane-wait' : 'lane-sub', x: '8', y: String(lt.y + lt.h / 2 + 11) }, sub));
    laneRows[i].forEach(function (b) {
      if (b.row >= 12) return;
      var g = b.g, x1 = x(b.s), x2 = x(b.e), y = lt.y + lanePad + b.row * rowH + (rowH - barH) / 2;
      var ended = g.releasedAt ? g.releasedBy || 'holder' : 'live';
      var stale = ended === 'live' && state.staleIds.has(g.id);
      var rect = sv('rect', { class: 'bar ' + g.mode + ' ended-' + ended + (stale ? ' stale' : ''), x: String(x1), y: String(y), width: String(Math.max(ended === 'live' ? 4 : 2, x2 - x1)), height: String(barH), rx: '2',
        'data-grant-id': String(g.id), 'data-ended': ended, 'data-mode': g.mode });
      var tip = '#' + g.id + ' ' + modeText(g) + ' on ' + g.resourceId + '\\n' + g.owner + '\\ngranted ' + clock(b.s, true) + ', ' +
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

// The jobs view reads a day of the log: every fifth refresh is enough for runs of a second or more.
var JOBS_EVERY = 4, jobsDue = 0;
var inflight = false, timer = null;
async function refresh() {
  if (inflight) return;
  inflight = true;
  clearTimeout(timer);
  try {
    var q = '/api/timeline?window=' + state.windowMs + (state.resource ? '&resource=' + encodeURIComponent(state.resource) : '');
    var both = await Promise.all([getJson('/api/state'), getJson(q), getJson('/api/leaders')]);
    var s = both[0], t = both[1];
    state.staleIds = new Set(s.live.filter(function (g) { return g.stale; }).map(function (g) { return g.id; }));
    state.waiting = new Set(s.live.filter(function (g) { return g.writerWaiting; }).map(function (g) { return g.resourceId; }));
    drawCards(s.stats, s.live, s.liveTruncated);
    if (jobsDue-- <= 0) { jobsDue = JOBS_EVERY; drawJobs(await getJson('/api/jobs')); }
    drawLeaders(both[2]);
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
