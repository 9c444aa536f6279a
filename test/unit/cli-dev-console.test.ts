/**
 * Where `shardcron dev` serves the console: the configured address, 8080 or any free port, and a
 * token generated only when the address is not a loopback one and none is set.
 */
import net from 'node:net';
import { describeDevConsole, devConsole } from '../../src/cli/dev-console';
import { loadEnvConfig } from '../../src/shared/config/env-config';

const configOf = (env: Record<string, string>) => loadEnvConfig({ ...env, SHARDCRON_ROLES: 'scheduler,worker' });

describe('devConsole', () => {
  it('a loopback address needs no token', async () => {
    const env = { SHARDCRON_OPS_PORT: '18081' };
    const c = await devConsole(configOf(env), env);
    expect(c).toMatchObject({ host: '127.0.0.1', port: 18081, url: 'http://127.0.0.1:18081/', tokenGenerated: false });
    expect(c.token).toBeUndefined();
    expect(c.env).toEqual({ SHARDCRON_OPS_HOST: '127.0.0.1', SHARDCRON_OPS_PORT: '18081' });
    expect(describeDevConsole(c)).toBe('http://127.0.0.1:18081/  (no token needed on this loopback address; Bull Board http://127.0.0.1:18081/queues, metrics http://127.0.0.1:18081/metrics)');
  });

  it('a wildcard address without a token gets a generated one, printed; the URL is the loopback\'s', async () => {
    const env = { SHARDCRON_OPS_HOST: '0.0.0.0', SHARDCRON_OPS_PORT: '18082' };
    const c = await devConsole(configOf(env), env);
    expect(c.tokenGenerated).toBe(true);
    expect(c.token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(c.url).toBe('http://127.0.0.1:18082/');
    expect(c.env.SHARDCRON_OPS_TOKEN).toBe(c.token);
    expect(describeDevConsole(c)).toContain(`log in with the token ${c.token} (generated for this run)`);
    // The node's environment passes the console's own check.
    expect(() => loadEnvConfig({ ...c.env, SHARDCRON_ROLES: 'scheduler,console' })).not.toThrow();
  });

  it('a token that is set is used and not printed', async () => {
    const env = { SHARDCRON_OPS_HOST: '0.0.0.0', SHARDCRON_OPS_PORT: '18083', SHARDCRON_OPS_TOKEN: 'a-token-of-the-user-0123' };
    const c = await devConsole(configOf(env), env);
    expect(c).toMatchObject({ token: 'a-token-of-the-user-0123', tokenGenerated: false });
    expect(describeDevConsole(c)).not.toContain('a-token-of-the-user-0123');
  });

  it('without SHARDCRON_OPS_PORT: 8080 when free, else any free port', async () => {
    const blocker = net.createServer();
    const blocked = await new Promise<boolean>((resolve) => {
      blocker.once('error', () => resolve(false));
      blocker.listen({ host: '127.0.0.1', port: 8080, exclusive: true }, () => resolve(true));
    });
    try {
      const c = await devConsole(configOf({}), {});
      // Either this test holds 8080, or something else does: dev must not pick it then.
      expect(c.port).not.toBe(8080);
      expect(c.port).toBeGreaterThan(0);
    } finally {
      if (blocked) await new Promise((resolve) => blocker.close(resolve));
    }
  });
});
