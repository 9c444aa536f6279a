/** Where a command writes and what environment it reads: the process's, or a test's. */
export interface CliIo {
  /** Writes one line (a newline is appended) to standard output. */
  out(line: string): void;
  /** Writes one line to standard error. */
  err(line: string): void;
  readonly env: NodeJS.ProcessEnv;
}

/** The real process: stdout, stderr, process.env. */
export const processIo: CliIo = {
  out: (line) => void process.stdout.write(`${line}\n`),
  err: (line) => void process.stderr.write(`${line}\n`),
  env: process.env,
};
