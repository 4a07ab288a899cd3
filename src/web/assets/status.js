// The status page's live part: draws the charts with uPlot from GET /api/stats (polled), and keeps the
// latest pings and the current minute up to date from the live stream (/stream). Without it the page
// still shows every number, as of loading. Data only ever reaches the page as text nodes.
(function () {
  'use strict';
  var POLL_MS = 5000;
  var POLL_24H_MS = 30000;
  var RECENT = 20;
  var css = getComputedStyle(document.documentElement);
  var color = function (name) { return css.getPropertyValue(name).trim() || '#888'; };
  var charts = {};
  var last = {};

  function $(id) { return document.getElementById(id); }
  function text(id, v) { var e = $(id); if (e) e.textContent = String(v); }
  function sum(a) { var s = 0; for (var i = 0; i < a.length; i++) s += a[i] || 0; return s; }
  function refusedPerMinute(s) {
    var out = s.minutes.map(function () { return 0; });
    Object.keys(s.refused).forEach(function (k) { s.refused[k].forEach(function (n, i) { out[i] += n; }); });
    return out;
  }
  function axes() {
    var stroke = color('--muted');
    var grid = { stroke: color('--line'), width: 1 };
    return [{ stroke: stroke, grid: grid, ticks: grid }, { stroke: stroke, grid: grid, ticks: grid, size: 50 }];
  }
  function size(el) { return { width: Math.max(200, el.clientWidth - 8), height: el.clientHeight - 40 }; }

  function draw(id, data, series) {
    var el = $(id);
    if (!el || typeof uPlot === 'undefined') return;
    var chart = charts[id];
    if (!chart) {
      var dims = size(el);
      chart = charts[id] = new uPlot({ width: dims.width, height: dims.height, series: [{}].concat(series), axes: axes(), legend: { live: false }, cursor: { drag: { x: false, y: false } } }, data, el);
    } else {
      chart.setData(data);
    }
    el.dataset.points = String(data[0].length);
    el.dataset.accepted = String(sum(data[1]));
  }
  function pingSeries() {
    return [
      { label: 'accepted', stroke: color('--accepted'), fill: color('--accepted') + '22', width: 2 },
      { label: 'refused', stroke: color('--refused'), width: 2 },
    ];
  }

  function show1h(s) {
    last['1h'] = s;
    draw('chart-1h', [s.minutes, s.accepted.slice(), refusedPerMinute(s)], pingSeries());
    draw('chart-latency', [s.minutes, s.latencyMs.p50, s.latencyMs.p99], [
      { label: 'p50 ms', stroke: color('--p50'), width: 2, spanGaps: false },
      { label: 'p99 ms', stroke: color('--p99'), width: 2, spanGaps: false },
    ]);
    text('accepted-total', s.totals.accepted);
    text('refused-total', sum(Object.keys(s.totals.refused).map(function (k) { return s.totals.refused[k]; })));
    text('verified-total', sum(Object.keys(s.totals.verification).map(function (k) { return s.totals.verification[k]; })));
    text('ping-queue', s.health.pingQueue);
    var db = $('db-state');
    if (db) { db.textContent = s.health.ready ? 'ready' : s.health.reason || 'not ready'; db.className = 'value ' + (s.health.ready ? 'ok' : 'err'); }
    var at = $('generated-at');
    if (at) { at.dateTime = s.generatedAt; at.textContent = s.generatedAt.slice(11, 19) + ' UTC'; }
    rows('refused-table', Object.keys(s.totals.refused).map(function (k) { return [k, s.totals.refused[k]]; }), 'none');
    rows('verification-table', Object.keys(s.totals.verification).map(function (k) { return [k, s.totals.verification[k]]; }), 'none settled');
    rows('hosts-table', s.topHosts.map(function (h) { return [h.host, h.accepted, h.refused]; }), 'no pings yet');
    rows('queues-table', s.health.queues.map(function (q) { return [q.name, q.depth, q.oldestAgeSeconds]; }), 'none');
    rows('documents-table', s.documents.map(function (d) {
      return [{ href: d.path, text: d.name }, d.renderedAt ? d.renderedAt.slice(0, 19).replace('T', ' ') : 'not yet', d.ageSeconds === null ? '–' : d.ageSeconds, d.entries === null ? '–' : d.entries, d.renderMs === null ? '–' : d.renderMs];
    }), 'none');
  }
  function show24h(s) {
    last['24h'] = s;
    draw('chart-24h', [s.minutes, s.accepted.slice(), refusedPerMinute(s)], pingSeries());
  }

  // Replaces a table's body with text cells (numbers right-aligned, as the server renders them).
  function rows(tableId, data, empty) {
    var table = $(tableId);
    if (!table) return;
    var body = document.createElement('tbody');
    var width = table.tHead ? table.tHead.rows[0].cells.length : 2;
    if (data.length === 0) {
      var tr0 = body.insertRow();
      var td0 = tr0.insertCell();
      td0.colSpan = width;
      td0.className = 'muted';
      td0.textContent = empty;
    }
    data.forEach(function (r) {
      var tr = body.insertRow();
      r.forEach(function (v, i) {
        var td = tr.insertCell();
        if (v && typeof v === 'object') {
          var a = document.createElement('a');
          a.href = v.href;
          a.textContent = v.text;
          td.appendChild(a);
        } else {
          td.textContent = String(v);
          if (typeof v === 'number' || i > 0 && /^[0-9–]+$/.test(String(v))) td.className = 'num';
        }
      });
    });
    table.replaceChild(body, table.tBodies[0]);
  }

  function load(window, then) {
    return fetch('/api/stats?window=' + window, { headers: { accept: 'application/json' } })
      .then(function (r) { if (!r.ok) throw new Error('HTTP ' + r.status); return r.json(); })
      .then(then)
      .catch(function () { text('live-state', 'Statistics unavailable; retrying.'); });
  }

  // A ping from the stream: first in the list, and counted in the current minute until the next poll.
  function onPing(p) {
    var list = $('recent');
    if (list) {
      var li = document.createElement('li');
      li.dataset.id = String(p.id);
      var t = document.createElement('time');
      t.dateTime = p.receivedAt;
      t.textContent = String(p.receivedAt).slice(11, 19);
      var a = document.createElement('a');
      a.href = '/weblog?url=' + encodeURIComponent(p.url);
      a.textContent = p.name;
      var m = document.createElement('span');
      m.className = 'muted';
      m.textContent = p.method;
      li.append(t, ' ', a, ' ', m);
      list.insertBefore(li, list.firstChild);
      while (list.children.length > RECENT) list.removeChild(list.lastChild);
    }
    var s = last['1h'];
    if (s && s.accepted.length) {
      s.accepted[s.accepted.length - 1]++;
      s.totals.accepted++;
      text('accepted-total', s.totals.accepted);
      draw('chart-1h', [s.minutes, s.accepted.slice(), refusedPerMinute(s)], pingSeries());
    }
  }

  function listen() {
    if (typeof EventSource === 'undefined') return;
    var es = new EventSource('/stream');
    es.addEventListener('open', function () { text('recent-state', 'live'); text('live-state', 'Live: updates every few seconds.'); });
    es.addEventListener('error', function () { text('recent-state', 'reconnecting'); });
    es.addEventListener('ping', function (e) {
      try { onPing(JSON.parse(e.data)); } catch (err) { /* a malformed event is skipped */ }
    });
  }

  window.addEventListener('resize', function () {
    Object.keys(charts).forEach(function (id) { var el = $(id); if (el) charts[id].setSize(size(el)); });
  });

  load('1h', show1h);
  load('24h', show24h);
  setInterval(function () { load('1h', show1h); }, POLL_MS);
  setInterval(function () { load('24h', show24h); }, POLL_24H_MS);
  listen();
})();
