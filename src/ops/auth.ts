/**
 * Who may use the console (DESIGN.md "Console contract"): `SHARDCRON_OPS_TOKEN` is the admin token,
 * `SHARDCRON_OPS_READ_TOKEN` a read-only one, sent as `Authorization: Bearer <token>`. The browser
 * pages (dashboard, Bull Board) cannot send that header on every fetch, so they log in once: the
 * token is checked and exchanged for a random session id in an HttpOnly, SameSite=Strict cookie
 * (the token itself is never stored in the browser nor logged). A write authenticated by the cookie
 * must come from the console's own pages: its Origin must be the console's, or, without an Origin,
 * it must carry the `X-Shardcron-Csrf` header, which a cross-site form cannot set. With no token
 * configured, the console binds a loopback address only (env-config refuses otherwise) and every
 * caller is admin.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type {} from '@fastify/cookie';
import type { FastifyRequest } from 'fastify';
import { HttpCodes, HttpError } from './http-errors';

/** What a caller may do: everything, read only, or (with no token configured) everything without logging in. */
export type Role = 'admin' | 'read' | 'open';

export const SESSION_COOKIE = 'shardcron_session';
export const CSRF_HEADER = 'x-shardcron-csrf';
/** How long a browser session lasts without a new login. */
const SESSION_TTL_MS = 12 * 3_600_000;
/** Sessions kept at most; the oldest goes first. */
const MAX_SESSIONS = 1_000;

const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();
const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** The console's tokens and browser sessions. */
export class ConsoleAuth {
  private readonly adminDigest: Buffer | undefined;
  private readonly readDigest: Buffer | undefined;
  private readonly sessions = new Map<string, { role: Exclude<Role, 'open'>; expires: number }>();

  constructor(tokens: { admin?: string; read?: string }) {
    this.adminDigest = tokens.admin === undefined ? undefined : digest(tokens.admin);
    this.readDigest = tokens.read === undefined ? undefined : digest(tokens.read);
  }

  /** False when no token is configured: everything is open (a loopback console). */
  get enabled(): boolean {
    return this.adminDigest !== undefined || this.readDigest !== undefined;
  }

  /**
   * The role of `token`, compared in constant time (digests of equal length, so neither the
   * token's characters nor its length leak through the time a comparison takes).
   */
  roleOfToken(token: string): Exclude<Role, 'open'> | undefined {
    const given = digest(token);
    const admin = this.adminDigest !== undefined && timingSafeEqual(given, this.adminDigest);
    const read = this.readDigest !== undefined && timingSafeEqual(given, this.readDigest);
    return admin ? 'admin' : read ? 'read' : undefined;
  }

  /** A new browser session for `role`: its id, for the cookie. */
  openSession(role: Exclude<Role, 'open'>): string {
    const id = randomBytes(32).toString('base64url');
    if (this.sessions.size >= MAX_SESSIONS) this.sessions.delete(this.sessions.keys().next().value as string);
    this.sessions.set(id, { role, expires: Date.now() + SESSION_TTL_MS });
    return id;
  }

  closeSession(id: string | undefined): void {
    if (id !== undefined) this.sessions.delete(id);
  }

  /**
   * The caller's role, or an HttpError: 401 without a valid token or session, 403 for a read-only
   * caller's write or a cookie-authenticated write from another site.
   */
  authorize(request: FastifyRequest): Role {
    if (!this.enabled) return 'open';
    const write = WRITE_METHODS.has(request.method);
    const header = request.headers.authorization;
    let role: Exclude<Role, 'open'> | undefined;
    if (header !== undefined) {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
      role = match ? this.roleOfToken(match[1]) : undefined;
      if (!role) throw new HttpError(401, HttpCodes.UNAUTHORIZED, 'unknown token: send Authorization: Bearer <SHARDCRON_OPS_TOKEN or SHARDCRON_OPS_READ_TOKEN>');
    } else {
      const id = request.cookies?.[SESSION_COOKIE];
      const session = id === undefined ? undefined : this.sessions.get(id);
      if (!session || session.expires < Date.now()) {
        if (id !== undefined) this.sessions.delete(id);
        throw new HttpError(401, HttpCodes.UNAUTHORIZED, 'no token: send Authorization: Bearer <token>, or log in on the dashboard');
      }
      role = session.role;
      if (write && !sameOrigin(request)) {
        throw new HttpError(403, HttpCodes.FORBIDDEN, 'a write with the session cookie must come from the console\'s own pages (Origin mismatch, or no X-Shardcron-Csrf header)');
      }
    }
    if (write && role === 'read') throw new HttpError(403, HttpCodes.FORBIDDEN, 'the read-only token cannot change anything; use SHARDCRON_OPS_TOKEN');
    return role;
  }
}

/** The request comes from the console's own origin (its Origin header), or says so with the CSRF header. */
function sameOrigin(request: FastifyRequest): boolean {
  const origin = request.headers.origin;
  if (origin === undefined || origin === 'null') return request.headers[CSRF_HEADER] !== undefined;
  try {
    return new URL(origin).host === request.headers.host;
  } catch {
    return false;
  }
}
