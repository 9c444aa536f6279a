/**
 * bin/shardcron.js picks the compiled CLI or the TypeScript sources. Each case lays the files out in
 * a temporary directory outside the repository (so tsx cannot be resolved, as in the Docker image
 * and in a package installed without dev dependencies) and runs the real launcher with node. The
 * compiled CLI there is a one-line module that says it ran.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const LAUNCHER = path.resolve(__dirname, '..', '..', 'bin', 'shardcron.js');

let root: string;

function write(relative: string, text: string, mtime?: Date): void {
  const file = path.join(root, relative);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
  if (mtime) fs.utimesSync(file, mtime, mtime);
}

function run(): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [path.join(root, 'bin', 'shardcron.js'), 'version'], { encoding: 'utf8', env: { PATH: process.env.PATH } });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

const BUILT = new Date('2026-01-01T00:00:00Z');
const LATER = new Date('2026-01-02T00:00:00Z');
const COMPILED_CLI = "exports.main = (args) => process.stdout.write('compiled ' + args.join(' '));";

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'shardcron-bin-'));
  fs.mkdirSync(path.join(root, 'bin'));
  fs.copyFileSync(LAUNCHER, path.join(root, 'bin', 'shardcron.js'));
  write('dist/cli.js', COMPILED_CLI, BUILT);
});

afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

describe('bin/shardcron.js', () => {
  it('runs dist/ in the Docker image, whose src/ is a link to dist/ holding files written after cli.js', () => {
    // The build copies the dashboard after tsc wrote cli.js, and COPY keeps their times.
    write('dist/cli.d.ts', 'export {};', LATER);
    write('dist/ops/dashboard/index.html', '<html></html>', LATER);
    fs.symlinkSync('dist', path.join(root, 'src'));
    expect(run()).toEqual({ status: 0, stdout: 'compiled version', stderr: '' });
  });

  it('runs dist/ in a package installed from the registry (no src/)', () => {
    expect(run()).toMatchObject({ status: 0, stdout: 'compiled version' });
  });

  it('runs dist/ in a checkout whose sources are not newer than the build', () => {
    write('src/cli.ts', 'export {};', BUILT);
    write('src/ops/dashboard/index.html', '<html></html>', BUILT);
    expect(run()).toMatchObject({ status: 0, stdout: 'compiled version' });
  });

  it('prefers the sources in a checkout edited after its build, and says why when tsx is missing', () => {
    write('src/cli.ts', 'export {};', BUILT);
    write('src/worker/worker-service.ts', 'export {};', LATER);
    const result = run();
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('dist/cli.js is older than the sources and tsx is not installed');
  });

  it('says dist/cli.js is missing when there is no build and no tsx', () => {
    fs.rmSync(path.join(root, 'dist'), { recursive: true });
    write('src/cli.ts', 'export {};', BUILT);
    const result = run();
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('dist/cli.js is missing and tsx is not installed');
  });
});
