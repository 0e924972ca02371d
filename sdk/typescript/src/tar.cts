// SPDX-License-Identifier: Apache-2.0
// A build context directory as a tar stream (POSIX ustar, with PAX records for long names),
// made as it is sent: files are read in chunks, never whole. Node only (node:fs, imported on use).

const BLOCK = 512;
const CHUNK = 256 * 1024;
const enc = new TextEncoder();

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, '0') + '\0';
}

function header(name: string, opts: { size: number; mode: number; mtime: number; type: string; link?: string }): Uint8Array {
  const h = new Uint8Array(BLOCK);
  const put = (s: string | Uint8Array, off: number, len: number) => {
    const b = typeof s === 'string' ? enc.encode(s) : s;
    h.set(b.subarray(0, len), off);
  };
  put(name, 0, 100);
  put(octal(opts.mode & 0o7777, 8), 100, 8);
  put(octal(0, 8), 108, 8);
  put(octal(0, 8), 116, 8);
  put(octal(opts.size, 12), 124, 12);
  put(octal(Math.floor(opts.mtime), 12), 136, 12);
  put('        ', 148, 8);
  put(opts.type, 156, 1);
  if (opts.link) put(opts.link, 157, 100);
  put('ustar\0', 257, 6);
  put('00', 263, 2);
  let sum = 0;
  for (const b of h) sum += b;
  put(octal(sum, 7) + ' ', 148, 8);
  return h;
}

function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let len = enc.encode(body).length;
  let n = len + String(len).length;
  if (String(n).length !== String(len).length) n = len + String(n).length;
  return `${n}${body}`;
}

function pad(n: number): Uint8Array { const r = n % BLOCK; return new Uint8Array(r ? BLOCK - r : 0); }

function* entryHeader(name: string, o: { size: number; mode: number; mtime: number; type: string; link?: string }): Generator<Uint8Array> {
  if (enc.encode(name).length > 100 || (o.link && enc.encode(o.link).length > 100)) {
    let pax = paxRecord('path', name);
    if (o.link) pax += paxRecord('linkpath', o.link);
    const data = enc.encode(pax);
    yield header('PaxHeader', { size: data.length, mode: 0o644, mtime: o.mtime, type: 'x' });
    yield data;
    yield pad(data.length);
  }
  yield header(name, o);
}

/** The directory `root` as a tar stream; with `dockerfile`, its top-level Dockerfile is that text. */
export async function* tarDirectory(root: string, dockerfile?: string): AsyncGenerator<Uint8Array> {
  const fs = await import('node:fs/promises');
  const pathMod = await import('node:path');
  const st = await fs.stat(root);
  if (!st.isDirectory()) throw new TypeError(`build context ${JSON.stringify(root)} is not a directory`);
  async function* walk(dir: string, rel: string): AsyncGenerator<Uint8Array> {
    const names = (await fs.readdir(dir)).sort();
    for (const n of names) {
      const full = pathMod.join(dir, n);
      const name = rel ? `${rel}/${n}` : n;
      if (!rel && dockerfile !== undefined && n === 'Dockerfile') continue;
      const s = await fs.lstat(full);
      const mtime = s.mtimeMs / 1000;
      if (s.isDirectory()) {
        yield* entryHeader(name + '/', { size: 0, mode: s.mode, mtime, type: '5' });
        yield* walk(full, name);
      } else if (s.isSymbolicLink()) {
        yield* entryHeader(name, { size: 0, mode: s.mode, mtime, type: '2', link: await fs.readlink(full) });
      } else if (s.isFile()) {
        yield* entryHeader(name, { size: s.size, mode: s.mode, mtime, type: '0' });
        const fh = await fs.open(full, 'r');
        let left = s.size;
        try {
          while (left > 0) {
            const buf = new Uint8Array(Math.min(CHUNK, left));
            const { bytesRead } = await fh.read(buf, 0, buf.length, null);
            if (bytesRead === 0) throw new Error(`${full} shrank while it was sent`);
            left -= bytesRead;
            yield buf.subarray(0, bytesRead);
          }
        } finally { await fh.close(); }
        yield pad(s.size);
      }
      // sockets, fifos, devices: a context cannot hold them
    }
  }
  yield* walk(root, '');
  if (dockerfile !== undefined) {
    const data = enc.encode(dockerfile);
    yield* entryHeader('Dockerfile', { size: data.length, mode: 0o644, mtime: Date.now() / 1000, type: '0' });
    yield data;
    yield pad(data.length);
  }
  yield new Uint8Array(BLOCK * 2);
}

/** A local file as a stream of chunks (Node only). */
export async function* fileChunks(path: string): AsyncGenerator<Uint8Array> {
  const fs = await import('node:fs/promises');
  const fh = await fs.open(path, 'r');
  try {
    for (;;) {
      const buf = new Uint8Array(CHUNK);
      const { bytesRead } = await fh.read(buf, 0, CHUNK, null);
      if (bytesRead === 0) return;
      yield buf.subarray(0, bytesRead);
    }
  } finally { await fh.close(); }
}
