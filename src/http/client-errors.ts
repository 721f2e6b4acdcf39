// Requests Node's HTTP parser rejects before fastify sees them (oversized heads, garbage, slow senders)
// still get a JSON answer in the relay's error shape.
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';

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
    if (socket.writable) {
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
          `Content-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy();
  };
}
