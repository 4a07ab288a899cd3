// The status page's live part: draws the charts with uPlot from GET /api/stats (polled), and keeps the
// latest pings and the current minute up to date from the live stream (/stream). Without it the page
// still shows every number, as of loading. Data only ever reaches the page as text nodes.
(function () {
  'use strict';
  var POLL_MS = 5000;
  var POLL_24H_MS = 30000;
  var RECENT = 20;
  var css = getComputedStyle(document.documentElement);
  var color = function (name) {
    return css.getPropertyValue(name).trim() || '#888';
  };
  var charts = {};
  var last = {};

  function $(id) {
    return document.getElementById(id);
  }
  function text(id, v) {
    var e = $(id);
    if (e) e.textContent = String(v);
  }
  function sum(a) {
    var s = 0;
    for (var i = 0; i < a.length; i++) s += a[i] || 0;
    return s;
  }
  function refusedPerMinute(s) {
    var out = s.minutes.map(function () {
      return 0;
    });
    Object.keys(s.refused).forEach(function (k) {
      s.refused[k].forEach(function (n, i) {
        out[i] += n;
      });
    });
    return out;
  }
  function axes() {
    var stroke = color('--muted');
    var grid = { stroke: color('--line'), width: 1 };
    return [
      { stroke: stroke, grid: grid, ticks: grid },
      { stroke: stroke, grid: grid, ticks: grid, size: 50 },
    ];
  }
  function size(el) {
    return { width: Math.max(200, el.clientWidth - 8), height: el.clientHeight - 40 };
  }

  function draw(id, data, series) {
    var el = $(id);
    if (!el || typeof uPlot === 'undefined') return;
    var chart = charts[id];
    if (!chart) {
      var dims = size(el);
      chart = charts[id] = new uPlot(
        {
          width: dims.width,
          height: dims.height,
          series: [{}].concat(series),
          axes: axes(),
          legend: { live: false },
          cursor: { drag: { x: false, y: false } },
        },
        data,
        el,
      );
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
    draw(
      'chart-latency',
      [s.minutes, s.latencyMs.p50, s.latencyMs.p99],
      [
        { label: 'p50 ms', stroke: color('--p50'), width: 2, spanGaps: false },
        { label: 'p99 ms', stroke: color('--p99'), width: 2, spanGaps: false },
      ],
    );
    text('accepted-total', s.totals.accepted);
    text(
      'refused-total',
      sum(
        Object.keys(s.totals.refused).map(function (k) {
          return s.totals.refused[k];
        }),
      ),
    );
    text(
      'verified-total',
      sum(
        Object.keys(s.totals.verification).map(function (k) {
          return s.totals.verification[k];
        }),
      ),
    );
    text('ping-queue', s.health.pingQueue);
    var db = $('db-state');
    if (db) {
      db.textContent = s.health.ready ? 'ready' : s.health.reason || 'not ready';
      db.className = 'value ' + (s.health.ready ? 'ok' : 'err');
    }
    var at = $('generated-at');
    if (at) {
      at.dateTime = s.generatedAt;
      at.textContent = s.generatedAt.slice(11, 19) + ' UTC';
    }
    rows(
      'refused-table',
      Object.keys(s.totals.refused).map(function (k) {
        return [k, s.totals.refused[k]];
      }),
      'none',
    );
    rows(
      'verification-table',
      Object.keys(s.totals.verification).map(function (k) {
        return [k, s.totals.verification[k]];
      }),
      'none settled',
    );
    rows(
      'hosts-table',
      s.topHosts.map(function (h) {
        return [h.host, h.accepted, h.refused];
      }),
      'no pings yet',
    );
    rows(
      'queues-table',
      s.health.queues.map(function (q) {
        return [q.name, q.depth, q.oldestAgeSeconds];
      }),
      'none',
    );
    rows(
      'documents-table',
      s.documents.map(function (d) {
        return [
          { href: d.path, text: d.name },
          d.renderedAt ? d.renderedAt.slice(0, 19).replace('T', ' ') : 'not yet',
          d.ageSeconds === null ? '–' : d.ageSeconds,
          d.entries === null ? '–' : d.entries,
          d.renderMs === null ? '–' : d.renderMs,
        ];
      }),
      'none',
    );
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
          if (typeof v === 'number' || (i > 0 && /^[0-9–]+$/.test(String(v)))) td.className = 'num';
        }
      });
    });
    table.replaceChild(body, table.tBodies[0]);
  }

  function load(window, then) {
    return fetch('/api/stats?window=' + window, { headers: { accept: 'application/json' } })
      .then(function (r) {
        if (!r.ok) throw new Error('HTTP ' + r.status);
        return r.json();
      })
      .then(then)
      .catch(function () {
        text('live-state', 'Statistics unavailable; retrying.');
      });
  }

  // Pings from the stream are taken in batches: at a thousand events a second, one list update and one
  // redraw per event kept the page's thread seconds behind (measured: bench/results/evidence/2026-11-23-web.md).
  // Between two batches only a count and the newest RECENT events are kept, so a hidden tab holds little.
  var BATCH_MS = 250;
  var DRAW_MS = 1000;
  var waiting = { count: 0, newest: [] };
  var batchTimer = null;
  var lastDraw = 0;

  function onPing(p) {
    waiting.count++;
    waiting.newest.push(p);
    if (waiting.newest.length > RECENT) waiting.newest.shift();
    if (batchTimer === null) batchTimer = setTimeout(takeBatch, BATCH_MS);
  }

  function item(p) {
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
    return li;
  }

  // The batch: newest first at the top of the list, counted in the current minute until the next poll.
  function takeBatch() {
    batchTimer = null;
    var batch = waiting;
    waiting = { count: 0, newest: [] };
    var list = $('recent');
    if (list) {
      var frag = document.createDocumentFragment();
      for (var i = batch.newest.length - 1; i >= 0; i--) frag.appendChild(item(batch.newest[i]));
      list.insertBefore(frag, list.firstChild);
      while (list.children.length > RECENT) list.removeChild(list.lastChild);
    }
    var s = last['1h'];
    if (s && s.accepted.length) {
      s.accepted[s.accepted.length - 1] += batch.count;
      s.totals.accepted += batch.count;
      text('accepted-total', s.totals.accepted);
      var wait = DRAW_MS - (Date.now() - lastDraw);
      if (wait <= 0) redraw1h();
      else if (!redrawTimer) redrawTimer = setTimeout(redraw1h, wait);
    }
  }

  var redrawTimer = null;
  function redraw1h() {
    redrawTimer = null;
    lastDraw = Date.now();
    var s = last['1h'];
    if (s) draw('chart-1h', [s.minutes, s.accepted.slice(), refusedPerMinute(s)], pingSeries());
  }

  // The live stream. A refusal (pingd answers a short 200 stream with a `retry:` and an `event: refused`)
  // is retried by the EventSource itself. Any other failure (a proxy's 502, an older pingd's 503) closes it
  // for good (readyState CLOSED): the page then opens a new one after RETRY_MIN_MS, doubling up to
  // RETRY_MAX_MS, back to the least once one opens. "reconnecting" is shown only while a retry is coming.
  var RETRY_MIN_MS = 1000;
  var RETRY_MAX_MS = 30000;
  var retryMs = RETRY_MIN_MS;

  function listen() {
    if (typeof EventSource === 'undefined') return;
    var es = new EventSource('/stream');
    es.addEventListener('open', function () {
      retryMs = RETRY_MIN_MS;
      text('recent-state', 'live');
      text('live-state', 'Live: updates every few seconds.');
    });
    es.addEventListener('refused', function (e) {
      try {
        var d = JSON.parse(e.data);
        text('live-state', 'Live updates refused: ' + d.message + ' Retrying in ' + Math.round(d.retryMs / 1000) + ' s.');
      } catch (err) {
        /* the state below still says it */
      }
      text('recent-state', 'reconnecting');
    });
    es.addEventListener('error', function () {
      text('recent-state', 'reconnecting');
      if (es.readyState !== 2) return; // CONNECTING: the EventSource retries by itself
      es.close();
      var wait = retryMs;
      retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
      text('live-state', 'Live updates lost; retrying in ' + Math.round(wait / 1000) + ' s.');
      setTimeout(listen, wait);
    });
    es.addEventListener('ping', function (e) {
      try {
        onPing(JSON.parse(e.data));
      } catch (err) {
        /* a malformed event is skipped */
      }
    });
  }

  window.addEventListener('resize', function () {
    Object.keys(charts).forEach(function (id) {
      var el = $(id);
      if (el) charts[id].setSize(size(el));
    });
  });

  load('1h', show1h);
  load('24h', show24h);
  setInterval(function () {
    load('1h', show1h);
  }, POLL_MS);
  setInterval(function () {
    load('24h', show24h);
  }, POLL_24H_MS);
  listen();
})();
