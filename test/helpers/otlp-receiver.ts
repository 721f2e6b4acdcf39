// An OTLP/HTTP trace receiver the tests run themselves: POST /v1/traces in http/json or http/protobuf,
// decoded into one plain form. Protobuf is read by a small wire-format reader for the fields of
// opentelemetry/proto/collector/trace/v1 (ExportTraceServiceRequest) the tests look at: the tree has no
// protobuf decoder for requests (the exporter's otlp-transformer only writes them). It can also hang
// (never answer) to play an endpoint that is stuck.
import { type IncomingMessage, type RequestListener, type Server, createServer } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

export type AttrValue = string | number | boolean | AttrValue[] | { [k: string]: AttrValue } | null;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  traceState: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, AttrValue>;
  links: { traceId: string; spanId: string; attributes: Record<string, AttrValue> }[];
  /** 0 unset, 1 ok, 2 error */
  statusCode: number;
  resource: Record<string, AttrValue>;
  scope: { name: string; version: string };
  /** the content-type it came with */
  format: string;
}

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  requests: { contentType: string; headers: IncomingMessage['headers'] }[];
  /** when true, requests are held open and never answered */
  hang: boolean;
  /** resolves once at least n spans arrived (rejects after timeoutMs) */
  waitForSpans(n: number, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

// ── protobuf wire format ──
class Reader {
  pos = 0;
  constructor(private readonly buf: Buffer) {}
  get done(): boolean {
    return this.pos >= this.buf.length;
  }
  varint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const b = this.buf[this.pos++]!;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
    }
  }
  tag(): { field: number; wire: number } {
    const t = Number(this.varint());
    return { field: t >>> 3, wire: t & 7 };
  }
  bytes(): Buffer {
    const len = Number(this.varint());
    const out = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len;
    return out;
  }
  fixed64(): Buffer {
    const out = this.buf.subarray(this.pos, this.pos + 8);
    this.pos += 8;
    return out;
  }
  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.pos += 8;
    else if (wire === 2) this.bytes();
    else if (wire === 5) this.pos += 4;
    else throw new Error(`wire type ${wire}`);
  }
}

function fields(buf: Buffer, on: (field: number, wire: number, r: Reader) => void): void {
  const r = new Reader(buf);
  while (!r.done) {
    const { field, wire } = r.tag();
    const before = r.pos;
    on(field, wire, r);
    if (r.pos === before) r.skip(wire);
  }
}

function pbAnyValue(buf: Buffer): AttrValue {
  let v: AttrValue = null;
  fields(buf, (f, _w, r) => {
    if (f === 1) v = r.bytes().toString('utf8');
    else if (f === 2) v = r.varint() !== 0n;
    else if (f === 3) v = Number(BigInt.asIntN(64, r.varint()));
    else if (f === 4) v = r.fixed64().readDoubleLE(0);
    else if (f === 5) {
      const list: AttrValue[] = [];
      fields(r.bytes(), (f2, _w2, r2) => {
        if (f2 === 1) list.push(pbAnyValue(r2.bytes()));
      });
      v = list;
    } else if (f === 6) v = pbKeyValues(r.bytes(), 1);
    else if (f === 7) v = r.bytes().toString('base64');
  });
  return v;
}

/** repeated KeyValue at `field` of a message */
function pbKeyValues(buf: Buffer, field: number): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  fields(buf, (f, _w, r) => {
    if (f !== field) return;
    let key = '';
    let value: AttrValue = null;
    fields(r.bytes(), (f2, _w2, r2) => {
      if (f2 === 1) key = r2.bytes().toString('utf8');
      else if (f2 === 2) value = pbAnyValue(r2.bytes());
    });
    out[key] = value;
  });
  return out;
}

function pbSpan(buf: Buffer): Omit<ReceivedSpan, 'resource' | 'scope' | 'format'> {
  const s = { traceId: '', spanId: '', parentSpanId: '', traceState: '', name: '', kind: 0, startNs: 0n, endNs: 0n, attributes: {}, links: [], statusCode: 0 } as Omit<ReceivedSpan, 'resource' | 'scope' | 'format'>;
  s.attributes = pbKeyValues(buf, 9);
  fields(buf, (f, _w, r) => {
    if (f === 1) s.traceId = r.bytes().toString('hex');
    else if (f === 2) s.spanId = r.bytes().toString('hex');
    else if (f === 3) s.traceState = r.bytes().toString('utf8');
    else if (f === 4) s.parentSpanId = r.bytes().toString('hex');
    else if (f === 5) s.name = r.bytes().toString('utf8');
    else if (f === 6) s.kind = Number(r.varint());
    else if (f === 7) s.startNs = r.fixed64().readBigUInt64LE(0);
    else if (f === 8) s.endNs = r.fixed64().readBigUInt64LE(0);
    else if (f === 13) {
      const raw = r.bytes();
      const link = { traceId: '', spanId: '', attributes: pbKeyValues(raw, 4) };
      fields(raw, (f2, _w2, r2) => {
        if (f2 === 1) link.traceId = r2.bytes().toString('hex');
        else if (f2 === 2) link.spanId = r2.bytes().toString('hex');
      });
      s.links.push(link);
    } else if (f === 15)
      fields(r.bytes(), (f2, _w2, r2) => {
        if (f2 === 3) s.statusCode = Number(r2.varint());
      });
  });
  return s;
}

function decodeProtobuf(body: Buffer, format: string): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  fields(body, (f, _w, r) => {
    if (f !== 1) return;
    const rs = r.bytes();
    let resource: Record<string, AttrValue> = {};
    fields(rs, (f2, _w2, r2) => {
      if (f2 === 1) resource = pbKeyValues(r2.bytes(), 1);
    });
    fields(rs, (f2, _w2, r2) => {
      if (f2 !== 2) return;
      const ss = r2.bytes();
      const scope = { name: '', version: '' };
      fields(ss, (f3, _w3, r3) => {
        if (f3 === 1)
          fields(r3.bytes(), (f4, _w4, r4) => {
            if (f4 === 1) scope.name = r4.bytes().toString('utf8');
            else if (f4 === 2) scope.version = r4.bytes().toString('utf8');
          });
        else if (f3 === 2) out.push({ ...pbSpan(r3.bytes()), resource, scope, format });
      });
    });
  });
  return out;
}

// ── OTLP/JSON ──
function jsonValue(v: any): AttrValue {
  if (v === undefined || v === null) return null;
  if ('stringValue' in v) return v.stringValue;
  if ('boolValue' in v) return v.boolValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return Number(v.doubleValue);
  if ('arrayValue' in v) return (v.arrayValue.values ?? []).map(jsonValue);
  if ('kvlistValue' in v) return jsonAttributes(v.kvlistValue.values);
  if ('bytesValue' in v) return v.bytesValue;
  return null;
}

function jsonAttributes(list: any[] | undefined): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  for (const kv of list ?? []) out[kv.key] = jsonValue(kv.value);
  return out;
}

/** ids in OTLP/JSON are hex (the spec), though some writers send base64: both are read */
function jsonId(v: string | undefined, bytes: number): string {
  if (!v) return '';
  return /^[0-9a-f]+$/i.test(v) && v.length === bytes * 2 ? v.toLowerCase() : Buffer.from(v, 'base64').toString('hex');
}

function decodeJson(body: Buffer, format: string): ReceivedSpan[] {
  const doc = JSON.parse(body.toString('utf8'));
  const out: ReceivedSpan[] = [];
  for (const rs of doc.resourceSpans ?? []) {
    const resource = jsonAttributes(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      const scope = { name: ss.scope?.name ?? '', version: ss.scope?.version ?? '' };
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: jsonId(s.traceId, 16),
          spanId: jsonId(s.spanId, 8),
          parentSpanId: jsonId(s.parentSpanId, 8),
          traceState: s.traceState ?? '',
          name: s.name,
          kind: Number(s.kind ?? 0),
          startNs: BigInt(s.startTimeUnixNano),
          endNs: BigInt(s.endTimeUnixNano),
          attributes: jsonAttributes(s.attributes),
          links: (s.links ?? []).map((l: any) => ({ traceId: jsonId(l.traceId, 16), spanId: jsonId(l.spanId, 8), attributes: jsonAttributes(l.attributes) })),
          statusCode: Number(s.status?.code ?? 0),
          resource,
          scope,
          format,
        });
      }
    }
  }
  return out;
}

/** With `tls` (a PEM key and certificate) it listens for https. */
export async function startOtlpReceiver(tls?: { key: string; cert: string }): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: OtlpReceiver['requests'] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  const state = { hang: false };
  const handler: RequestListener = (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (state.hang) return; // held open: the exporter's timeout ends it
      const contentType = String(req.headers['content-type'] ?? '');
      requests.push({ contentType, headers: req.headers });
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const body = Buffer.concat(chunks);
      const got = contentType.includes('json') ? decodeJson(body, 'json') : decodeProtobuf(body, 'protobuf');
      spans.push(...got);
      for (const w of waiters.filter((w) => spans.length >= w.n)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
      // an empty ExportTraceServiceResponse
      if (contentType.includes('json')) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  };
  const server: Server = tls ? createTlsServer(tls, handler) : createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(state, {
    url: `${tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    spans,
    requests,
    async waitForSpans(n: number, timeoutMs = 10_000) {
      if (spans.length < n)
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`only ${spans.length} of ${n} spans arrived`)), timeoutMs);
          waiters.push({ n, resolve: () => (clearTimeout(timer), resolve()) });
        });
      return spans;
    },
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}
