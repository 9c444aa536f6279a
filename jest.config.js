/** `unit` needs no servers; `integration` starts real ZooKeeper and Redis itself; `e2e` adds a browser. */
const transform = { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'typescript' } } }] };

module.exports = {
  // Global on purpose: jest ignores testTimeout inside a project. Integration tests wait on real servers.
  testTimeout: 60_000,
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      transform,
      testMatch: ['<rootDir>/test/unit/**/*.test.ts'],
    },
    {
      displayName: 'integration',
      testEnvironment: 'node',
      transform,
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      // Two files at a time (--maxWorkers=2, package.json): each starts its own servers on free ports, and
      // most of a file's time is spent waiting on real sessions and fires (about 30% of two cores busy
      // when run one at a time), so two halve the run; more would crowd the timing a file asserts on.
    },
    {
      // A real browser (chromium) on the console of a real cluster; screenshots in test-artifacts/.
      displayName: 'e2e',
      testEnvironment: 'node',
      transform,
      testMatch: ['<rootDir>/test/e2e/**/*.test.ts'],
    },
  ],
};
