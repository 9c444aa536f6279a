/**
 * settle-accounts: each sharding item settles the accounts whose `id % shardingTotalCount` equals
 * its item, in one PostgreSQL transaction that commits only while the execution is still ours.
 * Without a reachable database it settles an in-process table instead, so `shardcron dev` runs anywhere.
 */
import { Pool } from 'pg';
import type { ShardingContext } from '../src';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ACCOUNTS = 30;

/** Where the accounts live: PostgreSQL, or memory when no database answers. */
interface AccountStore {
  /** Settles the accounts of one item; returns how many it settled. */
  settle(ctx: ShardingContext): Promise<number>;
}

const pool = new Pool({ connectionString: DATABASE_URL, max: 2, connectionTimeoutMillis: 2_000, allowExitOnIdle: true });

async function openPostgres(): Promise<AccountStore> {
  const setup = await pool.connect();
  try {
    // Several workers start at once: the lock keeps them from creating the table twice.
    await setup.query('BEGIN');
    await setup.query("SELECT pg_advisory_xact_lock(hashtext('shardcron_example_accounts'))");
    await setup.query(`CREATE TABLE IF NOT EXISTS shardcron_example_accounts (
      id int PRIMARY KEY, balance_cents bigint NOT NULL, pending_cents bigint NOT NULL,
      settled_at timestamptz, settled_by text)`);
    await setup.query(
      `INSERT INTO shardcron_example_accounts (id, balance_cents, pending_cents)
       SELECT g, 10000, g * 100 FROM generate_series(1, $1) g ON CONFLICT (id) DO NOTHING`,
      [ACCOUNTS],
    );
    await setup.query('COMMIT');
  } catch (err) {
    await setup.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    setup.release();
  }
  return {
    async settle(ctx) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await client.query(
          `UPDATE shardcron_example_accounts
              SET balance_cents = balance_cents + pending_cents, pending_cents = 0, settled_at = now(), settled_by = $3
            WHERE id % $1 = $2`,
          [ctx.shardingTotalCount, ctx.shardingItem, ctx.instanceId],
        );
        // If this worker lost ZooKeeper meanwhile, the item may run elsewhere: do not commit.
        ctx.assertOwnership();
        await client.query('COMMIT');
        return result.rowCount ?? 0;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    },
  };
}

function openMemory(): AccountStore {
  const accounts = Array.from({ length: ACCOUNTS }, (_, i) => ({ id: i + 1, balanceCents: 10_000, pendingCents: (i + 1) * 100, settledBy: '' }));
  return {
    async settle(ctx) {
      const mine = accounts.filter((a) => a.id % ctx.shardingTotalCount === ctx.shardingItem);
      ctx.assertOwnership();
      for (const account of mine) {
        account.balanceCents += account.pendingCents;
        account.pendingCents = 0;
        account.settledBy = ctx.instanceId;
      }
      return mine.length;
    },
  };
}

let store: Promise<AccountStore> | undefined;

/** The job's execute function. */
export async function settleAccounts(ctx: ShardingContext): Promise<void> {
  store ??= openPostgres().catch((err: Error) => {
    const where = DATABASE_URL.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
    ctx.log.warn(`no PostgreSQL at ${where} (${err.message}); settling an in-process table instead. Set DATABASE_URL to use a database.`);
    return openMemory();
  });
  const settled = await (await store).settle(ctx);
  ctx.log.info({ settled }, `settled ${settled} accounts (item ${ctx.shardingItem}: ${ctx.shardingParameter})`);
}
