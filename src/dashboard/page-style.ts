// The operator page's stylesheet, inlined into its <style> element by renderPage (page.ts).
export const CSS = `
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
.cards { display:grid; grid-template-columns:repeat(7,minmax(0,1fr)); gap:12px; }
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
.sw.write { background:var(--write); } .sw.read { background:var(--read); } .sw.permit { background:var(--permit); }
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
svg .lane-wait { fill:#ffc266; font-size:10.5px; } svg .lane-sub { fill:var(--muted); font-size:10.5px; }
.fold-note { font-size:11.5px; margin:0 0 6px; }
.tag.running { background:#102a22; color:#6fe0b1; } .tag.finished { background:#1c2430; color:var(--text); } .tag.reaped { background:#3b1420; color:#ff8aa0; } .tag.unknown { background:#1c2430; color:var(--muted); }
.tag.term-leading { background:#102a22; color:#6fe0b1; } .tag.term-lease-ran-out, .tag.term-reaped { background:#3b1420; color:#ff8aa0; }
.tag.term-resigned, .tag.term-unleased, .tag.term-unknown, .tag.term-none { background:#1c2430; color:var(--text); } .tag.term-healed { background:#3a2a0c; color:#ffc266; } .tag.term-operator { background:#281c45; color:#cdb4ff; }
td.terms .tag { margin:1px 4px 1px 0; }
.kind { color:var(--muted); font-size:12px; } td.alert-text { color:#ff8aa0; font-weight:650; }
dialog { background:var(--panel); color:var(--text); border:1px solid #34404f; border-radius:10px; padding:16px 18px; width:min(520px,92vw); box-shadow:0 12px 40px rgba(0,0,0,.6); }
dialog::backdrop { background:rgba(5,8,12,.6); }
dialog h3 { margin:0 0 6px; font-size:14px; overflow-wrap:anywhere; } dialog p { margin:0 0 10px; font-size:12.5px; }
dialog label { display:block; color:var(--muted); font-size:12px; margin:8px 0 4px; }
dialog input, dialog textarea { width:100%; background:#0e1217; border:1px solid var(--line); color:var(--text); border-radius:6px; padding:6px 9px; font:13px system-ui,sans-serif; }
dialog .hint { color:#ffb3c1; margin:6px 0 0; } dialog .actions { display:flex; justify-content:flex-end; gap:8px; margin-top:14px; }
@media (max-width:1100px) { .cards { grid-template-columns:repeat(4,minmax(0,1fr)); } }
@media (min-width:2000px) { .grid { grid-template-columns:minmax(0,1.1fr) minmax(0,1fr); } }
`;
