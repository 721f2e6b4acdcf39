// Requests Node's HTTP parser rejects before fastify sees them (oversized heads, garbage, slow senders)
// still get a JSON answer in the relay's error shape.
import { type IncomingMessage, STATUS_CODES, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

export function clientErrorHandler(maxHeaderBytes: number): (err: NodeJS.ErrnoException, socket: Socket) => void {
  return (err, socket) => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    let status = 400;
    let code = 'RELAY_ERR_BAD_REQUEST';
    let message = `Malformed HTTP request (${err.code ?? 'parse error'})`;
    if (err.code === 'HPE_HEADER_OVERFLOW') {
      status = 431;
      code = 'RELAY_ERR_HEADERS_TOO_LARGE';
      message = `The request headers are larger than the limit of ${maxHeaderBytes} bytes (RELAY_MAX_HEADER_BYTES)`;
    } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      status = 408;
      code = 'RELAY_ERR_REQUEST_TIMEOUT';
      message = 'The request was not received in time';
    }
    const body = JSON.stringify({ statusCode: status, code, error: STATUS_CODES[status], message });
    const answer = () => {
      if (socket.writable) {
        socket.write(
          `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
            `Content-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
        );
      }
      socket.destroy();
    };
    // Garbage pipelined behind a good request must not cost that request its answer: let it finish first.
    // (Only when that request was read whole: otherwise this error is about its own body.)
    const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
    if (inFlight && inFlight.req?.complete && !inFlight.writableFinished && !inFlight.destroyed) {
      inFlight.once('finish', answer);
      inFlight.once('close', () => socket.destroy());
    } else answer();
  };
}

/** CONNECT (a tunnel request) is not something a relay of HTTP APIs does: say so instead of hanging up. */
export function refuseConnect(_req: IncomingMessage, socket: Duplex): void {
  const body = JSON.stringify({
    statusCode: 405,
    code: 'RELAY_ERR_METHOD_NOT_ALLOWED',
    error: STATUS_CODES[405],
    message: 'CONNECT is not supported: the relay forwards HTTP requests, it does not open tunnels',
  });
  socket.end(
    `HTTP/1.1 405 ${STATUS_CODES[405]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Content-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
  );
}
