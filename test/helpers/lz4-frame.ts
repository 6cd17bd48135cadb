/**
 * A minimal LZ4 frame decoder (https://github.com/lz4/lz4/blob/dev/doc/lz4_Frame_format.md,
 * block format in lz4_Block_format.md) for tests only: ClickHouse compresses Arrow
 * IPC buffers with LZ4_FRAME unless told otherwise, and apache-arrow ships no codec.
 * Registered with `compressionRegistry` it lets a test read such a stream to check
 * its columns and rows. Checksums are skipped, not verified.
 * @throws Error when `src` is not an LZ4 frame or a block is malformed.
 */
export function lz4FrameDecode(src: Uint8Array): Uint8Array {
  const dv = new DataView(src.buffer, src.byteOffset, src.byteLength);
  if (dv.getUint32(0, true) !== 0x184d2204) throw new Error('not an LZ4 frame (bad magic)');
  const flg = src[4]!;
  let p = 6; // magic, FLG, BD
  if (flg & 0x08) p += 8; // content size
  if (flg & 0x01) p += 4; // dictionary id
  p += 1; // header checksum
  const out: number[] = [];
  for (;;) {
    const word = dv.getUint32(p, true);
    p += 4;
    if (word === 0) break; // end mark
    const n = word & 0x7fffffff;
    const block = src.subarray(p, p + n);
    if (word & 0x80000000) for (const b of block) out.push(b);
    else decodeBlock(block, out);
    p += n;
    if (flg & 0x10) p += 4; // block checksum
  }
  return Uint8Array.from(out);
}

function decodeBlock(b: Uint8Array, out: number[]): void {
  let i = 0;
  const length = (initial: number): number => {
    let n = initial;
    if (n === 15) {
      let x: number;
      do {
        x = b[i++]!;
        n += x;
      } while (x === 255);
    }
    return n;
  };
  while (i < b.length) {
    const token = b[i++]!;
    const literals = length(token >> 4);
    for (let k = 0; k < literals; k++) out.push(b[i++]!);
    if (i >= b.length) break; // the last sequence has literals only
    const offset = b[i]! | (b[i + 1]! << 8);
    i += 2;
    if (offset === 0 || offset > out.length) throw new Error('malformed LZ4 block (bad offset)');
    const match = length(token & 0x0f) + 4;
    const from = out.length - offset;
    for (let k = 0; k < match; k++) out.push(out[from + k]!);
  }
}
