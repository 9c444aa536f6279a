/**
 * A small HTTP client for console tests: every call answers its status, headers and parsed JSON
 * body (or text), so a test asserts what an API user sees.
 */

export interface ConsoleAnswer<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface CallOptions {
  /** Sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** Raw Authorization header (wins over `token`). */
  authorization?: string;
  /** JSON body; a string is sent as it is. */
  body?: unknown;
  cookie?: string;
  headers?: Record<string, string>;
}

/** The console at `baseUrl`, called with fetch. */
export class ConsoleClient {
  constructor(readonly baseUrl: string) {}

  async call<T = any>(method: string, path: string, options: CallOptions = {}): Promise<ConsoleAnswer<T>> {
    const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
    if (options.authorization !== undefined) headers.authorization = options.authorization;
    else if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    if (options.cookie !== undefined) headers.cookie = options.cookie;
    let body: string | undefined;
    if (options.body !== undefined) {
      body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(`${this.baseUrl}${path}`, { method, headers, body, redirect: 'manual' });
    const text = await res.text();
    let parsed: unknown = text;
    if ((res.headers.get('content-type') ?? '').includes('application/json') && text) parsed = JSON.parse(text);
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  }

  get<T = any>(path: string, options?: CallOptions) {
    return this.call<T>('GET', path, options);
  }

  post<T = any>(path: string, options?: CallOptions) {
    return this.call<T>('POST', path, options);
  }

  put<T = any>(path: string, options?: CallOptions) {
    return this.call<T>('PUT', path, options);
  }

  delete<T = any>(path: string, options?: CallOptions) {
    return this.call<T>('DELETE', path, options);
  }

  /** Logs in like the dashboard; returns the `name=value` of the session cookie. */
  async login(token: string): Promise<string> {
    const answer = await this.post('/login', { body: { token }, headers: { 'x-shardcron-csrf': '1' } });
    if (answer.status !== 200) throw new Error(`login failed: ${answer.status} ${answer.text}`);
    const setCookie = answer.headers.get('set-cookie') ?? '';
    return setCookie.split(';')[0];
  }
}

/** The names of the fields a 400 answer names. */
export const badFields = (answer: ConsoleAnswer): string[] =>
  ((answer.body?.error?.details?.fields ?? []) as Array<{ field: string }>).map((f) => f.field).sort();
