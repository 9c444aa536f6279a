import v8 from 'node:v8';
import { addCompletedFire, COMPLETED_FIRES_KEPT, formatCompletedFires, parseCompletedFires, withCompletedFire, mergeCompletedFires } from '../../src/shared/registry/completed-fires';

const BASE = Date.UTC(2026, 10, 22, 1, 0, 0);
const buf = (text: string) => Buffer.from(text, 'utf8');

describe('completed fires', () => {
  it('writes the oldest fire time and then differences, and reads them back', () => {
    const fires = [BASE, BASE + 1_000, BASE + 2_000];
    const text = formatCompletedFires(fires);
    expect(text).toBe(`["d",${BASE},1000,1000]`);
    expect(parseCompletedFires(buf(text))).toEqual(fires);
  });

  it('keeps an order that is not ascending (a misfire re-run completes an older fire after a newer one)', () => {
    const fires = [BASE + 5_000, BASE + 3_000, BASE + 60_000];
    expect(parseCompletedFires(buf(formatCompletedFires(fires)))).toEqual(fires);
  });

  it('writes a full list of a job firing every second in 174 bytes, against 449 for whole times', () => {
    let list: number[] = [];
    for (let i = 0; i < 40; i += 1) list = withCompletedFire(list, BASE + i * 1_000);
    expect(list).toHaveLength(COMPLETED_FIRES_KEPT);
    expect(Buffer.byteLength(formatCompletedFires(list))).toBe(174);
    expect(Buffer.byteLength(JSON.stringify(list))).toBe(449);
    expect(parseCompletedFires(buf(formatCompletedFires(list)))).toEqual(list);
  });

  it('reads the whole-times array earlier versions wrote', () => {
    expect(parseCompletedFires(buf(JSON.stringify([BASE, BASE + 1_000])))).toEqual([BASE, BASE + 1_000]);
  });

  it('formats an empty list, and reads empty data and the empty list as none', () => {
    expect(formatCompletedFires([])).toBe('["d"]');
    expect(parseCompletedFires(buf('["d"]'))).toEqual([]);
    expect(parseCompletedFires(Buffer.alloc(0))).toEqual([]);
  });

  it('reads anything unreadable as no completed fire, never as a wrong one', () => {
    for (const text of ['not json', '{"d":1}', '["d",1.5]', `["d",${BASE},"x"]`, `["d",${Number.MAX_SAFE_INTEGER},1]`]) {
      expect(parseCompletedFires(buf(text))).toEqual([]);
    }
    // The whole-times form drops entries that are not fire times and keeps the others.
    expect(parseCompletedFires(buf(`[${BASE},"x",1.5]`))).toEqual([BASE]);
  });

  it('adds a fire once, newest last, dropping the oldest beyond the kept count', () => {
    expect(withCompletedFire([BASE, BASE + 1_000], BASE)).toEqual([BASE + 1_000, BASE]);
    const full = Array.from({ length: COMPLETED_FIRES_KEPT }, (_, i) => BASE + i);
    expect(withCompletedFire(full, BASE + 100)).toEqual([...full.slice(1), BASE + 100]);
  });

  it('merges lists by fire time, each fire once, keeping both lists whole: an older list merged last does not push out the newest', () => {
    const recent = Array.from({ length: COMPLETED_FIRES_KEPT }, (_, i) => BASE + 100_000 + i * 1_000);
    const old = Array.from({ length: COMPLETED_FIRES_KEPT }, (_, i) => BASE + i * 1_000);
    expect(mergeCompletedFires(recent, old)).toEqual([...old, ...recent]);
    expect(mergeCompletedFires(old, recent)).toEqual([...old, ...recent]);
    // A record whose last completion is an old fire (a failover), next to one newer fire it lacks.
    const record = [...recent.slice(1), BASE];
    expect(mergeCompletedFires(record, [recent[0]])).toEqual([BASE, ...recent]);
    // Beyond twice the count, the oldest fire times go.
    expect(mergeCompletedFires([BASE - 1_000], old, recent)).toEqual([...old, ...recent]);
    expect(mergeCompletedFires([BASE + 2_000, BASE], [BASE + 1_000, BASE], [])).toEqual([BASE, BASE + 1_000, BASE + 2_000]);
    expect(mergeCompletedFires([], [])).toEqual([]);
  });

  it('holds fire times unboxed, whatever array they came from (a worker keeps a list per item lease)', () => {
    // V8's own check, with natives syntax allowed for this one compile.
    v8.setFlagsFromString('--allow-natives-syntax');
    const unboxed = new Function('list', 'return %HasDoubleElements(list)') as (list: readonly number[]) => boolean;
    v8.setFlagsFromString('--no-allow-natives-syntax');
    const boxed = [...new Set([BASE, BASE + 1_000])];
    expect(unboxed(boxed)).toBe(false);
    const merged = mergeCompletedFires(boxed, [], [BASE + 2_000]);
    expect(merged).toEqual([BASE, BASE + 1_000, BASE + 2_000]);
    expect(unboxed(merged)).toBe(true);
    expect(unboxed(withCompletedFire(mergeCompletedFires([], []), BASE))).toBe(true);
    const added = withCompletedFire(boxed, BASE + 3_000);
    expect(added).toEqual([BASE, BASE + 1_000, BASE + 3_000]);
    expect(unboxed(added)).toBe(true);
    // In place: the same array, full at the count, the newest last, unboxed.
    const list: number[] = [];
    for (let i = 0; i < 40; i += 1) addCompletedFire(list, BASE + i * 1_000);
    addCompletedFire(list, BASE + 20_000);
    expect(list).toEqual([...Array.from({ length: 32 }, (_, i) => BASE + (8 + i) * 1_000).filter((f) => f !== BASE + 20_000), BASE + 20_000]);
    expect(list).toHaveLength(COMPLETED_FIRES_KEPT);
    expect(unboxed(list)).toBe(true);
  });
});
