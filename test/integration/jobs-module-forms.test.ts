/**
 * Jobs modules in every form a Node.js user writes, run by `shardcron start` as a user's project
 * runs it: shardcron installed (compiled) in the project's node_modules, the module importing it by
 * name. CommonJS (`.cjs`, `.js`), ES modules (`.mjs` with top-level await, `.js` under
 * `"type": "module"`) and TypeScript (`.ts`, `.mts`); broken modules exit 2 naming file and line.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { cliExitCode, cliPids, killCliRuns, runCli, type CliRun } from '../helpers/cli-process';
import { closeServices, isProcessAlive, startRedis, startZooKeeper, waitFor } from '../helpers/services';
import { uniqueNamespace } from '../helpers/zk';

const ROOT = path.resolve(__dirname, '../..');
/**
 * The user's project lives inside the repository (a git-ignored folder) so that shardcron's own
 * dependencies (bullmq, tsx, ...) resolve from the repository's node_modules, as they would from
 * the project's own after `npm install shardcron`.
 */
const PROJECT = path.join(ROOT, '.shardcron', `jobs-forms-${process.pid}`);
const INSTALLED = path.join(PROJECT, 'node_modules', 'shardcron');
const BIN = path.join(INSTALLED, 'bin', 'shardcron.js');

let zk: ZooKeeperServer;
let redis: RedisServer;

function write(relative: string, text: string): string {
  const file = path.join(PROJECT, relative);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
  return file;
}

/** One job named `name`: every second, two items, each finishing at once. */
const definition = (name: string, total = '2') => `defineJob({ name: '${name}', cron: '* * * * * ?', shardingTotalCount: ${total}, execute: async (ctx) => { ctx.log.debug('ran'); } })`;

const FORMS: Record<string, { file: string; text: string }> = {
  'ES module (.mjs, top-level await)': {
    file: 'esm/jobs.mjs',
    text: `import { defineJob } from 'shardcron';\nconst total = await Promise.resolve(2);\nexport default [${definition('form-mjs', 'total')}];\n`,
  },
  'ES module (.js under "type": "module")': {
    file: 'esm-package/jobs.js',
    text: `import { defineJob } from 'shardcron';\nexport default [${definition('form-esm-js')}];\n`,
  },
  'CommonJS (.cjs)': {
    file: 'cjs/jobs.cjs',
    text: `const { defineJob } = require('shardcron');\nmodule.exports = [${definition('form-cjs')}];\n`,
  },
  'CommonJS (.js)': {
    file: 'cjs/jobs.js',
    text: `'use strict';\nconst { defineJob } = require('shardcron');\nmodule.exports = [${definition('form-cjs-js')}];\n`,
  },
  'TypeScript (.ts, through tsx)': {
    file: 'ts/jobs.ts',
    text: `import { defineJob, type ShardingContext } from 'shardcron';\nconst total: number = 2;\nconst log = (ctx: ShardingContext): void => ctx.log.debug('ran');\nexport default [defineJob({ name: 'form-ts', cron: '* * * * * ?', shardingTotalCount: total, execute: async (ctx) => log(ctx) })];\n`,
  },
  'TypeScript ES module (.mts, through tsx)': {
    file: 'ts/jobs.mts',
    text: `import { defineJob } from 'shardcron';\nconst total: number = await Promise.resolve(2);\nexport default [${definition('form-mts', 'total')}];\n`,
  },
};

function start(file: string): CliRun {
  return runCli(
    ['start'],
    {
      SHARDCRON_ZK: zk.connectionString,
      SHARDCRON_REDIS_URL: redis.url,
      SHARDCRON_NAMESPACE: uniqueNamespace('forms'),
      SHARDCRON_ROLES: 'scheduler,worker',
      SHARDCRON_JOBS: file,
      SHARDCRON_ZK_SESSION_TIMEOUT_MS: '2000',
    },
    { bin: BIN, cwd: PROJECT },
  );
}

beforeAll(async () => {
  [zk, redis] = await Promise.all([startZooKeeper(), startRedis()]);
  fs.rmSync(PROJECT, { recursive: true, force: true });
  // `npm install shardcron` gives the project the compiled package: dist/, bin/ and package.json.
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(ROOT, 'tsconfig.build.json'), '--outDir', path.join(INSTALLED, 'dist')], { stdio: 'pipe' });
  fs.cpSync(path.join(ROOT, 'bin'), path.join(INSTALLED, 'bin'), { recursive: true });
  fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(INSTALLED, 'package.json'));
  write('package.json', JSON.stringify({ name: 'user-project', private: true }));
  write('esm-package/package.json', JSON.stringify({ type: 'module' }));
  for (const { file, text } of Object.values(FORMS)) write(file, text);
}, 120_000);

afterEach(killCliRuns);

afterAll(async () => {
  fs.rmSync(PROJECT, { recursive: true, force: true });
  await closeServices();
});

describe('shardcron start runs a jobs module in every form', () => {
  it('runs both items of each form on a real cluster and exits 0 on SIGTERM', async () => {
    const runs = Object.entries(FORMS).map(([form, { file, text }]) => ({ form, run: start(path.join(PROJECT, file)), job: /name: '([^']+)'/.exec(text)![1] }));
    for (const { form, run, job } of runs) {
      await waitFor(
        () => {
          const done = run.json().filter((l) => l.msg === 'item finished' && l.job === job && l.status === 'completed').map((l) => l.item);
          return done.includes(0) && done.includes(1);
        },
        { timeoutMs: 45_000, message: `${form}: both items of ${job} completed; stderr:\n${run.stderr.join('\n')}\nstdout:\n${run.stdout.slice(-10).join('\n')}` },
      );
    }
    for (const { run } of runs) run.child.kill('SIGTERM');
    for (const { form, run } of runs) {
      expect({ form, code: await cliExitCode(run, 20_000) }).toEqual({ form, code: 0 });
      expect({ form, stderr: run.stderr.join('\n').trim() }).toEqual({ form, stderr: '' });
    }
  }, 120_000);
});

describe('a broken jobs module exits 2 naming the file and the line', () => {
  it('a syntax error in an ES module', async () => {
    const file = write('broken/syntax.mjs', "import { defineJob } from 'shardcron';\nexport default [\n  defineJob({ name: 'x' execute() {} }),\n];\n");
    const r = start(file);
    expect(await cliExitCode(r, 30_000)).toBe(2);
    const stderr = r.stderr.join('\n');
    expect(stderr).toContain(`SHARDCRON_JOBS=${file} (${file}): failed to load at line 3`);
    expect(stderr).toContain('SyntaxError');
    expect(stderr).toContain("3 | defineJob({ name: 'x' execute() {} }),");
  });

  it('a syntax error in a CommonJS module', async () => {
    const file = write('broken/syntax.cjs', "'use strict';\nmodule.exports = [\n  }\n];\n");
    const r = start(file);
    expect(await cliExitCode(r, 30_000)).toBe(2);
    expect(r.stderr.join('\n')).toMatch(new RegExp(`${file.replace(/[.]/g, '\\.')}\\): failed to load at line 3: SyntaxError: Unexpected token`));
  });

  it('a module that throws while it loads', async () => {
    const file = write('broken/throws.mjs', "const url = process.env.NO_SUCH_VARIABLE;\nif (!url) {\n  throw new Error('DATABASE_URL is not set');\n}\nexport default [];\n");
    const r = start(file);
    expect(await cliExitCode(r, 30_000)).toBe(2);
    const stderr = r.stderr.join('\n');
    expect(stderr).toContain(`(${file}): failed to load at line 3, column 9: Error: DATABASE_URL is not set`);
    expect(stderr).toContain("3 | throw new Error('DATABASE_URL is not set');");
  });

  it('a TypeScript module with a syntax error', async () => {
    const file = write('broken/syntax.ts', "import { defineJob } from 'shardcron';\nconst a: number = ;\nexport default [];\n");
    const r = start(file);
    expect(await cliExitCode(r, 30_000)).toBe(2);
    const stderr = r.stderr.join('\n');
    expect(stderr).toContain(`(${file}): failed to load at line 2`);
  });
});

it('leaves no child process behind', () => {
  expect(cliPids.length).toBeGreaterThan(6);
  expect(cliPids.filter(isProcessAlive)).toEqual([]);
});
