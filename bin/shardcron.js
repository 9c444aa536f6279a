#!/usr/bin/env node
'use strict';
// The `shardcron` binary. Runs the compiled CLI (dist/cli.js, from `npm run build`) when it exists;
// in a fresh clone without a build it runs the TypeScript sources through tsx (a dev dependency).
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const compiled = path.join(root, 'dist', 'cli.js');

/** Newest modification time of the files under `dir` (0 when there is no such directory). */
function newestSource(dir) {
  let newest = 0;
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(file));
    else newest = Math.max(newest, fs.statSync(file).mtimeMs);
  }
  return newest;
}

// In a checkout, a dist/ older than the sources (built before a pull or an edit) would run old code
// silently: the sources win then. Only a checkout has src/cli.ts: a package installed from the
// registry has no src/, and the Docker image's src/ is a link to dist/ (compared with itself, the
// files the build writes after dist/cli.js looked newer, and the image has no tsx to run sources).
const built = fs.existsSync(compiled) ? fs.statSync(compiled).mtimeMs : 0;
const checkout = fs.existsSync(path.join(root, 'src', 'cli.ts'));
const useCompiled = built > 0 && (!checkout || newestSource(path.join(root, 'src')) <= built);
let cli;
if (useCompiled) {
  cli = require(compiled);
} else {
  try {
    require('tsx/cjs/api').register();
  } catch (err) {
    process.stderr.write(
      `shardcron: ${compiled} is ${built > 0 ? 'older than the sources' : 'missing'} and tsx is not installed to run the TypeScript sources.\n` +
        'Run `npm ci` (installs tsx) or `npm run build` (compiles dist/) in the shardcron directory.\n' +
        `(${err && err.message})\n`,
    );
    process.exit(1);
  }
  cli = require(path.join(root, 'src', 'cli.ts'));
}
cli.main(process.argv.slice(2));
