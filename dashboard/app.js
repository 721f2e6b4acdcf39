// The llm-relay dashboard: reads the public reporting API (/api/reporting/v2) and draws it. No library,
// no build step. Report data only ever reaches the page as text (textContent, text nodes, attributes),
// never as markup. Times are UTC throughout (format.js says why).
import { drawChart } from './chart.js';
import { ZONE, cacheText, endpoint, instant, int, isError, ms, pct, statusText, time, tokens, usd } from './format.js';

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

// ---- the chart (chart.js): UTC days, weeks or months from the range's start (or the first day) on
const UNIT_TITLES = { day: 'per day', week: 'per week (from Monday)', month: 'per month' };
function showChart(groups, from) {
  const unit = drawChart(chart, s, groups, from ? Date.parse(from) : null);
  $('chart-unit').textContent = UNIT_TITLES[unit];
}

// ---- the requests table
let generation = 0;
let listParams = new URLSearchParams();
let cursor = null;

function row(r) {
  const cache = cacheText(r);
  const { method, path } = endpoint(r);
  const used = tokens(r.usage);
  const hit = cache === 'hit' || cache === 'coalesced';
  const tr = h('tr', { 'data-testid': 'request-row', 'data-id': r.id, tabindex: 0, class: isError(r) ? 'error' : '', 'aria-haspopup': 'dialog' },
    h('td', {}, time(r.request?.timestamp)),
    h('td', { class: 'path', title: method ? `${method} ${path}` : 'reported through POST /api/reporting/v2/request' },
      h('span', { class: 'clip' }, ...(method ? [h('span', { class: 'method' }, method), ' '] : []), h('span', { class: method ? '' : 'muted' }, path))),
    h('td', { class: 'model', title: r.model }, h('span', { class: 'clip' }, r.model)), h('td', {}, r.metadata?.environment),
    h('td', {}, statusText(r)), h('td', { class: hit ? 'hit' : '' }, cache),
    h('td', { class: `num${used.title ? ' estimated' : ''}`, title: used.title }, used.text),
    h('td', { class: 'num' }, ms(r.durationMs)),
    h('td', { class: 'num', title: 'costSavedUsd' in r ? `saved ${usd(r.costSavedUsd)}` : '' }, usd(r.costUsd)),
    h('td', { class: 'open', 'aria-hidden': 'true' }, '›'));
  tr.addEventListener('click', () => openReport(r.id));
  tr.addEventListener('keydown', (e) => {
    if (e.target !== tr || (e.key !== 'Enter' && e.key !== ' ')) return;
    e.preventDefault(); // a space would scroll the page
    openReport(r.id);
  });
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
    api('/stats', day).then((r) => gen === generation && showChart(r.groups ?? [], listParams.get('from')), (err) => { if (gen === generation) chart.replaceChildren(); throw err; }),
    loadRequests(gen, true),
  ]);
  if (gen !== generation) return;
  const failed = done.find((d) => d.status === 'rejected');
  if (failed) status(problem(failed.reason), 'error');
  else status(`Updated ${time(new Date())} ${ZONE}`, 'ready');
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
  const used = tokens(r.usage, true);
  const { method, path } = endpoint(r);
  const facts = [
    ['Id', r.id], ['Received', instant(r.receivedAt)], ['Client', [md.client, md.clientVersion].filter(Boolean).join(' ')],
    ['Environment', md.environment], ['Prompt id', md.promptId], ['Provider', r.provider], ['Model', r.model],
    ['Endpoint', method ? `${method} ${path}` : path], ['Upstream', r.proxy?.upstream ?? undefined],
    ['Status', statusText(r)], ['Error', r.proxy?.error ?? undefined],
    ['Request at', instant(r.request?.timestamp)], ['Response at', instant(r.response?.timestamp)],
    ['Duration', ms(r.durationMs)], ['Cache', cacheText(r)],
    ['Tokens in / out / total', used.title ? `${used.text} (estimated)` : used.text],
    ['Cost', usd(r.costUsd)], ['Cost saved', 'costSavedUsd' in r ? usd(r.costSavedUsd) : undefined],
    ['Bytes request / response', `${int(r.requestBytes)} / ${int(r.responseBytes)}`],
  ];
  $('detail-facts').replaceChildren(
    ...facts.filter(([, v]) => v !== undefined).flatMap(([k, v]) => [h('dt', {}, k), h('dd', { 'data-fact': k }, v === '' ? '—' : v)]),
  );
  $('detail-title').textContent = `${r.model ?? 'Request'} · ${time(r.request?.timestamp)} ${ZONE}`;
  $('detail-properties').textContent = json(r.properties ?? {});
  // Past RELAY_BODY_RETENTION a report keeps everything but its bodies, and says so.
  const gone = r.bodiesExpired === true ? '(expired: past the body retention)' : undefined;
  $('detail-request').textContent = gone ?? json(r.request?.body);
  $('detail-response').textContent = gone ?? json(r.response?.body);
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
