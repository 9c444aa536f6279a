import { ErrorCodes, ShardcronError } from '../../src/shared/errors';
import { formatShardingItemParameters, parseShardingItemParameters } from '../../src/shared/sharding/sharding-item-parameters';

/** The ShardcronError that parsing `input` throws. */
function parseError(input: string): ShardcronError {
  try {
    parseShardingItemParameters(input);
  } catch (err) {
    expect(err).toBeInstanceOf(ShardcronError);
    expect((err as ShardcronError).code).toBe(ErrorCodes.INVALID_ITEM_PARAMETERS);
    expect((err as ShardcronError).message).toContain('item=value,item=value');
    expect((err as ShardcronError).message).toContain('0=Beijing,1=Shanghai');
    return err as ShardcronError;
  }
  throw new Error(`expected ${JSON.stringify(input)} to be rejected`);
}

describe('parseShardingItemParameters: accepted forms', () => {
  it('gives {} for empty, undefined and null', () => {
    expect(parseShardingItemParameters('')).toEqual({});
    expect(parseShardingItemParameters(undefined)).toEqual({});
    expect(parseShardingItemParameters(null)).toEqual({});
  });

  it('parses the usual form', () => {
    expect(parseShardingItemParameters('0=Beijing,1=Shanghai,2=Guangzhou')).toEqual({
      0: 'Beijing',
      1: 'Shanghai',
      2: 'Guangzhou',
    });
    expect(parseShardingItemParameters('0=A')).toEqual({ 0: 'A' });
  });

  it('ignores trailing commas, as Java split drops trailing empty strings', () => {
    expect(parseShardingItemParameters('0=A,')).toEqual({ 0: 'A' });
    expect(parseShardingItemParameters('0=A,,,')).toEqual({ 0: 'A' });
    // Only empty strings: Java's split returns an empty array, so ElasticJob gets no entry.
    expect(parseShardingItemParameters(',')).toEqual({});
    expect(parseShardingItemParameters(',,')).toEqual({});
  });

  it('trims entries, keys and values', () => {
    expect(parseShardingItemParameters(' 0 = A , 1=B\t,\n2= C D ')).toEqual({ 0: 'A', 1: 'B', 2: 'C D' });
  });

  it('trims like Java: control characters go, Unicode spaces stay', () => {
    expect(parseShardingItemParameters('0=\u0001A\u0000')).toEqual({ 0: 'A' });
    expect(parseShardingItemParameters('0=\u3000A\u00a0')).toEqual({ 0: '\u3000A\u00a0' });
  });

  it('keeps Unicode values', () => {
    expect(parseShardingItemParameters('0=北京,1=上海,2=Zürich,3=😀')).toEqual({ 0: '北京', 1: '上海', 2: 'Zürich', 3: '😀' });
  });

  it('lets a later duplicate win', () => {
    expect(parseShardingItemParameters('0=A,1=B,0=C')).toEqual({ 0: 'C', 1: 'B' });
  });

  it('reads keys like Integer.parseInt: sign, leading zeros, int32 max', () => {
    expect(parseShardingItemParameters('+1=A,007=B')).toEqual({ 1: 'A', 7: 'B' });
    expect(parseShardingItemParameters('-0=Z')).toEqual({ 0: 'Z' });
    expect(Object.keys(parseShardingItemParameters('-0=Z'))).toEqual(['0']);
    expect(parseShardingItemParameters('2147483647=big')).toEqual({ 2147483647: 'big' });
    expect(parseShardingItemParameters('0002147483647=big')).toEqual({ 2147483647: 'big' });
  });

  it('accepts keys in any order', () => {
    expect(parseShardingItemParameters('2=C,0=A,1=B')).toEqual({ 0: 'A', 1: 'B', 2: 'C' });
  });
});

describe('parseShardingItemParameters: rejected forms', () => {
  it('rejects an empty leading or inner entry', () => {
    const lead = parseError(',0=A');
    expect(lead.message).toContain('entry 1 "" is empty');
    expect(lead.details).toMatchObject({ field: 'shardingItemParameters', value: ',0=A', entry: '', position: 1 });
    expect(parseError('0=A,,1=B').message).toContain('entry 2 "" is empty');
    expect(parseError('0=A, ,1=B').message).toContain('entry 2 " " is empty');
  });

  it('rejects a whitespace-only string, as ElasticJob does', () => {
    expect(parseError('   ').message).toContain('is empty');
  });

  it('rejects an entry without a value or without "="', () => {
    expect(parseError('0=').message).toContain('entry 1 "0=" is not of the form item=value');
    expect(parseError('0= ').message).toContain('"0= "');
    expect(parseError('0==').message).toContain('"0=="');
    expect(parseError('0').message).toContain('entry 1 "0"');
    expect(parseError('0=A,1').message).toContain('entry 2 "1"');
    expect(parseError('=').message).toContain('entry 1 "="');
  });

  it('rejects "=" inside a value', () => {
    expect(parseError('0=A=B').message).toContain("entry 1 \"0=A=B\" has more than one '='");
    expect(parseError('0=k=v,1=B').message).toContain('"0=k=v"');
    expect(parseError('0=a==b').message).toContain('"0=a==b"');
  });

  it('rejects keys that are not integers', () => {
    expect(parseError('=A').message).toContain('key "" that is not an integer');
    expect(parseError('x=A').message).toContain('key "x" that is not an integer');
    expect(parseError('1.5=A').message).toContain('key "1.5"');
    expect(parseError('1e2=A').message).toContain('key "1e2"');
    expect(parseError('0x1=A').message).toContain('key "0x1"');
    expect(parseError('+=A').message).toContain('key "+"');
    expect(parseError('-=A').message).toContain('key "-"');
    expect(parseError('+-1=A').message).toContain('key "+-1"');
    expect(parseError('1 2=A').message).toContain('key "1 2"');
    expect(parseError('0=A,one=B').message).toContain('entry 2 "one=B"');
  });

  it('rejects non-ASCII digits (Java would accept them)', () => {
    expect(parseError('３=A').message).toContain('key "３"');
    expect(parseError('٣=A').message).toContain('key "٣"');
  });

  it('rejects keys past int32', () => {
    expect(parseError('2147483648=A').message).toContain('key "2147483648" that is not an integer');
    expect(parseError('99999999999999999999=A').message).toContain('not an integer');
    expect(parseError('9007199254740993=A').message).toContain('not an integer');
  });

  it('rejects negative keys (a documented divergence from ElasticJob)', () => {
    expect(parseError('-1=A').message).toContain('entry 1 "-1=A" has a negative item -1');
    expect(parseError('0=A,-2147483648=B').message).toContain('negative item -2147483648');
    expect(parseError('-2147483649=A').message).toContain('not an integer');
  });
});

describe('formatShardingItemParameters', () => {
  it('joins items in ascending order', () => {
    expect(formatShardingItemParameters({ 2: 'C', 0: 'A', 10: 'K', 1: 'B' })).toBe('0=A,1=B,2=C,10=K');
    expect(formatShardingItemParameters({})).toBe('');
  });

  it('round-trips through the parser', () => {
    const record = { 0: '北京', 1: 'Shanghai road', 2147483647: 'max', 3: '\u3000x' };
    expect(parseShardingItemParameters(formatShardingItemParameters(record))).toEqual(record);
  });

  it('refuses what would not parse back', () => {
    const bads: Array<Record<number, string>> = [{ 0: 'a,b' }, { 0: 'a=b' }, { 0: '' }, { 0: ' a' }, { 0: 'a\n' }, { [-1]: 'a' }, { 2147483648: 'a' }];
    for (const bad of bads) {
      expect(() => formatShardingItemParameters(bad)).toThrow(ShardcronError);
    }
    expect(() => formatShardingItemParameters({ 0: 'a,b' })).toThrow(/item "0" has the value "a,b", which contains ',' or '='/);
    expect(() => formatShardingItemParameters({ 1.5: 'a' } as Record<number, string>)).toThrow(/not a non-negative int32/);
  });
});
