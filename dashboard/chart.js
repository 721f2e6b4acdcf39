// Requests (bars, left scale) and cost (line, right scale) on a real time axis: every day between the first
// and the last has its place, so a day without traffic is a gap where it happened, never squeezed out.
// Days are UTC days, as the API groups them. A long span is summed into weeks (from Monday) or months so
// each bar stays wide enough to see and to point at. Under the dates runs a row of years: the first one
// at the start, each next one where it begins (a dashed line), so every year on the axis is named.
import { ZONE, day, int, usd } from './format.js';

const DAY = 86_400_000;
const [W, H, L, R, T, B] = [800, 236, 50, 70, 14, 44];
const PW = W - L - R;
const PH = H - T - B;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
/** at most this many labels fit under the plot */
const MAX_LABELS = 12;

const UNITS = {
  day: {
    maxDays: 92,
    floor: (t) => t,
    next: (t) => t + DAY,
    name: (t) => day(t),
    label: (d) => `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()}`,
    steps: [1, 2, 3, 7, 14],
  },
  week: {
    maxDays: 732,
    // back to the Monday (getUTCDay: 0 is Sunday)
    floor: (t) => t - ((new Date(t).getUTCDay() + 6) % 7) * DAY,
    next: (t) => t + 7 * DAY,
    name: (t) => `week of ${day(t)}`,
    label: (d) => `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()}`,
    steps: [1, 2, 4, 8, 13],
  },
  month: {
    maxDays: Infinity,
    floor: (t) => Date.UTC(new Date(t).getUTCFullYear(), new Date(t).getUTCMonth(), 1),
    next: (t) => Date.UTC(new Date(t).getUTCFullYear(), new Date(t).getUTCMonth() + 1, 1),
    name: (t) => day(t).slice(0, 7),
    label: (d) => MONTHS[d.getUTCMonth()],
    steps: [1, 2, 3, 6, 12, 24, 60],
  },
};

/**
 * The buckets from the first to the last day (or from the range's first day to today), each with the
 * sum of its days. `groups` are the API's day groups; `fromMs` the range's start, or null for all time.
 */
export function buckets(groups, fromMs, nowMs) {
  const days = groups.filter((g) => g.key != null && Number.isFinite(Date.parse(g.key)));
  if (days.length === 0) return { unit: 'day', list: [] };
  const keys = days.map((g) => Date.parse(g.key));
  let first = Math.min(...keys);
  let last = Math.max(...keys);
  if (fromMs != null) {
    first = Math.min(first, Date.parse(day(fromMs)));
    last = Math.max(last, Date.parse(day(nowMs)));
  }
  const span = (last - first) / DAY + 1;
  const unit = Object.keys(UNITS).find((u) => span <= UNITS[u].maxDays);
  const u = UNITS[unit];
  const list = [];
  for (let t = u.floor(first); t <= last; t = u.next(t)) list.push({ start: t, end: u.next(t), requests: 0, costUsd: 0 });
  for (const g of days) {
    const b = list.find((x) => Date.parse(g.key) < x.end);
    b.requests += g.requests;
    b.costUsd += g.costUsd ?? 0;
  }
  return { unit, list };
}

function niceCeil(v, steps = [1, 2, 5, 10]) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return steps.map((m) => m * p).find((m) => v <= m * (1 + 1e-9));
}

/** Draws into `svg` with `el(tag, attrs, ...children)` (SVG elements); returns the unit drawn. */
export function drawChart(svg, el, groups, fromMs, nowMs = Date.now()) {
  const { unit, list } = buckets(groups, fromMs, nowMs);
  if (list.length === 0) {
    svg.replaceChildren(el('text', { x: W / 2, y: H / 2, class: 'none' }, 'No requests in this range'));
    return unit;
  }
  const u = UNITS[unit];
  const t0 = list[0].start;
  const t1 = list[list.length - 1].end;
  const x = (t) => L + ((t - t0) / (t1 - t0)) * PW;
  // an even number of requests on top, so the middle line is a whole number too
  const maxReq = niceCeil(Math.max(2, ...list.map((b) => b.requests)), [1, 2, 4, 6, 8, 10]);
  const maxCostSeen = Math.max(...list.map((b) => b.costUsd));
  const maxCost = niceCeil(maxCostSeen);
  const y = (v, max) => T + PH - (v / max) * PH;
  const mid = (b) => (x(b.start) + x(b.end)) / 2;
  const parts = [];

  for (const f of [0, 0.5, 1]) {
    parts.push(el('line', { x1: L, x2: L + PW, y1: y(f, 1), y2: y(f, 1), class: 'grid' }));
    parts.push(el('text', { x: L - 6, y: y(f, 1) + 4, class: 'axis left' }, int(f * maxReq)));
    // without any cost (unpriced models, hits only) the right scale shows only its zero
    if (f === 0 || maxCostSeen > 0) parts.push(el('text', { x: L + PW + 6, y: y(f, 1) + 4, class: 'axis right' }, usd(f * maxCost)));
  }
  // the years: the first at the start (unless the next one begins too close to leave it room), then each
  // at the line where it begins
  const YEAR_Y = T + PH + 36;
  const firstYear = new Date(t0).getUTCFullYear();
  if (!(Date.UTC(firstYear + 1, 0, 1) < t1 && x(Date.UTC(firstYear + 1, 0, 1)) - L < 40))
    parts.push(el('text', { x: L, y: YEAR_Y, class: 'axis year-label', 'data-testid': 'chart-year' }, firstYear));
  for (let year = firstYear + 1; Date.UTC(year, 0, 1) < t1; year++) {
    const at = x(Date.UTC(year, 0, 1));
    // through the plot and down to its year, leaving the row of dates alone
    parts.push(el('line', { x1: at, x2: at, y1: T, y2: T + PH, class: 'year' }));
    parts.push(el('line', { x1: at, x2: at, y1: T + PH + 24, y2: YEAR_Y + 4, class: 'year' }));
    parts.push(el('text', { x: at + 4, y: YEAR_Y, class: 'axis year-label', 'data-testid': 'chart-year' }, year));
  }

  for (const b of list) {
    const slot = x(b.end) - x(b.start);
    const width = Math.max(1, Math.min(slot * 0.75, 48));
    const height = (b.requests / maxReq) * PH;
    const name = u.name(b.start);
    parts.push(el('rect', {
      x: mid(b) - width / 2, y: T + PH - height, width, height, class: 'bar',
      'data-testid': 'chart-bar', 'data-day': day(b.start), 'data-requests': b.requests, 'data-cost': b.costUsd,
    }, el('title', {}, `${name} (${ZONE}): ${int(b.requests)} requests, ${usd(b.costUsd)}`)));
  }
  parts.push(el('polyline', { points: list.map((b) => `${mid(b)},${y(b.costUsd, maxCost)}`).join(' '), class: 'line' }));
  if (list.length <= 62) for (const b of list) parts.push(el('circle', { cx: mid(b), cy: y(b.costUsd, maxCost), r: 3, class: 'dot' }));

  // a date under every step-th bucket
  const step = u.steps.find((n) => list.length / n <= MAX_LABELS) ?? Math.ceil(list.length / MAX_LABELS);
  list.forEach((b, i) => {
    if (i % step === 0) parts.push(el('text', { x: mid(b), y: T + PH + 18, class: 'axis tick', 'data-testid': 'chart-label' }, u.label(new Date(b.start))));
  });
  svg.replaceChildren(...parts);
  return unit;
}
