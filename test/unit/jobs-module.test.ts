import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadJobsModule } from '../../src/jobs-module';
import { ConfigError, ErrorCodes, ShardcronError } from '../../src/shared/errors';

const jobDefinitionModule = path.resolve(__dirname, '../../src/shared/job-definition');
let dir: string;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shardcron-jobs-module-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Writes a fixture module; `body` may use `defineJob`. Returns its file name. */
function fixture(name: string, body: string): string {
  const header = `const { defineJob } = require(${JSON.stringify(jobDefinitionModule)});\n`;
  fs.writeFileSync(path.join(dir, name), header + body);
  return name;
}

function loadError(modulePath: string, options = {}): ShardcronError {
  try {
    loadJobsModule(modulePath, { cwd: dir, ...options });
  } catch (err) {
    expect(err).toBeInstanceOf(ShardcronError);
    return err as ShardcronError;
  }
  throw new Error(`expected ${modulePath} to fail`);
}

const job = (name: string) => `defineJob({ name: '${name}', cron: '* * * * * ?', execute() {} })`;

describe('loadJobsModule', () => {
  it('loads `module.exports = [...]` relative to cwd', () => {
    fixture('jobs.cjs', `module.exports = [${job('a')}, ${job('b')}];`);
    const jobs = loadJobsModule('./jobs.cjs', { cwd: dir });
    expect(jobs.map((j) => j.name)).toEqual(['a', 'b']);
    expect(jobs[0].cron).toBe('* * * * * ?');
  });

  it('loads a default export (compiled `export default [...]`) given an absolute path', () => {
    fixture('jobs.js', `Object.defineProperty(exports, '__esModule', { value: true });\nexports.default = [${job('billing')}];`);
    expect(loadJobsModule(path.join(dir, 'jobs.js')).map((j) => j.name)).toEqual(['billing']);
  });

  it('loads a TypeScript module', () => {
    fs.writeFileSync(
      path.join(dir, 'jobs.ts'),
      `import { defineJob } from ${JSON.stringify(jobDefinitionModule)};\n` +
        `const total: number = 2;\nexport default [defineJob({ name: 'typed', shardingTotalCount: total, execute() {} })];\n`,
    );
    expect(loadJobsModule('jobs.ts', { cwd: dir }).map((j) => [j.name, j.shardingTotalCount])).toEqual([['typed', 2]]);
  });

  it('names SHARDCRON_JOBS, the path and every bad index', () => {
    fixture('bad.js', `module.exports = [${job('ok')}, { name: 'raw', execute() {} }, 42, ${job('ok')}];`);
    const err = loadError('bad.js');
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(err.message).toContain(`SHARDCRON_JOBS=bad.js (${path.join(dir, 'bad.js')})`);
    expect((err as ConfigError).issues.map((i) => i.field)).toEqual(['SHARDCRON_JOBS[1]', 'SHARDCRON_JOBS[2]', 'SHARDCRON_JOBS[3]']);
    expect(err.message).toMatch(/SHARDCRON_JOBS\[1\]: expected the result of defineJob\(\{\.\.\.\}\), got a plain object named "raw"/);
    expect(err.message).toMatch(/SHARDCRON_JOBS\[2\]: expected the result of defineJob.*got number 42/);
    expect(err.message).toMatch(/SHARDCRON_JOBS\[3\]: defines job "ok" again \(first at index 0\)/);
  });

  it('refuses a module whose export is not an array', () => {
    fixture('object.js', `module.exports = { jobs: [${job('a')}] };`);
    const err = loadError('object.js');
    expect(err.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(err.message).toMatch(/^SHARDCRON_JOBS=object\.js \(.*object\.js\): must export an array of defineJob\(\.\.\.\) results/);
    expect(err.message).toContain('it exports a plain object');
  });

  it('reports a missing file, a directory and an ES module by path', () => {
    expect(loadError('missing.js').message).toBe(`SHARDCRON_JOBS=missing.js (${path.join(dir, 'missing.js')}): no such file`);
    expect(loadError('.').message).toMatch(/is a directory/);
    fs.writeFileSync(path.join(dir, 'jobs.mjs'), 'export default [];');
    expect(loadError('jobs.mjs').message).toMatch(/is an ES module/);
  });

  it('wraps errors thrown while the module loads, such as an invalid defineJob', () => {
    fixture('throws.js', `module.exports = [defineJob({ name: 'bad name!', execute() {} })];`);
    const err = loadError('throws.js');
    expect(err.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(err.message).toMatch(/^SHARDCRON_JOBS=throws\.js \(.*\): failed to load: Invalid job "bad name!"/);
    expect((err as Error & { cause?: unknown }).cause).toBeInstanceOf(ConfigError);
  });

  it('tells to compile a TypeScript module when tsx is not installed', () => {
    fs.writeFileSync(path.join(dir, 'jobs.cts'), 'export default [];');
    const extensions = require.extensions as Record<string, unknown> | undefined;
    const saved = { ts: extensions?.['.ts'], cts: extensions?.['.cts'] };
    if (extensions) {
      delete extensions['.ts'];
      delete extensions['.cts'];
    }
    try {
      const err = loadError('jobs.cts', { resolveTsx: () => undefined });
      expect(err.message).toMatch(/is a TypeScript module and tsx.*is not installed\. Compile the module to JavaScript/);
    } finally {
      if (extensions && saved.ts) extensions['.ts'] = saved.ts;
      if (extensions && saved.cts) extensions['.cts'] = saved.cts;
    }
  });

  it('accepts, after validating again, a definition made by another copy of defineJob', () => {
    const foreign = Object.freeze({ name: 'other', cron: '* * * * * ?', execute() {}, config: Object.freeze({ name: 'other', cron: '* * * * * ?', shardingTotalCount: 2 }) });
    fixture('foreign.js', `module.exports = [globalThis.__foreignJob];`);
    (globalThis as Record<string, unknown>).__foreignJob = foreign;
    try {
      const [adopted] = loadJobsModule('foreign.js', { cwd: dir });
      expect(adopted.name).toBe('other');
      expect(adopted.shardingTotalCount).toBe(2);
    } finally {
      delete (globalThis as Record<string, unknown>).__foreignJob;
    }
  });
});
