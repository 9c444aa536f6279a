/**
 * The HTTP executor against real local servers: statuses, bodies and headers as they arrive, both
 * timeouts (connect: a listener whose queue is full; read: a server that never answers or stalls),
 * refusals and aborts, and no connection left open after any run.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { makeTempDir } from '../../src/dev/child-service';
import type { ShardingContext } from '../../src/shared/config/job-definition';
import { httpSpecSchema, shardingContextJson, type HttpSpecInput } from '../../src/shared/config/job-type-specs';
import { httpExecutor } from '../../src/worker/executors/http-executor';
import { ExecutionFailure } from '../../src/worker/executors/job-executor';
import { eventually, waitFor } from '../helpers/services';
import { noResharding, testContext } from '../helpers/sharding-context';
import { startUnconnectablePort } from '../helpers/unconnectable-port';

/** What the server saw of one request. */
interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

let server: http.Server;
let base: string;
const seen: Seen[] = [];
/** Requests the server holds without answering (or without ending the answer). */
const held: http.IncomingMessage[] = [];

/** The routes: each path answers as its name says (the query is ignored). */
function answer(req: http.IncomingMessage, res: http.ServerResponse, body: string): void {
  seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
  switch (new URL(req.url!, 'http://local').pathname) {
    case '/ok':
      res.end('fine');
      return;
    case '/created':
      res.writeHead(201).end();
      return;
    case '/fail':
      res.writeHead(500, { 'content-type': 'text/plain' }).end('database unavailable');
      return;
    case '/fail-long':
      res.writeHead(503).end('e'.repeat(10_000));
      return;
    case '/moved':
      res.writeHead(302, { location: '/ok' }).end();
      return;
    case '/stall':
      res.writeHead(200).write('first piece');
      held.push(req);
      return;
    default: // '/hang'
      held.push(req);
  }
}

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk)).on('end', () => answer(req, res, body));
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  seen.length = 0;
  held.length = 0;
});
afterEach(async () => {
  // Every run consumed or destroyed its response: the server is left with no connection.
  await eventually(async () => expect(await new Promise((resolve) => server.getConnections((_e, n) => resolve(n)))).toBe(0), { timeoutMs: 5_000 });
});

const run = (spec: HttpSpecInput, ctx: ShardingContext = testContext()) => httpExecutor.run(httpSpecSchema.parse(spec), ctx, noResharding);

/**
 * Node counts a timer from the event loop's time at the start of the turn, so one can end a little
 * before its delay by the wall clock (a connect timeout of 500 ms measured 499 in CI): a test
 * asserts a delay less this.
 */
const TIMER_SLACK_MS = 20;

/** The ExecutionFailure `start()` must reject with, and how long it took from before the call. */
async function failureOf(start: () => Promise<unknown>): Promise<{ failure: ExecutionFailure; tookMs: number }> {
  const started = Date.now();
  const err = await start().then(() => undefined, (e: unknown) => e);
  if (!(err instanceof ExecutionFailure)) throw new Error(`expected an ExecutionFailure, got ${String(err)}`);
  return { failure: err, tookMs: Date.now() - started };
}

describe('HTTP: statuses', () => {
  it('completes with the status of a 2xx answer', async () => {
    await expect(run({ url: `${base}/ok` })).resolves.toEqual({ httpStatus: 200 });
    await expect(run({ url: `${base}/created`, method: 'POST' })).resolves.toEqual({ httpStatus: 201 });
  });

  it('sends the method, headers and body, and the context in a shardingContext header that parses', async () => {
    const ctx = testContext({ shardingParameter: '北京 😀', jobParameter: 'a "quoted" value' });
    await run({ url: `${base}/created?token=secret`, method: 'PUT', headers: { 'X-Tenant': 'acme' }, body: '{"full":true}' }, ctx);
    expect(seen).toHaveLength(1);
    const [request] = seen;
    expect(request).toMatchObject({ method: 'PUT', url: '/created?token=secret', body: '{"full":true}' });
    expect(request!.headers).toMatchObject({ 'x-tenant': 'acme', 'content-length': '13' });
    const header = request!.headers.shardingcontext as string;
    expect(header).toMatch(/^[\x20-\x7e]+$/);
    expect(JSON.parse(header)).toEqual(JSON.parse(shardingContextJson(ctx)));
    expect(JSON.parse(header).shardingParameter).toBe('北京 😀');
  });

  it('fails on 500 with the status and the body', async () => {
    const { failure } = await failureOf(() => run({ url: `${base}/fail?token=secret` }));
    expect(failure.report).toEqual({ httpStatus: 500 });
    expect(failure.message).toBe(`HTTP GET ${base}/fail answered 500 Internal Server Error; body:\ndatabase unavailable`);
    expect(failure.details).toMatchObject({ failure: 'status', bodyHead: 'database unavailable' });
  });

  it('keeps only the first 4 KB of a long error body', async () => {
    const { failure } = await failureOf(() => run({ url: `${base}/fail-long` }));
    expect(failure.report).toEqual({ httpStatus: 503 });
    expect(failure.message).toBe(`HTTP GET ${base}/fail-long answered 503 Service Unavailable; body (first 4096 bytes):\n${'e'.repeat(4096)}`);
  });

  it('does not follow a redirect: a 3xx is a failure', async () => {
    const { failure } = await failureOf(() => run({ url: `${base}/moved` }));
    expect(failure.report).toEqual({ httpStatus: 302 });
    expect(seen.map((s) => s.url)).toEqual(['/moved']);
  });
});

describe('HTTP: timeouts, refusals, aborts', () => {
  it('fails with a read timeout when the server accepts and never answers', async () => {
    const { failure, tookMs } = await failureOf(() => run({ url: `${base}/hang`, readTimeoutMs: 400 }));
    expect(failure.message).toBe(`HTTP GET ${base}/hang: read timeout after 400 ms (no response)`);
    expect(failure.details).toMatchObject({ failure: 'read-timeout' });
    expect(tookMs).toBeGreaterThanOrEqual(400 - TIMER_SLACK_MS);
    expect(tookMs).toBeLessThan(3_000);
  });

  it('fails with a read timeout when a response stalls', async () => {
    const { failure } = await failureOf(() => run({ url: `${base}/stall`, readTimeoutMs: 400 }));
    expect(failure.message).toBe(`HTTP GET ${base}/stall: read timeout after 400 ms (the response stalled)`);
  });

  it('fails with a connect timeout when the connection never completes', async () => {
    const target = await startUnconnectablePort();
    try {
      const { failure, tookMs } = await failureOf(() => run({ url: `http://127.0.0.1:${target.port}/run`, connectTimeoutMs: 500, readTimeoutMs: 60_000 }));
      expect(failure.message).toBe(`HTTP GET http://127.0.0.1:${target.port}/run: connect timeout after 500 ms (not connected to 127.0.0.1:${target.port})`);
      expect(failure.details).toMatchObject({ failure: 'connect-timeout' });
      expect(tookMs).toBeGreaterThanOrEqual(500 - TIMER_SLACK_MS);
      expect(tookMs).toBeLessThan(3_000);
    } finally {
      await target.close();
    }
  });

  it('fails naming a refused connection', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const { failure } = await failureOf(() => run({ url: `http://127.0.0.1:${port}/run` }));
    expect(failure.message).toBe(`HTTP GET http://127.0.0.1:${port}/run: connection refused by 127.0.0.1:${port} (nothing listens there?)`);
    expect(failure.details).toMatchObject({ failure: 'network', code: 'ECONNREFUSED' });
  });

  it('stops the request when ctx.signal aborts, and the server sees the connection close', async () => {
    const controller = new AbortController();
    const outcome = failureOf(() => run({ url: `${base}/hang`, readTimeoutMs: 60_000 }, testContext({ signal: controller.signal })));
    const request = await waitFor(() => held[0], { message: 'the request to reach the server' });
    const serverSawClose = new Promise((resolve) => request.socket.once('close', resolve));
    controller.abort(new Error('worker shutting down'));
    const { failure, tookMs } = await outcome;
    expect(failure.message).toBe(`HTTP GET ${base}/hang stopped: aborted (worker shutting down)`);
    expect(failure.details).toMatchObject({ failure: 'aborted', aborted: true });
    expect(tookMs).toBeLessThan(3_000);
    await serverSawClose;
  });

  it('speaks TLS to an https: URL and names a certificate it does not trust', async () => {
    const dir = makeTempDir('shardcron-tls-');
    const tls = { key: path.join(dir.root, 'key.pem'), cert: path.join(dir.root, 'cert.pem') };
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', tls.key, '-out', tls.cert, '-days', '1', '-subj', '/CN=127.0.0.1'], { stdio: 'ignore' });
    const secure = https.createServer({ key: fs.readFileSync(tls.key), cert: fs.readFileSync(tls.cert) }, (_req, res) => res.end('fine'));
    try {
      await new Promise<void>((resolve) => secure.listen(0, '127.0.0.1', resolve));
      const { port } = secure.address() as AddressInfo;
      const { failure } = await failureOf(() => run({ url: `https://127.0.0.1:${port}/ok` }));
      expect(failure.message).toBe(`HTTP GET https://127.0.0.1:${port}/ok: self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT)`);
    } finally {
      secure.closeAllConnections();
      await new Promise((resolve) => secure.close(resolve));
      dir.remove();
    }
  });
});
