#!/usr/bin/env node
'use strict';
// The `shardcron` binary. Runs the compiled CLI (dist/cli.js, from `npm run build`) when it exists;
// in a fresh clone without a build it runs the TypeScript sources through tsx (a dev dependency).
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const compiled = path.join(root, 'dist', 'cli.js');
let cli;
if (fs.existsSync(compiled)) {
  cli = require(compiled);
} else {
  try {
    require('tsx/cjs/api').register();
  } catch (err) {
    process.stderr.write(
      `shardcron: ${compiled} is missing and tsx is not installed to run the TypeScript sources.\n` +
        'Run `npm ci` (installs tsx) or `npm run build` (compiles dist/) in the shardcron directory.\n' +
        `(${err && err.message})\n`,
    );
    process.exit(1);
  }
  cli = require(path.join(root, 'src', 'cli.ts'));
}
cli.main(process.argv.slice(2));
