/** Runs a bench tool's `main` and exits: 0 when it resolves, 1 with its stack when it fails. */
export function runTool(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (err) => {
      process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
