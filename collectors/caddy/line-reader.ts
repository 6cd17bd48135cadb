import { createHash, type Hash } from 'node:crypto';
import { createReadStream, fstatSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { constants as zlibConstants, createGunzip, type Gunzip } from 'node:zlib';
import { ContinuityError } from '../../core/index.ts';
import { errnoText } from '../../core/fs.ts';

/** 1 MiB: the default longest line kept (Caddy lines are ~1 KiB; headers are bounded by the proxy). */
export const DEFAULT_MAX_LINE_BYTES = 1 << 20;

/** Where lines come from: a file path, or `'-'` for standard input. */
export type InputPath = string;

/** Progress of one input, reported once per chunk read. */
export interface ReadProgress {
  /** The input path as given (`'-'` for stdin). */
  readonly path: string;
  /** Bytes read from the input so far (compressed bytes for gzip). */
  readonly bytesRead: number;
  /** Size of the input in bytes when known (regular files), else undefined (stdin, pipes). */
  readonly totalBytes: number | undefined;
}

/**
 * Receives the lines of an input. `line` gets the buffer and the byte span of the
 * line without its terminator (`\n`, `\r\n`); the buffer is reused after the call
 * returns, so copy what must outlive it. A returned promise pauses reading until it
 * settles (backpressure).
 */
export interface LineHandler {
  line(buf: Buffer, start: number, end: number, lineNo: number): void | Promise<void>;
  /** A line longer than `maxLineBytes` was skipped; `bytes` is its full length. */
  tooLong(lineNo: number, bytes: number): void | Promise<void>;
  /** Called after each chunk's lines were handled (e.g. to check for a failed writer). */
  chunkDone?(): void | Promise<void>;
}

/** Options of {@link readLines}. */
export interface ReadLinesOptions {
  /** Longest line passed to the handler, bytes (default 1 MiB); longer ones go to `tooLong`. */
  maxLineBytes?: number;
  onProgress?: (progress: ReadProgress) => void;
  /** Read size for files, bytes (default 1 MiB). */
  chunkBytes?: number;
  /** Standard input stream to use for `'-'` (default `process.stdin`). */
  stdin?: NodeJS.ReadableStream;
  /**
   * Compute `contentHash` (the SHA-256 of the input's bytes as read, compressed bytes
   * for gzip) and `decodedHash` (of the decompressed bytes).
   */
  contentHash?: boolean;
  /**
   * With `contentHash`: also hash the first L decompressed bytes for each L here
   * (`prefixHashes`), e.g. the lengths of inputs imported before, to recognise a log
   * that grew since. Taken in one pass as the bytes go by; nothing is held.
   */
  prefixLengths?: readonly number[];
  /**
   * Stops reading when aborted (e.g. on SIGINT), between chunks: every line of the
   * chunks read so far is handled; a line the stop cut off before its terminator is
   * not (`cutLineBytes`), and `interrupted` is set. A read still waiting for bytes (an
   * idle pipe) is given up, and the input closed.
   */
  signal?: AbortSignal;
}

/** What {@link readLines} saw. */
export interface ReadLinesResult {
  /** Every line, blank ones included (a final line without a terminator counts). */
  lines: number;
  /** Blank or whitespace-only lines (not passed to the handler). */
  blank: number;
  /** Lines passed to `tooLong`. */
  tooLong: number;
  /** Input bytes read (compressed bytes for gzip). */
  bytesRead: number;
  /** Decompressed bytes. */
  bytesDecoded: number;
  gzip: boolean;
  /**
   * A read or decompression error that ended the input early (e.g. truncated gzip, a
   * corrupt member, bytes after the last gzip member that are not gzip), else undefined.
   */
  readError: string | undefined;
  /**
   * With `readError`: bytes of the last line that the error cut off before its
   * terminator (`readError` names it). That line was not passed to the handler and is
   * not in `lines`; 0 when the error fell between lines, or ended the input after a
   * complete gzip member (trailing garbage: its last line is whole).
   */
  cutLineBytes: number;
  /** `signal` stopped the reading before the input ended. */
  interrupted: boolean;
  /** SHA-256 of the bytes read, hex, when `contentHash` was asked for. */
  contentHash?: string;
  /** SHA-256 of the decompressed bytes (all `bytesDecoded` of them), hex, when `contentHash` was asked for; equals `contentHash` for plain input. */
  decodedHash?: string;
  /**
   * SHA-256 of the first L decompressed bytes, hex, by L, for each of `prefixLengths`
   * shorter than the input's decompressed bytes (proper prefixes only).
   */
  prefixHashes?: Map<number, string>;
}

/**
 * Reads `path` line by line in constant memory: plain or gzip (detected by the magic
 * bytes 1f 8b, RFC 1952 §2.3.1, whatever the file is called), or standard input for
 * `'-'`. Lines are split on `\n` in the raw bytes (no `readline`); a trailing `\r` is
 * dropped; a UTF-8 byte order mark at the start is skipped; blank lines are counted
 * and skipped; lines longer than `maxLineBytes` are never buffered whole — their
 * bytes are counted and dropped, then `tooLong` is called with the line number.
 * Line numbers are 1-based.
 *
 * A read or gzip error after the input was opened ends the input early and is
 * returned in `readError`. Every line decoded in full before it was delivered, as
 * `gzip -dc` would output them; a line the error cut off is not delivered (see
 * `cutLineBytes`). Bytes after a complete gzip member that do not start another one
 * are ignored like gzip does, and named in `readError` ("trailing garbage").
 *
 * @throws ContinuityError CONT_ERR_INPUT_UNREADABLE when the input cannot be opened
 *   (missing, a directory, no permission).
 */
export async function readLines(path: InputPath, handler: LineHandler, options: ReadLinesOptions = {}): Promise<ReadLinesResult> {
  const maxLine = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  if (!(maxLine >= 1)) throw new RangeError('maxLineBytes must be >= 1');
  const { raw, totalBytes, close, abandon, reread } = await openRaw(path, options);
  // when options.signal aborts, a read waiting for bytes (an idle pipe) is not waited for (unlessStopped)
  const stop = options.signal;
  let abandoned = false;
  // Plain input: its bytes are the decompressed bytes, hashed once (by `decoded`).
  const decoded = options.contentHash ? new PrefixHasher(options.prefixLengths ?? []) : undefined;
  let compressed: Hash | undefined;
  const result: ReadLinesResult = { lines: 0, blank: 0, tooLong: 0, bytesRead: 0, bytesDecoded: 0, gzip: false, readError: undefined, cutLineBytes: 0, interrupted: false };
  const splitter = new LineSplitter(maxLine, handler, result);
  try {
    const it = raw[Symbol.asyncIterator]();
    // Peek at the first bytes for the gzip magic.
    let head: Buffer = Buffer.alloc(0);
    let rawDone = false;
    let stoppedEarly = false;
    while (head.length < 2) {
      const r = await unlessStopped(it.next(), stop);
      if (r === 'stop') {
        stoppedEarly = true;
        break;
      }
      if (r.done) {
        rawDone = true;
        break;
      }
      const chunk = r.value as Buffer;
      result.bytesRead += chunk.length;
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
    }
    options.onProgress?.({ path, bytesRead: result.bytesRead, totalBytes });
    result.gzip = head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b;
    let text: AsyncIterable<Buffer>;
    if (!result.gzip) {
      text = (async function* () {
        if (head.length > 0) yield head;
        if (rawDone) return;
        for (;;) {
          const r = await it.next();
          if (r.done) return;
          const chunk = r.value as Buffer;
          result.bytesRead += chunk.length;
          options.onProgress?.({ path, bytesRead: result.bytesRead, totalBytes });
          yield chunk;
        }
      })();
    } else {
      const hash = options.contentHash ? createHash('sha256') : undefined;
      compressed = hash;
      const input = (async function* () {
        hash?.update(head);
        yield head;
        if (rawDone) return;
        for (;;) {
          const r = await it.next();
          if (r.done) return;
          const chunk = r.value as Buffer;
          hash?.update(chunk);
          result.bytesRead += chunk.length;
          options.onProgress?.({ path, bytesRead: result.bytesRead, totalBytes });
          yield chunk;
        }
      })();
      text = gunzipChunks(input, reread, totalBytes);
    }
    const chunks = text[Symbol.asyncIterator]();
    try {
      for (;;) {
        let next: IteratorResult<Buffer> | 'stop';
        try {
          next = stoppedEarly ? 'stop' : await unlessStopped(chunks.next(), stop);
        } catch (err) {
          // Only read and zlib errors land here; the handler's own errors propagate.
          result.readError = (err as Error).message ?? String(err);
          // After a complete gzip member, its last line is whole even without a terminator.
          if (!(err instanceof TrailingGarbage)) result.cutLineBytes = splitter.dropPartial();
          if (result.cutLineBytes > 0) {
            result.readError += `; line ${result.lines + 1} was cut off after ${result.cutLineBytes} bytes and not parsed`;
          }
          break;
        }
        if (next === 'stop') {
          // every line of the chunks before was handled; the one this cut off was not
          result.interrupted = true;
          result.cutLineBytes = splitter.dropPartial();
          abandoned = true;
          abandon();
          break;
        }
        if (next.done) break;
        const chunk = next.value;
        result.bytesDecoded += chunk.length;
        decoded?.update(chunk);
        await splitter.push(chunk);
        const done = handler.chunkDone?.();
        if (done) await done;
      }
    } finally {
      // (the generator of an abandoned read is still running: return() would wait for it)
      if (abandoned) void chunks.return?.()?.catch(() => {});
      else await chunks.return?.()?.catch(() => {});
    }
    await splitter.end();
    if (decoded) {
      result.decodedHash = decoded.digest();
      result.contentHash = compressed ? compressed.digest('hex') : result.decodedHash;
      result.prefixHashes = decoded.prefixes;
    }
    return result;
  } finally {
    await close();
  }
}

/**
 * `read`, or `'stop'` when `stop` aborts first (the abandoned read's error, if any, is
 * dropped). The abort listener is removed once the read settles. (It was a
 * `Promise.race` with one promise that settled on abort: every race left a reaction on
 * that promise, which held its chunk until the import ended, so memory grew with the
 * input: 2 GB of blank lines took 2.3 GB; a break-it pass.)
 */
function unlessStopped<T>(read: Promise<T>, stop: AbortSignal | undefined): Promise<T | 'stop'> {
  if (!stop) return read;
  read.catch(() => {});
  if (stop.aborted) return Promise.resolve('stop');
  return new Promise<T | 'stop'>((resolve, reject) => {
    const onAbort = () => resolve('stop');
    stop.addEventListener('abort', onAbort, { once: true });
    read.then(
      (value) => {
        stop.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        stop.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/**
 * SHA-256 of a stream of bytes and of its prefixes at given lengths: at each length
 * the running hash is copied (`Hash.copy`) and the copy finished, so one pass over the
 * bytes serves every length and no byte is held.
 */
class PrefixHasher {
  private readonly hash = createHash('sha256');
  private readonly lengths: number[];
  private next = 0;
  private offset = 0;
  /** Hex digest of the first L bytes, by L; after {@link digest}, only the L shorter than the whole. */
  readonly prefixes = new Map<number, string>();

  constructor(lengths: readonly number[]) {
    this.lengths = [...new Set(lengths)].filter((l) => Number.isSafeInteger(l) && l > 0).sort((a, b) => a - b);
  }

  update(chunk: Buffer): void {
    let pos = 0;
    while (this.next < this.lengths.length && this.offset + (chunk.length - pos) >= this.lengths[this.next]!) {
      const cut = pos + (this.lengths[this.next]! - this.offset);
      this.hash.update(chunk.subarray(pos, cut));
      this.offset += cut - pos;
      pos = cut;
      this.prefixes.set(this.offset, this.hash.copy().digest('hex'));
      this.next++;
    }
    if (pos < chunk.length) {
      this.hash.update(chunk.subarray(pos));
      this.offset += chunk.length - pos;
    }
  }

  /** The hash of all bytes, hex; a prefix as long as the whole is not a proper prefix, so it is dropped. */
  digest(): string {
    this.prefixes.delete(this.offset);
    return this.hash.digest('hex');
  }
}

/** Decoded bytes zlib writes per call (256 KiB): few calls per GB of text. */
const GUNZIP_CHUNK_BYTES = 1 << 18;
/**
 * Compressed bytes written to zlib at a time (64 KiB): bounds the decoded bytes held
 * per write (at most ~64 MiB at deflate's densest, ~1 MiB for logs) and the bytes fed
 * one at a time to find a corrupt member's last good byte.
 */
const GUNZIP_PIECE_BYTES = 1 << 16;

/**
 * zlib's messages for a gzip header it cannot read (RFC 1952 §2.3), by how many bytes
 * of the header precede the byte it fails on (ID1 ID2 CM FLG ...; zlib reads ID1 and
 * ID2 together).
 */
const GZIP_HEADER_ERRORS: ReadonlyMap<string, number> = new Map([
  ['incorrect header check', 1],
  ['unknown compression method', 2],
  ['unknown header flags set', 3],
  ['header crc mismatch', 0],
]);

/** Bytes after a complete gzip member that are not another member: ignored, like `gzip -d` does. */
class TrailingGarbage extends Error {}

/**
 * One gunzip stream, fed a piece at a time. Its output is taken from `'data'` as zlib
 * pushes it, so none is lost when a later error destroys the stream (a stream's own
 * buffer and async iterator drop what was not read yet).
 */
class Inflater {
  private readonly z: Gunzip;
  private out: Buffer[] = [];
  private settle: (() => void) | undefined;
  /** The zlib error that stopped the stream, if any. */
  error: Error | undefined;
  /**
   * The stream ended on its own: Node's gunzip ends at a zero byte after a complete
   * member (padding, which it ignores as `gzip -d` does), before the input does. Later
   * bytes are not decoded, and feeding them settles at once (a break-it pass: a
   * member padded with one zero byte left `feed()` waiting for an `'end'` that had
   * fired, and the process exited 13 with nothing imported).
   */
  private ended = false;

  /** @param finishFlush zlib flush mode at the end (default Z_FINISH: a cut member is an error). */
  constructor(finishFlush?: number) {
    this.z = createGunzip({ chunkSize: GUNZIP_CHUNK_BYTES, ...(finishFlush === undefined ? {} : { finishFlush }) });
    this.z.on('data', (chunk: Buffer) => this.out.push(chunk));
    this.z.on('error', (err: Error) => {
      this.error = err;
      this.settle?.();
    });
    this.z.on('end', () => {
      this.ended = true;
      this.settle?.();
    });
  }

  /** Compressed bytes consumed by the zlib calls that succeeded. */
  get consumed(): number {
    return this.z.bytesWritten;
  }

  /** Writes `piece` (or ends the input, without one); settles once it is decoded or the stream failed. */
  feed(piece?: Buffer): Promise<void> {
    if (this.error || this.ended) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.settle = resolve;
      if (piece) this.z.write(piece, () => resolve());
      else this.z.end();
    });
  }

  /** The decoded chunks pushed since the last call. */
  take(): Buffer[] {
    const out = this.out;
    this.out = [];
    return out;
  }

  destroy(): void {
    this.z.destroy();
  }
}

/**
 * Decompresses a gzip input (one or more members, RFC 1952 §2.2) into decoded chunks.
 * The next piece is decoded while the consumer handles the chunks of the one before.
 * On a zlib error, every decoded byte before it is yielded first, then the error is
 * thrown: zlib drops what its failing call decoded, so for a corrupt member
 * (Z_DATA_ERROR) of a re-readable file the input is decoded again from its start, the
 * bytes of that call one at a time. Bytes after a complete member that are not a
 * gzip header end the input with a {@link TrailingGarbage} error.
 *
 * @param reread the input's compressed bytes again from its start, when it is a regular
 *   file; undefined for pipes and standard input (then up to 256 KiB decoded just
 *   before a corrupt spot may be missing, and the error says so).
 * @param size the input's size in bytes when known, for the trailing-garbage message.
 * @throws the read error of `input`, the zlib error, or {@link TrailingGarbage}.
 */
async function* gunzipChunks(
  input: AsyncIterable<Buffer>,
  reread: (() => AsyncIterable<Buffer>) | undefined,
  size: number | undefined,
): AsyncGenerator<Buffer> {
  const z = new Inflater();
  let fed = 0;
  let delivered = 0;
  let pending: Promise<void> | undefined;
  let readFailure: { err: unknown } | undefined;
  try {
    try {
      outer: for await (const chunk of input) {
        for (let off = 0; off < chunk.length; off += GUNZIP_PIECE_BYTES) {
          const piece = chunk.subarray(off, off + GUNZIP_PIECE_BYTES);
          if (pending) await pending;
          const out = z.take();
          if (z.error) break outer;
          pending = z.feed(piece);
          fed += piece.length;
          for (const c of out) {
            delivered += c.length;
            yield c;
          }
        }
      }
    } catch (err) {
      readFailure = { err };
    }
    if (pending) await pending;
    if (!z.error && !readFailure) await z.feed();
    for (const c of z.take()) {
      delivered += c.length;
      yield c;
    }
    if (readFailure) throw readFailure.err;
    const error = z.error;
    if (!error) return;
    let at = z.consumed;
    let exact = (error as NodeJS.ErrnoException).code !== 'Z_DATA_ERROR';
    if (!exact && reread) {
      // Decode [0, at) again in pieces, then [at, fed) a byte at a time until zlib fails.
      const found: { at?: number } = {};
      for await (const c of redecode(reread(), delivered, at, fed, found)) {
        delivered += c.length;
        yield c;
      }
      if (found.at !== undefined) {
        at = found.at;
        exact = true;
      }
    }
    const headerBytes = GZIP_HEADER_ERRORS.get(error.message);
    if (exact && delivered > 0 && headerBytes !== undefined) {
      // A header error after decoded bytes: a member ended, and what follows is not one.
      const from = Math.max(0, at - headerBytes);
      const ignored = size === undefined ? 'the bytes' : `${size - from} bytes`;
      throw new TrailingGarbage(`trailing garbage ignored: ${ignored} from byte ${from}, after the last complete gzip member, are not gzip data (${error.message})`);
    }
    if (!exact) {
      error.message += ` (at compressed byte ~${at}; zlib dropped what it decoded last, up to ${GUNZIP_CHUNK_BYTES >> 10} KiB, before the error)`;
    }
    throw error;
  } finally {
    z.destroy();
  }
}

/**
 * Decodes `compressed` again after a zlib data error at compressed bytes [from, to):
 * [0, from) in pieces (it decoded without error before), then one byte per zlib call,
 * so that the call that fails decodes next to nothing. Yields the decoded bytes past
 * the first `skip` (those were delivered); sets `found.at` to the compressed offset of
 * the byte zlib failed on.
 */
async function* redecode(
  compressed: AsyncIterable<Buffer>,
  skip: number,
  from: number,
  to: number,
  found: { at?: number },
): AsyncGenerator<Buffer> {
  // Z_SYNC_FLUSH at the end: input that stops mid-member is not an error here.
  const z = new Inflater(zlibConstants.Z_SYNC_FLUSH);
  let pos = 0;
  try {
    outer: for await (const chunk of compressed) {
      let off = 0;
      while (off < chunk.length) {
        const step = pos >= from && pos < to ? 1 : pos < from ? Math.min(GUNZIP_PIECE_BYTES, from - pos) : GUNZIP_PIECE_BYTES;
        const piece = chunk.subarray(off, off + step);
        await z.feed(piece);
        for (const c of z.take()) {
          if (skip >= c.length) skip -= c.length;
          else {
            yield skip > 0 ? c.subarray(skip) : c;
            skip = 0;
          }
        }
        if (z.error) {
          found.at = pos;
          break outer;
        }
        pos += piece.length;
        off += piece.length;
      }
    }
  } finally {
    z.destroy();
  }
}

interface RawInput {
  raw: AsyncIterable<Buffer>;
  totalBytes: number | undefined;
  close(): Promise<void>;
  /** Gives up a read that may be waiting for bytes (a stopped import of an idle pipe). */
  abandon(): void;
  /** The bytes again from the start (regular files only). */
  reread: (() => AsyncIterable<Buffer>) | undefined;
}

async function openRaw(path: string, options: ReadLinesOptions): Promise<RawInput> {
  if (path === '-') {
    const stdin = options.stdin ?? standardInput();
    return {
      raw: stdin as AsyncIterable<Buffer>,
      totalBytes: undefined,
      close: async () => {},
      // (a destroyed stream no longer holds the process open waiting for its writer)
      abandon: () => void (stdin as Partial<Readable>).destroy?.(),
      reread: undefined,
    };
  }
  let fh: FileHandle;
  try {
    fh = await open(path, 'r');
  } catch (err) {
    throw unreadable(path, err);
  }
  let size: number | undefined;
  try {
    const st = await fh.stat();
    if (st.isDirectory()) throw Object.assign(new Error('is a directory'), { code: 'EISDIR' });
    size = st.isFile() ? st.size : undefined;
  } catch (err) {
    await fh.close();
    throw unreadable(path, err);
  }
  const chunkBytes = options.chunkBytes ?? 1 << 20;
  const handle = fh;
  return {
    raw: (async function* () {
      for (;;) {
        const buf = Buffer.allocUnsafe(chunkBytes);
        const { bytesRead } = await handle.read(buf, 0, chunkBytes, null);
        if (bytesRead === 0) return;
        yield bytesRead < chunkBytes ? buf.subarray(0, bytesRead) : buf;
      }
    })(),
    totalBytes: size,
    close: () => handle.close().catch(() => {}),
    abandon: () => void handle.close().catch(() => {}),
    reread:
      size === undefined
        ? undefined
        : async function* () {
            for (let position = 0; ; ) {
              const buf = Buffer.allocUnsafe(chunkBytes);
              const { bytesRead } = await handle.read(buf, 0, chunkBytes, position);
              if (bytesRead === 0) return;
              position += bytesRead;
              yield bytesRead < chunkBytes ? buf.subarray(0, bytesRead) : buf;
            }
          },
  };
}

function unreadable(path: string, err: unknown): ContinuityError {
  const e = err as NodeJS.ErrnoException;
  return new ContinuityError('CONT_ERR_INPUT_UNREADABLE', `${path}: ${errnoText(e, err)}`, {
    cause: err,
    details: { path, errno: e.code },
  });
}

/**
 * Splits chunks into lines. A partial line at the end of a chunk is carried into a
 * buffer of at most `maxLine` bytes; past that the line is in "skipping" mode and
 * its bytes are only counted.
 */
class LineSplitter {
  private carry: Buffer;
  private carryLen = 0;
  private skipping = false;
  private skippedBytes = 0;
  private lineNo = 0;
  private atStart = true;

  constructor(
    private readonly maxLine: number,
    private readonly handler: LineHandler,
    private readonly result: ReadLinesResult,
  ) {
    this.carry = Buffer.allocUnsafe(Math.min(maxLine + 1, 1 << 16));
  }

  async push(chunk: Buffer): Promise<void> {
    let pos = 0;
    if (this.atStart) {
      this.atStart = false;
      if (chunk.length >= 3 && chunk[0] === 0xef && chunk[1] === 0xbb && chunk[2] === 0xbf) pos = 3;
    }
    const n = chunk.length;
    while (pos < n) {
      const nl = chunk.indexOf(0x0a, pos);
      if (nl < 0) {
        this.append(chunk, pos, n);
        return;
      }
      if (this.carryLen > 0 || this.skipping) {
        this.append(chunk, pos, nl);
        const r = this.finishCarried();
        if (r) await r;
      } else {
        const r = this.deliver(chunk, pos, nl);
        if (r) await r;
      }
      pos = nl + 1;
    }
  }

  /**
   * Drops the line begun but not ended (an error cut it off): it is neither delivered
   * nor counted. Returns its bytes so far, 0 when there is none.
   */
  dropPartial(): number {
    const bytes = this.skipping ? this.skippedBytes : this.carryLen;
    this.skipping = false;
    this.skippedBytes = 0;
    this.carryLen = 0;
    return bytes;
  }

  async end(): Promise<void> {
    if (this.carryLen > 0 || this.skipping) {
      const r = this.finishCarried();
      if (r) await r;
    }
  }

  private append(chunk: Buffer, s: number, e: number): void {
    const len = e - s;
    if (len === 0) return;
    if (this.skipping) {
      this.skippedBytes += len;
      return;
    }
    const need = this.carryLen + len;
    if (need > this.maxLine + 1) {
      // +1: a trailing \r does not count towards the limit.
      this.skipping = true;
      this.skippedBytes = need;
      this.carryLen = 0;
      return;
    }
    if (need > this.carry.length) {
      const bigger = Buffer.allocUnsafe(Math.min(this.maxLine + 1, Math.max(need, this.carry.length * 2)));
      this.carry.copy(bigger, 0, 0, this.carryLen);
      this.carry = bigger;
    }
    chunk.copy(this.carry, this.carryLen, s, e);
    this.carryLen = need;
  }

  private finishCarried(): void | Promise<void> {
    if (this.skipping) {
      this.skipping = false;
      const bytes = this.skippedBytes;
      this.skippedBytes = 0;
      this.lineNo++;
      this.result.lines++;
      this.result.tooLong++;
      return this.handler.tooLong(this.lineNo, bytes);
    }
    const len = this.carryLen;
    this.carryLen = 0;
    return this.deliver(this.carry, 0, len);
  }

  private deliver(buf: Buffer, s: number, e: number): void | Promise<void> {
    this.lineNo++;
    this.result.lines++;
    if (e > s && buf[e - 1] === 0x0d) e--;
    if (e - s > this.maxLine) {
      this.result.tooLong++;
      return this.handler.tooLong(this.lineNo, e - s);
    }
    if (e === s || isBlank(buf, s, e)) {
      this.result.blank++;
      return;
    }
    return this.handler.line(buf, s, e, this.lineNo);
  }
}

function isBlank(buf: Buffer, s: number, e: number): boolean {
  const c = buf[s];
  if (c !== 0x20 && c !== 0x09 && c !== 0x0d) return false;
  for (let i = s; i < e; i++) {
    const d = buf[i];
    if (d !== 0x20 && d !== 0x09 && d !== 0x0d) return false;
  }
  return true;
}

/**
 * The process's standard input for `'-'`: file descriptor `CONTINUITY_STDIN_FD` when
 * set (bin/continuity.mjs passes stdin there, so that the embedded engine never sees
 * data on fd 0), else `process.stdin`.
 */
function standardInput(): NodeJS.ReadableStream {
  const fd = Number(process.env.CONTINUITY_STDIN_FD);
  if (!(Number.isInteger(fd) && fd > 2)) return process.stdin;
  // A pipe (the launcher's) is read through the event loop, as process.stdin reads one: a
  // file stream reads it with a blocking read on a worker thread, which a stopped import
  // (a signal) could not give up until the writer sent more or closed.
  const st = fstatSync(fd);
  return st.isFIFO() || st.isSocket() ? new Socket({ fd, readable: true, writable: false }) : createReadStream('', { fd });
}
