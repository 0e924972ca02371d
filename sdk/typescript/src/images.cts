// SPDX-License-Identifier: Apache-2.0
// Templates and snapshots: the images sandboxes start from.

import { type BodyInit, type CallOptions, type ConnectionOptions, call, resolveClient, seg } from './client.cjs';
import { BuildError, WarrenError } from './errors.cjs';
import { arr, date, obj, optInt, optNum, optStr, str } from './models.cjs';
import { fileChunks, tarDirectory } from './tar.cjs';

/** A step of a template build, as it starts. `cached`: its layer came from the cache. */
export interface BuildStep { step: number; of: number; line: number; instruction: string; cached: boolean }

export interface BuildOptions extends ConnectionOptions {
  /** The Dockerfile's text (FROM, RUN, ENV, WORKDIR, USER, COPY). */
  dockerfile?: string;
  /** A build context directory (Node only; tarred as it is sent; its Dockerfile is used unless
   * `dockerfile` is given), or a tar archive of one (bytes, a Blob or a stream). */
  context?: string | Exclude<BodyInit, string>;
  /** Replace the team's template of that name (else ConflictError). */
  replace?: boolean;
  /** Admin keys only: a template every team uses. */
  shared?: boolean;
  /** The isolation backend its sandboxes run on when a create does not say (`ns` or `gvisor`;
   * default: the FROM image's). The steps themselves run on the server's default. */
  runtime?: 'ns' | 'gvisor';
  onStep?: (step: BuildStep) => void;
  onOutput?: (stream: 'stdout' | 'stderr', text: string) => void;
}

/** A template sandboxes can be created from. `kind`: `dir` (a directory on the host) or
 * `template` (built or imported, made of layers). */
export class Template {
  readonly name: string;
  readonly kind: string;
  readonly sizeBytes: number | undefined;
  readonly layers: number;
  readonly createdAt: Date | undefined;
  readonly inUse: number;
  readonly shared: boolean;
  readonly team: string | undefined;
  readonly raw: Record<string, unknown>;

  /** @internal */
  constructor(d: Record<string, unknown>) {
    this.name = str(d.name); this.kind = str(d.kind); this.sizeBytes = optInt(d.size_bytes);
    this.layers = optInt(d.layers) ?? 0; this.createdAt = date(d.created_at); this.inUse = optInt(d.in_use) ?? 0;
    this.shared = d.shared === true; this.team = optStr(d.team); this.raw = d;
  }

  /** Every template the team can use. */
  static async list(opts: ConnectionOptions = {}): Promise<Template[]> {
    const d = (await resolveClient(opts).request('GET', '/v1/templates', call(opts))).object();
    return arr(d.templates).map((t) => new Template(obj(t)));
  }

  /** The template `name` (NotFoundError if none). */
  static async get(name: string, opts: ConnectionOptions = {}): Promise<Template> {
    return new Template((await resolveClient(opts).request('GET', `/v1/templates/${seg(name)}`, call(opts))).object());
  }

  /** Delete the template `name` (its sandboxes keep running). */
  static async delete(name: string, opts: ConnectionOptions = {}): Promise<void> {
    await resolveClient(opts).request('DELETE', `/v1/templates/${seg(name)}`, call(opts));
  }

  /** Forget the team's build cache; resolves to the steps forgotten. */
  static async pruneCache(opts: ConnectionOptions = {}): Promise<number> {
    const d = (await resolveClient(opts).request('POST', '/v1/templates/prune', call(opts))).object();
    return optInt(d.pruned_steps) ?? 0;
  }

  /** Build the template `name` from a Dockerfile and/or a context, reporting progress through
   * onStep/onOutput; resolves to the template. A step that fails throws BuildError; a
   * Dockerfile refused before the first step throws the API's error (InvalidArgumentError,
   * NotFoundError for an unknown FROM, ConflictError for a name taken). */
  static async build(name: string, opts: BuildOptions): Promise<Template> {
    const { dockerfile, context } = opts;
    if (dockerfile === undefined && context === undefined) throw new TypeError('Template.build needs a dockerfile, a context, or both');
    const query: Record<string, string> = { name };
    if (opts.replace) query.replace = 'true';
    if (opts.shared) query.shared = 'true';
    if (opts.runtime !== undefined) query.runtime = opts.runtime;
    let body: BodyInit;
    let ctype: string;
    if (typeof context === 'string') { body = tarDirectory(context, dockerfile); ctype = 'application/x-tar'; }
    else if (context !== undefined) { body = context; ctype = 'application/x-tar'; }
    else { body = dockerfile!; ctype = 'text/plain; charset=utf-8'; }
    const c = resolveClient(opts);
    const cc = call(opts);
    if (cc.requestTimeoutMs === undefined) cc.requestTimeoutMs = 0;
    const s = await c.stream('POST', '/v1/templates/build', {
      ...cc, query, body, headers: { 'Content-Type': ctype, Accept: 'application/x-ndjson' }, retry: false,
    });
    try {
      for await (const ev of s.json()) {
        const type = ev.type;
        if (type === 'step') {
          opts.onStep?.({ step: optInt(ev.step) ?? 0, of: optInt(ev.of) ?? 0, line: optInt(ev.line) ?? 0, instruction: str(ev.instruction), cached: ev.cached === true });
        } else if (type === 'stdout' || type === 'stderr') {
          if (typeof ev.data === 'string') opts.onOutput?.(type, ev.data);
        } else if (type === 'done') {
          if (ev.template && typeof ev.template === 'object') return await Template.get(name, { client: c, ...call(opts) });
          throw new WarrenError('bad_response', 'build: `done` without a template', undefined, s.requestId);
        } else if (type === 'error') {
          throw new BuildError(str(ev.code, 'error'), str(ev.message, 'the build failed'), optInt(ev.step), optInt(ev.line), optInt(ev.exit_code), s.requestId);
        }
      }
      throw new WarrenError('bad_response', 'build: the answer ended before the build did', undefined, s.requestId);
    } finally { s.close(); }
  }

  /** Make template `name` from an image archive (docker-archive or oci-archive): a local path
   * (Node only) or the archive's bytes/stream, streamed to the daemon. */
  static async importArchive(archive: string | Exclude<BodyInit, string>, name: string, opts: ConnectionOptions & { replace?: boolean; shared?: boolean } = {}): Promise<Template> {
    const query: Record<string, string> = { name };
    if (opts.replace) query.replace = 'true';
    if (opts.shared) query.shared = 'true';
    const body = typeof archive === 'string' ? fileChunks(archive) : archive;
    const cc = call(opts);
    if (cc.requestTimeoutMs === undefined) cc.requestTimeoutMs = 600_000;
    const r = await resolveClient(opts).request('POST', '/v1/templates/import', { ...cc, query, body, headers: { 'Content-Type': 'application/x-tar' }, retry: false });
    return new Template(r.object());
  }

  /** Make template `name` from `image`, pulled by the daemon from its registry. */
  static async pull(image: string, name: string, opts: ConnectionOptions & { username?: string; password?: string; insecure?: boolean; replace?: boolean; shared?: boolean } = {}): Promise<Template> {
    const json: Record<string, unknown> = { name, image, insecure: !!opts.insecure, replace: !!opts.replace };
    if (opts.shared) json.shared = true;
    if (opts.username !== undefined) json.username = opts.username;
    if (opts.password !== undefined) json.password = opts.password;
    const cc = call(opts);
    if (cc.requestTimeoutMs === undefined) cc.requestTimeoutMs = 600_000;
    return new Template((await resolveClient(opts).request('POST', '/v1/templates/pull', { ...cc, json, retry: false })).object());
  }
}

/** A sandbox's files captured as an image; `Sandbox.create({template: snap.id})` (or its name)
 * starts sandboxes with them. freezeMs/captureMs/capture are set only in what sb.snapshot()
 * returns. */
export class Snapshot {
  readonly id: string;
  readonly name: string | undefined;
  readonly sandboxId: string | undefined;
  readonly sizeBytes: number | undefined;
  readonly layers: number;
  readonly createdAt: Date | undefined;
  readonly freezeMs: number | undefined;
  readonly captureMs: number | undefined;
  readonly capture: string | undefined;
  readonly raw: Record<string, unknown>;

  /** @internal */
  constructor(d: Record<string, unknown>) {
    this.id = str(d.id); this.name = optStr(d.name); this.sandboxId = optStr(d.sandbox_id); this.sizeBytes = optInt(d.size_bytes);
    this.layers = optInt(d.layers) ?? 0; this.createdAt = date(d.created_at); this.freezeMs = optNum(d.freeze_ms);
    this.captureMs = optNum(d.capture_ms); this.capture = optStr(d.capture); this.raw = d;
  }

  /** The team's snapshots (only those of `sandboxId` if given). */
  static async list(opts: ConnectionOptions & { sandboxId?: string } = {}): Promise<Snapshot[]> {
    const d = (await resolveClient(opts).request('GET', '/v1/snapshots', { ...call(opts), query: { sandbox_id: opts.sandboxId } })).object();
    return arr(d.snapshots).map((s) => new Snapshot(obj(s)));
  }

  static async get(idOrName: string, opts: ConnectionOptions = {}): Promise<Snapshot> {
    return new Snapshot((await resolveClient(opts).request('GET', `/v1/snapshots/${seg(idOrName)}`, call(opts))).object());
  }

  static async delete(idOrName: string, opts: ConnectionOptions = {}): Promise<void> {
    await resolveClient(opts).request('DELETE', `/v1/snapshots/${seg(idOrName)}`, call(opts));
  }
}

export type { CallOptions };
