/**
 * The `{ webhook: url }` error handler: a failed execution is POSTed to the URL as JSON. Bounded and
 * never in the way: the execution does not wait for it, at most {@link MAX_IN_FLIGHT} posts are open
 * at once and {@link MAX_QUEUED} wait behind them (more are dropped, counted and logged), each post
 * times out, and nothing is retried (a webhook that is down must not pile up a worker's memory).
 */
import http from 'node:http';
import https from 'node:https';
import type { Logger } from '../shared/logger';
import type { ExecutionRecord } from '../shared/registry/execution-record';

const MAX_IN_FLIGHT = 8;
const MAX_QUEUED = 1_000;
const DEFAULT_TIMEOUT_MS = 5_000;

/** What a webhook receives: the execution's record and the job's parameters. */
export interface WebhookReport {
  event: 'execution:failed';
  record: ExecutionRecord;
  jobParameter: string;
  shardingParameter: string;
}

interface Post {
  url: string;
  timeoutMs: number;
  body: string;
}

/** Posts failure reports to webhooks, off the execution path. */
export class ErrorWebhooks {
  private readonly queue: Post[] = [];
  private inFlight = 0;
  /** Reports dropped because too many were waiting, and posts that failed. */
  dropped = 0;
  failed = 0;

  constructor(private readonly log: Logger) {}

  /** Queues a report for `url`; returns at once. */
  send(url: string, report: WebhookReport, timeoutMs = DEFAULT_TIMEOUT_MS): void {
    if (this.queue.length >= MAX_QUEUED) {
      this.dropped += 1;
      if (this.dropped === 1 || this.dropped % 100 === 0) this.log.warn({ dropped: this.dropped }, 'error webhook: too many reports waiting; dropping');
      return;
    }
    this.queue.push({ url, timeoutMs, body: JSON.stringify(report) });
    this.pump();
  }

  private pump(): void {
    while (this.inFlight < MAX_IN_FLIGHT && this.queue.length > 0) {
      const post = this.queue.shift()!;
      this.inFlight += 1;
      void this.post(post).finally(() => {
        this.inFlight -= 1;
        this.pump();
      });
    }
  }

  private post({ url, timeoutMs, body }: Post): Promise<void> {
    return new Promise((resolve) => {
      const target = new URL(url);
      const transport = target.protocol === 'https:' ? https : http;
      const request = transport.request(target, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }, timeout: timeoutMs }, (response) => {
        response.resume();
        response.on('end', resolve);
        response.on('error', resolve);
        if ((response.statusCode ?? 0) >= 300) this.fail(target, `status ${response.statusCode}`);
      });
      request.on('timeout', () => request.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      request.on('error', (err) => {
        this.fail(target, err.message);
        resolve();
      });
      request.end(body);
    });
  }

  private fail(target: URL, why: string): void {
    this.failed += 1;
    // The URL without user info or query, which may hold secrets.
    this.log.warn({ webhook: `${target.protocol}//${target.host}${target.pathname}`, why }, 'error webhook: post failed');
  }
}
