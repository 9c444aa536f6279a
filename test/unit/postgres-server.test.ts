import { findPostgres } from '../../src/dev/postgres-server';
import { ErrorCodes, ShardcronError } from '../../src/shared/errors';

describe('findPostgres', () => {
  it('names the missing programs and the Debian package when none are found', () => {
    let error: unknown;
    try {
      findPostgres({ SHARDCRON_PG_BIN_DIR: '/nonexistent/bin', PATH: '' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ShardcronError);
    expect((error as ShardcronError).code).toBe(ErrorCodes.MISSING_DEPENDENCY);
    expect((error as ShardcronError).message).toMatch(/no initdb and postgres executable in SHARDCRON_PG_BIN_DIR=\/nonexistent\/bin.*apt-get install -y postgresql/);
  });
});
