/**
 * Patch. node-zookeeper-client builds an Error with a stack trace for every answer that carries an
 * error code, including the ones that are ordinary outcomes: NO_NODE for a read of a node that is
 * usually absent (a job's `leader/sharding/necessary`, an item's `disabled`, a job's `trigger/`
 * before its first trigger), NODE_EXISTS, BAD_VERSION. Its stack only ever shows the library's socket
 * handler (the answer is matched to its request there, not where the request was made), and capturing
 * it was the most expensive thing a new leader did: 9% of the CPU of a takeover of 10,000 jobs went to
 * the library's `Exception`, and 11% more to the error that wraps it (src/shared/zk/zk-errors.ts).
 * Here `Exception.create` builds its errors without a stack; everything else about them is unchanged.
 * Installed once per process (the library's module is shared). Test: test/unit/zk-stackless-exceptions.test.ts.
 */

/** The part of node-zookeeper-client's `lib/Exception.js` this patch touches. */
interface ExceptionModule {
  create(code: number, path?: string): Error;
}

let installed: boolean | undefined;

/** Makes the library's answer errors stackless; false when its module looks different (nothing changed then). */
export function installStacklessExceptions(): boolean {
  if (installed !== undefined) return installed;
  let module: ExceptionModule | undefined;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    module = require('node-zookeeper-client/lib/Exception.js') as ExceptionModule;
  } catch {
    module = undefined;
  }
  const create = module?.create;
  if (!module || typeof create !== 'function') return (installed = false);
  module.create = function stacklessCreate(this: unknown, code: number, path?: string): Error {
    return withoutStack(() => create.call(this, code, path));
  };
  return (installed = true);
}

/** What `make` returns, with errors it constructs carrying no stack trace. */
export function withoutStack<T>(make: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
  }
}
