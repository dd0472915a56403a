/* global L, document, fetch, setTimeout, setInterval, AbortSignal */
// The console's page: polls the console's JSON every second and draws breakers and mosaics. Every text that
// comes from the fleet (a transition's detail, an actor, a reason) goes in through textContent, never as markup.
'use strict';

const STATE_COLOURS = {
  closed: '#2f855a',
  open: '#c53030',
  'forced-open': '#c53030',
  'half-open': '#d69e2e',
  'forced-closed': '#6b46c1',
  'metrics-only': '#6b46c1',
};
// Tile statuses on the map: ok tiles show the image itself; the others are painted over it.
const TILE_STYLES = {
  o: { name: 'ok', colour: '#2f855a', fill: 0 },
  s: { name: 'stale', colour: '#dd6b20', fill: 0.55 },
  h: { name: 'hole', colour: '#e53e3e', fill: 0.6 },
  d: { name: 'dead-lettered', colour: '#805ad5', fill: 0.6 },
  f: { name: 'failed', colour: '#1a202c', fill: 0.6 },
  x: { name: 'outside', colour: '#a0aec0', fill: 0.5 },
};
const MIRROR = { name: 'mirror', colour: '#3182ce', fill: 0.45 };
const PROBE_REASONS = new Set(['probe-failed', 'probes-succeeded', 'cooldown-elapsed', 'force-expired']);

let overview = null;
let selected = null;
let detailShown = null;
let map = null;
let mapFor = null;

const $ = (id) => document.getElementById(id);
const el = (tag, props, ...children) => {
  const e = document.createElement(tag);
  Object.assign(e, props || {});
  for (const c of children) e.append(c);
  return e;
};
const svg = (tag, attrs) => {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
};
const time = (ms) => new Date(ms).toLocaleTimeString();
const duration = (ms) => {
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
};

function say(text) {
  $('message').textContent = text;
  if (text) setTimeout(() => $('message').textContent === text && ($('message').textContent = ''), 8000);
}

async function getJson(url) {
  const r = await fetch(url, { cache: 'no-store', signal: AbortSignal.timeout(30_000) });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || `${r.status}`);
  return body;
}

async function act(url, body) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const answer = await r.json().catch(() => ({ error: `${r.status}` }));
  say(r.ok ? `done: ${url.split('/').pop()} ${body.key || body.workflowId}` : `refused: ${answer.error}`);
  return r.ok;
}

// ---------------------------------------------------------------------------------------------------------
// Breakers
// ---------------------------------------------------------------------------------------------------------

function drawTimeline(b, now) {
  const w = 1000;
  const h = 46;
  const log = [...b.transitions].sort((a, c) => a.at - c.at);
  const oldest = log.length ? log[0].at : now - 60_000;
  const from = Math.max(now - 24 * 3600_000, oldest - Math.max(10_000, (now - oldest) * 0.05));
  const x = (t) => ((Math.max(t, from) - from) / Math.max(1, now - from)) * w;
  const s = svg('svg', { class: 'timeline', viewBox: `0 0 ${w} ${h}`, preserveAspectRatio: 'none', 'data-key': b.key });
  let state = log.length ? log[0].from : b.state || 'closed';
  let at = from;
  const band = (until) => {
    const r = svg('rect', {
      x: x(at),
      y: 8,
      width: Math.max(0.5, x(until) - x(at)),
      height: 20,
      fill: STATE_COLOURS[state] || '#718096',
      'data-state': state,
    });
    r.append(Object.assign(svg('title', {}), { textContent: `${state} ${time(at)} - ${time(until)}` }));
    s.append(r);
  };
  for (const t of log) {
    band(t.at);
    state = t.to;
    at = t.at;
  }
  band(now);
  s.append(Object.assign(svg('title', {}), { textContent: `${time(from)} to ${time(now)}` }));
  for (const t of log) {
    const probe = PROBE_REASONS.has(t.reason);
    const mark = probe
      ? svg('circle', { cx: x(t.at), cy: 38, r: 4, fill: STATE_COLOURS[t.to] || '#333' })
      : svg('rect', { x: x(t.at) - 1, y: 32, width: 2, height: 12, fill: '#1d2430' });
    mark.setAttribute('class', probe ? 'probe-mark' : 'transition-mark');
    mark.append(
      Object.assign(svg('title', {}), { textContent: `${time(t.at)} ${t.from} -> ${t.to} (${t.reason}): ${t.detail}` }),
    );
    s.append(mark);
  }
  return s;
}

// Cards stay in place between reads, so a hover, a scroll or a click is not lost to a redraw: their text is
// rebuilt only when the breaker changed, their timeline when it did or every few seconds (time moves on).
const cards = new Map();

function breakerParts(b, actions) {
  const head = el(
    'div',
    { className: 'head' },
    el('span', { className: 'key', textContent: b.key }),
    el('span', {
      className: `state ${b.state || ''}`,
      textContent: b.state === 'forced-closed' ? 'forced closed: never trips' : b.state || 'unknown',
    }),
    el('span', {
      textContent: b.notAnswering ? 'not answering' : `open ${duration(b.openMsLast24h)} in the last 24 h`,
    }),
    el('span', { textContent: b.reporters === null ? '' : `${b.reporters} reporter${b.reporters === 1 ? '' : 's'}` }),
    el('span', { textContent: b.probes.length ? `probe held by ${b.probes.map((p) => p.holder).join(', ')}` : '' }),
  );
  const why = el('div', { className: 'why', textContent: b.reason ? `why: ${b.reason}` : '' });
  const list = el('ol', { className: 'transitions', reversed: true });
  for (const t of b.transitions.slice(0, 20)) {
    const who = t.actor ? ` (by "${t.actor}", claimed${t.sender ? `; sent by ${t.sender}` : ''})` : '';
    list.append(
      el('li', {
        className: 'transition',
        textContent: `${time(t.at)}  ${t.from} -> ${t.to}  ${t.reason}: ${t.detail}${who}`,
      }),
    );
  }
  const buttons = el('div', { className: 'actions' });
  for (const [path, label] of [
    ['open', 'force open'],
    ['force-close', 'force closed (never trips)'],
    ['reset', 'reset to automatic'],
  ]) {
    const btn = el('button', {
      textContent: label,
      title: actions ? '' : 'read-only console: start it with --allow-actions',
    });
    btn.dataset.action = path;
    btn.addEventListener('click', () => act(`/api/breakers/${path}`, { key: b.key }).then(tick));
    buttons.append(btn);
  }
  return { head, why, list, buttons };
}

function drawBreakers(breakers, now, actions) {
  const keys = new Set(breakers.map((b) => b.key));
  for (const [key, c] of cards) {
    if (keys.has(key)) continue;
    c.card.remove();
    cards.delete(key);
  }
  for (const b of breakers) {
    const json = JSON.stringify(b) + actions;
    let c = cards.get(b.key);
    if (!c) {
      c = { card: el('div', { className: 'breaker' }), json: '', drawnAt: 0 };
      c.card.dataset.key = b.key;
      cards.set(b.key, c);
    }
    const changed = c.json !== json;
    if (changed) {
      const parts = breakerParts(b, actions);
      c.parts = parts;
      c.json = json;
      c.card.dataset.state = b.state || '';
    }
    if (changed || now - c.drawnAt >= 5_000) {
      const log = b.transitions.map((t) => t.at);
      const start = Math.max(now - 24 * 3600_000, log.length ? Math.min(...log) : now - 60_000);
      const axis = el(
        'div',
        { className: 'axis' },
        el('span', { textContent: `from ${time(start)}` }),
        el('span', { textContent: `now ${time(now)}` }),
      );
      const p = c.parts;
      c.card.replaceChildren(p.head, p.why, drawTimeline(b, now), axis, p.list, p.buttons);
      c.drawnAt = now;
    }
    $('breakers').append(c.card);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Mosaics
// ---------------------------------------------------------------------------------------------------------

let listed = '';
function drawMosaicList(mosaics) {
  const json = JSON.stringify(mosaics) + selected;
  if (json === listed) return;
  listed = json;
  const body = $('mosaics').querySelector('tbody');
  body.replaceChildren();
  for (const m of mosaics) {
    const row = el(
      'tr',
      { className: m.workflowId === selected ? 'selected' : '' },
      el('td', { textContent: m.name }),
      el('td', { textContent: m.status }),
      el('td', { textContent: m.progress === null ? '' : `${m.progress}%` }),
      el('td', { textContent: m.source || '' }),
      el('td', { textContent: m.zoom === null ? '' : String(m.zoom) }),
      el('td', { textContent: m.startTime ? new Date(m.startTime).toLocaleString() : '' }),
    );
    row.dataset.workflowId = m.workflowId;
    row.addEventListener('click', () => {
      selected = m.workflowId;
      detailShown = null;
      delete $('mosaic-detail').dataset.workflowId;
      $('tile-record').hidden = true;
      tick();
    });
    body.append(row);
  }
}

async function drawMosaicDetail() {
  if (!selected) return;
  const wanted = selected;
  const d = await getJson(`/api/mosaics/${encodeURIComponent(wanted)}`);
  // Another mosaic was chosen while this one was read: it is drawn on the next read instead.
  if (selected !== wanted) return;
  $('mosaic-detail').hidden = false;
  $('mosaic-title').textContent = `${d.name} (${d.status}${d.phase && d.status === 'running' ? `, ${d.phase}` : ''})`;
  const counts = el('div', { className: 'counts' });
  if (d.total !== null) counts.append(el('span', { textContent: `${d.done ?? 0} of ${d.total} tiles settled` }));
  for (const [k, v] of Object.entries(d.counts || {}))
    if (v) counts.append(el('span', { className: `count-${k}`, textContent: `${k} ${v}` }));
  if (d.waitingFor)
    counts.append(el('span', { textContent: `waiting for breaker ${d.waitingFor.key} (${d.waitingFor.state})` }));
  if (d.failure) counts.append(el('span', { textContent: `failed: ${d.failure}` }));
  $('mosaic-summary').replaceChildren(counts);
  const redrive = el('button', { textContent: 're-drive its dead-lettered tiles' });
  redrive.dataset.action = 'redrive';
  redrive.addEventListener('click', () => act('/api/mosaics/redrive', { workflowId: d.workflowId }).then(tick));
  $('mosaic-actions').replaceChildren(d.status !== 'running' ? redrive : '');
  $('no-map').hidden = !d.noMap;
  $('no-map').textContent = d.noMap || '';
  $('map-wrap').hidden = !d.map;
  if (!d.map) $('show-image').hidden = true;
  if (d.map && mapFor !== d.workflowId + d.closeTime) drawMap(d);
  detailShown = d;
  $('mosaic-detail').dataset.workflowId = d.workflowId;
}

function drawMap(d) {
  const m = d.map;
  mapFor = d.workflowId + d.closeTime;
  if (map) map.remove();
  // Pixel space of the mosaic: y grows down the image, Leaflet's latitude up, hence the minus signs.
  map = L.map('map', { crs: L.CRS.Simple, minZoom: -8, maxZoom: 4, zoomSnap: 0.25, attributionControl: false });
  const bounds = [
    [-m.height, 0],
    [0, m.width],
  ];
  // The image only when asked for: opening the page must not make the console decode a large TIFF.
  const show = $('show-image');
  show.hidden = !m.preview;
  show.onclick = () => {
    show.hidden = true;
    L.imageOverlay(`/api/mosaics/${encodeURIComponent(d.workflowId)}/preview.png`, bounds).addTo(map);
  };
  const renderer = L.canvas({ padding: 0.2 });
  const ts = m.tileSize;
  for (let i = 0; i < m.statuses.length; i++) {
    const code = m.statuses[i];
    const style = m.tiers[i] && m.tiers[i].startsWith('mirror:') ? MIRROR : TILE_STYLES[code];
    if (!style || (code === 'o' && style !== MIRROR)) continue;
    const row = Math.floor(i / m.cols);
    const col = i % m.cols;
    L.rectangle(
      [
        [-(row + 1) * ts, col * ts],
        [-row * ts, (col + 1) * ts],
      ],
      {
        renderer,
        color: style.colour,
        weight: 1,
        fillColor: style.colour,
        fillOpacity: style.fill,
        interactive: false,
      },
    ).addTo(map);
  }
  map.fitBounds(bounds);
  map.on('click', (e) => {
    const col = Math.floor(e.latlng.lng / ts);
    const row = Math.floor(-e.latlng.lat / ts);
    if (col < 0 || row < 0 || col >= m.cols || row >= m.rows) return;
    showTile(d.workflowId, row * m.cols + col, e.latlng);
  });
  const legend = $('legend');
  legend.replaceChildren();
  const seen = new Set(m.statuses);
  for (const [code, style] of Object.entries(TILE_STYLES)) {
    const n = [...m.statuses].filter((c) => c === code).length;
    legend.append(
      el(
        'li',
        { className: seen.has(code) ? '' : 'absent' },
        el('span', { className: 'swatch', style: `background:${code === 'o' ? 'transparent' : style.colour}` }),
        `${style.name} ${n}`,
      ),
    );
  }
  legend.append(
    el(
      'li',
      {},
      el('span', { className: 'swatch', style: `background:${MIRROR.colour}` }),
      `mirror ${Object.values(m.tiers).filter((t) => t.startsWith('mirror:')).length}`,
    ),
  );
}

async function showTile(workflowId, index, latlng) {
  try {
    const t = await getJson(`/api/mosaics/${encodeURIComponent(workflowId)}/tiles/${index}`);
    const lines = [
      `tile ${t.z}/${t.x}/${t.y} (#${t.i})`,
      `status: ${t.status}`,
      `reason: ${t.reason}`,
      `attempts: ${t.attempts}`,
      `HTTP status: ${t.httpStatus === undefined ? '-' : t.httpStatus === null ? 'no response' : t.httpStatus}`,
      `breaker state that decided it: ${t.breakerState || '-'}`,
    ];
    if (t.tier) lines.push(`served by: ${t.tier}`);
    $('tile-record').hidden = false;
    $('tile-record').textContent = lines.join('\n');
    L.popup()
      .setLatLng(latlng)
      .setContent(el('pre', { className: 'popup-record', textContent: lines.join('\n') }))
      .openOn(map);
  } catch (err) {
    say(String(err.message || err));
  }
}

// ---------------------------------------------------------------------------------------------------------

async function refresh() {
  try {
    overview = await getJson('/api/overview');
    $('mode').textContent = overview.allowActions ? 'actions on' : 'read-only';
    $('mode').className = overview.allowActions ? 'mode actions' : 'mode';
    $('updated').textContent = `updated ${time(overview.now)}`;
    drawBreakers(overview.breakers, overview.now, overview.allowActions);
    $('breakers-empty').hidden = overview.breakers.length > 0;
    if (!selected && overview.mosaics.length) selected = overview.mosaics[0].workflowId;
    drawMosaicList(overview.mosaics);
    const row = overview.mosaics.find((m) => m.workflowId === selected);
    // A running mosaic's counts move: read it again; a finished one only when it changes.
    if (
      !detailShown ||
      detailShown.workflowId !== selected ||
      detailShown.status === 'running' ||
      (row && row.status !== detailShown.status)
    )
      await drawMosaicDetail();
  } catch (err) {
    say(`could not read the console: ${err.message || err}`);
  }
}

// One read at a time: a slow server must not pile reads up.
let busy = false;
async function tick() {
  if (busy) return;
  busy = true;
  try {
    await refresh();
  } finally {
    busy = false;
  }
}
tick();
setInterval(tick, 1000);
