/**
 * `shardingItemParameters`: the per-item parameter string of a job, `item=value,item=value`
 * (e.g. `0=Beijing,1=Shanghai`). Parsed exactly as ElasticJob-Lite 3.x parses it (Java
 * String.split, String.trim and Integer.parseInt semantics), with the divergences noted below.
 * No I/O.
 */
import { ErrorCodes, ShardcronError } from '../errors';

const EXPECTED_FORM = 'expected item=value,item=value (e.g. 0=Beijing,1=Shanghai)';

/**
 * Java's `String.split(sep)` with a literal one-character separator and limit 0: trailing empty
 * strings are dropped (so `"0=A,"` has one entry and `","` has none), leading and inner ones are
 * kept. When the separator does not occur Java returns the input itself, even if it is empty.
 */
function javaSplit(s: string, sep: string): string[] {
  if (!s.includes(sep)) return [s];
  const parts = s.split(sep);
  let end = parts.length;
  while (end > 0 && parts[end - 1] === '') end--;
  return parts.slice(0, end);
}

/**
 * Java's `String.trim()`: strips code units up to U+0020 (spaces and ASCII control characters)
 * from both ends, but not other Unicode spaces such as U+00A0 or U+3000, which JS's trim would
 * also strip. Kept so a value reads the same as it did under ElasticJob.
 */
function javaTrim(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && s.charCodeAt(start) <= 0x20) start++;
  while (end > start && s.charCodeAt(end - 1) <= 0x20) end--;
  return s.slice(start, end);
}

const INT32_MAX = 2147483647;

/**
 * `Integer.parseInt` on an already-trimmed key: an optional `+` or `-`, then digits, within
 * int32. Returns undefined where Java throws NumberFormatException. Divergence: only ASCII digits
 * are accepted, whereas Java's Character.digit also takes other Unicode decimal digits (`３`, `٣`).
 */
function parseJavaInt(key: string): number | undefined {
  const m = /^([+-]?)([0-9]+)$/.exec(key);
  if (!m) return undefined;
  const magnitude = Number(m[2]); // exact: any digit string past int32 range is rejected below
  const value = m[1] === '-' ? -magnitude : magnitude;
  // Java's range is -2^31..2^31-1; `+ 0` turns -0 into 0, as parseInt("-0") is 0 in Java.
  if (value > INT32_MAX || value < -INT32_MAX - 1) return undefined;
  return value + 0;
}

function fail(input: string, entry: string, position: number, problem: string): never {
  throw new ShardcronError(
    ErrorCodes.INVALID_ITEM_PARAMETERS,
    `Invalid shardingItemParameters ${JSON.stringify(input)}: entry ${position} ${JSON.stringify(entry)} ${problem}; ${EXPECTED_FORM}`,
    { field: 'shardingItemParameters', value: input, entry, position },
  );
}

/**
 * Parses `shardingItemParameters` into item → parameter, as ElasticJob does:
 * - `undefined`, `null` and `""` give `{}`; the string is split on `,` with Java semantics, so a
 *   trailing comma is ignored (`"0=A,"`) while an empty leading or inner entry is an error
 *   (`",0=A"`, `"0=A,,1=B"`), and a whitespace-only string is an error too;
 * - each entry is trimmed and split on `=`, and must give exactly two parts: `"0="`, `"0=A=B"`
 *   and `"0"` are errors (a value cannot contain `=`);
 * - the trimmed key must be an int32 as Java's Integer.parseInt reads it (optional sign, digits,
 *   leading zeros allowed); `"=A"` and `"x=A"` are errors saying the key is not an integer;
 * - the value is trimmed (Java trim); a later duplicate item wins.
 *
 * Deliberate divergence: a negative key (`"-1=A"`) is rejected, since an item is never negative;
 * ElasticJob accepts it and then never uses it. `-0` is item 0, as Java reads it.
 * Keys beyond the job's shardingTotalCount are accepted and ignored, as in ElasticJob.
 *
 * Throws ShardcronError INVALID_ITEM_PARAMETERS quoting the offending entry and the expected form.
 */
export function parseShardingItemParameters(s: string | undefined | null): Record<number, string> {
  const result: Record<number, string> = {};
  if (s === undefined || s === null || s === '') return result;
  if (typeof s !== 'string') {
    throw new ShardcronError(
      ErrorCodes.INVALID_ITEM_PARAMETERS,
      `Invalid shardingItemParameters: expected a string, got ${typeof s}; ${EXPECTED_FORM}`,
      { field: 'shardingItemParameters' },
    );
  }
  javaSplit(s, ',').forEach((entry, index) => {
    const position = index + 1;
    const pair = javaSplit(javaTrim(entry), '=');
    if (pair.length !== 2) {
      const problem =
        javaTrim(entry) === ''
          ? 'is empty'
          : pair.length > 2
            ? "has more than one '=' (a value cannot contain '=')"
            : "is not of the form item=value (missing '=' or value)";
      fail(s, entry, position, problem);
    }
    const key = javaTrim(pair[0]);
    const item = parseJavaInt(key);
    if (item === undefined) {
      fail(s, entry, position, `has a key ${JSON.stringify(key)} that is not an integer (a non-negative int32 item number is required)`);
    }
    if (item < 0) fail(s, entry, position, `has a negative item ${item}; items are numbered from 0`);
    result[item] = javaTrim(pair[1]);
  });
  return result;
}

/**
 * The inverse of {@link parseShardingItemParameters}: `item=value` pairs joined with `,`, items
 * ascending. Throws ShardcronError INVALID_ITEM_PARAMETERS for anything that would not parse
 * back to the same record: a key that is not a non-negative int32, or a value that is empty,
 * contains `,` or `=`, or starts or ends with a character Java's trim would strip.
 */
export function formatShardingItemParameters(record: Readonly<Record<number, string>>): string {
  const entries = Object.entries(record).map(([key, value]): [number, string] => {
    const item = Number(key);
    const bad = (problem: string): never => {
      throw new ShardcronError(
        ErrorCodes.INVALID_ITEM_PARAMETERS,
        `Cannot format shardingItemParameters: item ${JSON.stringify(key)} ${problem}; ${EXPECTED_FORM}`,
        { field: 'shardingItemParameters', entry: key },
      );
    };
    if (!/^(0|[1-9][0-9]*)$/.test(key) || item > INT32_MAX) bad('is not a non-negative int32');
    if (typeof value !== 'string') bad(`has a ${typeof value} value, expected a string`);
    if (value === '' || javaTrim(value) !== value) bad(`has the value ${JSON.stringify(value)}, which is empty or has leading or trailing whitespace`);
    if (value.includes(',') || value.includes('=')) bad(`has the value ${JSON.stringify(value)}, which contains ',' or '='`);
    return [item, value];
  });
  entries.sort((a, b) => a[0] - b[0]);
  return entries.map(([item, value]) => `${item}=${value}`).join(',');
}
