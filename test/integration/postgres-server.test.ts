/** The throwaway PostgreSQL of tests and `shardcron dev`: data across stop, kill and restart; nothing left after close. */
import fs from 'node:fs';
import { Client } from 'pg';
import { PostgresServer } from '../../src/dev/postgres-server';
import { expectNoLiveServices, isProcessAlive } from '../helpers/services';

async function select(url: string, text: string): Promise<unknown[]> {
  const client = new Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return (await client.query(text)).rows;
  } finally {
    await client.end();
  }
}

afterAll(expectNoLiveServices);

describe('PostgresServer', () => {
  it('keeps its data across a fast stop and a kill -9, each followed by a restart on the same port; close removes it all', async () => {
    const server = await PostgresServer.start();
    try {
      await select(server.url, 'CREATE TABLE t (x int); INSERT INTO t VALUES (1)');
      if (process.getuid?.() === 0) {
        // PostgreSQL refuses root: the server runs as the postgres user.
        const uid = /^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${server.pid}/status`, 'utf8'))?.[1];
        expect(Number(uid)).not.toBe(0);
      }
      // A client left open must not hold up a stop (the default SIGTERM would wait for it).
      const idle = new Client({ connectionString: server.url });
      idle.on('error', () => undefined);
      await idle.connect();
      const started = Date.now();
      await server.stop();
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(server.running).toBe(false);
      await server.restart();
      expect(await select(server.url, 'SELECT x FROM t')).toEqual([{ x: 1 }]);
      await server.kill();
      await server.restart();
      expect(await select(server.url, 'SELECT x FROM t')).toEqual([{ x: 1 }]);
      await idle.end().catch(() => undefined);
    } finally {
      const pid = server.pid!;
      await server.close();
      expect(isProcessAlive(pid)).toBe(false);
      expect(fs.existsSync(server.dataDir)).toBe(false);
    }
  });
});
