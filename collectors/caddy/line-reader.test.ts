import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { constants, deflateRawSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isContinuityError } from '../../core/index.ts';
import { readLines, type ReadLinesOptions, type ReadProgress } from './line-reader.ts';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'line-reader-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function file(name: string, content: string | Buffer): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');

/** Lines of ~100-400 bytes, distinct: more than zlib's 256 KiB output chunk for 5000 of them. */
const logLines = (n: number): string[] => Array.from({ length: n }, (_, i) => `{"n":${i},"pad":"${'p'.repeat(100 + ((i * 7919) % 300))}"}`);

/**
 * A gzip member whose deflate data stops, byte-aligned, after `text` (a sync flush) and
 * goes on with a block of the reserved type (0xff: BFINAL=1, BTYPE=11), which zlib
 * rejects as "invalid block type"; `gzip -dc` outputs all of `text`, then fails.
 */
function damagedGzip(text: string): Buffer {
  const header = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
  const data = deflateRawSync(text, { finishFlush: constants.Z_SYNC_FLUSH });
  return Buffer.concat([header, data, Buffer.from([0xff, 0xff, 0x00, 0x12, 0x34])]);
}

async function collect(path: string, options: ReadLinesOptions = {}) {
  const lines: Array<[number, string]> = [];
  const tooLong: Array<[number, number]> = [];
  const result = await readLines(
    path,
    {
      line: (buf, s, e, n) => {
        lines.push([n, buf.toString('utf8', s, e)]);
      },
      tooLong: (n, bytes) => {
        tooLong.push([n, bytes]);
      },
    },
    options,
  );
  return { lines, tooLong, result };
}

describe('readLines', () => {
  it('numbers lines from 1, drops CR of CRLF, skips and counts blank lines, reads a last line without newline', async () => {
    const { lines, result } = await collect(file('a.log', 'one\r\n\r\ntwo\n  \n\tthree \nfour'));
    expect(lines).toEqual([
      [1, 'one'],
      [3, 'two'],
      [5, '\tthree '],
      [6, 'four'],
    ]);
    expect(result).toMatchObject({ lines: 6, blank: 2, tooLong: 0, gzip: false, readError: undefined });
  });

  it('skips a UTF-8 byte order mark at the start', async () => {
    const { lines } = await collect(file('bom.log', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":1}\n')])));
    expect(lines).toEqual([[1, '{"a":1}']]);
  });

  it('splits lines across chunk boundaries of any size', async () => {
    const text = Array.from({ length: 200 }, (_, i) => `line-${i}-${'x'.repeat(i % 37)}`).join('\n') + '\n';
    for (const chunkBytes of [1, 2, 3, 7, 64, 4096]) {
      const { lines } = await collect(file(`chunks-${chunkBytes}.log`, text), { chunkBytes });
      expect(lines.map((l) => l[1])).toEqual(text.trimEnd().split('\n'));
    }
  });

  it('reports lines over maxLineBytes with their length, without delivering them, and goes on', async () => {
    const long = 'y'.repeat(5000);
    const { lines, tooLong, result } = await collect(file('long.log', `short\n${long}\nafter\n${'z'.repeat(10)}\r\n`), {
      maxLineBytes: 10,
      chunkBytes: 256,
    });
    expect(lines).toEqual([
      [1, 'short'],
      [3, 'after'],
      [4, 'zzzzzzzzzz'],
    ]);
    expect(tooLong).toEqual([[2, 5000]]);
    expect(result.tooLong).toBe(1);
  });

  it('detects gzip by the magic bytes, not the name, and reports compressed bytes read', async () => {
    const text = 'a\nb\nc\n';
    const gz = gzipSync(text);
    const progress: ReadProgress[] = [];
    const { lines, result } = await collect(file('plain-name.txt', gz), { onProgress: (p) => progress.push(p) });
    expect(lines.map((l) => l[1])).toEqual(['a', 'b', 'c']);
    expect(result).toMatchObject({ gzip: true, bytesRead: gz.length, bytesDecoded: text.length });
    expect(progress.at(-1)).toMatchObject({ bytesRead: gz.length, totalBytes: gz.length });
  });

  it('reads a multi-member gzip (concatenated .gz files)', async () => {
    const { lines } = await collect(file('multi.gz', Buffer.concat([gzipSync('a\n'), gzipSync('b\n')])));
    expect(lines.map((l) => l[1])).toEqual(['a', 'b']);
  });

  it('returns a truncated gzip as readError after delivering what it could', async () => {
    const big = Array.from({ length: 5000 }, (_, i) => `line ${i} ${'q'.repeat(i % 50)}`).join('\n');
    const gz = gzipSync(big);
    const { lines, result } = await collect(file('cut.gz', gz.subarray(0, gz.length - 20)), { chunkBytes: 1024 });
    expect(result.readError).toMatch(/unexpected end of file/i);
    expect(lines.length).toBeGreaterThan(100);
    expect(lines.length).toBeLessThan(5000);
  });

  it('reads every line of a gzip followed by trailing garbage, like gzip -dc, and names the bytes ignored', async () => {
    const text = logLines(5000).join('\n') + '\n';
    const gz = gzipSync(text);
    const { lines, result } = await collect(file('garbage.gz', Buffer.concat([gz, Buffer.from('garbage\n')])));
    expect(lines.map((l) => l[1])).toEqual(text.trimEnd().split('\n'));
    expect(result).toMatchObject({ lines: 5000, bytesDecoded: text.length, cutLineBytes: 0 });
    expect(result.readError).toBe(
      `trailing garbage ignored: 8 bytes from byte ${gz.length}, after the last complete gzip member, are not gzip data (incorrect header check)`,
    );
    // Concatenated members, then garbage; a last line without a newline ends with its member, so it is whole.
    const multi = await collect(file('members-garbage.gz', Buffer.concat([gz, gzipSync('a\nlast'), Buffer.from('zz')])));
    expect(multi.lines.length).toBe(5002);
    expect(multi.lines.at(-1)).toEqual([5002, 'last']);
    expect(multi.result.readError).toMatch(/^trailing garbage ignored: 2 bytes from byte \d+/);
  });

  it('reads every line of a gzip padded with zero bytes, as gzip -d does (one zero byte hung the reader: exit 13, nothing imported)', async () => {
    const text = logLines(5000).join('\n') + '\n';
    const gz = gzipSync(text);
    for (const pad of [Buffer.alloc(1), Buffer.alloc(4096), Buffer.from([0, 0, 0, 0x78]), Buffer.alloc(300_000)]) {
      const { lines, result } = await collect(file('padded.gz', Buffer.concat([gz, pad])), { chunkBytes: 1024 });
      expect(lines.map((l) => l[1]), `${pad.length} bytes`).toEqual(text.trimEnd().split('\n'));
      expect(result, `${pad.length} bytes`).toMatchObject({ gzip: true, lines: 5000, bytesDecoded: text.length, bytesRead: gz.length + pad.length });
    }
  });

  it('delivers every line decoded before a corrupt spot in a gzip member; the line it cuts is not delivered', async () => {
    const full = logLines(5000);
    const text = full.join('\n') + '\n' + '{"n":5000,"pad"';
    for (const chunkBytes of [1 << 20, 1000]) {
      const { lines, result } = await collect(file('damaged.gz', damagedGzip(text)), { chunkBytes });
      expect(lines.map((l) => l[1])).toEqual(full);
      expect(result).toMatchObject({ lines: 5000, cutLineBytes: 15, bytesDecoded: text.length });
      expect(result.readError).toBe('invalid block type; line 5001 was cut off after 15 bytes and not parsed');
    }
    // Damage right at the start of a small file: the lines before it still come through.
    const small = await collect(file('damaged-small.gz', damagedGzip('a\nb\n')));
    expect(small.lines).toEqual([
      [1, 'a'],
      [2, 'b'],
    ]);
    expect(small.result).toMatchObject({ readError: 'invalid block type', cutLineBytes: 0 });
  });

  it('from standard input (not read twice), a gzip error never passes a cut line on as whole', async () => {
    const full = logLines(5000);
    const text = full.join('\n') + '\n';
    const { lines, result } = await collect('-', { stdin: Readable.from([Buffer.concat([gzipSync(text), Buffer.from('garbage\n')])]) });
    expect(lines.map((l) => l[1])).toEqual(full.slice(0, lines.length));
    expect(result.readError).toMatch(/^incorrect header check/);
    expect(result.lines + (result.cutLineBytes > 0 ? 1 : 0)).toBeLessThanOrEqual(5000);
  });

  it("reads standard input for '-', plain or gzip", async () => {
    const plain = await collect('-', { stdin: Readable.from([Buffer.from('x\ny')]) });
    expect(plain.lines.map((l) => l[1])).toEqual(['x', 'y']);
    expect(plain.result.gzip).toBe(false);
    const gz = gzipSync('p\nq\n');
    const zipped = await collect('-', { stdin: Readable.from([gz.subarray(0, 1), gz.subarray(1)]) });
    expect(zipped.lines.map((l) => l[1])).toEqual(['p', 'q']);
    expect(zipped.result.gzip).toBe(true);
  });

  it('an empty input has no lines', async () => {
    const { lines, result } = await collect(file('empty.log', ''));
    expect(lines).toEqual([]);
    expect(result).toMatchObject({ lines: 0, blank: 0, bytesRead: 0 });
  });

  it('computes the SHA-256 of the bytes read on request', async () => {
    const { result } = await collect(file('h.log', 'abc'), { contentHash: true });
    expect(result.contentHash).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(result.decodedHash).toBe(result.contentHash);
  });

  it('hashes a gzip’s compressed bytes (contentHash) and its decompressed bytes (decodedHash)', async () => {
    const gz = gzipSync('abc');
    const { result } = await collect(file('h.log.gz', gz), { contentHash: true });
    expect(result.contentHash).toBe(sha256(gz));
    expect(result.decodedHash).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('hashes the decompressed prefixes at the lengths asked for, across chunk boundaries, proper prefixes only', async () => {
    const text = Array.from({ length: 40 }, (_, i) => `line ${i}`).join('\n') + '\n';
    const lengths = [0, 1, 4, 5, 17, 17, 100, text.length - 1, text.length, text.length + 3];
    const expected = new Map(lengths.filter((l) => l > 0 && l < text.length).map((l) => [l, sha256(text.slice(0, l))]));
    const plain = await collect(file('p.log', text), { contentHash: true, prefixLengths: lengths, chunkBytes: 4 });
    expect(plain.result.prefixHashes).toEqual(expected);
    expect(plain.result.decodedHash).toBe(sha256(text));
    const zipped = await collect(file('p.log.gz', gzipSync(text)), { contentHash: true, prefixLengths: lengths, chunkBytes: 3 });
    expect(zipped.result.prefixHashes).toEqual(expected);
    expect(zipped.result.decodedHash).toBe(sha256(text));
  });

  it('waits for a handler that pushes back', async () => {
    const order: string[] = [];
    await readLines(file('bp.log', 'a\nb\n'), {
      line: (buf, s, e) => {
        const text = buf.toString('utf8', s, e);
        order.push(`start ${text}`);
        return new Promise<void>((r) =>
          setImmediate(() => {
            order.push(`end ${text}`);
            r();
          }),
        );
      },
      tooLong: () => undefined,
    });
    expect(order).toEqual(['start a', 'end a', 'start b', 'end b']);
  });

  it('throws CONT_ERR_INPUT_UNREADABLE for a missing file or a directory', async () => {
    for (const path of [join(dir, 'missing.log'), dir]) {
      let thrown: unknown;
      try {
        await collect(path);
      } catch (err) {
        thrown = err;
      }
      expect(isContinuityError(thrown, 'CONT_ERR_INPUT_UNREADABLE'), String(thrown)).toBe(true);
    }
  });

  it("propagates the handler's own errors instead of reporting them as read errors", async () => {
    await expect(
      readLines(file('throw.log', 'a\n'), {
        line: () => {
          throw new Error('handler bug');
        },
        tooLong: () => undefined,
      }),
    ).rejects.toThrow('handler bug');
  });
});

describe('memory while reading with a signal', () => {
  it('holds no chunk already read: 200 MB of lines leave a few MB of buffers (each read once kept its chunk until the end: 2 GB took 2.3 GB)', async () => {
    const big = join(dir, 'big.log');
    writeFileSync(big, Buffer.alloc(200 << 20, '\n'));
    // in a child with the collector exposed, so buffers already read can be collected and counted
    const script = join(dir, 'measure.mts');
    writeFileSync(
      script,
      `import { readLines } from ${JSON.stringify(new URL('./line-reader.ts', import.meta.url).pathname)};
let seen = 0;
let held = -1;
const r = await readLines(${JSON.stringify(big)}, {
  line: () => {},
  tooLong: () => {},
  chunkDone: () => {
    seen++;
    if (held < 0 && seen === 100) { globalThis.gc(); held = process.memoryUsage().arrayBuffers; }
  },
}, { signal: new AbortController().signal });
console.log(JSON.stringify({ blank: r.blank, chunks: seen, held }));
`,
    );
    const { execFileSync } = await import('node:child_process');
    const out = execFileSync(process.execPath, ['--expose-gc', '--import', 'tsx', script], { encoding: 'utf8', timeout: 120_000 });
    const m = JSON.parse(out.trim().split('\n').at(-1)!) as { blank: number; chunks: number; held: number };
    expect(m.blank).toBe(200 << 20);
    // 100 chunks (1 MiB each: 100 MiB) read by the time it is measured
    expect(m.chunks).toBeGreaterThanOrEqual(100);
    expect(m.held).toBeGreaterThan(0);
    expect(m.held).toBeLessThan(32 << 20);
  }, 180_000);
});
