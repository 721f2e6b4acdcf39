// A raw call through the relay's proxy, returning status, headers and the whole body text.
export interface ProxyResult {
  status: number;
  headers: Headers;
  text: string;
  cache: string | null;
}

export async function chat(
  base: string,
  content: string,
  opts: { headers?: Record<string, string>; stream?: boolean; model?: string; signal?: AbortSignal } = {},
): Promise<ProxyResult> {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-default', ...opts.headers },
    body: JSON.stringify({
      model: opts.model ?? 'gpt-4o-mini',
      messages: [{ role: 'user', content }],
      ...(opts.stream ? { stream: true } : {}),
    }),
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, cache: res.headers.get('x-relay-cache') };
}
