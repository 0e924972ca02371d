// SPDX-License-Identifier: Apache-2.0
// The sandbox's file system: `sandbox.files`. Reads and writes are streamed both ways.

import { type BodyInit, type CallOptions, type Client, type StreamResponse, call, seg } from './client.cjs';
import { ConflictError, NotFoundError } from './errors.cjs';
import { type FileInfo, type FilesystemEvent, arr, fileInfoFromJson, obj, str } from './models.cjs';

/** What a file can be written from: text (UTF-8), bytes, a Blob, or a stream of chunks (a web
 * ReadableStream, a Node Readable, any async iterable: sent chunked, never held whole). */
export type FileData = BodyInit;

export interface ServiceOptions extends CallOptions {
  /** In a sandbox made from a Compose file: the paths are in this service's root. */
  service?: string;
}

export interface UserOptions extends ServiceOptions {
  /** Act as this user of the sandbox (name or uid; default the template's user). */
  user?: string;
}

export interface ReadOptions extends UserOptions {
  /** `text` (default, UTF-8), `bytes` (a Uint8Array), `stream` (a StreamResponse: iterate it
   * for Uint8Array chunks) or `blob`. */
  format?: 'text' | 'bytes' | 'stream' | 'blob';
  offset?: number;
  length?: number;
}

export interface WriteOptions extends UserOptions {
  /** Permission bits of a new file (0o600 or "0600"). */
  mode?: number | string;
  /** Create missing parent directories (default true). */
  parents?: boolean;
}

function modeStr(m: number | string | undefined): string | undefined {
  return m === undefined ? undefined : typeof m === 'number' ? m.toString(8).padStart(4, '0') : m;
}

/** A running directory watch (see Files.watchDir). */
export class WatchHandle {
  /** What ended it abnormally (a stream failure, or an error thrown by onEvent). */
  error: unknown;
  private running = true;
  /** Resolves when the watch ended. */
  readonly done: Promise<void>;
  /** @internal */
  constructor(private readonly stream: StreamResponse, onEvent: (ev: FilesystemEvent) => void | Promise<void>, readonly path: string) {
    this.done = (async () => {
      try {
        for await (const d of stream.json()) await onEvent({ type: str(d.type), name: str(d.name) });
      } catch (e) {
        if (this.running) this.error = e;
      } finally { this.running = false; stream.close(); }
    })();
  }
  get isRunning(): boolean { return this.running; }
  /** Stop watching. */
  async stop(): Promise<void> {
    this.running = false;
    this.stream.close();
    await this.done;
  }
}

/** `sandbox.files`: paths are absolute paths inside the sandbox (with `service`, inside that
 * Compose service's root). */
export class Files {
  private readonly base: string;
  /** @internal */
  constructor(private readonly client: Client, readonly sandboxId: string) {
    this.base = `/v1/sandboxes/${seg(sandboxId)}/files`;
  }

  private q(path: string, opts: UserOptions, extra: Record<string, string | number | undefined> = {}) {
    return { path, user: opts.user, service: opts.service, ...extra };
  }

  private body(json: Record<string, unknown>, opts: UserOptions): Record<string, unknown> {
    if (opts.user !== undefined) json.user = opts.user;
    if (opts.service !== undefined) json.service = opts.service;
    return json;
  }

  /** A file's content as text (default), bytes, a Blob or a stream; offset/length read part of
   * it (an HTTP Range). */
  read(path: string, opts?: ReadOptions & { format?: 'text' }): Promise<string>;
  read(path: string, opts: ReadOptions & { format: 'bytes' }): Promise<Uint8Array>;
  read(path: string, opts: ReadOptions & { format: 'blob' }): Promise<Blob>;
  read(path: string, opts: ReadOptions & { format: 'stream' }): Promise<StreamResponse>;
  async read(path: string, opts: ReadOptions = {}): Promise<string | Uint8Array | Blob | StreamResponse> {
    const format = opts.format ?? 'text';
    const offset = opts.offset ?? 0;
    let length = opts.length;
    if (offset < 0 || (length !== undefined && length < 0)) throw new RangeError('offset and length must be >= 0');
    const headers: Record<string, string> = {};
    if (length === 0) {
      if (format === 'stream') length = undefined;
      else {
        await this.getInfo(path, opts);
        return format === 'text' ? '' : format === 'blob' ? new Blob([]) : new Uint8Array(0);
      }
    }
    if (length !== undefined) headers.Range = `bytes=${offset}-${offset + length - 1}`;
    else if (offset) headers.Range = `bytes=${offset}-`;
    const args = { ...call(opts), query: this.q(path, opts), headers };
    if (format === 'stream') return this.client.stream('GET', this.base, args);
    const r = await this.client.request('GET', this.base, args);
    let body = r.body;
    if (headers.Range && r.status === 200) body = body.subarray(offset, length === undefined ? undefined : offset + length);
    if (format === 'bytes') return body;
    if (format === 'blob') return new Blob([body as BlobPart]);
    return new TextDecoder().decode(body);
  }

  /** Write (create or atomically replace) a file from text, bytes, a Blob or a stream;
   * resolves to its info. */
  async write(path: string, data: FileData, opts: WriteOptions = {}): Promise<FileInfo> {
    const query = this.q(path, opts, { mode: modeStr(opts.mode), parents: opts.parents === false ? 'false' : undefined });
    const r = await this.client.request('PUT', this.base, { ...call(opts), query, body: data });
    return fileInfoFromJson(r.object());
  }

  /** Write several files (one request each, in order). */
  async writeFiles(files: { path: string; data: FileData }[], opts: WriteOptions = {}): Promise<FileInfo[]> {
    const out: FileInfo[] = [];
    for (const f of files) out.push(await this.write(f.path, f.data, opts));
    return out;
  }

  /** A directory's entries (`depth` levels, 1-16). */
  async list(path: string, opts: UserOptions & { depth?: number } = {}): Promise<FileInfo[]> {
    const d = (await this.client.request('GET', `${this.base}/list`, { ...call(opts), query: this.q(path, opts, { depth: opts.depth }) })).object();
    return arr(d.entries).map((e) => fileInfoFromJson(obj(e)));
  }

  /** Stat `path` (a symlink is not followed); NotFoundError if it does not exist. */
  async getInfo(path: string, opts: UserOptions = {}): Promise<FileInfo> {
    return fileInfoFromJson((await this.client.request('GET', `${this.base}/stat`, { ...call(opts), query: this.q(path, opts) })).object());
  }

  /** Alias of getInfo. */
  stat(path: string, opts: UserOptions = {}): Promise<FileInfo> { return this.getInfo(path, opts); }

  async exists(path: string, opts: UserOptions = {}): Promise<boolean> {
    try { await this.getInfo(path, opts); return true; } catch (e) { if (e instanceof NotFoundError) return false; throw e; }
  }

  /** Remove a file or directory (a non-empty directory needs `recursive`). */
  async remove(path: string, opts: UserOptions & { recursive?: boolean } = {}): Promise<void> {
    await this.client.request('DELETE', this.base, { ...call(opts), query: this.q(path, opts, { recursive: opts.recursive ? 'true' : undefined }) });
  }

  /** Move `oldPath` to `newPath`; resolves to the moved entry's info. */
  async rename(oldPath: string, newPath: string, opts: UserOptions = {}): Promise<FileInfo> {
    const json = this.body({ from: oldPath, to: newPath }, opts);
    await this.client.request('POST', `${this.base}/move`, { ...call(opts), json, retry: false });
    return this.getInfo(newPath, opts);
  }

  /** Make a directory (and its parents); false if it existed already. */
  async makeDir(path: string, opts: UserOptions & { mode?: number | string; parents?: boolean } = {}): Promise<boolean> {
    const json = this.body({ path, parents: opts.parents ?? true }, opts);
    if (opts.mode !== undefined) json.mode = modeStr(opts.mode);
    try {
      await this.client.request('POST', `${this.base}/mkdir`, { ...call(opts), json });
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e;
      // 409 also means "the sandbox is not running": false only for an existing directory.
      let info: FileInfo;
      try { info = await this.getInfo(path, opts); } catch { throw e; }
      if (info.isDir) return false;
      throw e;
    }
    return true;
  }

  /** Alias of makeDir. */
  mkdir(path: string, opts: UserOptions & { mode?: number | string; parents?: boolean } = {}): Promise<boolean> { return this.makeDir(path, opts); }

  /** Watch a directory: onEvent is called for each change. Resolves once the server accepted
   * the watch (NotFoundError otherwise); stop it with `handle.stop()`. */
  async watchDir(path: string, onEvent: (ev: FilesystemEvent) => void | Promise<void>, opts: ServiceOptions & { recursive?: boolean } = {}): Promise<WatchHandle> {
    const s = await this.client.stream('GET', `${this.base}/watch`, {
      ...call(opts), query: { path, recursive: opts.recursive ? 'true' : undefined, service: opts.service }, headers: { Accept: 'application/x-ndjson' },
    });
    return new WatchHandle(s, onEvent, path);
  }
}
