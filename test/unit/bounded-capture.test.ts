import { ByteHead, ByteTail } from '../../src/worker/executors/bounded-capture';

const bytes = (text: string) => Buffer.from(text, 'utf8');

describe('ByteTail', () => {
  it('keeps everything under the limit', () => {
    const tail = new ByteTail(16);
    tail.push(bytes('abc'));
    tail.push(bytes('def'));
    expect(tail.text()).toBe('abcdef');
    expect(tail.truncated).toBe(false);
  });

  it('keeps the last bytes of a long stream of small writes', () => {
    const tail = new ByteTail(10);
    for (let i = 0; i < 1000; i++) tail.push(bytes(`${i % 10}`));
    expect(tail.text()).toBe('0123456789');
    expect(tail.truncated).toBe(true);
  });

  it('never starts in the middle of a character', () => {
    const tail = new ByteTail(6);
    tail.push(bytes('x北京y')); // x(1) 北(3) 京(3) y(1): the last 6 bytes start inside 北
    expect(tail.text()).toBe('京y');
  });
});

describe('ByteHead', () => {
  it('keeps the first bytes and says when more came', () => {
    const head = new ByteHead(5);
    head.push(bytes('abc'));
    expect(head.full).toBe(false);
    head.push(bytes('defgh'));
    expect(head.full).toBe(true);
    expect(head.truncated).toBe(true);
    expect(head.text()).toBe('abcde');
  });

  it('never ends in the middle of a character', () => {
    const head = new ByteHead(5);
    head.push(bytes('ab😀c')); // a b then a 4-byte emoji: 5 bytes cut it
    expect(head.text()).toBe('ab');
    const exact = new ByteHead(6);
    exact.push(bytes('ab😀'));
    expect(exact.text()).toBe('ab😀');
  });
});
