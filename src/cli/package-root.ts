import path from 'node:path';

/** The repository (or installed package) root: src/cli and dist/cli are both two levels below it. */
export const PACKAGE_ROOT = path.resolve(__dirname, '..', '..');

/** The `shardcron` binary that dev's processes run. */
export const SHARDCRON_BIN = path.join(PACKAGE_ROOT, 'bin', 'shardcron.js');
