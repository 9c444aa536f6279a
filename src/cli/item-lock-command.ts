/** `shardcron item-lock [lease|per-run] [--force]`: show or switch monitorExecution's lock in the namespace. */
import { isItemLockMode, ITEM_LOCK_MODES } from '../shared/registry/item-lock-mode';
import { readAdminArgs, usageError } from './admin-args';
import { jsonLines } from './admin-output';
import { withAdmin } from './admin-session';
import { ExitCode } from './exit-codes';
import type { CliIo } from './io';

/** Usage of `shardcron item-lock`; kept in step with docs/cli.md. */
export const ITEM_LOCK_USAGE = 'Usage: shardcron item-lock [lease|per-run] [--force] [--json]';

/** Runs `shardcron item-lock ...`: exit 0 done, 1 failure (workers live without --force), 2 bad usage. */
export async function runItemLock(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const args = readAdminArgs(argv, io, 'shardcron item-lock', ITEM_LOCK_USAGE);
  if (typeof args === 'number') return args;
  const [mode, ...extra] = args.words;
  const label = `shardcron item-lock${mode === undefined ? '' : ` ${mode}`}`;
  if (mode !== undefined && !isItemLockMode(mode)) return usageError(io, label, `unknown lock "${mode}": expected ${ITEM_LOCK_MODES.join(' or ')}`, ITEM_LOCK_USAGE);
  if (extra.length > 0 || args.item !== undefined || args.file !== undefined) return usageError(io, label, 'takes at most one lock name and --force', ITEM_LOCK_USAGE);
  if (mode === undefined && args.force) return usageError(io, label, '--force goes with a lock name', ITEM_LOCK_USAGE);
  return withAdmin(io, label, async (admin) => {
    if (mode === undefined) {
      const recorded = await admin.itemLock();
      if (args.json) jsonLines({ itemLock: recorded ?? null }).forEach((line) => io.out(line));
      else io.out(recorded === undefined ? `Namespace ${admin.namespace} records no item lock yet: its first worker records one when it starts.` : `Namespace ${admin.namespace} uses the ${recorded} item lock.`);
      return ExitCode.OK;
    }
    const result = await admin.setItemLock(mode, args.force);
    if (args.json) jsonLines({ itemLock: result.mode, previous: result.previous ?? null }).forEach((line) => io.out(line));
    else if (result.previous === mode) io.out(`Namespace ${admin.namespace} already uses the ${mode} item lock.`);
    else io.out(`Namespace ${admin.namespace} now uses the ${mode} item lock (was ${result.previous ?? 'none'}); workers started from now on use it.`);
    return ExitCode.OK;
  });
}
