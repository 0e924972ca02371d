// SPDX-License-Identifier: Apache-2.0
// The Sandbox class: create, connect to, list and kill sandboxes, and everything done to one.

import { type CallOptions, type Client, type ConnectionOptions, call, newIdempotencyKey, resolveClient, seg } from './client.cjs';
import { type CodeContext, type Execution, type RunCodeOptions, contexts, runCode } from './code.cjs';
import { Commands } from './commands.cjs';
import { type ComposeSpec, composeBody } from './compose.cjs';
import { NotFoundError, type WarrenError, errorFromCode } from './errors.cjs';
import { Files } from './files.cjs';
import { Snapshot, Template } from './images.cjs';
import { Terminal, type TerminalOptions } from './terminal.cjs';
import {
  type DiskUsage, type MetricSample, type NetworkLogEntry, type NetworkPolicy, type NetworkStats, type PortInfo, type SandboxInfo,
  type ServiceInfo, type VolumeMount, arr, date, networkFromJson, networkLogFromJson, obj, optInt, optNum, optStr, parseVolumeMount,
  sandboxInfoFromJson, serviceFromJson, str,
} from './models.cjs';

/** The egress policy of `Sandbox.create` and `sb.updateNetwork` (docs/networking.md). */
export interface NetworkOptions {
  /** Egress beyond allowOut (default: the server's). */
  internet?: boolean;
  /** Addresses, CIDR blocks, names and `*.names` reachable whatever else is denied. */
  allowOut?: string[];
  /** Addresses and CIDR blocks never reachable. */
  denyOut?: string[];
  /** Concurrent egress connections at most. */
  maxConnections?: number;
}

export interface CreateOptions extends ConnectionOptions, NetworkOptions {
  /** A template's name, a snapshot's id or name, or a Template/Snapshot (default `base`). */
  template?: string | Template | Snapshot;
  cpus?: number;
  memoryMb?: number;
  diskMb?: number;
  /** Seconds until the server kills (or pauses) it (server default 300). */
  timeout?: number;
  onTimeout?: 'kill' | 'pause';
  /** Environment of every command. */
  env?: Record<string, string>;
  metadata?: Record<string, string>;
  /** `"NAME:/path"`, `"NAME:/path:ro"` or {name, path, readonly}. */
  volumes?: (string | { name: string; path: string; readonly?: boolean })[];
  /** false: requests to its ports need its traffic token. */
  publicPorts?: boolean;
  /** false: loopback only, no address of its own. */
  network?: boolean;
  /** A repeated create with the same key returns the first sandbox. Default: a fresh key per
   * call, so the SDK may retry the create (on 503 past the host's capacity, or a dropped
   * connection) without making two sandboxes. */
  idempotencyKey?: string;
  /** Its isolation backend: `ns` (namespaces and seccomp around the host's kernel) or `gvisor`
   * (inside gVisor's user-space kernel). Default: the template's, else `ns`. A runtime the
   * server does not allow is an InvalidArgumentError; `gvisor` without runsc on the host is an
   * UnsupportedError. */
  runtime?: 'ns' | 'gvisor';
  /** Host devices for it alone while it lives, by CDI name (`vendor.com/class=name`;
   * `client.devices()` lists them; docs/devices.md). An unknown one is an
   * InvalidArgumentError; one another sandbox holds, a RateLimitError (503). */
  devices?: string[];
  /** Run the services of a Compose file in the sandbox, all in this one sandbox
   * (docs/compose.md): the file's text (YAML or JSON itself, not a path), or {file, env,
   * context} (see ComposeSpec; `composeContext(dir)` builds the context). The other options
   * still apply to the sandbox as a whole. A key Warren does not support is an
   * UnsupportedError whose message names the key and its line (`services.web.privileged (line
   * 7): not supported`); other mistakes an InvalidArgumentError. */
  compose?: string | ComposeSpec;
}

export interface ListOptions extends ConnectionOptions {
  state?: string | string[];
  metadata?: Record<string, string>;
  /** Stop after this many. */
  limit?: number;
  /** Sandboxes per request (1-1000). */
  pageSize?: number;
}

/** A filesystem change of `sb.diff()`. */
export interface DiffChange {
  path: string;
  change: 'added' | 'modified' | 'deleted' | 'renamed' | string;
  type: 'file' | 'dir' | 'symlink' | 'other' | string;
  size: number | undefined;
  mode: string | undefined;
  oldSize: number | undefined;
  oldMode: string | undefined;
  /** The old path of a rename. */
  from: string | undefined;
}

export interface Diff {
  sandboxId: string;
  against: { kind: 'template' | 'snapshot' | 'sandbox' | string; name: string };
  changes: DiffChange[];
  truncated: boolean;
  raw: Record<string, unknown>;
}

/** The text diff of one file (`sb.diff({path, content: true})`). */
export interface FileDiff { path: string; change: string; binary: boolean; tooLarge: boolean; diff: string; raw: Record<string, unknown> }

/** What `sb.fork()` made: the copies, and an error for each one that could not be made. */
export interface ForkResult {
  sandboxes: Sandbox[];
  errors: WarrenError[];
  freezeMs: number;
  capture: string;
  /** Every copy asked for was made. */
  ok: boolean;
  killAll(): Promise<void>;
  raw: Record<string, unknown>;
}

export interface DesktopInfo { running: boolean; display: string; width: number; height: number; raw: Record<string, unknown> }
export interface DesktopWindow { id: string; title: string; class: string; focused: boolean }
export type MouseButton = 'left' | 'middle' | 'right';

function desktopInfo(d: Record<string, unknown>): DesktopInfo {
  return { running: d.running === true, display: str(d.display), width: optInt(d.width) ?? 0, height: optInt(d.height) ?? 0, raw: d };
}

/** `sb.desktop`: computer use on a sandbox of the `desktop` template. */
export class Desktop {
  private readonly base: string;
  /** @internal */
  constructor(private readonly client: Client, sandboxId: string) { this.base = `/v1/sandboxes/${seg(sandboxId)}/desktop`; }

  /** Whether the desktop runs, its display and screen size. */
  async info(opts?: CallOptions): Promise<DesktopInfo> { return desktopInfo((await this.client.request('GET', this.base, call(opts))).object()); }
  /** Start Xvfb and the desktop (idempotent). */
  async start(opts: CallOptions & { width?: number; height?: number; dpi?: number } = {}): Promise<DesktopInfo> {
    const json: Record<string, number> = {};
    if (opts.width !== undefined) json.width = opts.width;
    if (opts.height !== undefined) json.height = opts.height;
    if (opts.dpi !== undefined) json.dpi = opts.dpi;
    return desktopInfo((await this.client.request('POST', `${this.base}/start`, { ...call(opts), json })).object());
  }
  /** A PNG of the screen. */
  async screenshot(opts: CallOptions & { cursor?: boolean } = {}): Promise<Uint8Array> {
    return (await this.client.request('GET', `${this.base}/screenshot`, { ...call(opts), query: { cursor: opts.cursor ? 1 : undefined } })).body;
  }
  private async mouse(json: Record<string, unknown>, opts?: CallOptions): Promise<{ x: number; y: number }> {
    const d = (await this.client.request('POST', `${this.base}/mouse`, { ...call(opts), json, retry: false })).object();
    return { x: optInt(d.x) ?? 0, y: optInt(d.y) ?? 0 };
  }
  private static at(json: Record<string, unknown>, x?: number, y?: number): Record<string, unknown> {
    if (x !== undefined) json.x = x;
    if (y !== undefined) json.y = y;
    return json;
  }
  /** Move the pointer; resolves to where it is after. */
  move(x: number, y: number, opts?: CallOptions) { return this.mouse({ action: 'move', x, y }, opts); }
  /** Click (at x, y if given). */
  click(x?: number, y?: number, opts: CallOptions & { button?: MouseButton } = {}) {
    return this.mouse(Desktop.at({ action: 'click', button: opts.button ?? 'left' }, x, y), opts);
  }
  doubleClick(x?: number, y?: number, opts: CallOptions & { button?: MouseButton } = {}) {
    return this.mouse(Desktop.at({ action: 'double_click', button: opts.button ?? 'left' }, x, y), opts);
  }
  mouseDown(opts: CallOptions & { button?: MouseButton } = {}) { return this.mouse({ action: 'down', button: opts.button ?? 'left' }, opts); }
  mouseUp(opts: CallOptions & { button?: MouseButton } = {}) { return this.mouse({ action: 'up', button: opts.button ?? 'left' }, opts); }
  /** Scroll `amount` steps up or down (at x, y if given). */
  scroll(direction: 'up' | 'down' = 'down', amount = 1, opts: CallOptions & { x?: number; y?: number } = {}) {
    return this.mouse(Desktop.at({ action: 'scroll', direction, amount }, opts.x, opts.y), opts);
  }
  /** Press at `from`, move to `to`, release. */
  drag(from: [number, number], to: [number, number], opts?: CallOptions) {
    return this.mouse({ action: 'drag', x: from[0], y: from[1], to_x: to[0], to_y: to[1] }, opts);
  }
  /** Type `text`. */
  async type(text: string, opts?: CallOptions): Promise<void> {
    await this.client.request('POST', `${this.base}/keyboard`, { ...call(opts), json: { text }, retry: false });
  }
  /** Press one chord: `key('Return')`, `key(['ctrl', 'c'])`. */
  async key(keys: string | string[], opts?: CallOptions): Promise<void> {
    await this.client.request('POST', `${this.base}/keyboard`, { ...call(opts), json: { keys: Array.isArray(keys) ? keys : [keys] }, retry: false });
  }
  /** Where the pointer is. */
  async cursor(opts?: CallOptions): Promise<{ x: number; y: number }> {
    const d = (await this.client.request('GET', `${this.base}/mouse`, call(opts))).object();
    return { x: optInt(d.x) ?? 0, y: optInt(d.y) ?? 0 };
  }
  async windows(opts?: CallOptions): Promise<DesktopWindow[]> {
    const d = (await this.client.request('GET', `${this.base}/windows`, call(opts))).object();
    return arr(d.windows).map((w) => { const o = obj(w); return { id: String(o.id ?? ''), title: str(o.title), class: str(o.class), focused: o.focused === true }; });
  }
}

/** `sb.browser`: Chromium in the sandbox, driven over the Chrome DevTools Protocol. */
export class Browser {
  /** @internal */
  constructor(private readonly client: Client, private readonly sandboxId: string) {}
  /** Start Chromium (CDP on 127.0.0.1:9222 inside); resolves to the CDP URL through the daemon
   * (for playwright's `chromium.connectOverCDP(url, {headers})`). */
  async start(opts?: CallOptions): Promise<string> {
    const d = (await this.client.request('POST', `/v1/sandboxes/${seg(this.sandboxId)}/browser/start`, { ...call(opts), retry: false })).object();
    return str(d.cdp_url);
  }
}

function networkBody(o: NetworkOptions): Record<string, unknown> {
  const n: Record<string, unknown> = {};
  if (o.internet !== undefined) n.internet = o.internet;
  if (o.allowOut !== undefined) n.allow_out = [...o.allowOut];
  if (o.denyOut !== undefined) n.deny_out = [...o.denyOut];
  if (o.maxConnections !== undefined) n.max_connections = o.maxConnections;
  return n;
}

function positiveSeconds(v: number, what: string): number {
  if (!(v > 0)) throw new RangeError(`${what} must be > 0`);
  return Math.ceil(v);
}

/** A sandbox. Make one with `Sandbox.create()`, or `Sandbox.connect(id)` to an existing one. */
export class Sandbox {
  readonly id: string;
  readonly client: Client;
  readonly commands: Commands;
  readonly files: Files;
  readonly desktop: Desktop;
  readonly browser: Browser;
  /** The last known info (from create/connect/getInfo/...), without a request. */
  info: SandboxInfo | undefined;

  /** @internal */
  constructor(id: string, client: Client, info?: SandboxInfo) {
    this.id = id;
    this.client = client;
    this.info = info;
    this.commands = new Commands(client, id);
    this.files = new Files(client, id);
    this.desktop = new Desktop(client, id);
    this.browser = new Browser(client, id);
  }

  /** Alias of `id` (the E2B name). */
  get sandboxId(): string { return this.id; }
  /** Its isolation backend (`ns` or `gvisor`), from the last known info. */
  get runtime(): string | undefined { return this.info?.runtime; }
  private get path(): string { return `/v1/sandboxes/${seg(this.id)}`; }

  /** Start a sandbox and resolve once it runs: `Sandbox.create()`, `Sandbox.create('base', {...})`
   * or `Sandbox.create({template, ...})`. Past the host's capacity the SDK retries (503 with
   * Retry-After), then throws RateLimitError. */
  static async create(template?: string | Template | Snapshot | CreateOptions, opts: CreateOptions = {}): Promise<Sandbox> {
    if (template !== undefined && typeof template === 'object' && !(template instanceof Template) && !(template instanceof Snapshot)) {
      opts = template;
      template = opts.template;
    }
    let t: string | Template | Snapshot = (template as string | Template | Snapshot | undefined) ?? 'base';
    if (t instanceof Template) t = t.name;
    else if (t instanceof Snapshot) t = t.id;
    const body: Record<string, unknown> = { template: t };
    if (opts.cpus !== undefined) body.cpus = opts.cpus;
    if (opts.memoryMb !== undefined) body.memory_mb = Math.trunc(opts.memoryMb);
    if (opts.diskMb !== undefined) body.disk_mb = Math.trunc(opts.diskMb);
    if (opts.timeout !== undefined) body.timeout = positiveSeconds(opts.timeout, 'timeout');
    if (opts.onTimeout !== undefined) {
      if (opts.onTimeout !== 'kill' && opts.onTimeout !== 'pause') throw new TypeError("onTimeout must be 'kill' or 'pause'");
      body.on_timeout = opts.onTimeout;
    }
    if (opts.env && Object.keys(opts.env).length) body.env = opts.env;
    if (opts.metadata && Object.keys(opts.metadata).length) body.metadata = opts.metadata;
    if (opts.volumes?.length) body.volumes = opts.volumes.map((v) => parseVolumeMount(v));
    const net = networkBody(opts);
    if (opts.publicPorts !== undefined) net.ports = { public: opts.publicPorts };
    if (opts.network !== undefined) net.enabled = opts.network;
    if (Object.keys(net).length) body.network = net;
    if (opts.runtime !== undefined) body.runtime = opts.runtime;
    if (opts.devices?.length) body.devices = [...opts.devices];
    if (opts.compose !== undefined) body.compose = composeBody(opts.compose);
    const c = resolveClient(opts);
    const r = await c.request('POST', '/v1/sandboxes', {
      ...call(opts), json: body, headers: { 'Idempotency-Key': opts.idempotencyKey ?? newIdempotencyKey() },
    });
    const info = sandboxInfoFromJson(r.object());
    return new Sandbox(info.id, c, info);
  }

  /** The existing sandbox `id` (NotFoundError if the key's team has none). */
  static async connect(id: string, opts: ConnectionOptions = {}): Promise<Sandbox> {
    const c = resolveClient(opts);
    const info = sandboxInfoFromJson((await c.request('GET', `/v1/sandboxes/${seg(id)}`, call(opts))).object());
    return new Sandbox(info.id || id, c, info);
  }

  /** Kill and delete the sandbox `id` without connecting to it (E2B's `Sandbox.kill`); false if
   * there was none. */
  static async kill(id: string, opts: ConnectionOptions = {}): Promise<boolean> {
    try { await resolveClient(opts).request('DELETE', `/v1/sandboxes/${seg(id)}`, call(opts)); } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
    return true;
  }

  /** The team's sandboxes, oldest first, fetched page by page as you iterate
   * (`for await (const info of Sandbox.list())`). */
  static async *list(opts: ListOptions = {}): AsyncGenerator<SandboxInfo> {
    const query: [string, string | number][] = [];
    if (opts.state !== undefined) query.push(['state', typeof opts.state === 'string' ? opts.state : opts.state.join(',')]);
    for (const [k, v] of Object.entries(opts.metadata ?? {})) query.push(['metadata', `${k}=${v}`]);
    let pageSize = opts.pageSize;
    if (pageSize === undefined && opts.limit !== undefined) pageSize = Math.min(Math.max(opts.limit, 1), 1000);
    if (pageSize !== undefined) query.push(['limit', pageSize]);
    const c = resolveClient(opts);
    let cursor: string | undefined;
    let n = 0;
    for (;;) {
      const d = (await c.request('GET', '/v1/sandboxes', { ...call(opts), query: cursor ? [...query, ['cursor', cursor]] : query })).object();
      for (const s of arr(d.sandboxes)) {
        if (opts.limit !== undefined && n >= opts.limit) return;
        n++;
        yield sandboxInfoFromJson(obj(s));
      }
      const next = d.next_cursor;
      if (typeof next !== 'string' || !next || next === cursor) return;
      if (opts.limit !== undefined && n >= opts.limit) return;
      cursor = next;
    }
  }

  async getInfo(opts?: CallOptions): Promise<SandboxInfo> {
    this.info = sandboxInfoFromJson((await this.client.request('GET', this.path, call(opts))).object());
    return this.info;
  }

  /** True while the sandbox exists and runs. */
  async isRunning(opts?: CallOptions): Promise<boolean> {
    try { return (await this.getInfo(opts)).state === 'running'; } catch (e) { if (e instanceof NotFoundError) return false; throw e; }
  }

  async isPaused(opts?: CallOptions): Promise<boolean> {
    try { return (await this.getInfo(opts)).state === 'paused'; } catch (e) { if (e instanceof NotFoundError) return false; throw e; }
  }

  /** Kill the sandbox `timeout` seconds from now (extends or shortens its life). */
  async setTimeout(timeout: number, opts?: CallOptions): Promise<SandboxInfo> {
    const r = await this.client.request('POST', `${this.path}/timeout`, { ...call(opts), json: { timeout: positiveSeconds(timeout, 'timeout') } });
    this.info = sandboxInfoFromJson(r.object());
    return this.info;
  }

  /** Kill and delete the sandbox; false if it was gone already. */
  async kill(opts?: CallOptions): Promise<boolean> {
    try { await this.client.request('DELETE', this.path, call(opts)); } catch (e) { if (e instanceof NotFoundError) return false; throw e; }
    return true;
  }

  /** Pause: `memory` (default) freezes every process with its memory; `disk` keeps the files,
   * ends the processes and frees the memory. The deadline's clock stops. */
  async pause(opts: CallOptions & { mode?: 'memory' | 'disk' } = {}): Promise<SandboxInfo> {
    const mode = opts.mode ?? 'memory';
    if (mode !== 'memory' && mode !== 'disk') throw new TypeError("mode must be 'memory' or 'disk'");
    this.info = sandboxInfoFromJson((await this.client.request('POST', `${this.path}/pause`, { ...call(opts), json: { mode }, retry: false })).object());
    return this.info;
  }

  /** Resume a paused sandbox; `processesKept` in the answer says whether the same processes
   * went on. `timeout`: its new timeout in seconds (default the time it had left). */
  async resume(opts: CallOptions & { timeout?: number } = {}): Promise<SandboxInfo> {
    const json: Record<string, number> = {};
    if (opts.timeout !== undefined) json.timeout = positiveSeconds(opts.timeout, 'timeout');
    this.info = sandboxInfoFromJson((await this.client.request('POST', `${this.path}/resume`, { ...call(opts), json, retry: false })).object());
    return this.info;
  }

  /** Capture the sandbox's files as a snapshot. */
  async snapshot(opts: CallOptions & { name?: string } = {}): Promise<Snapshot> {
    const json: Record<string, string> = {};
    if (opts.name !== undefined) json.name = opts.name;
    return new Snapshot((await this.client.request('POST', `${this.path}/snapshots`, { ...call(opts), json, retry: false })).object());
  }

  /** Copy the running sandbox into `count` new ones (1-100), each with its files and config. */
  async fork(opts: CallOptions & { count?: number; timeout?: number; metadata?: Record<string, string> } = {}): Promise<ForkResult> {
    const json: Record<string, unknown> = { count: opts.count ?? 1 };
    if (opts.timeout !== undefined) json.timeout = positiveSeconds(opts.timeout, 'timeout');
    if (opts.metadata) json.metadata = opts.metadata;
    const r = await this.client.request('POST', `${this.path}/fork`, { ...call(opts), json, retry: false });
    const d = r.object();
    const sandboxes = arr(d.sandboxes).map((s) => { const i = sandboxInfoFromJson(obj(s)); return new Sandbox(i.id, this.client, i); });
    const errors = arr(d.errors).map((e) => { const o = obj(e); return errorFromCode(str(o.code), str(o.message), undefined, r.requestId); });
    return {
      sandboxes, errors, freezeMs: optNum(d.freeze_ms) ?? 0, capture: str(d.capture), ok: errors.length === 0, raw: d,
      async killAll() { await Promise.all(sandboxes.map((s) => s.kill())); },
    };
  }

  /** Its network: the egress policy in force and its address. */
  async network(opts?: CallOptions): Promise<NetworkPolicy> {
    return networkFromJson((await this.client.request('GET', `${this.path}/network`, call(opts))).object());
  }

  /** Replace its egress policy (the whole policy: what is left out is cleared). */
  async updateNetwork(policy: NetworkOptions, opts?: CallOptions): Promise<NetworkPolicy> {
    return networkFromJson((await this.client.request('PUT', `${this.path}/network`, { ...call(opts), json: networkBody(policy) })).object());
  }

  async networkStats(opts?: CallOptions): Promise<NetworkStats> {
    const d = (await this.client.request('GET', `${this.path}/network/stats`, call(opts))).object();
    return { packetsOut: optInt(d.packets_out) ?? 0, bytesOut: optInt(d.bytes_out) ?? 0, packetsDropped: optInt(d.packets_dropped) ?? 0, bytesDropped: optInt(d.bytes_dropped) ?? 0 };
  }

  /** Its egress log, oldest first, page by page; with `follow`, goes on with each new entry
   * until the sandbox's record is deleted (break out of the loop to stop earlier). */
  async *networkLog(opts: CallOptions & { follow?: boolean; after?: string; pageSize?: number } = {}): AsyncGenerator<NetworkLogEntry> {
    const p = `${this.path}/network/log`;
    if (opts.follow) {
      const s = await this.client.stream('GET', p, { ...call(opts), query: { follow: '1', after: opts.after }, headers: { Accept: 'application/x-ndjson' } });
      try { for await (const d of s.json()) yield networkLogFromJson(d); } finally { s.close(); }
      return;
    }
    const limit = opts.pageSize ?? 1000;
    let after = opts.after;
    for (;;) {
      const d = (await this.client.request('GET', p, { ...call(opts), query: { after, limit } })).object();
      const entries = arr(d.entries);
      for (const e of entries) yield networkLogFromJson(obj(e));
      const next = optStr(d.next);
      if (entries.length < limit || !next || next === after) return;
      after = next;
    }
  }

  /** CPU and memory samples (every 5 s, the last 10 minutes, and one taken now). */
  async metrics(opts?: CallOptions): Promise<MetricSample[]> {
    const d = (await this.client.request('GET', `${this.path}/metrics`, call(opts))).object();
    return arr(d.samples).map((x) => {
      const o = obj(x);
      return { timestamp: date(o.timestamp), cpuPct: optNum(o.cpu_pct) ?? 0, cpuCount: optInt(o.cpu_count) ?? 0, memoryBytes: optInt(o.memory_bytes) ?? 0, memoryLimitBytes: optInt(o.memory_limit_bytes) ?? 0 };
    });
  }

  /** Disk use of its writable layer (measured now), its limit and how the limit is enforced. */
  async diskUsage(opts?: CallOptions): Promise<DiskUsage> {
    const d = (await this.client.request('GET', `${this.path}/disk`, call(opts))).object();
    return { usedBytes: optInt(d.used_bytes) ?? 0, limitBytes: optInt(d.limit_bytes), enforcedBy: optStr(d.enforced_by) };
  }

  /** The TCP sockets listening in the sandbox. */
  async ports(opts?: CallOptions): Promise<PortInfo[]> {
    const d = (await this.client.request('GET', `${this.path}/ports`, call(opts))).object();
    return arr(d.ports).map((x) => { const o = obj(x); return { port: optInt(o.port) ?? 0, address: str(o.address), protocol: str(o.protocol, 'tcp') }; });
  }

  /** The services of a sandbox made from a Compose file, in start order (none for a sandbox
   * made without one). */
  async services(opts?: CallOptions): Promise<ServiceInfo[]> {
    const d = (await this.client.request('GET', `${this.path}/services`, call(opts))).object();
    return arr(d.services).map((s) => serviceFromJson(obj(s)));
  }

  /** Service `name`'s log: its stdout and stderr, and the lines warren-init adds (starts,
   * exits, health checks, restarts); as text (default, UTF-8) or `bytes` (a Uint8Array,
   * unchanged). NotFoundError for a service the sandbox does not have. */
  serviceLogs(name: string, opts?: CallOptions & { format?: 'text' }): Promise<string>;
  serviceLogs(name: string, opts: CallOptions & { format: 'bytes' }): Promise<Uint8Array>;
  async serviceLogs(name: string, opts: CallOptions & { format?: 'text' | 'bytes' } = {}): Promise<string | Uint8Array> {
    const r = await this.client.request('GET', `${this.path}/services/${seg(name)}/logs`, {
      ...call(opts), headers: { Accept: 'application/octet-stream' },
    });
    return opts.format === 'bytes' ? r.body : new TextDecoder().decode(r.body);
  }

  /** Where port `port` of the sandbox is reached through the daemon: E2B's `<port>-<id>.<domain>`
   * when the daemon has a domain, else the native URL `<apiUrl>/v1/sandboxes/<id>/ports/<port>`
   * (which needs the API key). */
  async getHost(port: number, opts?: CallOptions): Promise<string> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError(`port must be 1 to 65535, not ${port}`);
    const domain = (await this.client.version(opts)).domain;
    if (domain) return `${port}-${this.id}.${domain}`;
    const ep = this.client.endpoint;
    const base = ep.scheme === 'unix' ? `http+unix://${encodeURIComponent(ep.socketPath ?? '')}` : ep.origin + ep.basePath;
    return `${base}/v1/sandboxes/${seg(this.id)}/ports/${port}`;
  }

  /** What the sandbox added, changed and deleted against its template (or `against`: a
   * snapshot or a sandbox of its lineage); with `path` and `content`, the text diff of that file. */
  diff(opts: CallOptions & { against?: string; path: string; content: true }): Promise<FileDiff>;
  diff(opts?: CallOptions & { against?: string; path?: string; content?: false }): Promise<Diff>;
  async diff(opts: CallOptions & { against?: string; path?: string; content?: boolean } = {}): Promise<Diff | FileDiff> {
    const d = (await this.client.request('GET', `${this.path}/diff`, {
      ...call(opts), query: { against: opts.against, path: opts.path, content: opts.content ? 1 : undefined },
    })).object();
    if (opts.content) {
      return { path: str(d.path), change: str(d.change), binary: d.binary === true, tooLarge: d.too_large === true, diff: str(d.diff), raw: d };
    }
    const a = obj(d.against);
    return {
      sandboxId: str(d.sandbox_id), against: { kind: str(a.kind), name: str(a.name) }, truncated: d.truncated === true, raw: d,
      changes: arr(d.changes).map((x) => {
        const o = obj(x);
        return { path: str(o.path), change: str(o.change), type: str(o.type), size: optInt(o.size), mode: optStr(o.mode), oldSize: optInt(o.old_size), oldMode: optStr(o.old_mode), from: optStr(o.from) };
      }),
    };
  }

  /** An interactive terminal (a PTY running the user's shell, or `cmd`) over a WebSocket; its
   * output goes to `onData`. Needs an http(s) API URL and a WebSocket (browsers, Node 22+). */
  terminal(opts?: TerminalOptions): Promise<Terminal> { return Terminal.open(this.client, this.id, opts); }

  /** Run a cell in the sandbox's code interpreter (a template such as code-interpreter-v1);
   * ConflictError (code `no_interpreter`) for a sandbox without one. */
  runCode(code: string, opts?: RunCodeOptions): Promise<Execution> { return runCode(this.client, this.id, code, opts); }
  createCodeContext(opts?: CallOptions & { language?: string; cwd?: string }): Promise<CodeContext> { return contexts.create(this.client, this.id, opts); }
  listCodeContexts(opts?: CallOptions): Promise<CodeContext[]> { return contexts.list(this.client, this.id, opts); }
  restartCodeContext(ctx: CodeContext | string, opts?: CallOptions): Promise<void> { return contexts.restart(this.client, this.id, ctx, opts); }
  removeCodeContext(ctx: CodeContext | string, opts?: CallOptions): Promise<void> { return contexts.remove(this.client, this.id, ctx, opts); }

  toString(): string { return `Sandbox(${this.id})`; }
}

export type { VolumeMount };
