// SPDX-License-Identifier: Apache-2.0
// HTTP transport: the platform fetch for http(s) API URLs, node:http over a unix socket for
// unix:// ones (fetch cannot reach a unix socket without undici; node:http is imported on first
// use only, so the package loads in browsers, Deno and Bun). Retries with backoff on 429/503
// (honouring Retry-After) and on a connection that failed, but only for requests that may be
// sent twice: idempotent methods, or a POST carrying an Idempotency-Key.

import {
  AbortError, APIConnectionError, TimeoutError, WarrenError, errorFromResponse, parseRetryAfter,
} from './errors.cjs';
import {
  type TeamLimits, type UsageReport, teamLimitsFromJson, usageReportFromJson, versionFromJson, type VersionInfo,
} from './models.cjs';

/** What `client.usage()` sums: closed intervals that start in [from, to), grouped. */
export interface UsageOptions extends CallOptions {
  /** A Date, RFC 3339 text or unix seconds. */
  from?: Date | string | number;
  to?: Date | string | number;
  groupBy?: 'sandbox' | 'template' | 'day';
  /** Admin keys: another team's usage (`''`: every team's). */
  team?: string;
}

function usageQuery(o: UsageOptions, format: 'json' | 'csv'): Query {
  const t = (v: Date | string | number | undefined) => v instanceof Date ? v.toISOString() : v === undefined ? undefined : String(v);
  return { from: t(o.from), to: t(o.to), group_by: o.groupBy, team: o.team, format };
}

export const VERSION = '0.1.0';
export const ENV_API_URL = 'WARREN_API_URL';
export const ENV_API_KEY = 'WARREN_API_KEY';
export const DEFAULT_API_URL = 'unix:///run/warrend/warrend.sock';
/** Default milliseconds to wait for a response (whole, or its head for streams). */
export const DEFAULT_TIMEOUT_MS = 60_000;

/** What a request body can be: bytes or text (sent with a length, and may be retried), or a
 * stream of chunks (sent chunked, never held whole in memory, never retried). */
export type BodyInit =
  | string | Uint8Array | ArrayBuffer | Blob
  | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array | string> | Iterable<Uint8Array>;

export type Query = Record<string, string | number | boolean | undefined | null | (string | number)[]>;

export interface ClientOptions {
  /** `unix:///path/to.sock`, `http://host:port[/prefix]` or `https://...`; default
   * `$WARREN_API_URL`, else `unix:///run/warrend/warrend.sock`. */
  apiUrl?: string;
  /** Sent as `Authorization: Bearer`; default `$WARREN_API_KEY` (not needed on the unix socket). */
  apiKey?: string;
  /** Milliseconds to wait for a response (default 60000; 0: no limit). */
  timeoutMs?: number;
  /** Retries of a refused (429/503) or failed request that may be repeated (default 3). */
  maxRetries?: number;
  /** The first backoff in milliseconds, doubled each retry, with jitter (default 250). */
  retryBaseMs?: number;
  /** The longest wait between attempts, whatever Retry-After says (default 30000). */
  maxRetryDelayMs?: number;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** A fetch to use instead of the global one (http(s) URLs only). */
  fetch?: typeof fetch;
}

/** Options every call takes. */
export interface CallOptions {
  /** Abort the call (and, for streams, stop reading). */
  signal?: AbortSignal;
  /** Milliseconds to wait for this request's response (overrides the client's; 0: none). */
  requestTimeoutMs?: number;
}

/** Arguments of Client.request / Client.stream (the raw API). */
export interface RequestArgs extends CallOptions {
  query?: Query | [string, string | number][];
  json?: unknown;
  body?: BodyInit;
  headers?: Record<string, string>;
  /** false: never retry (a request with side effects and no Idempotency-Key). */
  retry?: boolean;
}

interface Endpoint { scheme: 'unix' | 'http' | 'https'; socketPath?: string; origin: string; basePath: string }

/** @internal */
export function parseApiUrl(url: string): Endpoint {
  const u = url.trim();
  if (u.startsWith('/')) return { scheme: 'unix', socketPath: u, origin: 'http://localhost', basePath: '' };
  const m = /^([a-z+]+):\/\/(.*)$/i.exec(u);
  if (!m) throw new TypeError(`unsupported API URL ${JSON.stringify(url)}: expected unix:///path, http://host:port or https://...`);
  const scheme = m[1]!.toLowerCase();
  if (scheme === 'unix' || scheme === 'http+unix') {
    const rest = m[2]!;
    const path = scheme === 'http+unix' ? decodeURIComponent(rest.split('/')[0]!) + rest.slice(rest.split('/')[0]!.length) : rest;
    if (!path) throw new TypeError(`no socket path in API URL ${JSON.stringify(url)}`);
    return { scheme: 'unix', socketPath: path, origin: 'http://localhost', basePath: '' };
  }
  if (scheme === 'http' || scheme === 'https') {
    const p = new URL(u);
    return { scheme, origin: p.origin, basePath: p.pathname.replace(/\/+$/, '') };
  }
  throw new TypeError(`unsupported API URL ${JSON.stringify(url)}: expected unix:///path, http://host:port or https://...`);
}

/** Percent-encode one path segment (a sandbox id, a pid, a name). */
export function seg(v: string | number): string { return encodeURIComponent(String(v)); }

function randomHex(n: number): string {
  const c = (globalThis as { crypto?: { getRandomValues?(a: Uint8Array): Uint8Array } }).crypto;
  const b = new Uint8Array(Math.ceil(n / 2));
  if (c?.getRandomValues) c.getRandomValues(b);
  else for (let i = 0; i < b.length; i++) b[i] = Math.floor(Math.random() * 256);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('').slice(0, n);
}

/** @internal A fresh Idempotency-Key. */
export function newIdempotencyKey(): string { return `ts-${randomHex(32)}`; }

function env(name: string): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env?.[name] || undefined;
}

const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);

interface RawResponse {
  status: number;
  headers: { get(name: string): string | null };
  body: AsyncIterable<Uint8Array>;
  cancel(): void;
}

function isReplayable(b: BodyInit | undefined): b is undefined | string | Uint8Array | ArrayBuffer | Blob {
  return b === undefined || typeof b === 'string' || b instanceof Uint8Array || b instanceof ArrayBuffer ||
    (typeof Blob !== 'undefined' && b instanceof Blob);
}

async function* iterBody(b: BodyInit): AsyncGenerator<Uint8Array> {
  const enc = new TextEncoder();
  if (typeof b === 'string') { yield enc.encode(b); return; }
  if (b instanceof Uint8Array) { yield b; return; }
  if (b instanceof ArrayBuffer) { yield new Uint8Array(b); return; }
  if (typeof Blob !== 'undefined' && b instanceof Blob) { yield* iterBody(b.stream() as ReadableStream<Uint8Array>); return; }
  if (typeof (b as ReadableStream).getReader === 'function') {
    const reader = (b as ReadableStream<Uint8Array>).getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        if (value && value.length) yield value;
      }
    } finally { reader.releaseLock(); }
  }
  for await (const c of b as AsyncIterable<Uint8Array | string>) {
    const chunk = typeof c === 'string' ? enc.encode(c) : c;
    if (chunk.length) yield chunk;
  }
}

function toReadableStream(b: BodyInit): ReadableStream<Uint8Array> {
  const it = iterBody(b);
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      const { done, value } = await it.next();
      if (done) ctrl.close(); else ctrl.enqueue(value);
    },
    async cancel() { await it.return(undefined); },
  });
}

async function* readerChunks(stream: ReadableStream<Uint8Array> | null): AsyncGenerator<Uint8Array> {
  if (!stream) return;
  const reader = stream.getReader();
  let done = false;
  try {
    for (;;) {
      const r = await reader.read();
      if (r.done) { done = true; return; }
      if (r.value && r.value.length) yield r.value;
    }
  } finally {
    if (!done) reader.cancel().catch(() => {});
    else reader.releaseLock();
  }
}

type NodeHttp = typeof import('node:http');
let nodeHttp: Promise<NodeHttp> | undefined;

/** A response read to the end. */
export class Response {
  constructor(readonly status: number, readonly headers: { get(name: string): string | null }, readonly body: Uint8Array) {}
  get requestId(): string | undefined { return this.headers.get('x-request-id') ?? undefined; }
  text(): string { return new TextDecoder().decode(this.body); }
  json(): unknown {
    if (!this.body.length) return undefined;
    try { return JSON.parse(this.text()); } catch (e) {
      throw new WarrenError('bad_response', `the server answered invalid JSON (HTTP ${this.status}): ${(e as Error).message}`, this.status, this.requestId);
    }
  }
  /** The body as a JSON object (bad_response if it is not one). */
  object(): Record<string, unknown> {
    const d = this.json();
    if (!d || typeof d !== 'object' || Array.isArray(d))
      throw new WarrenError('bad_response', `expected a JSON object (HTTP ${this.status})`, this.status, this.requestId);
    return d as Record<string, unknown>;
  }
}

/** A 2xx response whose body is read as it comes: iterate it for chunks, or use lines()/json()
 * for NDJSON. close() stops reading. */
export class StreamResponse implements AsyncIterable<Uint8Array> {
  /** @internal */
  constructor(readonly status: number, readonly headers: { get(name: string): string | null }, private raw: RawResponse, private done: () => void, private wrap: (e: unknown) => unknown) {}
  get requestId(): string | undefined { return this.headers.get('x-request-id') ?? undefined; }

  async *[Symbol.asyncIterator](): AsyncGenerator<Uint8Array> {
    try {
      for await (const c of this.raw.body) yield c;
      this.ended = true;
    } catch (e) {
      throw this.wrap(e);
    } finally {
      this.close();
    }
  }

  /** Non-empty lines, without their newline. */
  async *lines(): AsyncGenerator<string> {
    const dec = new TextDecoder();
    let buf = '';
    for await (const chunk of this) {
      buf += dec.decode(chunk, { stream: true });
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).replace(/\r$/, '');
        buf = buf.slice(i + 1);
        if (line) yield line;
      }
    }
    buf += dec.decode();
    if (buf.trim()) yield buf.replace(/\r$/, '');
  }

  /** One JSON object per NDJSON line. */
  async *json(): AsyncGenerator<Record<string, unknown>> {
    for await (const line of this.lines()) {
      let d: unknown;
      try { d = JSON.parse(line); } catch (e) {
        this.close();
        throw new WarrenError('bad_response', `invalid NDJSON line: ${(e as Error).message}`, this.status, this.requestId);
      }
      if (d && typeof d === 'object' && !Array.isArray(d)) yield d as Record<string, unknown>;
    }
  }

  /** The whole rest of the body. */
  async bytes(): Promise<Uint8Array> {
    const parts: Uint8Array[] = [];
    let n = 0;
    for await (const c of this) { parts.push(c); n += c.length; }
    const out = new Uint8Array(n);
    let o = 0;
    for (const p of parts) { out.set(p, o); o += p.length; }
    return out;
  }

  /** Stop reading (the connection is dropped). */
  close(): void {
    if (!this.ended) this.raw.cancel();
    this.done();
  }
  private ended = false;
}

/** A connection to warrend: what every Sandbox, Template, Volume ... call talks through. Make
 * one to share settings (and keep-alive connections) between many sandboxes:
 * `Sandbox.create({client})`. */
export class Client {
  readonly apiUrl: string;
  readonly timeoutMs: number;
  readonly maxRetries: number;
  readonly retryBaseMs: number;
  readonly maxRetryDelayMs: number;
  /** @internal */ readonly endpoint: Endpoint;
  private readonly apiKey: string | undefined;
  private readonly extraHeaders: Record<string, string>;
  private readonly fetchFn: typeof fetch | undefined;
  private agent: import('node:http').Agent | undefined;

  constructor(opts: ClientOptions = {}) {
    this.apiUrl = opts.apiUrl || env(ENV_API_URL) || DEFAULT_API_URL;
    this.apiKey = opts.apiKey !== undefined ? opts.apiKey || undefined : env(ENV_API_KEY);
    this.endpoint = parseApiUrl(this.apiUrl);
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.maxRetries = opts.maxRetries ?? 3;
    this.retryBaseMs = opts.retryBaseMs ?? 250;
    this.maxRetryDelayMs = opts.maxRetryDelayMs ?? 30_000;
    this.extraHeaders = { ...(opts.headers ?? {}) };
    this.fetchFn = opts.fetch;
  }

  /** Whether the client sends an API key. */
  get hasApiKey(): boolean { return !!this.apiKey; }

  /** @internal The key a WebSocket names in its subprotocols (terminal.cts). */
  apiKeyForWebSocket(): string | undefined { return this.apiKey; }

  /** @internal */
  url(path: string, query?: RequestArgs['query']): string {
    let q = '';
    if (query) {
      const pairs: [string, string][] = [];
      const items = Array.isArray(query) ? query : Object.entries(query);
      for (const [k, v] of items) {
        if (v === undefined || v === null) continue;
        if (Array.isArray(v)) for (const x of v) pairs.push([k, String(x)]);
        else pairs.push([k, typeof v === 'boolean' ? (v ? 'true' : 'false') : String(v)]);
      }
      if (pairs.length) q = '?' + pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
    }
    return this.endpoint.basePath + path + q;
  }

  private async sendOnce(method: string, path: string, headers: Record<string, string>, body: BodyInit | undefined, signal: AbortSignal, cancel: () => void): Promise<RawResponse> {
    const ep = this.endpoint;
    if (ep.scheme !== 'unix') {
      const f = this.fetchFn ?? globalThis.fetch;
      if (typeof f !== 'function') throw new APIConnectionError('connection', 'no fetch in this runtime (Node 18 or later has one)');
      const init: RequestInit & { duplex?: 'half' } = { method, headers, signal, redirect: 'manual' };
      if (body !== undefined) {
        if (isReplayable(body)) init.body = body as string | Uint8Array | ArrayBuffer | Blob as never;
        else { init.body = toReadableStream(body) as never; init.duplex = 'half'; }
      }
      const r = await f(ep.origin + path, init);
      return { status: r.status, headers: r.headers, body: readerChunks(r.body), cancel: () => { cancel(); } };
    }
    nodeHttp ??= import('node:http');
    const http = await nodeHttp;
    this.agent ??= new http.Agent({ keepAlive: true, maxSockets: 64 });
    return await new Promise<RawResponse>((resolve, reject) => {
      const req = http.request({ socketPath: ep.socketPath, path, method, headers, agent: this.agent, signal });
      req.once('error', reject);
      req.once('response', (res) => {
        resolve({
          status: res.statusCode ?? 0,
          headers: { get: (n: string) => { const v = res.headers[n.toLowerCase()]; return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v; } },
          body: (async function* () {
            try { for await (const c of res) yield c as Uint8Array; } finally { if (!res.complete) res.destroy(); }
          })(),
          cancel: () => { if (!res.complete) res.destroy(); cancel(); },
        });
      });
      if (body === undefined) { req.end(); return; }
      if (typeof body === 'string' || body instanceof Uint8Array) { req.end(body); return; }
      if (body instanceof ArrayBuffer) { req.end(new Uint8Array(body)); return; }
      (async () => {
        for await (const chunk of iterBody(body)) {
          if (req.destroyed) return;
          if (!req.write(chunk)) {
            await new Promise<void>((r) => {
              const go = () => { req.off('drain', go); req.off('close', go); r(); };
              req.on('drain', go);
              req.on('close', go);
            });
          }
        }
        req.end();
      })().catch((e) => req.destroy(e as Error));
    });
  }

  private headersFor(extra: Record<string, string> | undefined, json: boolean, hasBody: boolean, body: BodyInit | undefined): Record<string, string> {
    const h: Record<string, string> = { 'User-Agent': `warren-typescript/${VERSION}`, ...this.extraHeaders };
    if (this.apiKey) h['Authorization'] = `Bearer ${this.apiKey}`;
    h['X-Request-Id'] = `ts-${randomHex(20)}`;
    if (json) h['Content-Type'] = 'application/json';
    else if (hasBody) h['Content-Type'] = 'application/octet-stream';
    if (body !== undefined && this.endpoint.scheme === 'unix') {
      const len = typeof body === 'string' ? new TextEncoder().encode(body).length
        : body instanceof Uint8Array ? body.length : body instanceof ArrayBuffer ? body.byteLength : undefined;
      if (len !== undefined) h['Content-Length'] = String(len);
      else h['Transfer-Encoding'] = 'chunked';
    }
    for (const [k, v] of Object.entries(extra ?? {})) {
      for (const key of Object.keys(h)) if (key.toLowerCase() === k.toLowerCase()) delete h[key];
      h[k] = v;
    }
    return h;
  }

  private backoff(attempt: number): number {
    const d = this.retryBaseMs * 2 ** attempt;
    return Math.min(d / 2 + Math.random() * d / 2, this.maxRetryDelayMs);
  }

  /** Send with retries; the response head is back, its body unread. `onHead` clears the timer of
   * a stream. */
  private async send(method: string, path: string, args: RequestArgs, whole: boolean): Promise<{ raw: RawResponse; finish: () => void; wrap: (e: unknown) => unknown }> {
    let body = args.body;
    const isJson = args.json !== undefined;
    if (isJson) body = JSON.stringify(args.json);
    if (body === undefined && (method === 'POST' || method === 'PUT' || method === 'PATCH')) body = '';
    const headers = this.headersFor(args.headers, isJson, args.body !== undefined, body);
    const requestId = headers['X-Request-Id'];
    const idem = Object.keys(headers).some((k) => k.toLowerCase() === 'idempotency-key');
    const mayRepeat = args.retry !== false && (IDEMPOTENT.has(method) || idem) && isReplayable(body);
    const url = this.url(path, args.query);
    const timeoutMs = args.requestTimeoutMs ?? this.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      const ctrl = new AbortController();
      let timedOut = false;
      const user = args.signal;
      if (user?.aborted) throw new AbortError('aborted', `${method} ${path}: aborted`, undefined, requestId, { cause: user.reason });
      const onAbort = () => ctrl.abort(user?.reason);
      user?.addEventListener('abort', onAbort, { once: true });
      const timer = timeoutMs > 0 ? setTimeout(() => { timedOut = true; ctrl.abort(); }, timeoutMs) : undefined;
      const clearTimer = () => { if (timer) clearTimeout(timer); };
      const finish = () => { clearTimer(); user?.removeEventListener('abort', onAbort); };
      let closed = false;
      const cancel = () => { if (!closed) { closed = true; finish(); ctrl.abort(); } };
      const wrap = (e: unknown): unknown => {
        if (e instanceof WarrenError) return e;
        if (timedOut) return new TimeoutError('client_timeout', `${method} ${path}: no response within ${timeoutMs} ms`, undefined, requestId, { cause: e });
        if (user?.aborted) return new AbortError('aborted', `${method} ${path}: aborted`, undefined, requestId, { cause: e });
        const cause = (e as { cause?: unknown })?.cause;
        const detail = cause instanceof Error ? cause.message : (e as Error)?.message ?? String(e);
        return new APIConnectionError('connection', `${method} ${path}: cannot reach warrend at ${this.apiUrl}: ${detail}`, undefined, requestId, { cause: e });
      };
      let raw: RawResponse;
      try {
        raw = await this.sendOnce(method, url, headers, body, ctrl.signal, cancel);
      } catch (e) {
        finish();
        const err = wrap(e);
        if (err instanceof APIConnectionError && !(err instanceof AbortError) && mayRepeat && attempt < this.maxRetries) {
          await sleep(this.backoff(attempt), user);
          continue;
        }
        throw err;
      }
      if ((raw.status === 429 || raw.status === 503) && mayRepeat && attempt < this.maxRetries) {
        const ra = parseRetryAfter(raw.headers.get('retry-after'));
        try { for await (const _ of raw.body) { /* drain */ } } catch { /* ignore */ }
        finish();
        await sleep(ra !== undefined ? Math.min(ra * 1000, this.maxRetryDelayMs) : this.backoff(attempt), user);
        continue;
      }
      if (raw.status >= 300) {
        let text = '';
        try { text = new TextDecoder().decode(await collect(raw.body)); } catch { /* keep what we have */ }
        finish();
        throw errorFromResponse(raw.status, text, raw.headers.get('x-request-id') ?? requestId, raw.headers.get('retry-after'));
      }
      // A stream keeps the caller's signal until it is closed; only the head had the timeout.
      if (!whole) clearTimer();
      return { raw, finish, wrap };
    }
  }

  /** One request, its response read whole; a non-2xx status throws the matching WarrenError. */
  async request(method: string, path: string, args: RequestArgs = {}): Promise<Response> {
    const { raw, finish, wrap } = await this.send(method, path, args, true);
    try {
      return new Response(raw.status, raw.headers, await collect(raw.body));
    } catch (e) {
      throw wrap(e);
    } finally {
      finish();
    }
  }

  /** A request whose 2xx body is read as it comes; the timeout bounds the head only. */
  async stream(method: string, path: string, args: RequestArgs = {}): Promise<StreamResponse> {
    const { raw, finish, wrap } = await this.send(method, path, args, false);
    return new StreamResponse(raw.status, raw.headers, raw, finish, wrap);
  }

  /** True when the daemon answers GET /v1/health. */
  async health(opts: CallOptions = {}): Promise<boolean> {
    try {
      await this.request('GET', '/v1/health', { ...opts, retry: false });
      return true;
    } catch { return false; }
  }

  async version(opts: CallOptions = {}): Promise<VersionInfo> {
    return versionFromJson((await this.request('GET', '/v1/version', opts)).object());
  }

  /** The host's devices from its CDI specs (`GET /v1/devices`, docs/devices.md): each one's
   * `name`, `kind`, whether a sandbox holds it (`inUse`), and why a create naming it is refused
   * (`refused`) where Warren cannot give it. */
  async devices(opts: CallOptions = {}): Promise<{ name: string; kind: string; inUse: boolean; refused: string | undefined }[]> {
    const got = (await this.request('GET', '/v1/devices', opts)).object().devices;
    return (Array.isArray(got) ? got : []).map((x) => {
      const o = (x && typeof x === 'object' ? x : {}) as Record<string, unknown>;
      return {
        name: String(o.name ?? ''),
        kind: String(o.kind ?? ''),
        inUse: o.in_use === true,
        refused: typeof o.refused === 'string' ? o.refused : undefined,
      };
    });
  }

  /** The usage ledger's sums (`GET /v1/usage`, docs/usage.md): per sandbox (default), template
   * or day, for the key's team (an admin: `team`). */
  async usage(opts: UsageOptions = {}): Promise<UsageReport> {
    return usageReportFromJson((await this.request('GET', '/v1/usage', { ...call(opts), query: usageQuery(opts, 'json') })).object());
  }

  /** The same sums as CSV text (a header line, then a row per group). */
  async usageCsv(opts: UsageOptions = {}): Promise<string> {
    return (await this.request('GET', '/v1/usage', { ...call(opts), query: usageQuery(opts, 'csv'), headers: { Accept: 'text/csv' } })).text();
  }

  /** A team's limits in force (`GET /v1/teams/{team}/limits`; a team's key: its own). */
  async teamLimits(team: string, opts: CallOptions = {}): Promise<TeamLimits> {
    return teamLimitsFromJson((await this.request('GET', `/v1/teams/${seg(team)}/limits`, call(opts))).object());
  }

  /** Close idle keep-alive connections (the client stays usable). */
  close(): void {
    this.agent?.destroy();
    this.agent = undefined;
  }
}

async function collect(body: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const c of body) { parts.push(c); n += c.length; }
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) { reject(new AbortError('aborted', 'aborted', undefined, undefined, { cause: signal.reason })); return; }
    const t = setTimeout(() => { signal?.removeEventListener('abort', on); resolve(); }, ms);
    const on = () => { clearTimeout(t); reject(new AbortError('aborted', 'aborted while waiting to retry', undefined, undefined, { cause: signal?.reason })); };
    signal?.addEventListener('abort', on, { once: true });
  });
}

/** Options of calls that may make their own client. */
export interface ConnectionOptions extends CallOptions {
  apiUrl?: string;
  apiKey?: string;
  /** A client to use (its settings win over apiUrl/apiKey). */
  client?: Client;
}

/** @internal */
export function resolveClient(o: ConnectionOptions | undefined): Client {
  if (o?.client) {
    if (o.apiUrl !== undefined || o.apiKey !== undefined) throw new TypeError('pass either client or apiUrl/apiKey, not both');
    return o.client;
  }
  const opts: ClientOptions = {};
  if (o?.apiUrl !== undefined) opts.apiUrl = o.apiUrl;
  if (o?.apiKey !== undefined) opts.apiKey = o.apiKey;
  return new Client(opts);
}

/** @internal The CallOptions part of an options object. */
export function call(o: CallOptions | undefined): CallOptions {
  const c: CallOptions = {};
  if (o?.signal) c.signal = o.signal;
  if (o?.requestTimeoutMs !== undefined) c.requestTimeoutMs = o.requestTimeoutMs;
  return c;
}
