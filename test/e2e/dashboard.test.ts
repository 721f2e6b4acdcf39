// /dashboard in a real browser (Debian's chromium, driven by playwright-core) against a real relay holding
// reports with hand-computed numbers: the totals, the chart on its time axis (a gap of days, a new year),
// the table (endpoint, tokens, a broken stream as an error, sub-cent costs), the filters, paging, one
// report in full, a stream cut through the real proxy, and the token hand-over. Plus the plain HTTP facts
// of the page's files. Chromium missing is a failure that says how to install it, never a skip.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, type BrowserContext, type Page, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RelayConfig } from '../../src/config.js';
import { DASHBOARD_PATHS } from '../../src/http/dashboard-routes.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { chat } from '../helpers/proxy-call.js';
import { type TestRelay, startRelay } from '../helpers/relay.js';

const CHROMIUM = '/usr/bin/chromium';
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ARTIFACTS = join(ROOT, 'test/artifacts');

// ---- a relay (app.ts registers /dashboard itself)

type DashboardRelay = TestRelay;

function startDashboardRelay(settings: Partial<RelayConfig> = {}): Promise<DashboardRelay> {
  return startRelay({ logLevel: 'warn', cacheUrl: 'memory', reportsUrl: 'sqlite', ...settings });
}

function requireChromium(): void {
  if (!existsSync(CHROMIUM))
    throw new Error(`Chromium is not installed at ${CHROMIUM}; the dashboard test needs it. Install it with: apt-get install -y chromium`);
}

async function launchChromium(): Promise<Browser> {
  requireChromium();
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
}

// ---- reports with known numbers

interface Fixture {
  at: string;
  ms: number;
  env: string;
  model: string;
  tokens?: [number, number];
  status?: number;
  hit?: boolean;
  saved?: number;
  team: string;
  anthropic?: boolean;
  /** reported as a proxied exchange (the `proxy` object the proxy writes, posted like any unknown field) */
  path?: string;
  outcome?: 'complete' | 'stream-error';
  /** a streamed answer without usage, whose tokens the relay estimates (texts chosen to count 12 in, 40 out) */
  estimated?: boolean;
}

// Prices (config/prices.json, USD per million tokens in/out): gpt-4o-mini 0.15/0.6, gpt-4o 2.5/10,
// claude-3-5-haiku 0.8/4. A hit costs 0 and carries costSavedUsd. Two days of 2024, no traffic on the
// first two days of 2025, then the rest on 2025-01-03.
const FIXTURES: Fixture[] = [
  { at: '2024-12-30T09:00:00.000Z', ms: 1000, env: 'production', model: 'gpt-4o-mini', tokens: [1000, 500], team: 'search' }, // $0.00045
  { at: '2024-12-30T10:00:00.000Z', ms: 2000, env: 'production', model: 'gpt-4o', tokens: [2000, 1000], team: 'ads', path: '/v1/chat/completions' }, // $0.015
  { at: '2024-12-31T11:00:00.000Z', ms: 50, env: 'production', model: 'gpt-4o', tokens: [2000, 1000], hit: true, saved: 0.015, team: 'ads', path: '/v1/chat/completions' },
  { at: '2024-12-31T12:00:00.000Z', ms: 3000, env: 'staging', model: 'gpt-4o-mini', tokens: [4000, 2000], team: 'ads' }, // $0.0018
  { at: '2025-01-03T08:00:00.000Z', ms: 500, env: 'staging', model: 'gpt-4o-mini', status: 500, team: 'ads' }, // no usage: cost null
  { at: '2025-01-03T09:00:00.000Z', ms: 10, env: 'staging', model: 'gpt-4o-mini', tokens: [1000, 500], hit: true, saved: 0.00045, team: 'ads' },
  { at: '2025-01-03T10:00:00.000Z', ms: 1500, env: 'dev', model: 'claude-3-5-haiku-20241022', tokens: [1000, 200], anthropic: true, team: 'search', path: '/anthropic/v1/messages' }, // $0.0016
  // a 200 whose stream the upstream cut: no usage arrived, and it is an error
  { at: '2025-01-03T11:00:00.000Z', ms: 700, env: 'production', model: 'gpt-4o-mini', team: 'ads', path: '/v1/chat/completions', outcome: 'stream-error' },
  // a stream without usage whose tokens the relay estimated: $0.0000258
  { at: '2025-01-03T12:00:00.000Z', ms: 800, env: 'dev', model: 'gpt-4o-mini', tokens: [12, 40], team: 'ads', path: '/v1/chat/completions', estimated: true },
];

/** o200k counts these as 5 and 40 tokens; with OpenAI's message overhead the request is 12 (token-estimate.ts). */
const ESTIMATED_QUESTION = 'Count my tokens please.';
const ESTIMATED_ANSWER =
  'The relay counted these tokens itself, because the stream carried no usage. Every streamed answer without usage gets an estimate like this one, marked with a tilde in the table and in the report view.';

function requestBody(f: Fixture, i: number) {
  if (f.estimated) return { model: f.model, stream: true, messages: [{ role: 'user', content: ESTIMATED_QUESTION }] };
  return {
    model: f.model,
    max_tokens: 512,
    // markup in the data must come out as text
    messages: [{ role: 'user', content: `Question ${i}: what does <img src=x onerror="document.title='pwned'"> do?` }],
  };
}

function responseBody(f: Fixture, i: number) {
  if (f.status === 500) return { error: { message: 'upstream exploded', type: 'server_error' } };
  const text = `Answer ${i}. ${'All work and no play. '.repeat(200)}<b>the end</b>`;
  // what a cut or usage-less stream assembles to: the text so far, no usage
  if (f.outcome === 'stream-error' || f.estimated)
    return { id: `chatcmpl-${i}`, object: 'chat.completion', model: f.model,
      choices: [{ index: 0, message: { role: 'assistant', content: f.estimated ? ESTIMATED_ANSWER : text.slice(0, 40) }, finish_reason: f.estimated ? 'stop' : null }] };
  const [input, output] = f.tokens!;
  if (f.anthropic)
    return { id: `msg_${i}`, type: 'message', role: 'assistant', model: f.model, content: [{ type: 'text', text }],
      usage: { input_tokens: input, output_tokens: output } };
  return { id: `chatcmpl-${i}`, object: 'chat.completion', model: f.model,
    choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
    usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output } };
}

function reportOf(f: Fixture, i: number) {
  return {
    metadata: { client: 'dash-test', clientVersion: '1.0.0', environment: f.env, promptId: `prompt-${i}` },
    request: { timestamp: f.at, body: requestBody(f, i) },
    response: {
      timestamp: new Date(Date.parse(f.at) + f.ms).toISOString(),
      status: f.status ?? 200,
      body: responseBody(f, i),
      ...(f.estimated ? { streamed: true } : {}),
    },
    properties: { team: f.team },
    cacheEnabled: true,
    cacheHit: f.hit === true,
    ...(f.saved === undefined ? {} : { costSavedUsd: f.saved }),
    ...(f.path === undefined
      ? {}
      : { proxy: { method: 'POST', path: f.path, upstream: 'https://api.example.com', cacheStatus: f.hit ? 'HIT' : 'MISS', outcome: f.outcome ?? 'complete' } }),
  };
}

/** Stores a fixture through the direct API and returns its id. */
async function store(relay: TestRelay, f: Fixture, i: number): Promise<string> {
  return (await postReport(relay.url, reportOf(f, i))).id;
}

async function postReport(url: string, report: unknown, headers: Record<string, string> = {}): Promise<any> {
  const res = await fetch(`${url}/api/reporting/v2/request`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(report),
  });
  expect(res.status).toBe(201);
  return res.json();
}

// ---- reading the page

const byId = (id: string) => `[data-testid="${id}"]`;
/** The element's text now (undefined while it is absent): never waits, so it can be polled. */
const text = async (page: Page, id: string) => (await (await page.$(byId(id)))?.textContent())?.trim();
/**
 * Waits for what the page shows. 20 s: with the whole suite on two cores, a page's first fetches have taken
 * over 10 s (once: the chart's unit still the page's default after 10 s, and right away when run alone).
 */
const poll = <T>(fn: () => Promise<T>) => expect.poll(fn, { timeout: 20_000, interval: 50 });

async function totals(page: Page) {
  const ids = ['total-requests', 'total-hit-ratio', 'total-cost', 'total-cost-saved', 'total-tokens', 'total-errors', 'total-latency'];
  return Object.fromEntries(await Promise.all(ids.map(async (id) => [id.slice(6), await text(page, id)])));
}

const rows = (page: Page) =>
  page.$$eval(byId('request-row'), (trs) => trs.map((tr) => Array.from(tr.querySelectorAll('td'), (td: { textContent: string | null }) => td.textContent)));

const bars = (page: Page) =>
  page.$$eval(byId('chart-bar'), (rects) => rects.map((r) => [r.getAttribute('data-day'), Number(r.getAttribute('data-requests'))]));

/** Rows as the page shows them (in UTC): time, endpoint, model, environment, status, cache, tokens, duration, cost, chevron. */
function expectedRow(i: number, cost: string): string[] {
  const f = FIXTURES[i]!;
  const ms = f.ms < 1000 ? `${f.ms} ms` : `${(f.ms / 1000).toFixed(2)} s`;
  const mark = f.estimated ? '~' : '';
  const tokens = f.tokens ? f.tokens.map((n) => `${mark}${n.toLocaleString('en-US')}`).join(' / ') : '—';
  const status = `${f.status ?? 200}${f.outcome === 'stream-error' ? ' · stream broke' : ''}`;
  return [f.at.slice(0, 19).replace('T', ' '), f.path ? `POST ${f.path}` : 'direct API', f.model, f.env, status,
    f.hit ? 'hit' : 'miss', tokens, ms, cost, '›'];
}
const COSTS = ['$0.00045', '$0.015', '$0.00', '$0.0018', '—', '$0.00', '$0.0016', '—', '$0.0000258'];
const newestFirst = (indexes: number[]) => [...indexes].sort((a, b) => b - a).map((i) => expectedRow(i, COSTS[i]!));
const ALL = FIXTURES.map((_, i) => i);

/** The chart's bars: their day, where their centre sits and how wide they are (in the SVG's own units). */
const barGeometry = (page: Page) =>
  page.$$eval(byId('chart-bar'), (rects) =>
    rects.map((r) => ({
      day: r.getAttribute('data-day'),
      centre: Number(r.getAttribute('x')) + Number(r.getAttribute('width')) / 2,
      width: Number(r.getAttribute('width')),
    })));

/** The labels under the chart: the dates, and the row of years (with where each sits). */
const chartLabels = (page: Page) => page.$$eval(byId('chart-label'), (texts) => texts.map((t) => t.textContent));
const chartYears = (page: Page) =>
  page.$$eval(byId('chart-year'), (texts) => texts.map((t) => ({ year: t.textContent, x: Number(t.getAttribute('x')) })));

// ---- the tests

let relay: DashboardRelay;
let browser: Browser;
let context: BrowserContext;
const pageProblems: string[] = [];
const ids: string[] = [];

beforeAll(async () => {
  relay = await startDashboardRelay();
  // one at a time, so the reports' ids follow their order
  for (const [i, f] of FIXTURES.entries()) ids.push(await store(relay, f, i));
});

afterAll(async () => relay?.close());

describe('the dashboard files over HTTP', () => {
  const FILES = [
    ['/dashboard', 'index.html', 'text/html; charset=utf-8'],
    ['/dashboard/', 'index.html', 'text/html; charset=utf-8'],
    ['/dashboard/app.js', 'app.js', 'text/javascript; charset=utf-8'],
    ['/dashboard/chart.js', 'chart.js', 'text/javascript; charset=utf-8'],
    ['/dashboard/format.js', 'format.js', 'text/javascript; charset=utf-8'],
    ['/dashboard/style.css', 'style.css', 'text/css; charset=utf-8'],
  ] as const;
  const SCRIPTS = ['app.js', 'chart.js', 'format.js'];

  it('serves every file of dashboard/ and nothing else', () => {
    expect(FILES.map(([, file]) => file).filter((f, i, all) => all.indexOf(f) === i).sort()).toEqual(readdirSync(join(ROOT, 'dashboard')).sort());
    expect([...DASHBOARD_PATHS].sort()).toEqual(FILES.map(([path]) => path).sort());
  });

  it.each(FILES)('GET %s answers 200 with %s, its content type, no-cache and the CSP', async (path, file, type) => {
    const res = await fetch(`${relay.url}${path}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(type);
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('content-security-policy')).toMatch(/^default-src 'self'; script-src 'self'; style-src 'self';/);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await res.text()).toBe(readFileSync(join(ROOT, 'dashboard', file), 'utf8'));
    // revalidation is a 304
    const again = await fetch(`${relay.url}${path}`, { headers: { 'if-none-match': res.headers.get('etag')! } });
    expect(again.status).toBe(304);
  });

  it('reference nothing outside the relay and have no inline script or style', () => {
    for (const file of ['index.html', 'style.css', ...SCRIPTS]) {
      const body = readFileSync(join(ROOT, 'dashboard', file), 'utf8');
      expect(body, file).not.toMatch(/https?:\/\//i);
      // nor protocol-relative ones (//host/…) in an attribute or a CSS url()
      expect(body, file).not.toMatch(/(src|href)=["']?\/\/|url\(\s*["']?\/\//i);
    }
    const html = readFileSync(join(ROOT, 'dashboard/index.html'), 'utf8');
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/i);
    expect(html).not.toMatch(/\son[a-z]+=|\sstyle=|<style/i);
    for (const file of SCRIPTS)
      expect(readFileSync(join(ROOT, 'dashboard', file), 'utf8'), file).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
  });

  it('is hidden from the OpenAPI document, and an unknown file under /dashboard is a 404', async () => {
    const doc = (await (await fetch(`${relay.url}/docs/json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/dashboard'))).toEqual([]);
    expect((await fetch(`${relay.url}/dashboard/nope.js`)).status).toBe(404);
  });
});

// A failed test of its own saying how to fix it (a failing beforeAll alone would show the browser tests as skipped).
it(`finds chromium at ${CHROMIUM}`, () => requireChromium());

describe('in a browser (Debian chromium)', () => {
  beforeAll(async () => {
    browser = await launchChromium();
    context = await browser.newContext({ timezoneId: 'UTC', locale: 'en-US', viewport: { width: 1280, height: 900 } });
    context.on('page', (page) => {
      // a CSP violation or a script error shows up here
      page.on('console', (m) => m.type() === 'error' && pageProblems.push(`console: ${m.text()}`));
      page.on('pageerror', (err) => pageProblems.push(`pageerror: ${err.message}`));
    });
    await mkdir(ARTIFACTS, { recursive: true });
  });
  afterAll(async () => browser?.close());

  describe('the dashboard in a browser', () => {
    it('shows the totals, the chart and the recent requests', async () => {
      const page = await context.newPage();
      await page.goto(`${relay.url}/dashboard`);
      // 9 reports, 2 hits; cost 0.00045 + 0.015 + 0.0018 + 0.0016 + 0.0000258 = 0.0188758; saved 0.015 + 0.00045;
      // errors: the 500 and the broken stream; durations 10 50 500 700 800 1000 1500 2000 3000 ms →
      // p50 800, p95 2000 + 0.6·1000, p99 2000 + 0.92·1000
      await poll(() => totals(page)).toEqual({
        requests: '9',
        'hit-ratio': '22.2%',
        cost: '$0.0189',
        'cost-saved': '$0.0155',
        tokens: '11,012 / 5,240',
        errors: '2',
        latency: '800 ms / 2.60 s / 2.92 s',
      });
      expect(await text(page, 'total-hits')).toBe('2 hits');
      await poll(() => rows(page)).toEqual(newestFirst(ALL));
      expect(await page.$$eval('tr.error', (trs) => trs.map((tr) => tr.getAttribute('data-id')))).toEqual([ids[7], ids[4]]);
      // the estimated counts say so
      expect(await page.getAttribute(`[data-id="${ids[8]}"] td.estimated`, 'title')).toMatch(/^estimated/);
      expect(await page.isHidden(byId('load-more'))).toBe(true);
      await page.waitForSelector(`${byId('status')}[data-state="ready"]`);
      // one zone, said on the page
      expect(await text(page, 'zone')).toBe('All times UTC');
      expect(await text(page, 'status')).toMatch(/^Updated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png'), fullPage: true });
      expect(pageProblems).toEqual([]);
      await page.close();
    });

    it('draws the chart on a time axis: the days without traffic keep their place, and the years are labelled', async () => {
      const page = await context.newPage();
      await page.goto(`${relay.url}/dashboard`);
      await poll(() => bars(page)).toEqual([['2024-12-30', 2], ['2024-12-31', 2], ['2025-01-01', 0], ['2025-01-02', 0], ['2025-01-03', 5]]);
      expect(await text(page, 'chart-unit')).toBe('per day');
      // one slot per day: the two empty days are as wide as two days with traffic
      const geometry = await barGeometry(page);
      const slot = geometry[1]!.centre - geometry[0]!.centre;
      expect(slot).toBeGreaterThan(50);
      for (const [i, bar] of geometry.entries()) expect(bar.centre - geometry[0]!.centre).toBeCloseTo(i * slot, 6);
      expect(await chartLabels(page)).toEqual(['Dec 30', 'Dec 31', 'Jan 1', 'Jan 2', 'Jan 3']);
      // 2024 from the start, 2025 from where it begins: between the bars of Dec 31 and Jan 1
      const years = await chartYears(page);
      expect(years.map((y) => y.year)).toEqual(['2024', '2025']);
      expect(years[1]!.x).toBeGreaterThan(geometry[1]!.centre);
      expect(years[1]!.x).toBeLessThan(geometry[2]!.centre);
      // the cost of a day that cost a fraction of a cent is readable in its tooltip
      expect(await page.textContent(`${byId('chart-bar')}[data-day="2025-01-03"] title`)).toBe('2025-01-03 (UTC): 5 requests, $0.00163');
      expect(pageProblems).toEqual([]);
      await page.close();
    });

    it('re-queries totals, chart and table when a filter changes, and keeps the filters in the address bar', async () => {
      const page = await context.newPage();
      await page.goto(`${relay.url}/dashboard`);
      await poll(() => text(page, 'total-requests')).toBe('9');

      await page.selectOption(byId('filter-environment'), 'staging');
      // staging: reports 3, 4, 5; durations 10 500 3000 → p95 500 + 0.9·2500, p99 500 + 0.98·2500
      await poll(() => totals(page)).toEqual({
        requests: '3',
        'hit-ratio': '33.3%',
        cost: '$0.0018',
        'cost-saved': '$0.00045',
        tokens: '5,000 / 2,500',
        errors: '1',
        latency: '500 ms / 2.75 s / 2.95 s',
      });
      await poll(() => rows(page)).toEqual(newestFirst([3, 4, 5]));
      await poll(() => bars(page)).toEqual([['2024-12-31', 1], ['2025-01-01', 0], ['2025-01-02', 0], ['2025-01-03', 2]]);
      expect(new URL(page.url()).searchParams.get('environment')).toBe('staging');

      await page.selectOption(byId('filter-cache'), 'true');
      await poll(() => rows(page)).toEqual(newestFirst([5]));
      expect(await text(page, 'total-hit-ratio')).toBe('100.0%');

      // a property filter, from a fresh form
      await page.click(byId('reset'));
      await poll(() => text(page, 'total-requests')).toBe('9');
      await page.fill(byId('filter-prop-name'), 'team');
      await page.fill(byId('filter-prop-value'), 'search');
      await page.click(byId('apply'));
      await poll(() => rows(page)).toEqual(newestFirst([0, 6]));
      expect(await text(page, 'total-cost')).toBe('$0.00205');

      // the address bar reproduces the view
      const shared = page.url();
      expect(new URL(shared).searchParams.get('propName')).toBe('team');
      const other = await context.newPage();
      await other.goto(shared);
      await poll(() => rows(other)).toEqual(newestFirst([0, 6]));
      expect(pageProblems).toEqual([]);
      await other.close();
      await page.close();
    });

    it('pages with "load more" and the cursor', async () => {
      const page = await context.newPage();
      await page.goto(`${relay.url}/dashboard?limit=3`);
      await poll(() => rows(page)).toEqual(newestFirst([6, 7, 8]));
      await page.click(byId('load-more'));
      await poll(() => rows(page)).toEqual(newestFirst([3, 4, 5, 6, 7, 8]));
      await page.click(byId('load-more'));
      await poll(() => rows(page)).toEqual(newestFirst(ALL));
      expect(await page.isHidden(byId('load-more'))).toBe(true);
      expect(pageProblems).toEqual([]);
      await page.close();
    });

    it('rows look and act like links: a pointer, a highlight, a chevron, and Enter opens one', async () => {
      const page = await context.newPage();
      await page.goto(`${relay.url}/dashboard`);
      const first = `[data-id="${ids[8]}"]`;
      await page.waitForSelector(first);
      const style = (sel: string) =>
        page.$eval(sel, (el) => {
          const css = (globalThis as any).getComputedStyle(el);
          return { cursor: css.cursor as string, background: css.backgroundColor as string };
        });
      const before = await style(first);
      expect(before.cursor).toBe('pointer');
      await page.hover(first);
      expect((await style(first)).background).not.toBe(before.background);
      expect(await page.$$eval(byId('request-row'), (trs) => trs.every((tr) => tr.getAttribute('tabindex') === '0' && tr.lastElementChild?.textContent === '›'))).toBe(true);
      // the keyboard: Tab from the filters' last button reaches the first row, and Enter opens it
      await page.focus(byId('reset'));
      await page.keyboard.press('Tab');
      expect(await page.evaluate('document.activeElement.getAttribute("data-id")')).toBe(ids[8]);
      await page.keyboard.press('Enter');
      await page.waitForSelector(`${byId('detail')}[open]`);
      await poll(() => text(page, 'detail-title')).toBe('gpt-4o-mini · 2025-01-03 12:00:00 UTC');
      expect(await page.textContent('[data-fact="Tokens in / out / total"]')).toBe('~12 / ~40 / ~52 (estimated)');
      expect(await page.textContent('[data-fact="Cost"]')).toBe('$0.0000258');
      await page.keyboard.press('Escape');
      expect(await page.isHidden(byId('detail'))).toBe(true);
      expect(pageProblems).toEqual([]);
      await page.close();
    });

    it('opens one report in full, bodies pretty-printed and escaped', async () => {
      const page = await context.newPage();
      await page.goto(`${relay.url}/dashboard`);
      await page.click(`[data-id="${ids[1]}"]`);
      await page.waitForSelector(`${byId('detail')}[open]`);
      const f = FIXTURES[1]!;
      expect(await text(page, 'detail-request')).toBe(JSON.stringify(requestBody(f, 1), null, 2));
      expect(await text(page, 'detail-response')).toBe(JSON.stringify(responseBody(f, 1), null, 2));
      expect(await text(page, 'detail-properties')).toBe(JSON.stringify({ team: 'ads' }, null, 2));
      const facts = Object.fromEntries(
        await page.$$eval(`${byId('detail-facts')} dd`, (dds) => dds.map((dd) => [dd.getAttribute('data-fact'), dd.textContent])),
      );
      expect(facts).toEqual({
        Id: ids[1],
        Received: expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC$/),
        Client: 'dash-test 1.0.0',
        Environment: 'production',
        'Prompt id': 'prompt-1',
        Provider: 'openai',
        Model: 'gpt-4o',
        Endpoint: 'POST /v1/chat/completions',
        Upstream: 'https://api.example.com',
        Status: '200',
        'Request at': '2024-12-30 10:00:00.000 UTC',
        'Response at': '2024-12-30 10:00:02.000 UTC',
        Duration: '2.00 s',
        Cache: 'miss',
        'Tokens in / out / total': '2,000 / 1,000 / 3,000',
        Cost: '$0.015',
        'Bytes request / response': expect.stringMatching(/^\d+ \/ [\d,]+$/),
      });
      expect(await text(page, 'detail-title')).toBe('gpt-4o · 2024-12-30 10:00:00 UTC');
      // the markup in the bodies stayed text
      expect(await page.$$eval(`${byId('detail')} img, ${byId('detail')} b`, (els) => els.length)).toBe(0);
      expect(await page.title()).toBe('llm-relay dashboard');
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-report.png') });

      // a hit shows what it saved
      await page.click(byId('detail-close'));
      await page.click(`[data-id="${ids[2]}"]`);
      await poll(() => page.textContent('[data-fact="Cost saved"]')).toBe('$0.015');
      // a stream that broke says so, and a direct report says where it came from
      await page.click(byId('detail-close'));
      await page.click(`[data-id="${ids[7]}"]`);
      await poll(() => page.textContent('[data-fact="Status"]')).toBe('200 · stream broke');
      await page.click(byId('detail-close'));
      await page.click(`[data-id="${ids[0]}"]`);
      await poll(() => page.textContent('[data-fact="Endpoint"]')).toBe('direct API');
      expect(pageProblems).toEqual([]);
      await page.close();
    });
  });

  describe('the chart over years', () => {
    let years: DashboardRelay;
    beforeAll(async () => {
      years = await startDashboardRelay();
      for (const [i, at] of ['2022-06-30T12:00:00.000Z', '2023-02-28T12:00:00.000Z', '2023-02-28T13:00:00.000Z', '2025-02-01T00:00:00.000Z'].entries())
        await postReport(years.url, reportOf({ ...FIXTURES[0]!, at }, i));
    });
    afterAll(async () => years?.close());

    it('sums into months, keeps the empty ones in their place, and names each year once', async () => {
      const page = await context.newPage();
      await page.goto(`${years.url}/dashboard`);
      await poll(() => text(page, 'chart-unit')).toBe('per month');
      const shown = await bars(page);
      expect(shown).toHaveLength(33);
      expect(shown.filter(([, n]) => n !== 0)).toEqual([['2022-06-01', 1], ['2023-02-01', 2], ['2025-02-01', 1]]);
      // every third month labelled, and every year named, 2025 too (it has no month label of its own)
      expect(await chartLabels(page)).toEqual(['Jun', 'Sep', 'Dec', 'Mar', 'Jun', 'Sep', 'Dec', 'Mar', 'Jun', 'Sep', 'Dec']);
      expect((await chartYears(page)).map((y) => y.year)).toEqual(['2022', '2023', '2024', '2025']);
      // a month is as wide as its days: February 2023 is 28/31 of March
      const geometry = await barGeometry(page);
      expect(geometry[8]!.day).toBe('2023-02-01');
      expect(geometry[8]!.width / geometry[9]!.width).toBeCloseTo(28 / 31, 6);
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-years.png'), fullPage: true });
      expect(pageProblems).toEqual([]);
      await page.close();
    });
  });

  describe('a stream the upstream cut, through the proxy', () => {
    let up: FakeUpstream;
    let proxied: DashboardRelay;
    beforeAll(async () => {
      up = await startFakeUpstream();
      proxied = await startDashboardRelay({ upstreamUrl: up.url });
    });
    afterAll(async () => {
      await proxied?.close();
      await up?.close();
    });

    it('counts among the errors, and its row says the stream broke', async () => {
      expect((await chat(proxied.url, 'a whole answer', { stream: true })).status).toBe(200);
      // events a moment apart, so the answer has started (200, two events out) when the upstream drops it
      up.eventGapMs = 20;
      up.dropAfterEvents = 2;
      // the client sees the cut (or a short body); the relay reports the exchange either way
      await chat(proxied.url, 'an answer cut short', { stream: true }).catch(() => undefined);
      await proxied.reports.flush();
      const page = await context.newPage();
      await page.goto(`${proxied.url}/dashboard`);
      await poll(() => text(page, 'total-errors')).toBe('1');
      const shown = (await rows(page)).map((cells) => [cells[1], cells[2], cells[4], cells[5]]);
      // newest first
      expect(shown).toEqual([
        ['POST /v1/chat/completions', 'gpt-4o-mini', '200 · stream broke', 'miss'],
        ['POST /v1/chat/completions', 'gpt-4o-mini', '200', 'miss'],
      ]);
      expect(await page.$$eval('tr.error', (trs) => trs.map((tr) => tr.children[4]?.textContent))).toEqual(['200 · stream broke']);
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-proxy.png'), fullPage: true });
      expect(pageProblems).toEqual([]);
      await page.close();
    });
  });

  describe('the dashboard leaves no trace', () => {
    it('made no call the relay would proxy (a favicon.ico would be forwarded upstream and reported)', async () => {
      const res = await fetch(`${relay.url}/api/reporting/v2/requests?limit=1000`);
      const page = (await res.json()) as { items: { id: string }[] };
      expect(page.items.map((r) => r.id).sort()).toEqual([...ids].sort());
    });
  });

  describe('the dashboard with RELAY_API_TOKENS', () => {
    let secured: DashboardRelay;
    beforeAll(async () => {
      secured = await startDashboardRelay({ apiTokens: ['dash-token'] });
      await postReport(secured.url, reportOf(FIXTURES[0]!, 0), { authorization: 'Bearer dash-token' });
    });
    afterAll(async () => secured?.close());

    it('serves the page files without a token (they hold no data: every number comes from /api)', async () => {
      for (const path of DASHBOARD_PATHS) expect((await fetch(`${secured.url}${path}`)).status, path).toBe(200);
      expect((await fetch(`${secured.url}/api/reporting/v2/requests`)).status).toBe(401);
    });

    it('takes ?token= once, keeps it for the tab, and sends it as x-relay-token', async () => {
      const tab = await browser.newContext({ timezoneId: 'UTC' });
      const page = await tab.newPage();
      const sent: (string | undefined)[] = [];
      page.on('request', (r) => r.url().includes('/api/') && sent.push(r.headers()['x-relay-token']));
      await page.goto(`${secured.url}/dashboard?token=dash-token&environment=production`);
      await poll(() => text(page, 'total-requests')).toBe('1');
      expect(new URL(page.url()).searchParams.has('token')).toBe(false);
      expect(new URL(page.url()).searchParams.get('environment')).toBe('production');
      expect(await page.evaluate('sessionStorage.getItem("llm-relay-token")')).toBe('dash-token');
      expect(sent.length).toBeGreaterThan(0);
      expect(sent.every((t) => t === 'dash-token')).toBe(true);
      await page.goto(`${secured.url}/dashboard`);
      await poll(() => rows(page)).toEqual([expectedRow(0, COSTS[0]!)]);
      await tab.close();
    });

    it('says how to give a token when it has none', async () => {
      const tab = await browser.newContext();
      const page = await tab.newPage();
      await page.goto(`${secured.url}/dashboard`);
      await poll(() => text(page, 'status')).toBe('This relay needs an access token: open /dashboard?token=YOUR_TOKEN');
      expect(await text(page, 'total-requests')).toBe('—');
      await tab.close();
    });
  });
});
