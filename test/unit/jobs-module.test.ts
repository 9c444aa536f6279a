import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { errorLocation, loadJobsModule, moduleFormat } from '../../src/jobs-module';
import { ConfigError, ErrorCodes, ShardcronError } from '../../src/shared/errors';

const jobDefinitionModule = path.resolve(__dirname, '../../src/shared/config/job-definition');
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

async function loadError(modulePath: string, options = {}): Promise<ShardcronError> {
  try {
    await loadJobsModule(modulePath, { cwd: dir, ...options });
  } catch (err) {
    expect(err).toBeInstanceOf(ShardcronError);
    return err as ShardcronError;
  }
  throw new Error(`expected ${modulePath} to fail`);
}

const job = (name: string) => `defineJob({ name: '${name}', cron: '* * * * * ?', execute() {} })`;

describe('loadJobsModule', () => {
  it('loads `module.exports = [...]` relative to cwd', async () => {
    fixture('jobs.cjs', `module.exports = [${job('a')}, ${job('b')}];`);
    const jobs = await loadJobsModule('./jobs.cjs', { cwd: dir });
    expect(jobs.map((j) => j.name)).toEqual(['a', 'b']);
    expect(jobs[0].cron).toBe('* * * * * ?');
  });

  it('loads a default export (compiled `export default [...]`) given an absolute path', async () => {
    fixture('jobs.js', `Object.defineProperty(exports, '__esModule', { value: true });\nexports.default = [${job('billing')}];`);
    expect((await loadJobsModule(path.join(dir, 'jobs.js'))).map((j) => j.name)).toEqual(['billing']);
  });

  it('loads a TypeScript module', async () => {
    fs.writeFileSync(
      path.join(dir, 'jobs.ts'),
      `import { defineJob } from ${JSON.stringify(jobDefinitionModule)};\n` +
        `const total: number = 2;\nexport default [defineJob({ name: 'typed', shardingTotalCount: total, execute() {} })];\n`,
    );
    expect((await loadJobsModule('jobs.ts', { cwd: dir })).map((j) => [j.name, j.shardingTotalCount])).toEqual([['typed', 2]]);
  });

  it('names SHARDCRON_JOBS, the path and every bad index', async () => {
    fixture('bad.js', `module.exports = [${job('ok')}, { name: 'raw', execute() {} }, 42, ${job('ok')}];`);
    const err = await loadError('bad.js');
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(err.message).toContain(`SHARDCRON_JOBS=bad.js (${path.join(dir, 'bad.js')})`);
    expect((err as ConfigError).issues.map((i) => i.field)).toEqual(['SHARDCRON_JOBS[1]', 'SHARDCRON_JOBS[2]', 'SHARDCRON_JOBS[3]']);
    expect(err.message).toMatch(/SHARDCRON_JOBS\[1\]: expected the result of defineJob\(\{\.\.\.\}\), got a plain object named "raw"/);
    expect(err.message).toMatch(/SHARDCRON_JOBS\[2\]: expected the result of defineJob.*got number 42/);
    expect(err.message).toMatch(/SHARDCRON_JOBS\[3\]: defines job "ok" again \(first at index 0\)/);
  });

  it('refuses a module whose export is not an array', async () => {
    fixture('object.js', `module.exports = { jobs: [${job('a')}] };`);
    const err = await loadError('object.js');
    expect(err.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(err.message).toMatch(/^SHARDCRON_JOBS=object\.js \(.*object\.js\): must export an array of defineJob\(\.\.\.\) results/);
    expect(err.message).toContain('it exports a plain object');
  });

  it('reports a missing file and a directory by path', async () => {
    expect((await loadError('missing.js')).message).toBe(`SHARDCRON_JOBS=missing.js (${path.join(dir, 'missing.js')}): no such file`);
    expect((await loadError('.')).message).toMatch(/is a directory/);
  });

  it('tells CommonJS from ES modules by extension, then by the nearest package.json "type"', () => {
    fs.mkdirSync(path.join(dir, 'esm', 'sub'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'esm', 'package.json'), JSON.stringify({ type: 'module' }));
    fs.mkdirSync(path.join(dir, 'cjs'));
    fs.writeFileSync(path.join(dir, 'cjs', 'package.json'), JSON.stringify({ name: 'x' }));
    expect(moduleFormat(path.join(dir, 'a.mjs'))).toBe('module');
    expect(moduleFormat(path.join(dir, 'a.mts'))).toBe('module');
    expect(moduleFormat(path.join(dir, 'esm', 'a.cjs'))).toBe('commonjs');
    expect(moduleFormat(path.join(dir, 'esm', 'a.cts'))).toBe('commonjs');
    expect(moduleFormat(path.join(dir, 'esm', 'sub', 'a.js'))).toBe('module');
    expect(moduleFormat(path.join(dir, 'esm', 'a.ts'))).toBe('module');
    expect(moduleFormat(path.join(dir, 'cjs', 'a.js'))).toBe('commonjs');
  });

  it('imports an ES module through import() and takes its default export', async () => {
    fs.mkdirSync(path.join(dir, 'esm'));
    fs.writeFileSync(path.join(dir, 'esm', 'package.json'), JSON.stringify({ type: 'module' }));
    fixture('esm/jobs.js', 'module.exports = [];');
    fixture('jobs.mjs', 'module.exports = [];');
    const { defineJob } = jest.requireActual<typeof import('../../src/shared/config/job-definition')>(jobDefinitionModule);
    const urls: string[] = [];
    const importModule = async (url: string) => {
      urls.push(url);
      return { default: [defineJob({ name: `esm-${urls.length}`, execute() {} })] };
    };
    expect((await loadJobsModule('jobs.mjs', { cwd: dir, importModule })).map((j) => j.name)).toEqual(['esm-1']);
    expect((await loadJobsModule('esm/jobs.js', { cwd: dir, importModule })).map((j) => j.name)).toEqual(['esm-2']);
    expect(urls).toEqual([pathToFileURL(path.join(dir, 'jobs.mjs')).href, pathToFileURL(path.join(dir, 'esm', 'jobs.js')).href]);
  });

  it('unwraps the default of a compiled CommonJS module seen through an ES module namespace', async () => {
    const { defineJob } = jest.requireActual<typeof import('../../src/shared/config/job-definition')>(jobDefinitionModule);
    fixture('jobs.mjs', '');
    const importModule = async () => ({ default: { __esModule: true, default: [defineJob({ name: 'nested', execute() {} })] } });
    expect((await loadJobsModule('jobs.mjs', { cwd: dir, importModule })).map((j) => j.name)).toEqual(['nested']);
  });

  it('names the file, the line and the first error line of a syntax error', async () => {
    fs.writeFileSync(path.join(dir, 'broken.js'), 'module.exports = [\n  { name: "a" },\n  }\n];\n');
    const err = await loadError('broken.js');
    expect(err.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(err.message).toMatch(/^SHARDCRON_JOBS=broken\.js \(.*broken\.js\): failed to load at line 3: SyntaxError: /);
    expect(err.message).toContain('\n    3 | }');
  });

  it('points at the line of a module that throws while it loads', async () => {
    fs.writeFileSync(path.join(dir, 'throws-now.js'), '\'use strict\';\nconst x = 1;\nthrow new Error(`database unreachable ${x}`);\n');
    const err = await loadError('throws-now.js');
    expect(err.message).toMatch(/failed to load at line 3, column 7: Error: database unreachable 1\n {4}3 \| throw new Error/);
  });

  it('finds a location given as a file URL', () => {
    const file = path.join(dir, 'x.mjs');
    fs.writeFileSync(file, 'a\nb\nc\n');
    const err = new SyntaxError('Unexpected token');
    err.stack = `${pathToFileURL(file).href}:2\nb\n^\n\nSyntaxError: Unexpected token`;
    expect(errorLocation(err, file)).toEqual({ line: 2, source: 'b' });
    expect(errorLocation(new Error('elsewhere'), file)).toBeUndefined();
  });

  it('wraps errors thrown while the module loads, such as an invalid defineJob', async () => {
    fixture('throws.js', `module.exports = [defineJob({ name: 'bad name!', execute() {} })];`);
    const err = await loadError('throws.js');
    expect(err.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(err.message).toMatch(/^SHARDCRON_JOBS=throws\.js \(.*\): failed to load at line 2, column \d+: Invalid job "bad name!"/);
    expect(err.message).toMatch(/- name: /);
    expect((err as Error & { cause?: unknown }).cause).toBeInstanceOf(ConfigError);
  });

  it('tells to compile a TypeScript module when tsx is not installed', async () => {
    fs.writeFileSync(path.join(dir, 'jobs.cts'), 'export default [];');
    const extensions = require.extensions as Record<string, unknown> | undefined;
    const saved = { ts: extensions?.['.ts'], cts: extensions?.['.cts'] };
    if (extensions) {
      delete extensions['.ts'];
      delete extensions['.cts'];
    }
    try {
      const err = await loadError('jobs.cts', { resolveTsx: () => undefined });
      expect(err.message).toMatch(/is a TypeScript module and tsx.*is not installed\. Compile the module to JavaScript/);
    } finally {
      if (extensions && saved.ts) extensions['.ts'] = saved.ts;
      if (extensions && saved.cts) extensions['.cts'] = saved.cts;
    }
  });

  it('accepts, after validating again, a definition made by another copy of defineJob', async () => {
    const foreign = Object.freeze({ name: 'other', cron: '* * * * * ?', execute() {}, config: Object.freeze({ name: 'other', cron: '* * * * * ?', shardingTotalCount: 2 }) });
    fixture('foreign.js', `module.exports = [globalThis.__foreignJob];`);
    (globalThis as Record<string, unknown>).__foreignJob = foreign;
    try {
      const [adopted] = await loadJobsModule('foreign.js', { cwd: dir });
      expect(adopted.name).toBe('other');
      expect(adopted.shardingTotalCount).toBe(2);
    } finally {
      delete (globalThis as Record<string, unknown>).__foreignJob;
    }
  });
});
