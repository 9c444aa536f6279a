/**
 * Loading a jobs module: the file SHARDCRON_JOBS names, whose default export is an array of
 * `defineJob(...)` results. `shardcron start` calls {@link loadJobsModule} before it starts a node,
 * so a bad module fails at once with an error that names the variable, the file and each bad element.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ConfigError, ErrorCodes, ShardcronError, type FieldIssue } from './shared/errors';
import { defineJob, isResolvedJobDefinition, type JobDefinition, type ResolvedJobDefinition } from './shared/config/job-definition';

/** How Node.js (and tsx) would load a file: as CommonJS or as an ES module. */
export type ModuleFormat = 'commonjs' | 'module';

/** Options of {@link loadJobsModule}. */
export interface LoadJobsModuleOptions {
  /** Directory a relative path is resolved against; default `process.cwd()`. */
  cwd?: string;
  /**
   * Returns the path of one of tsx's APIs (`tsx/cjs/api`, `tsx/esm/api`), or undefined when tsx is
   * not installed. A seam for tests; the default looks next to shardcron, then next to the jobs module.
   */
  resolveTsx?: (api: TsxApi, moduleDir: string) => string | undefined;
  /**
   * Imports an ES module by file URL. A seam for tests (jest's module sandbox has no native
   * `import()`); the default is Node's own dynamic import.
   */
  importModule?: (url: string) => Promise<unknown>;
}

/** The tsx entry points shardcron uses to load TypeScript jobs modules. */
export type TsxApi = 'tsx/cjs/api' | 'tsx/esm/api';

const TYPESCRIPT_EXTENSIONS = new Set(['.ts', '.cts', '.mts', '.tsx']);
const VARIABLE = 'SHARDCRON_JOBS';

/**
 * Node's own `import()`. TypeScript compiles `import()` to `require()` under `module: commonjs`,
 * which cannot load an ES module on every Node 20; a function made at run time keeps the real one.
 */
const nativeImport = new Function('url', 'return import(url)') as (url: string) => Promise<unknown>;

function defaultResolveTsx(api: TsxApi, moduleDir: string): string | undefined {
  for (const from of [__dirname, moduleDir]) {
    try {
      return require.resolve(api, { paths: [from] });
    } catch {
      // not installed there
    }
  }
  return undefined;
}

/**
 * The format Node.js gives `file`: `.mjs`/`.mts` are ES modules, `.cjs`/`.cts` CommonJS, and any
 * other extension follows the `"type"` of the nearest package.json (CommonJS when it has none).
 */
export function moduleFormat(file: string): ModuleFormat {
  const extension = path.extname(file);
  if (extension === '.mjs' || extension === '.mts') return 'module';
  if (extension === '.cjs' || extension === '.cts') return 'commonjs';
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (fs.existsSync(manifest)) {
      try {
        return (JSON.parse(fs.readFileSync(manifest, 'utf8')) as { type?: unknown }).type === 'module' ? 'module' : 'commonjs';
      } catch {
        return 'commonjs'; // Node fails on it with its own message when the module loads
      }
    }
    if (path.dirname(dir) === dir) return 'commonjs';
  }
}

function loadError(given: string, file: string, what: string, cause?: unknown): ShardcronError {
  return new ShardcronError(ErrorCodes.INVALID_CONFIG, `${VARIABLE}=${given} (${file}): ${what}`, { variable: VARIABLE, path: file }, { cause });
}

function tsxMissing(given: string, file: string): ShardcronError {
  return loadError(given, file,
    'is a TypeScript module and tsx, which shardcron uses to load TypeScript, is not installed. ' +
      'Compile the module to JavaScript (e.g. `npx tsc`) and point SHARDCRON_JOBS at the .js file, or `npm install tsx`.');
}

/**
 * Makes `require` understand TypeScript, with tsx's CommonJS hook, unless something (tsx itself,
 * ts-node, jest) already handles `.ts`.
 */
function ensureTypeScriptLoader(given: string, file: string, resolveTsx: NonNullable<LoadJobsModuleOptions['resolveTsx']>): void {
  const extensions = (require as NodeJS.Require | undefined)?.extensions;
  if (extensions?.[path.extname(file)] || extensions?.['.ts']) return;
  const api = resolveTsx('tsx/cjs/api', path.dirname(file));
  if (!api) throw tsxMissing(given, file);
  (require(api) as { register(): unknown }).register();
}

/** Where in `file` an error thrown while loading it points: line and column, with the source line. */
export function errorLocation(err: unknown, file: string): { line: number; column?: number; source?: string } | undefined {
  const text = err instanceof Error ? `${err.message}\n${err.stack ?? ''}` : String(err);
  const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const pattern = new RegExp(`(?:${escape(pathToFileURL(file).href)}|${escape(file)}):(\\d+)(?::(\\d+))?`);
  const match = pattern.exec(text);
  if (!match) return undefined;
  const line = Number(match[1]);
  const column = match[2] === undefined ? undefined : Number(match[2]);
  let source: string | undefined;
  try {
    source = fs.readFileSync(file, 'utf8').split(/\r?\n/)[line - 1]?.trim().slice(0, 200);
  } catch {
    // unreadable: the location alone
  }
  return { line, ...(column !== undefined && { column }), ...(source && { source }) };
}

/**
 * Where a syntax error of an ES module is. V8 reports it to `import()` without a location (Node adds
 * one only to CommonJS errors), so the file is checked by `node --check`, which names it: a process
 * spawned only when a module already failed to load.
 */
function syntaxErrorLocation(file: string): ReturnType<typeof errorLocation> {
  const checked = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8', timeout: 10_000 });
  return checked.status === 0 ? undefined : errorLocation(Object.assign(new Error(''), { stack: checked.stderr }), file);
}

/** A load failure: the file, the error's first line and, when the stack points into the file, that line. */
function failedToLoad(given: string, file: string, err: unknown): ShardcronError {
  // Our own errors (an invalid defineJob) list every bad field: all of it. Others: the first line.
  const first = err instanceof ShardcronError ? err.message : err instanceof Error ? `${err.name}: ${err.message.split('\n')[0]}` : String(err);
  const javascript = !TYPESCRIPT_EXTENSIONS.has(path.extname(file));
  const at = errorLocation(err, file) ?? (javascript && err instanceof SyntaxError ? syntaxErrorLocation(file) : undefined);
  const where = at ? ` at line ${at.line}${at.column !== undefined ? `, column ${at.column}` : ''}` : '';
  const source = at?.source ? `\n    ${at.line} | ${at.source}` : '';
  return loadError(given, file, `failed to load${where}: ${first}${source}`, err);
}

/** CommonJS refusing ES module syntax: the file is an ES module after all (Node then loads it so). */
function isEsmSyntaxInCommonJs(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ERR_REQUIRE_ESM' || code === 'ERR_REQUIRE_ASYNC_MODULE' ||
    (err.name === 'SyntaxError' && /Cannot use import statement outside a module|Unexpected token 'export'/.test(err.message));
}

/** Loads `file` the way Node.js would run it, TypeScript through tsx; returns what it exports. */
async function importJobsModule(given: string, file: string, options: LoadJobsModuleOptions): Promise<unknown> {
  const resolveTsx = options.resolveTsx ?? defaultResolveTsx;
  const importModule = options.importModule ?? nativeImport;
  const typescript = TYPESCRIPT_EXTENSIONS.has(path.extname(file));
  const asModule = async (): Promise<unknown> => {
    if (!typescript) return importModule(pathToFileURL(file).href);
    const api = resolveTsx('tsx/esm/api', path.dirname(file));
    if (!api) throw tsxMissing(given, file);
    // `require` resolves tsx's CommonJS build of this API, whose tsImport registers its loader from a
    // wrong relative path in tsx 4.23 (ERR_MODULE_NOT_FOUND .../esm/api/esm/index.mjs): its ES build,
    // next to it, is imported instead. jobs-module-forms.test.ts loads a .mts module through it.
    const esmBuild = api.replace(/\.cjs$/, '.mjs');
    const { tsImport } = (fs.existsSync(esmBuild) ? await importModule(pathToFileURL(esmBuild).href) : require(api)) as {
      tsImport(specifier: string, parent: string): Promise<unknown>;
    };
    return tsImport(pathToFileURL(file).href, pathToFileURL(__filename).href);
  };
  if (moduleFormat(file) === 'module') return asModule();
  if (typescript) ensureTypeScriptLoader(given, file, resolveTsx);
  try {
    return require(file);
  } catch (err) {
    if (isEsmSyntaxInCommonJs(err)) return asModule();
    throw err;
  }
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
  if (typeof candidate.config !== 'object' || candidate.config === null) return undefined;
  const { fireListeners: _marker, ...config } = candidate.config;
  const definition = {
    ...config,
    ...(candidate.execute !== undefined && { execute: candidate.execute }),
    ...(candidate.fetchData !== undefined && { fetchData: candidate.fetchData }),
    ...(candidate.processData !== undefined && { processData: candidate.processData }),
    ...(candidate.errorHandler !== undefined && { errorHandler: candidate.errorHandler }),
    ...(candidate.listeners !== undefined && { listeners: candidate.listeners }),
  } as unknown as JobDefinition;
  return defineJob(definition);
}

/**
 * The array a module exports: `export default [...]` (or `exports.default`), else `module.exports = [...]`.
 * An ES module namespace of a compiled CommonJS module nests the default once more
 * (`namespace.default.default`), so defaults are unwrapped until an array shows.
 */
function exportedArray(exported: unknown, given: string, file: string): unknown[] {
  let candidate = exported;
  for (let depth = 0; depth < 3 && !Array.isArray(candidate); depth += 1) {
    if (typeof candidate !== 'object' || candidate === null || !('default' in candidate)) break;
    candidate = (candidate as { default: unknown }).default;
  }
  if (Array.isArray(candidate)) return candidate;
  throw loadError(given, file,
    `must export an array of defineJob(...) results as its default export (\`export default [defineJob({...})]\` ` +
      `or \`module.exports = [...]\`); it exports ${describeValue(candidate)}`);
}

/**
 * Loads the jobs module at `modulePath` (relative paths resolve against the working directory), in
 * every form a Node.js user writes: CommonJS (`.cjs`, `.js`), ES modules (`.mjs`, `.js` under
 * `"type": "module"`) and TypeScript (`.ts`, `.cts`, `.mts`, through tsx when it is installed).
 * Returns the job definitions, or throws ShardcronError INVALID_CONFIG naming SHARDCRON_JOBS, the
 * file and, for a module that fails to load, the line its error points at; for a bad array, each
 * offending index (a {@link ConfigError} with one issue per element).
 */
export async function loadJobsModule(modulePath: string, options: LoadJobsModuleOptions = {}): Promise<ResolvedJobDefinition[]> {
  const file = path.resolve(options.cwd ?? process.cwd(), modulePath);
  if (!fs.existsSync(file)) throw loadError(modulePath, file, 'no such file');
  if (fs.statSync(file).isDirectory()) throw loadError(modulePath, file, 'is a directory; name the module file, e.g. ./dist/jobs.js');

  let exported: unknown;
  try {
    exported = await importJobsModule(modulePath, file, options);
  } catch (err) {
    if (err instanceof ShardcronError && err.details.variable === VARIABLE) throw err;
    throw failedToLoad(modulePath, file, err);
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
