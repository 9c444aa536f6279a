/**
 * Bounded captures of a byte stream, for failure reports: a script's stderr tail, an HTTP error
 * body's head. Memory stays bounded however much the stream carries; the text never starts or ends
 * in the middle of a UTF-8 character.
 */

/** True for a UTF-8 continuation byte (10xxxxxx). */
const isContinuation = (byte: number): boolean => (byte & 0xc0) === 0x80;

/** Length of `buf` without a trailing UTF-8 sequence cut short. */
function completeLength(buf: Buffer): number {
  let start = buf.length - 1;
  // A sequence is at most 4 bytes: look back at most 3 continuation bytes for its lead byte.
  while (start >= 0 && start > buf.length - 4 && isContinuation(buf[start]!)) start -= 1;
  if (start < 0) return buf.length;
  const lead = buf[start]!;
  const needed = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  return buf.length - start < needed ? start : buf.length;
}

/** Keeps the last `limit` bytes written. */
export class ByteTail {
  private chunks: Buffer[] = [];
  private size = 0;
  private dropped = 0;

  constructor(private readonly limit: number) {}

  /** True once bytes were dropped from the front. */
  get truncated(): boolean {
    return this.dropped > 0 || this.size > this.limit;
  }

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size <= this.limit * 2) return;
    // Compacting only past twice the limit keeps a stream of small writes linear in time.
    this.compact();
  }

  /** The kept bytes as UTF-8 text, starting at a character boundary. */
  text(): string {
    this.compact();
    const buf = this.chunks[0] ?? Buffer.alloc(0);
    let start = 0;
    if (this.dropped > 0) while (start < buf.length && isContinuation(buf[start]!)) start += 1;
    return buf.subarray(start).toString('utf8');
  }

  private compact(): void {
    const all = Buffer.concat(this.chunks);
    const cut = Math.max(0, all.length - this.limit);
    this.dropped += cut;
    const kept = all.subarray(cut);
    this.chunks = kept.length > 0 ? [kept] : [];
    this.size = kept.length;
  }
}

/** Keeps the first `limit` bytes written. */
export class ByteHead {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  /** True once more than `limit` bytes arrived (what follows was not kept). */
  truncated = false;

  constructor(private readonly limit: number) {}

  /** True when nothing more will be kept. */
  get full(): boolean {
    return this.size >= this.limit;
  }

  push(chunk: Buffer): void {
    const room = this.limit - this.size;
    if (chunk.length > room) this.truncated = true;
    if (room <= 0) return;
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
    this.chunks.push(kept);
    this.size += kept.length;
  }

  /** The kept bytes as UTF-8 text, ending at a character boundary. */
  text(): string {
    const buf = Buffer.concat(this.chunks);
    return buf.subarray(0, this.truncated ? completeLength(buf) : buf.length).toString('utf8');
  }
}
