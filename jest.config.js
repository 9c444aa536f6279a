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
      // Run with --runInBand (see package.json): suites start their own servers and assert on timing.
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
