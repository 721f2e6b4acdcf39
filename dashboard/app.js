// The llm-relay dashboard: reads the public reporting API (/api/reporting/v2) and draws it. No library,
// no build step. Report data only ever reaches the page as text (textContent, text nodes, attributes),
// never as markup.
const API = '/api/reporting/v2';
const TOKEN_KEY = 'llm-relay-token';
const $ = (id) => document.querySelector(`[data-testid="${id}"]`);
const form = $('filters');
const chart = $('chart');
const SVG_NS = chart.namespaceURI; // the inline <svg>'s namespace, so no URL needs spelling out here

// ?token=… (or #token=…, which never reaches the server) is taken once, kept for this tab only, and
// removed from the address bar.
function takeToken() {
  const url = new URL(location.href);
  const hash = new URLSearchParams(url.hash.slice(1));
  const given = url.searchParams.get('token') ?? hash.get('token');
  if (given !== null) {
    sessionStorage.setItem(TOKEN_KEY, given);
    url.searchParams.delete('token');
    hash.delete('token');
    url.hash = hash.toString();
    history.replaceState(null, '', url);
  }
  return sessionStorage.getItem(TOKEN_KEY);
}
const token = takeToken();
const pageSize = Math.min(1000, Math.max(1, Number(new URLSearchParams(location.search).get('limit')) || 50));

async function api(path, params) {
  const query = params && String(params) ? `?${params}` : '';
  const res = await fetch(`${API}${path}${query}`, { headers: token ? { 'x-relay-token': token } : {} });
  const body = await res.json().catch(() => null);
  if (!res.ok) throw Object.assign(new Error(body?.message ?? `HTTP ${res.status}`), { status: res.status });
  return body;
}

function problem(err) {
  if (err.status === 401) return 'This relay needs an access token: open /dashboard?token=YOUR_TOKEN';
  return `Could not load: ${err.message}`;
}

function status(text, state) {
  const el = $('status');
  el.textContent = text;
  el.dataset.state = state;
}

// ---- formatting (the test formats its expected numbers the same way)
const int = (n) => (n ?? 0).toLocaleString('en-US');
const usd = (v) =>
  v == null ? '—' : `$${v.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: Math.abs(v) >= 1 ? 2 : 6 })}`;
const pct = (r) => (r == null ? '—' : `${(r * 100).toFixed(1)}%`);
const ms = (v) => (v == null ? '—' : v < 1000 ? `${Math.round(v)} ms` : `${(v / 1000).toFixed(2)} s`);
const pad = (n) => String(n).padStart(2, '0');
function time(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}
const json = (v) => (v === undefined ? '(none)' : JSON.stringify(v, null, 2));

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs)) if (v != null && v !== '') el.setAttribute(k, String(v));
  el.append(...children.map((c) => (c instanceof Node ? c : String(c ?? '—'))));
  return el;
}
const h = (tag, attrs = {}, ...children) => build(document.createElement(tag), attrs, children);
const s = (tag, attrs = {}, ...children) => build(document.createElementNS(SVG_NS, tag), attrs, children);

// ---- filters: the form is the state; it is mirrored in the address bar so a view can be shared
function filterParams() {
  const f = new FormData(form);
  const p = new URLSearchParams();
  const days = Number(f.get('range'));
  if (days) p.set('from', new Date(Date.now() - days * 86_400_000).toISOString());
  for (const k of ['environment', 'model', 'cacheHit']) if (f.get(k)) p.set(k, f.get(k));
  const name = String(f.get('propName')).trim();
  if (name) p.set(`property.${name}`, String(f.get('propValue')));
  return p;
}

function addOption(select, value) {
  if (![...select.options].some((o) => o.value === value)) select.append(new Option(value, value));
}

function readAddressBar() {
  const q = new URLSearchParams(location.search);
  for (const el of form.elements) {
    if (!el.name || !q.has(el.name)) continue;
    if (el.tagName === 'SELECT' && q.get(el.name)) addOption(el, q.get(el.name));
    el.value = q.get(el.name);
  }
}

function writeAddressBar() {
  const q = new URLSearchParams([...new FormData(form)].filter(([, v]) => v !== ''));
  if (pageSize !== 50) q.set('limit', String(pageSize));
  history.replaceState(null, '', String(q) ? `?${q}` : location.pathname);
}

async function loadOptions() {
  const [envs, models] = await Promise.all([api('/stats', 'groupBy=environment'), api('/stats', 'groupBy=model')]);
  for (const g of envs.groups ?? []) if (g.key != null) addOption($('filter-environment'), g.key);
  for (const g of models.groups ?? []) if (g.key != null) addOption($('filter-model'), g.key);
}

// ---- totals
function showTotals(t) {
  const l = t?.latencyMs;
  const values = {
    'total-requests': t && int(t.requests),
    'total-hit-ratio': t && pct(t.hitRatio),
    'total-hits': t ? `${int(t.cacheHits)} hits` : '',
    'total-cost': t && usd(t.costUsd),
    'total-cost-saved': t && usd(t.costSavedUsd),
    'total-tokens': t && `${int(t.inputTokens)} / ${int(t.outputTokens)}`,
    'total-errors': t && int(t.errors),
    'total-latency': l && [l.p50, l.p95, l.p99].map(ms).join(' / '),
  };
  for (const [id, text] of Object.entries(values)) $(id).textContent = text ?? '—';
  $('total-errors').classList.toggle('bad', Boolean(t?.errors));
}

// ---- chart: requests per day as bars (left scale), cost per day as a line (right scale)
const DAY = 86_400_000;
function fillDays(groups) {
  const byDay = new Map(groups.filter((g) => g.key != null).map((g) => [g.key, g]));
  const keys = [...byDay.keys()];
  if (keys.length < 2) return keys.map((k) => byDay.get(k));
  const first = Date.parse(keys[0]), last = Date.parse(keys[keys.length - 1]);
  if ((last - first) / DAY > 400) return keys.map((k) => byDay.get(k));
  const days = [];
  for (let t = first; t <= last; t += DAY) {
    const key = new Date(t).toISOString().slice(0, 10);
    days.push(byDay.get(key) ?? { key, requests: 0, costUsd: 0 });
  }
  return days;
}

function niceCeil(v, steps = [1, 2, 5, 10]) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return steps.map((m) => m * p).find((m) => v <= m * (1 + 1e-9));
}

function drawChart(groups) {
  const days = fillDays(groups);
  const [W, H, L, R, T, B] = [800, 220, 50, 70, 12, 28];
  const pw = W - L - R, ph = H - T - B;
  if (days.length === 0) return chart.replaceChildren(s('text', { x: W / 2, y: H / 2, class: 'none' }, 'No data'));
  // an even number of requests on top, so the middle line is a whole number too
  const maxReq = niceCeil(Math.max(2, ...days.map((d) => d.requests)), [1, 2, 4, 6, 8, 10]);
  const maxCost = niceCeil(Math.max(...days.map((d) => d.costUsd ?? 0)));
  const y = (v, max) => T + ph - (v / max) * ph;
  const bw = pw / days.length;
  const cx = (i) => L + i * bw + bw / 2;
  const parts = [];
  for (const f of [0, 0.5, 1]) {
    parts.push(s('line', { x1: L, x2: L + pw, y1: y(f, 1), y2: y(f, 1), class: 'grid' }));
    parts.push(s('text', { x: L - 6, y: y(f, 1) + 4, class: 'axis left' }, int(f * maxReq)));
    parts.push(s('text', { x: L + pw + 6, y: y(f, 1) + 4, class: 'axis right' }, usd(f * maxCost)));
  }
  const every = Math.ceil(days.length / 10);
  days.forEach((d, i) => {
    const barH = (d.requests / maxReq) * ph;
    const bar = s('rect', {
      x: cx(i) - (bw * 0.7) / 2, y: T + ph - barH, width: Math.max(1, bw * 0.7), height: barH, class: 'bar',
      'data-testid': 'chart-bar', 'data-day': d.key, 'data-requests': d.requests, 'data-cost': d.costUsd ?? 0,
    }, s('title', {}, `${d.key}: ${int(d.requests)} requests, ${usd(d.costUsd)}`));
    parts.push(bar);
    if (i % every === 0) parts.push(s('text', { x: cx(i), y: H - 8, class: 'axis day' }, d.key.slice(5)));
  });
  const points = days.map((d, i) => `${cx(i)},${y(d.costUsd ?? 0, maxCost)}`);
  parts.push(s('polyline', { points: points.join(' '), class: 'line' }));
  if (days.length <= 60) days.forEach((d, i) => parts.push(s('circle', { cx: cx(i), cy: y(d.costUsd ?? 0, maxCost), r: 3, class: 'dot' })));
  chart.replaceChildren(...parts);
}

// ---- the requests table
let generation = 0;
let listParams = new URLSearchParams();
let cursor = null;

function row(r) {
  const cache = r.cacheHit === true ? 'hit' : r.cacheHit === false ? 'miss' : '—';
  const tr = h('tr', { 'data-testid': 'request-row', 'data-id': r.id, tabindex: 0, class: r.status >= 400 ? 'error' : '' },
    h('td', {}, time(r.request?.timestamp)), h('td', {}, r.model), h('td', {}, r.metadata?.environment),
    h('td', {}, r.status), h('td', { class: cache }, cache), h('td', { class: 'num' }, ms(r.durationMs)),
    h('td', { class: 'num' }, usd(r.costUsd)));
  tr.addEventListener('click', () => openReport(r.id));
  tr.addEventListener('keydown', (e) => e.key === 'Enter' && openReport(r.id));
  return tr;
}

async function loadRequests(gen, fresh) {
  const p = new URLSearchParams(listParams);
  p.set('limit', String(pageSize));
  if (!fresh) p.set('cursor', cursor);
  const page = await api('/requests', p);
  if (gen !== generation) return;
  const tbody = $('requests').tBodies[0];
  if (fresh) tbody.replaceChildren();
  tbody.append(...page.items.map(row));
  cursor = page.nextCursor;
  $('load-more').hidden = !cursor;
  $('empty').hidden = tbody.rows.length > 0;
}

async function refresh() {
  const gen = ++generation;
  listParams = filterParams();
  writeAddressBar();
  status('Loading…', 'loading');
  const day = new URLSearchParams(listParams);
  day.set('groupBy', 'day');
  const done = await Promise.allSettled([
    api('/stats', listParams).then((r) => gen === generation && showTotals(r.totals), (err) => { if (gen === generation) showTotals(null); throw err; }),
    api('/stats', day).then((r) => gen === generation && drawChart(r.groups ?? []), (err) => { if (gen === generation) chart.replaceChildren(); throw err; }),
    loadRequests(gen, true),
  ]);
  if (gen !== generation) return;
  const failed = done.find((d) => d.status === 'rejected');
  if (failed) status(problem(failed.reason), 'error');
  else status(`Updated ${time(new Date())}`, 'ready');
}

// ---- one report in full
async function openReport(id) {
  let r;
  try {
    r = await api(`/requests/${encodeURIComponent(id)}`);
  } catch (err) {
    return status(problem(err), 'error');
  }
  const md = r.metadata ?? {};
  const u = r.usage;
  const facts = [
    ['Id', r.id], ['Received', r.receivedAt], ['Client', [md.client, md.clientVersion].filter(Boolean).join(' ')],
    ['Environment', md.environment], ['Prompt id', md.promptId], ['Provider', r.provider], ['Model', r.model],
    ['Status', r.status], ['Request at', r.request?.timestamp], ['Response at', r.response?.timestamp],
    ['Duration', ms(r.durationMs)],
    ['Cache', `${r.cacheEnabled === false ? 'off' : r.cacheHit ? 'hit' : r.cacheHit === false ? 'miss' : '—'}`],
    ['Tokens in / out / total', u ? `${int(u.inputTokens)} / ${int(u.outputTokens)} / ${int(u.totalTokens)}` : '—'],
    ['Cost', usd(r.costUsd)], ['Cost saved', 'costSavedUsd' in r ? usd(r.costSavedUsd) : undefined],
    ['Bytes request / response', `${int(r.requestBytes)} / ${int(r.responseBytes)}`],
    ['Proxy', r.proxy ? [r.proxy.method, r.proxy.path, r.proxy.cacheStatus, r.proxy.outcome, r.proxy.error].filter(Boolean).join(' · ') : undefined],
  ];
  $('detail-facts').replaceChildren(
    ...facts.filter(([, v]) => v !== undefined).flatMap(([k, v]) => [h('dt', {}, k), h('dd', { 'data-fact': k }, v === '' ? '—' : v)]),
  );
  $('detail-title').textContent = `${r.model ?? 'Request'} · ${time(r.request?.timestamp)}`;
  $('detail-properties').textContent = json(r.properties ?? {});
  $('detail-request').textContent = json(r.request?.body);
  $('detail-response').textContent = json(r.response?.body);
  if (!$('detail').open) $('detail').showModal();
}

// ---- wiring
form.addEventListener('submit', (e) => {
  e.preventDefault();
  refresh();
});
for (const select of form.querySelectorAll('select')) select.addEventListener('change', () => form.requestSubmit());
form.addEventListener('reset', () => setTimeout(refresh));
$('refresh').addEventListener('click', () => {
  loadOptions().catch(() => {});
  refresh();
});
$('load-more').addEventListener('click', async (e) => {
  e.target.disabled = true;
  await loadRequests(generation, false).catch((err) => status(problem(err), 'error'));
  e.target.disabled = false;
});
$('detail-close').addEventListener('click', () => $('detail').close());
$('detail').addEventListener('click', (e) => e.target === e.currentTarget && e.currentTarget.close());

readAddressBar();
loadOptions().catch(() => {}); // the same failure shows in the status line through refresh()
refresh();
