/**
 * The dashboard: static files (no build step), served at `/` and `/dashboard/*`. They ship with the
 * package: `src/ops/dashboard` in a clone, `dist/ops/dashboard` once built (`npm run build` copies
 * them), found beside this module either way.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { HttpCodes, HttpError } from './http-errors';

const TYPES: Readonly<Record<string, string>> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

/** The directory of the dashboard's files. */
export function dashboardDir(): string {
  const beside = path.join(__dirname, 'dashboard');
  return fs.existsSync(beside) ? beside : path.join(__dirname, '..', '..', 'src', 'ops', 'dashboard');
}

export function registerDashboard(app: FastifyInstance): void {
  const dir = dashboardDir();
  const files = new Map<string, { body: Buffer; type: string }>();
  for (const name of ['index.html', 'app.js', 'style.css']) files.set(name, { body: fs.readFileSync(path.join(dir, name)), type: TYPES[path.extname(name)] });
  const send = (name: string) => async (_request: unknown, reply: import('fastify').FastifyReply) => {
    const file = files.get(name);
    if (!file) throw new HttpError(404, HttpCodes.NOT_FOUND, `no dashboard file ${name}`);
    // The page and its script may not be framed or fetched by other sites.
    return reply.type(file.type).header('x-frame-options', 'DENY').header('content-security-policy', "default-src 'self'; frame-ancestors 'none'").send(file.body);
  };
  app.get('/', send('index.html'));
  app.get('/dashboard/:file', async (request, reply) => send((request.params as { file: string }).file)(request, reply));
}
