import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureDir } from './fs.ts';

const root = mkdtempSync(join(tmpdir(), 'continuity-fs-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('ensureDir', () => {
  it('creates a directory and its missing parents, and accepts one that exists', () => {
    const deep = join(root, 'a', 'b', 'c');
    ensureDir(deep);
    expect(statSync(deep).isDirectory()).toBe(true);
    ensureDir(deep);
    ensureDir(`${root}/a/./b/../b`);
    expect(statSync(join(root, 'a', 'b')).isDirectory()).toBe(true);
  });

  it('refuses a path that is a file, and a path under a file', () => {
    const file = join(root, 'f');
    writeFileSync(file, 'x');
    expect(() => ensureDir(file)).toThrow(expect.objectContaining({ code: 'ENOTDIR', message: expect.stringMatching(/^ENOTDIR: not a directory/) }));
    expect(() => ensureDir(join(file, 'sub'))).toThrow(expect.objectContaining({ code: 'ENOTDIR' }));
  });

  // mkdirSync(…, { recursive: true }) never returns here on Node 20 (it retries forever)
  it.runIf(existsSync('/proc/self'))('fails with ENOENT where the kernel refuses the directory (/proc)', () => {
    expect(() => ensureDir('/proc/continuity-nope/deeper')).toThrow(expect.objectContaining({ code: 'ENOENT' }));
  });
});
