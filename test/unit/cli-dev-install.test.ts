import { planInstall, type InstallFacts, type MissingServer } from '../../src/cli/dev-install';
import { ErrorCodes, ShardcronError } from '../../src/shared/errors';

const missing = (debianPackage: MissingServer['debianPackage']): MissingServer => ({
  debianPackage,
  error: new ShardcronError(ErrorCodes.MISSING_DEPENDENCY, `${debianPackage} missing`),
});
const facts = (over: Partial<InstallFacts> = {}): InstallFacts => ({
  missing: [missing('zookeeper'), missing('redis-server')],
  isRoot: true,
  hasAptGet: true,
  noInstall: false,
  customInstallation: false,
  ...over,
});

describe('planInstall', () => {
  it('installs every missing package with apt-get update, then apt-get install -y, as root', () => {
    expect(planInstall(facts())).toEqual({
      action: 'install',
      packages: ['zookeeper', 'redis-server'],
      commands: [['apt-get', 'update'], ['apt-get', 'install', '-y', 'zookeeper', 'redis-server']],
    });
    expect(planInstall(facts({ missing: [missing('redis-server')] }))).toMatchObject({ packages: ['redis-server'] });
  });

  it.each([
    [{ noInstall: true }, /--no-install/],
    [{ isRoot: false }, /not running as root/],
    [{ hasAptGet: false }, /apt-get is not available/],
    [{ customInstallation: true }, /SHARDCRON_JAVA, SHARDCRON_ZK_CLASSPATH or SHARDCRON_REDIS_SERVER/],
  ])('refuses when %j', (over, why) => {
    const plan = planInstall(facts(over));
    expect(plan.action).toBe('refuse');
    expect(plan.action === 'refuse' && plan.why).toMatch(why);
  });
});
