/**
 * The dashboard page itself: one HTML document, one small script and one style sheet, kept here as
 * strings so `tsc` ships them with the rest (no build step, no framework, no CDN; it works offline).
 * The HTML holds no value of the process: everything shown arrives over `/events` as JSON and is
 * put in the page with `textContent` and SVG attributes only, never as markup, so a workload name
 * or a configuration error text can hold `<script>` and shows as text. The page is served with a
 * Content-Security-Policy of `default-src 'self'`, which also forbids inline scripts and styles.
 */

/** Headers of the three documents (and the policy the page's script is written for). */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

export const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>svcproxy dashboard</title>
<link rel="stylesheet" href="/dashboard.css">
<script src="/dashboard.js" defer></script>
</head>
<body>
<header>
  <h1>svcproxy</h1>
  <span id="role" class="muted"></span>
  <span class="muted">generation <b id="generation">–</b></span>
  <span id="updated" class="muted"></span>
  <span id="status" class="status connecting">connecting</span>
</header>
<p id="note" class="note" hidden></p>
<p id="sampling" class="note warn" hidden></p>
<section id="config-error" class="error" hidden>
  <h2>Last configuration error <span id="config-error-at" class="muted"></span></h2>
  <p class="muted">The reload was rejected; the previous configuration stays in force.</p>
  <table><thead><tr><th>file</th><th>line</th><th>error</th></tr></thead><tbody id="config-error-lines"></tbody></table>
</section>
<main id="gvcs"><p class="muted" id="empty">Waiting for the first sample…</p></main>
<footer class="muted">Rates, 5xx share and upstream latency (p50/p99) per second over the last <span id="window">5</span> minutes. <a href="/metrics">/metrics</a> · <a href="/workloads">/workloads</a> · <a href="/config">/config</a></footer>
</body>
</html>
`;

export const DASHBOARD_CSS = `:root { color-scheme: light dark; --fg: #1d2330; --muted: #6b7385; --bg: #f6f7f9; --card: #fff; --line: #dde1e8;
  --ok: #1b873f; --bad: #c62828; --warn: #b26a00; --spark: #2f6fdb; }
@media (prefers-color-scheme: dark) { :root { --fg: #e4e7ee; --muted: #98a0b3; --bg: #15181e; --card: #1d2129; --line: #2e3440; --spark: #6ea0ff; } }
* { box-sizing: border-box; }
body { margin: 0; padding: 16px 24px; font: 14px/1.4 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 16px; align-items: baseline; flex-wrap: wrap; margin-bottom: 12px; }
h1 { font-size: 20px; margin: 0; }
h2 { font-size: 16px; margin: 0 0 8px; }
.muted { color: var(--muted); }
.status { padding: 1px 8px; border-radius: 10px; font-size: 12px; border: 1px solid var(--line); }
.status.live { color: var(--ok); border-color: var(--ok); }
.status.down, .status.connecting { color: var(--warn); border-color: var(--warn); }
.note { margin: 4px 0 12px; }
.warn { color: var(--warn); }
section.gvc, section.error { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; margin-bottom: 16px; overflow-x: auto; }
section.error { border-color: var(--bad); }
section.error td { font-family: ui-monospace, monospace; font-size: 12px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; white-space: nowrap; }
th { font-weight: 600; color: var(--muted); font-size: 12px; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.wrap { white-space: normal; }
.metric { display: flex; align-items: center; gap: 6px; justify-content: flex-end; }
.metric .value { min-width: 56px; text-align: right; font-variant-numeric: tabular-nums; }
svg.spark { width: 100px; height: 24px; }
svg.spark polyline { fill: none; stroke: var(--spark); stroke-width: 1.5; }
svg.spark line { stroke: var(--line); stroke-width: 1; }
.chip { display: inline-block; margin: 1px 4px 1px 0; padding: 0 6px; border-radius: 9px; font-size: 12px; border: 1px solid var(--line); }
.chip.ready { border-color: var(--ok); color: var(--ok); }
.chip.notready { border-color: var(--warn); color: var(--warn); }
.chip.ejected { border-color: var(--bad); color: var(--bad); }
.health-Healthy { color: var(--ok); }
.health-Unhealthy, .health-Deleting { color: var(--bad); }
.health-Loading, .health-Unknown { color: var(--warn); }
.bad { color: var(--bad); }
footer { margin-top: 16px; font-size: 12px; }
a { color: var(--spark); }
`;

/**
 * The page's script. Plain ES2017, no modules; every value goes in through textContent or an SVG
 * attribute. It keeps each workload's series (the `history` event, then one point per `tick`).
 */
export const DASHBOARD_JS = `'use strict';
(function () {
  var SVG = 'http://www.w3.org/2000/svg';
  var capacity = 300;
  var series = {};
  var seq = 0;
  var FIELDS = ['rps', 'err', 'p50', 'p99'];

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fmtRate(v) { return v === null ? '–' : (v >= 100 ? v.toFixed(0) : v.toFixed(1)) + '/s'; }
  function fmtShare(v) { return v === null ? '–' : (v * 100).toFixed(v > 0 && v < 0.1 ? 2 : 1) + '%'; }
  function fmtMs(v) { return v === null ? '–' : (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)) + ' ms'; }
  var FORMAT = { rps: fmtRate, err: fmtShare, p50: fmtMs, p99: fmtMs };

  function spark(values) {
    var w = 120, h = 24;
    var svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('class', 'spark');
    svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
    svg.setAttribute('preserveAspectRatio', 'none');
    var base = document.createElementNS(SVG, 'line');
    base.setAttribute('x1', '0'); base.setAttribute('x2', String(w));
    base.setAttribute('y1', String(h - 0.5)); base.setAttribute('y2', String(h - 0.5));
    svg.appendChild(base);
    var max = 0;
    for (var i = 0; i < values.length; i++) if (values[i] !== null && values[i] > max) max = values[i];
    if (max <= 0) max = 1;
    var step = w / Math.max(1, capacity - 1);
    var offset = capacity - values.length;
    var points = [];
    function flush() {
      if (points.length > 1) {
        var line = document.createElementNS(SVG, 'polyline');
        line.setAttribute('points', points.join(' '));
        svg.appendChild(line);
      }
      points = [];
    }
    for (var j = 0; j < values.length; j++) {
      var v = values[j];
      if (v === null) { flush(); continue; }
      var x = (offset + j) * step;
      var y = h - 1 - (v / max) * (h - 2);
      points.push(x.toFixed(1) + ',' + y.toFixed(1));
    }
    flush();
    return svg;
  }

  function metricCell(key, field, value) {
    var td = el('td', 'num');
    td.setAttribute('data-field', field);
    var box = el('div', 'metric');
    var s = series[key];
    box.appendChild(spark(s ? s[field] : []));
    var span = el('span', 'value', FORMAT[field](value));
    if (field === 'err' && value !== null && value > 0) span.className += ' bad';
    box.appendChild(span);
    td.appendChild(box);
    return td;
  }

  function append(key, w) {
    var s = series[key];
    if (!s) s = series[key] = { rps: [], err: [], p50: [], p99: [] };
    for (var i = 0; i < FIELDS.length; i++) {
      var list = s[FIELDS[i]];
      list.push(w[FIELDS[i]]);
      if (list.length > capacity) list.splice(0, list.length - capacity);
    }
  }

  function renderError(last) {
    var box = $('config-error');
    if (!last) { box.hidden = true; return; }
    box.hidden = false;
    $('config-error-at').textContent = new Date(last.at).toLocaleString();
    var body = $('config-error-lines');
    body.textContent = '';
    for (var i = 0; i < last.errors.length; i++) {
      var line = String(last.errors[i]);
      var m = /^(.+?):(\\d+): ([\\s\\S]*)$/.exec(line);
      var tr = el('tr');
      tr.appendChild(el('td', '', m ? m[1] : ''));
      tr.appendChild(el('td', 'num', m ? m[2] : ''));
      tr.appendChild(el('td', 'wrap', m ? m[3] : line));
      body.appendChild(tr);
    }
  }

  function replicaChips(td, list) {
    for (var i = 0; i < list.length; i++) {
      var r = list[i];
      var state = r.ejected ? 'ejected' : r.ready ? 'ready' : 'notready';
      var text = r.name + ' · ' + r.location + ' · ' + (r.ejected ? 'ejected' : r.ready ? 'ready' : 'not ready') + (r.outstanding ? ' · ' + r.outstanding + ' in flight' : '');
      td.appendChild(el('span', 'chip ' + state, text));
    }
    if (list.length === 0) td.appendChild(el('span', 'muted', 'none'));
  }

  function render(tick) {
    $('role').textContent = tick.role;
    $('generation').textContent = String(tick.generation);
    $('updated').textContent = 'updated ' + new Date(tick.at).toLocaleTimeString();
    var note = $('note');
    note.hidden = !tick.note; note.textContent = tick.note || '';
    var sampling = $('sampling');
    sampling.hidden = !tick.sampling; sampling.textContent = tick.sampling || '';
    renderError(tick.lastError);
    var byGvc = {};
    var order = [];
    for (var i = 0; i < tick.workloads.length; i++) {
      var w = tick.workloads[i];
      if (!byGvc[w.gvc]) { byGvc[w.gvc] = []; order.push(w.gvc); }
      byGvc[w.gvc].push(w);
    }
    var main = $('gvcs');
    main.textContent = '';
    if (order.length === 0) main.appendChild(el('p', 'muted', 'No workloads.'));
    for (var g = 0; g < order.length; g++) {
      var section = el('section', 'gvc');
      section.appendChild(el('h2', '', 'GVC ' + order[g]));
      var table = el('table');
      var head = el('tr');
      var titles = ['workload', 'locations', 'requests', '5xx', 'p50', 'p99', 'ejections'];
      for (var t = 0; t < titles.length; t++) head.appendChild(el('th', t >= 2 ? 'num' : '', titles[t]));
      var thead = el('thead'); thead.appendChild(head); table.appendChild(thead);
      var body = el('tbody');
      var list = byGvc[order[g]];
      for (var k = 0; k < list.length; k++) {
        var wl = list[k];
        var tr = el('tr');
        tr.setAttribute('data-workload', wl.key);
        var name = el('td'); name.appendChild(el('b', '', wl.name)); tr.appendChild(name);
        var locs = el('td');
        for (var l = 0; l < wl.locations.length; l++) {
          var loc = wl.locations[l];
          var div = el('div');
          div.appendChild(el('span', '', loc.location + ' '));
          div.appendChild(el('span', 'health-' + loc.health, loc.health));
          div.appendChild(el('span', 'muted', ' ' + loc.ready + '/' + loc.replicas + ' ready · ' + fmtRate(loc.rps) + (loc.err ? ' · ' + fmtShare(loc.err) + ' 5xx' : '')));
          locs.appendChild(div);
        }
        tr.appendChild(locs);
        tr.appendChild(metricCell(wl.key, 'rps', wl.rps));
        tr.appendChild(metricCell(wl.key, 'err', wl.err));
        tr.appendChild(metricCell(wl.key, 'p50', wl.p50));
        tr.appendChild(metricCell(wl.key, 'p99', wl.p99));
        var ej = el('td', 'num', wl.ejections); ej.setAttribute('data-field', 'ejections'); tr.appendChild(ej);
        body.appendChild(tr);
        var rtr = el('tr');
        rtr.appendChild(el('td', 'muted', 'replicas'));
        var rtd = el('td', 'wrap'); rtd.colSpan = 6;
        replicaChips(rtd, wl.replicas);
        rtr.appendChild(rtd);
        body.appendChild(rtr);
      }
      table.appendChild(body);
      section.appendChild(table);
      main.appendChild(section);
    }
  }

  var source = new EventSource('/events');
  source.addEventListener('open', function () { var s = $('status'); s.textContent = 'live'; s.className = 'status live'; });
  source.addEventListener('error', function () { var s = $('status'); s.textContent = 'reconnecting'; s.className = 'status down'; });
  source.addEventListener('history', function (e) {
    var h = JSON.parse(e.data);
    capacity = h.capacity;
    series = h.series;
    seq = h.seq;
    $('window').textContent = String(Math.round(h.capacity * h.intervalMs / 60000));
  });
  source.addEventListener('tick', function (e) {
    var tick = JSON.parse(e.data);
    // The history already holds the tick sent right after it.
    if (tick.seq <= seq) { render(tick); return; }
    seq = tick.seq;
    for (var i = 0; i < tick.workloads.length; i++) append(tick.workloads[i].key, tick.workloads[i]);
    render(tick);
  });
})();
`;
