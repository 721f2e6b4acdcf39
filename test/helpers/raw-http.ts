// Raw HTTP/1.1 over a socket, for requests undici refuses to send: write bytes, read every response until the
// server closes, and check a relay error in the RELAY_ERR_* shape.
import { STATUS_CODES } from 'node:http';
import net from 'node:net';
import { expect } from 'vitest';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export const latin1 = (s: string) => Buffer.from(s, 'latin1');

/** Writes the bytes to `url`'s port, reads until the server closes (or `ms` pass), and parses every HTTP response in order. */
export function rawExchange(url: string, bytes: Buffer, halfClose: boolean, ms = 5_000): Promise<{ responses: RawResponse[]; rest: string; timedOut: boolean }> {
  const port = Number(new URL(url).port);
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      socket.destroy();
    }, ms);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ ...parseResponses(Buffer.concat(chunks)), timedOut });
    });
    socket.write(bytes, () => {
      if (halfClose) socket.end();
    });
  });
}

export function parseResponses(buf: Buffer): { responses: RawResponse[]; rest: string } {
  const responses: RawResponse[] = [];
  let at = 0;
  for (;;) {
    const headEnd = buf.indexOf('\r\n\r\n', at);
    if (headEnd < 0) break;
    const [statusLine, ...lines] = buf.subarray(at, headEnd).toString('latin1').split('\r\n');
    const m = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine ?? '');
    if (!m) break;
    const headers: Record<string, string> = {};
    for (const l of lines) {
      const i = l.indexOf(':');
      headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    let bodyStart = headEnd + 4;
    let body = '';
    const status = Number(m[1]);
    if (status === 100) {
      at = bodyStart;
      continue;
    }
    if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      if (buf.length < bodyStart + n) break;
      body = buf.subarray(bodyStart, bodyStart + n).toString('utf8');
      bodyStart += n;
    } else if (headers['transfer-encoding'] === 'chunked') {
      let p = bodyStart;
      const parts: Buffer[] = [];
      for (;;) {
        const eol = buf.indexOf('\r\n', p);
        if (eol < 0) return { responses, rest: buf.subarray(at).toString('latin1') };
        const size = parseInt(buf.subarray(p, eol).toString('latin1'), 16);
        if (!Number.isFinite(size)) return { responses, rest: buf.subarray(at).toString('latin1') };
        if (size === 0) {
          p = eol + 4;
          break;
        }
        parts.push(buf.subarray(eol + 2, eol + 2 + size));
        p = eol + 2 + size + 2;
      }
      body = Buffer.concat(parts).toString('utf8');
      bodyStart = p;
    } else {
      body = buf.subarray(bodyStart).toString('utf8');
      bodyStart = buf.length;
    }
    responses.push({ status, headers, body });
    at = bodyStart;
  }
  return { responses, rest: buf.subarray(at).toString('latin1') };
}

export function expectRawRelayError(r: RawResponse, status: number | number[], codes: string | string[], what: string): void {
  const ctx = `${what} → HTTP ${r.status} ${r.body.slice(0, 200)}`;
  expect([status].flat(), ctx).toContain(r.status);
  let json: any;
  expect(() => (json = JSON.parse(r.body)), ctx).not.toThrow();
  expect(json, ctx).toMatchObject({ statusCode: r.status, error: STATUS_CODES[r.status], message: expect.any(String) });
  expect([codes].flat(), ctx).toContain(json.code);
}
