/**
 * HTTP jobs: one request per item, the ShardingContext JSON in the `shardingContext` header; a 2xx
 * status is success, any other a failure carrying the status and the body's first 4 KB.
 *
 * Decisions:
 * - node:http / node:https, not fetch: Node 20's fetch cannot bound the connect phase without
 *   undici's Agent, which is not a dependency.
 * - Two timeouts. Connect: from the request's start (name lookup included) until the TCP socket
 *   is connected. Read: once connected, the longest wait for the response and between two pieces
 *   of it (a TLS handshake that stalls counts here). Each failure says which one fired, after how long.
 * - A connection of its own per request (`agent: false`, so `Connection: close`): one request per
 *   item and fire gains nothing from keep-alive, and no pooled socket outlives the run.
 * - Redirects are not followed: a 3xx is outside 200-299, so a failure (DESIGN.md: "any status
 *   outside 200-299"; ElasticJob's HttpJobExecutor counts anything below 400 as success).
 * - A 2xx body is read to its end and dropped (the run lasts as long as the response); an error
 *   body is read up to 4 KB and the response destroyed. Every response is consumed or destroyed.
 * - Messages name the method and the URL without its user info and query, which may hold secrets.
 */
import http, { type ClientRequest, type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { onAbort } from '../../shared/abort-listeners';
import type { ShardingContext } from '../../shared/config/job-definition';
import { SHARDING_CONTEXT_HEADER, shardingContextJson, type HttpSpec } from '../../shared/config/job-type-specs';
import { ByteHead } from './bounded-capture';
import { ExecutionFailure, abortedFailure, type ExecutorReport, type JobExecutor } from './job-executor';

/** Bytes of an error response's body a failure carries. */
export const ERROR_BODY_BYTES = 4096;

/** What went wrong, in `details.failure` of an HTTP job's {@link ExecutionFailure}. */
export type HttpFailureKind = 'status' | 'connect-timeout' | 'read-timeout' | 'network' | 'aborted';

/** Words for the network errors a user most often meets; others keep Node's message. */
function networkProblem(err: NodeJS.ErrnoException, url: URL): string {
  const where = `${url.hostname}:${url.port || (url.protocol === 'https:' ? 443 : 80)}`;
  switch (err.code) {
    case 'ECONNREFUSED':
      return `connection refused by ${where} (nothing listens there?)`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `host ${url.hostname} not found (${err.code})`;
    case 'ECONNRESET':
      return `connection reset by ${where} (${err.message})`;
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `${where} is unreachable (${err.code})`;
    default:
      return err.code ? `${err.message} (${err.code})` : err.message;
  }
}

/** Runs one HTTP item; see the module comment. */
function runRequest(spec: HttpSpec, ctx: ShardingContext): Promise<ExecutorReport> {
  const url = new URL(spec.url);
  const target = `${spec.method} ${url.origin}${url.pathname}`;
  const details = (failure: HttpFailureKind, more: Record<string, unknown> = {}) => ({ failure, method: spec.method, url: `${url.origin}${url.pathname}`, ...more });
  if (ctx.signal.aborted) return Promise.reject(abortedFailure(`HTTP ${target}`, ctx.signal, {}, details('aborted')));
  const body = spec.body !== undefined ? Buffer.from(spec.body, 'utf8') : undefined;
  const headers: Record<string, string | number> = { ...spec.headers, [SHARDING_CONTEXT_HEADER]: shardingContextJson(ctx, { ascii: true }) };
  if (body) headers['content-length'] = body.length;

  return new Promise((resolve, reject) => {
    let settled = false;
    let response: IncomingMessage | undefined;
    let connectTimer: NodeJS.Timeout | undefined;
    let readTimer: NodeJS.Timeout | undefined;
    let stopListening = (): void => {};
    const transport = url.protocol === 'https:' ? https : http;
    const request: ClientRequest = transport.request(url, { method: spec.method, headers, agent: false });

    const finish = (failure: ExecutionFailure | undefined, report?: ExecutorReport): void => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      clearTimeout(readTimer);
      stopListening();
      // Nothing of the exchange outlives the run: the response, the request and their socket go.
      response?.destroy();
      request.destroy();
      if (failure) reject(failure);
      else resolve(report ?? {});
    };
    const fail = (message: string, kind: HttpFailureKind, more: { code?: string; httpStatus?: number } = {}, cause?: unknown) => {
      const report = more.httpStatus !== undefined ? { httpStatus: more.httpStatus } : {};
      finish(new ExecutionFailure(`HTTP ${target}: ${message}`, report, details(kind, more), { cause }));
    };

    connectTimer = setTimeout(() => fail(`connect timeout after ${spec.connectTimeoutMs} ms (not connected to ${url.host})`, 'connect-timeout'), spec.connectTimeoutMs);
    const stalled = () => fail(`read timeout after ${spec.readTimeoutMs} ms (${response ? 'the response stalled' : 'no response'})`, 'read-timeout');
    const connected = (): void => {
      clearTimeout(connectTimer);
      readTimer = setTimeout(stalled, spec.readTimeoutMs);
    };
    // Any sign of life from the server restarts the read timeout.
    const alive = () => readTimer?.refresh();
    stopListening = onAbort(ctx.signal, () => finish(abortedFailure(`HTTP ${target}`, ctx.signal, {}, details('aborted'))));

    request.on('socket', (socket: Socket) => {
      if (socket.connecting) socket.once('connect', connected);
      else connected();
    });
    // Also after finish: destroying the request emits one ('socket hang up'), which must not crash the worker.
    request.on('error', (err: NodeJS.ErrnoException) => fail(networkProblem(err, url), 'network', { code: err.code }, err));
    request.on('response', (res) => {
      response = res;
      alive();
      const status = res.statusCode ?? 0;
      res.on('error', (err: NodeJS.ErrnoException) => fail(networkProblem(err, url), 'network', { code: err.code, httpStatus: status }, err));
      res.on('close', () => fail(`the connection closed before the response (status ${status}) ended`, 'network', { httpStatus: status }));
      if (status >= 200 && status <= 299) {
        res.on('data', alive);
        res.on('end', () => finish(undefined, { httpStatus: status }));
        return;
      }
      const head = new ByteHead(ERROR_BODY_BYTES);
      const statusFailure = (cut: boolean) => {
        const text = head.text();
        const bodyPart = text === '' ? '; empty body' : `; body${cut ? ` (first ${ERROR_BODY_BYTES} bytes)` : ''}:\n${text}`;
        finish(new ExecutionFailure(`HTTP ${target} answered ${status} ${res.statusMessage ?? ''}`.trimEnd() + bodyPart, { httpStatus: status }, details('status', { bodyHead: text })));
      };
      res.on('data', (chunk: Buffer) => {
        alive();
        head.push(chunk);
        // Enough for the record: the rest is not read (finish destroys the response).
        if (head.full) statusFailure(true);
      });
      res.on('end', () => statusFailure(head.truncated));
    });
    request.end(body);
  });
}

/** The HTTP executor: one request per item. */
export const httpExecutor: JobExecutor<HttpSpec> = Object.freeze({
  run: (spec: HttpSpec, ctx: ShardingContext) => runRequest(spec, ctx),
});
