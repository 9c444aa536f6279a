/**
 * Loading a jobs module: the file SHARDCRON_JOBS names, whose default export is an array of
 * `defineJob(...)` results. `shardcron start` calls {@link loadJobsModule} before it starts a node,
 * so a bad module fails at once with an error that names the variable, the file and each bad element.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError, ErrorCodes, ShardcronError, type FieldIssue } from './shared/errors';
import { defineJob, isResolvedJobDefinition, type JobDefinition, type ResolvedJobDefinition } from './shared/job-definition';

/** Options of {@link loadJobsModule}. */
export interface LoadJobsModuleOptions {
  /** Directory a relative path is resolved against; default `process.cwd()`. */
  cwd?: string;
  /**
   * Returns the path of tsx's CommonJS API, or undefined when tsx is not installed. A seam for tests;
   * the default looks next to shardcron, then next to the jobs module.
   */
  resolveTsx?: (moduleDir: string) => string | undefined;
}

const TYPESCRIPT_EXTENSIONS = new Set(['.ts', '.cts', '.tsx']);
const VARIABLE = 'SHARDCRON_JOBS';

function defaultResolveTsx(moduleDir: string): string | undefined {
  for (const from of [__dirname, moduleDir]) {
    try {
      return require.resolve('tsx/cjs/api', { paths: [from] });
    } catch {
      // not installed there
    }
  }
  return undefined;
}

function loadError(given: string, file: string, what: string, cause?: unknown): ShardcronError {
  return new ShardcronError(ErrorCodes.INVALID_CONFIG, `${VARIABLE}=${given} (${file}): ${what}`, { variable: VARIABLE, path: file }, { cause });
}

/**
 * Makes `require` understand TypeScript, with tsx's CommonJS hook, unless something (tsx itself,
 * ts-node, jest) already handles `.ts`.
 */
function ensureTypeScriptLoader(given: string, file: string, resolveTsx: (dir: string) => string | undefined): void {
  const extensions = (require as NodeJS.Require | undefined)?.extensions;
  if (extensions?.[path.extname(file)] || extensions?.['.ts']) return;
  const api = resolveTsx(path.dirname(file));
  if (!api) {
    throw loadError(given, file,
      'is a TypeScript module and tsx, which shardcron uses to load TypeScript, is not installed. ' +
        'Compile the module to JavaScript (e.g. `npx tsc`) and point SHARDCRON_JOBS at the .js file, or `npm install tsx`.');
  }
  (require(api) as { register(): unknown }).register();
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'function') return 'a function';
  if (typeof value !== 'object') return `${typeof value} ${JSON.stringify(value)?.slice(0, 60)}`;
  const name = (value as { name?: unknown }).name;
  return typeof name === 'string' ? `a plain object named "${name}"` : 'a plain object';
}

/**
 * A definition made by another copy of shardcron (the compiled `dist` loading a module that imports
 * `src`, or two installed versions) fails {@link isResolvedJobDefinition}, which knows only this copy's
 * results. It has the same shape, so it is validated again by this copy's defineJob instead of refused.
 */
function adoptForeignDefinition(value: unknown): ResolvedJobDefinition | undefined {
  if (typeof value !== 'object' || value === null || !Object.isFrozen(value)) return undefined;
  const candidate = value as Partial<ResolvedJobDefinition>;
  if (typeof candidate.execute !== 'function' || typeof candidate.config !== 'object' || candidate.config === null) return undefined;
  const definition: JobDefinition = {
    ...candidate.config,
    execute: candidate.execute,
    ...(candidate.errorHandler !== undefined && { errorHandler: candidate.errorHandler }),
    ...(candidate.listeners !== undefined && { listeners: candidate.listeners }),
  };
  return defineJob(definition);
}

/** The array a module exports: `export default [...]` (or `exports.default`), else `module.exports = [...]`. */
function exportedArray(exported: unknown, given: string, file: string): unknown[] {
  const candidate = typeof exported === 'object' && exported !== null && 'default' in exported ? (exported as { default: unknown }).default : exported;
  if (Array.isArray(candidate)) return candidate;
  throw loadError(given, file,
    `must export an array of defineJob(...) results as its default export (\`export default [defineJob({...})]\` ` +
      `or \`module.exports = [...]\`); it exports ${describeValue(candidate)}`);
}

/**
 * Loads the jobs module at `modulePath` (relative paths resolve against the working directory).
 * JavaScript (`.js`, `.cjs`) is required as is; TypeScript through tsx when it is installed.
 * Returns the job definitions, or throws ShardcronError INVALID_CONFIG naming SHARDCRON_JOBS, the
 * file and, for a bad array, each offending index (a {@link ConfigError} with one issue per element).
 */
export function loadJobsModule(modulePath: string, options: LoadJobsModuleOptions = {}): ResolvedJobDefinition[] {
  const file = path.resolve(options.cwd ?? process.cwd(), modulePath);
  if (!fs.existsSync(file)) throw loadError(modulePath, file, 'no such file');
  if (fs.statSync(file).isDirectory()) throw loadError(modulePath, file, 'is a directory; name the module file, e.g. ./dist/jobs.js');
  const extension = path.extname(file);
  if (extension === '.mjs' || extension === '.mts') {
    throw loadError(modulePath, file, 'is an ES module; shardcron loads CommonJS jobs modules: use .js, .cjs or .ts');
  }
  if (TYPESCRIPT_EXTENSIONS.has(extension)) ensureTypeScriptLoader(modulePath, file, options.resolveTsx ?? defaultResolveTsx);

  let exported: unknown;
  try {
    exported = require(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_REQUIRE_ESM') {
      throw loadError(modulePath, file, 'is an ES module (its package.json says "type": "module"); use a .cjs or .ts jobs module', err);
    }
    const message = err instanceof Error ? err.message : String(err);
    throw loadError(modulePath, file, `failed to load: ${message}`, err);
  }

  const elements = exportedArray(exported, modulePath, file);
  const issues: FieldIssue[] = [];
  const jobs: ResolvedJobDefinition[] = [];
  const seen = new Map<string, number>();
  elements.forEach((element, index) => {
    const field = `${VARIABLE}[${index}]`;
    let job: ResolvedJobDefinition | undefined;
    try {
      job = isResolvedJobDefinition(element) ? element : adoptForeignDefinition(element);
    } catch (err) {
      issues.push({ field, message: err instanceof Error ? err.message : String(err) });
      return;
    }
    if (!job) {
      issues.push({ field, message: `expected the result of defineJob({...}), got ${describeValue(element)}` });
      return;
    }
    const first = seen.get(job.name);
    if (first !== undefined) {
      issues.push({ field, message: `defines job "${job.name}" again (first at index ${first}); job names are unique` });
      return;
    }
    seen.set(job.name, index);
    jobs.push(job);
  });
  if (issues.length > 0) {
    throw new ConfigError(ErrorCodes.INVALID_CONFIG, `${VARIABLE}=${modulePath} (${file}): the default export must be an array of defineJob(...) results`,
      issues, { variable: VARIABLE, path: file });
  }
  return jobs;
}
