/**
 * A JSONEachRow body built line by line: each line is encoded to UTF-8 into one growing
 * buffer as it comes, so a batch's rows need no array of strings, no join and no
 * re-encode before the store takes them as bytes (the consumer's write step).
 */

/** Lines appended with {@link JsonLines.push}, readable as byte ranges of one buffer. */
export interface JsonLines {
  /** Appends `line` (one JSON value, no newline in it) and a '\n' after it. */
  push(line: string): void;
  /** Lines pushed so far. */
  readonly length: number;
  /** UTF-8 bytes the lines take so far, newlines included. */
  readonly byteLength: number;
  /**
   * Lines `[from, to)` as one body: each line followed by '\n', the last one too. A view
   * of the buffer, not a copy: valid until the next `push` (which may move the lines to a
   * bigger buffer). Empty for `to <= from`.
   * @throws RangeError when `from` or `to` is outside `[0, length]`.
   */
  lines(from: number, to: number): Buffer;
  /**
   * Line `i` as text, without its newline.
   * @throws RangeError when `i` is outside `[0, length)`.
   */
  line(i: number): string;
}

/** Buffer's own UTF-8 encoder, called without `write`'s argument checks (as the batch writer does). */
type Utf8Writer = (buf: Buffer, text: string, offset: number) => number;
const utf8Write: Utf8Writer =
  typeof (Buffer.prototype as unknown as { utf8Write?: unknown }).utf8Write === 'function'
    ? (buf, text, offset) => (buf as unknown as { utf8Write(t: string, o: number): number }).utf8Write(text, offset)
    : (buf, text, offset) => buf.write(text, offset, 'utf8');

/**
 * Creates an empty {@link JsonLines} with room for `capacityBytes` bytes to start with
 * (it grows by doubling, so a low guess costs copies, not correctness).
 */
export function createJsonLines(capacityBytes = 64 * 1024): JsonLines {
  let buf = Buffer.allocUnsafe(Math.max(1024, Math.ceil(capacityBytes)));
  let used = 0;
  /** Byte offset just past each line's newline. */
  const ends: number[] = [];

  const grow = (need: number): void => {
    const bigger = Buffer.allocUnsafe(Math.max(need, buf.length * 2));
    buf.copy(bigger, 0, 0, used);
    buf = bigger;
  };
  const start = (i: number): number => (i === 0 ? 0 : ends[i - 1]!);
  const check = (i: number, max: number): void => {
    if (!(Number.isInteger(i) && i >= 0 && i <= max)) throw new RangeError(`line ${i} is outside [0, ${max}]`);
  };

  return {
    push(line: string): void {
      // A UTF-16 unit takes at most 3 UTF-8 bytes; only when that bound does not fit is
      // the exact length worth computing.
      if (used + line.length * 3 + 1 > buf.length) {
        const need = used + Buffer.byteLength(line, 'utf8') + 1;
        if (need > buf.length) grow(need);
      }
      used += utf8Write(buf, line, used);
      buf[used++] = 0x0a;
      ends.push(used);
    },
    get length(): number {
      return ends.length;
    },
    get byteLength(): number {
      return used;
    },
    lines(from: number, to: number): Buffer {
      check(from, ends.length);
      check(to, ends.length);
      return to <= from ? buf.subarray(0, 0) : buf.subarray(start(from), ends[to - 1]!);
    },
    line(i: number): string {
      check(i, ends.length - 1);
      return buf.toString('utf8', start(i), ends[i]! - 1);
    },
  };
}
