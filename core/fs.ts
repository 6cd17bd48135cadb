import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * Creates directory `path` and its missing parents, like `mkdirSync(path, { recursive:
 * true })`, which on Node 20 never returns for a path the kernel refuses to create
 * under an existing parent with ENOENT (e.g. `/proc/nope`): it retries the parent and
 * the child in turn forever, at 100% CPU. Here each level is tried once.
 * @throws the `mkdir` error (ENOENT, EACCES, ENOTDIR, EROFS, …) of the first level that
 *   cannot be created, or ENOTDIR when `path` exists and is not a directory (mkdir's own
 *   EEXIST said "file already exists", which read as if the directory were there).
 */
export function ensureDir(path: string): void {
  const target = resolve(path);
  try {
    mkdirSync(target);
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') {
      if (statSync(target).isDirectory()) return;
      throw Object.assign(new Error(`ENOTDIR: not a directory (a file is there), mkdir '${target}'`), { code: 'ENOTDIR', path: target });
    }
    if (code !== 'ENOENT') throw err;
  }
  const parent = dirname(target);
  if (parent === target) throw new Error(`cannot create ${target}: no parent directory`);
  ensureDir(parent);
  mkdirSync(target); // once: a second ENOENT under an existing parent is final
}

/**
 * A Node file-system error in words: its message, which already starts with its code
 * (`ENOENT: no such file or directory, open '…'`), with the code put in front only
 * where the message lacks it (the message alone repeated it: "ENOENT ENOENT: …").
 * @param e the error's `code` and `message`; `fallback` stands in for a missing message.
 */
export function errnoText(e: { code?: string; message?: string }, fallback?: unknown): string {
  const message = e.message ?? String(fallback);
  return e.code && !message.startsWith(`${e.code}:`) && !message.startsWith(`${e.code} `) ? `${e.code}: ${message}` : message;
}
