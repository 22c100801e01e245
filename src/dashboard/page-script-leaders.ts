// The operator page's Leaders section, inlined after SCRIPT (page-script.ts) into the same <script>
// element: it uses that script's helpers (el, dur, clock, resLink), and its refresh calls drawLeaders
// with `GET /api/leaders`. No template literals inside, as in SCRIPT.
export const LEADERS_SCRIPT = `
// How a term ended or stands, as src/cli/commands-leaders.ts says it for a shell.
var TERM_HOW = { leading: 'leading', 'lease-ran-out': 'LEASE RAN OUT', unleased: 'never leased', resigned: 'resigned', reaped: 'REAPED', healed: 'healed', operator: 'released by an operator', unknown: 'ended (unknown)' };
var TERM_TIP = {
  leading: 'live, its lease ahead',
  'lease-ran-out': 'live, its lease run out: the reaper, or the next attempt of a campaigner, releases it',
  unleased: 'granted and never leased: a campaigner before its first lease, or one that died there',
  resigned: 'released by its leader: resign(), close(), a failed callback or a late renewal (the log does not say which)',
  reaped: 'released by the reaper: its lease had run out',
  healed: 'released by a successor that found its lease run out',
  operator: 'released by an operator',
  unknown: 'released in a way this version does not know'
};
function termChip(t, now) {
  var tip = 'term ' + t.term + ' of ' + t.owner + '\\nsince ' + clock(Date.parse(t.since), true) + (t.endedAt ? ', ended ' + dur(now - Date.parse(t.endedAt)) + ' ago, led ' + dur(Date.parse(t.endedAt) - Date.parse(t.since)) : '') + '\\n' + TERM_TIP[t.how] + (t.releaser ? '\\nby ' + t.releaser : '') + (t.reason ? ': ' + t.reason : '');
  return el('span', { class: 'tag term-' + t.how, 'data-term': String(t.term), 'data-how': t.how, title: tip, text: '#' + t.term + ' ' + TERM_HOW[t.how] + (t.how === 'healed' && t.releaser ? ' by ' + t.releaser : '') });
}
function drawLeaders(v) {
  var body = $('leaders').tBodies[0];
  var now = Date.parse(v.now);
  $('leaders-empty').hidden = v.names.length > 0;
  $('leaders-caption').textContent = '(' + v.names.length + (v.truncated ? '+' : '') + ')';
  body.replaceChildren.apply(body, v.names.map(function (n) {
    // The live term, leading or with its lease run out (a name has at most one), then the ended ones.
    var cur = n.terms[0] && n.terms[0].endedAt == null ? n.terms[0] : null;
    var lease = '\u2014', leaseClass = 'num';
    if (cur && cur.leaseUntil) {
      var left = Date.parse(cur.leaseUntil) - now;
      lease = left > 0 ? dur(left) + ' left' : 'ran out ' + dur(-left) + ' ago';
      if (left <= 0) leaseClass = 'num alert-text';
    }
    var who = !cur ? [el('span', { class: 'tag term-none', text: 'no leader' })] : cur.how === 'leading' ? [cur.owner] : [cur.owner, ' ', termChip(cur, now)];
    // The name's writer-intent mark: someone waits to lead (not who: each process's gauge says).
    if (n.writerWaiting) who.push(' ', el('span', { class: 'tag waiting', text: 'campaigner waiting', title: 'a writer waits for the name (its writer-intent mark is current): a campaign waiting to lead' }));
    var earlier = n.terms.filter(function (x) { return x !== cur; }).map(function (x) { return termChip(x, now); });
    return el('tr', { 'data-leader': n.name, 'data-state': cur ? cur.how : 'none' }, [
      el('td', {}, [resLink(n.name)]),
      el('td', { class: 'mono leader', title: cur ? cur.owner : '' }, who),
      el('td', { class: 'mono', text: cur ? '#' + cur.term : '\u2014' }),
      el('td', { class: 'num', title: cur ? clock(Date.parse(cur.since), true) : '', text: cur ? dur(now - Date.parse(cur.since)) : '\u2014' }),
      el('td', { class: leaseClass, text: lease }),
      el('td', { class: 'terms' }, earlier.length ? earlier : ['\u2014']),
    ]);
  }));
}
`;
