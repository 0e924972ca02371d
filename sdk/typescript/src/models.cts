// SPDX-License-Identifier: Apache-2.0
// Plain data returned by the SDK, built from the API's JSON (snake_case there, camelCase here).
// Each object keeps the server's JSON in `raw`.

type J = Record<string, unknown>;

/** @internal */ export function str(v: unknown, dflt = ''): string { return typeof v === 'string' ? v : dflt; }
/** @internal */ export function optStr(v: unknown): string | undefined { return typeof v === 'string' ? v : undefined; }
/** @internal */ export function optInt(v: unknown): number | undefined { return typeof v === 'number' && Number.isInteger(v) ? v : undefined; }
/** @internal */ export function optNum(v: unknown): number | undefined { return typeof v === 'number' && Number.isFinite(v) ? v : undefined; }
/** @internal */ export function obj(v: unknown): J { return v && typeof v === 'object' && !Array.isArray(v) ? (v as J) : {}; }
/** @internal */ export function arr(v: unknown): unknown[] { return Array.isArray(v) ? v : []; }
/** @internal */ export function date(v: unknown): Date | undefined {
  if (typeof v !== 'string' || !v) return undefined;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : new Date(t);
}
function strMap(v: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(obj(v))) out[k] = String(x);
  return out;
}

export type SandboxState = 'creating' | 'running' | 'paused' | 'stopped' | 'error';

/** A volume mounted in a sandbox. `Sandbox.create({volumes})` also takes `"NAME:/path[:ro]"`. */
export interface VolumeMount { name: string; path: string; readonly: boolean }

/** @internal */
export function parseVolumeMount(spec: string | VolumeMount | { name: string; path: string; readonly?: boolean }): VolumeMount {
  if (typeof spec !== 'string') return { name: spec.name, path: spec.path, readonly: !!spec.readonly };
  const parts = spec.split(':');
  if (parts.length === 3 && (parts[2] === 'ro' || parts[2] === 'rw')) return { name: parts[0]!, path: parts[1]!, readonly: parts[2] === 'ro' };
  if (parts.length === 2) return { name: parts[0]!, path: parts[1]!, readonly: false };
  throw new TypeError(`volume ${JSON.stringify(spec)} must be NAME:/path or NAME:/path:ro`);
}

/** A sandbox's network (docs/networking.md). */
export interface NetworkPolicy {
  enabled: boolean;
  internet: boolean;
  allowOut: string[];
  denyOut: string[];
  maxConnections: number | undefined;
  address: string | undefined;
  portsPublic: boolean;
  maskHost: string | undefined;
  raw: J;
}

/** @internal */
export function networkFromJson(d: J): NetworkPolicy {
  const ports = obj(d.ports);
  return {
    enabled: !!d.enabled,
    internet: !!d.internet,
    allowOut: arr(d.allow_out).map(String),
    denyOut: arr(d.deny_out).map(String),
    maxConnections: optInt(d.max_connections),
    address: optStr(d.address),
    portsPublic: ports.public !== false,
    maskHost: optStr(ports.mask_host),
    raw: d,
  };
}

/** A sandbox as the API describes it. */
export interface SandboxInfo {
  id: string;
  /** Alias of `id` (the E2B name). */
  sandboxId: string;
  template: string;
  state: SandboxState | string;
  reason: string | undefined;
  cpus: number;
  memoryMb: number;
  diskMb: number | undefined;
  createdAt: Date | undefined;
  expiresAt: Date | undefined;
  metadata: Record<string, string>;
  onTimeout: 'kill' | 'pause' | string;
  timeout: number | undefined;
  pausedMode: 'memory' | 'disk' | undefined;
  remainingMs: number | undefined;
  /** Set by resume only: true when the same processes went on (a pause in memory). */
  processesKept: boolean | undefined;
  volumes: VolumeMount[];
  network: NetworkPolicy | undefined;
  /** Its isolation backend: `ns` or `gvisor`. */
  runtime: 'ns' | 'gvisor' | string;
  /** The host devices it holds (CDI names). */
  devices: string[];
  /** The services of the Compose file it was made from, in start order (empty for none). */
  services: string[];
  raw: J;
}

/** @internal */
export function sandboxInfoFromJson(d: J): SandboxInfo {
  const id = str(d.id);
  const pm = d.paused_mode;
  return {
    id,
    sandboxId: id,
    template: str(d.template),
    state: str(d.state),
    reason: optStr(d.reason),
    cpus: optNum(d.cpus) ?? 0,
    memoryMb: optInt(d.memory_mb) ?? 0,
    diskMb: optInt(d.disk_mb),
    createdAt: date(d.created_at),
    expiresAt: date(d.expires_at),
    metadata: strMap(d.metadata),
    onTimeout: str(d.on_timeout, 'kill'),
    timeout: optInt(d.timeout),
    pausedMode: pm === 'memory' || pm === 'disk' ? pm : undefined,
    remainingMs: optInt(d.remaining_ms),
    processesKept: typeof d.processes_kept === 'boolean' ? d.processes_kept : undefined,
    volumes: arr(d.volumes).map((v) => { const o = obj(v); return { name: str(o.name), path: str(o.path), readonly: !!o.readonly }; }),
    network: d.network && typeof d.network === 'object' ? networkFromJson(obj(d.network)) : undefined,
    runtime: str(d.runtime, 'ns'),
    devices: arr(d.devices).filter((x): x is string => typeof x === 'string'),
    services: arr(d.services).filter((x): x is string => typeof x === 'string'),
    raw: d,
  };
}

export type FileType = 'file' | 'dir' | 'symlink' | 'other';

/** A file system entry. `mode` is the permission bits as a number (0o644), `permissions` the
 * API's octal string ("0644"). */
export interface FileInfo {
  name: string;
  path: string;
  type: FileType;
  size: number;
  mode: number;
  permissions: string;
  mtime: Date | undefined;
  uid: number | undefined;
  gid: number | undefined;
  /** A symlink's target. */
  link: string | undefined;
  isDir: boolean;
  isFile: boolean;
  isSymlink: boolean;
  raw: J;
}

/** @internal */
export function fileInfoFromJson(d: J): FileInfo {
  const t = str(d.type, 'other');
  const type: FileType = t === 'file' || t === 'dir' || t === 'symlink' ? t : 'other';
  let mode = 0;
  if (typeof d.mode === 'string') { const m = parseInt(d.mode, 8); mode = Number.isNaN(m) ? 0 : m; }
  else if (typeof d.mode === 'number') mode = d.mode;
  return {
    name: str(d.name), path: str(d.path), type, size: optInt(d.size) ?? 0, mode,
    permissions: mode.toString(8).padStart(4, '0'),
    mtime: date(d.mtime), uid: optInt(d.uid), gid: optInt(d.gid), link: optStr(d.link),
    isDir: type === 'dir', isFile: type === 'file', isSymlink: type === 'symlink', raw: d,
  };
}

/** A service of a sandbox made from a Compose file (`sb.services()`). `state`: `waiting` (for
 * the services it depends on), `starting`, `running`, `healthy` / `unhealthy` (by its
 * healthcheck), `restarting`, `exited`, `failed` or `defining`. `pid`: its process inside the
 * sandbox while it runs; `exitCode`/`signal`: how it last ended; `message`: what warren-init
 * said about it. */
export interface ServiceInfo {
  name: string;
  image: string;
  state: 'waiting' | 'starting' | 'running' | 'healthy' | 'unhealthy' | 'restarting' | 'exited' | 'failed' | 'defining' | string;
  ports: number[];
  pid: number | undefined;
  restarts: number;
  exitCode: number | undefined;
  signal: number | undefined;
  message: string | undefined;
  raw: J;
}

/** @internal */
export function serviceFromJson(d: J): ServiceInfo {
  return {
    name: str(d.name), image: str(d.image), state: str(d.state),
    ports: arr(d.ports).filter((p): p is number => optInt(p) !== undefined),
    pid: optInt(d.pid), restarts: optInt(d.restarts) ?? 0, exitCode: optInt(d.exit_code), signal: optInt(d.signal),
    message: optStr(d.message), raw: d,
  };
}

/** A process started through the API. `pid` is the API's id; `osPid` the pid inside. */
export interface ProcessInfo {
  pid: number;
  cmd: string[];
  running: boolean;
  osPid: number | undefined;
  pty: boolean;
  tag: string | undefined;
  exitCode: number | undefined;
  signal: number | undefined;
  raw: J;
}

/** @internal */
export function processFromJson(d: J): ProcessInfo {
  return {
    pid: optInt(d.pid) ?? 0, cmd: arr(d.cmd).map(String), running: !!d.running, osPid: optInt(d.os_pid),
    pty: !!d.pty, tag: optStr(d.tag), exitCode: optInt(d.exit_code), signal: optInt(d.signal), raw: d,
  };
}

const dec = new TextDecoder();

/** What one command used (docs/usage.md, "Per-command usage"): `source` is `rusage` (warren-init's
 * wait4: the command and the descendants it waited for; the peak is the largest single resident
 * set) or `cgroup` (its own cgroup, read by the daemon: every process it started, summed). */
export interface CommandUsage {
  cpuSeconds: number;
  memoryPeakBytes: number;
  wallSeconds: number;
  source: 'rusage' | 'cgroup' | string;
}

/** @internal */
export function usageFromJson(d: unknown): CommandUsage | undefined {
  if (d === null || typeof d !== 'object') return undefined;
  const u = d as J;
  const num = (v: unknown): number => (typeof v === 'number' ? v : 0);
  return { cpuSeconds: num(u.cpu_seconds), memoryPeakBytes: num(u.memory_peak_bytes), wallSeconds: num(u.wall_seconds), source: typeof u.source === 'string' ? u.source : 'rusage' };
}

/** The outcome of a command: `stdout`/`stderr` decoded as UTF-8 (invalid sequences become
 * U+FFFD), `stdoutBytes`/`stderrBytes` the exact bytes. `exitCode` is undefined when a signal
 * killed it (`signal` is then set). */
export class CommandResult {
  readonly exitCode: number | undefined;
  readonly signal: number | undefined;
  readonly stdoutBytes: Uint8Array;
  readonly stderrBytes: Uint8Array;
  readonly pid: number | undefined;
  readonly timedOut: boolean;
  readonly stdoutTruncated: boolean;
  readonly stderrTruncated: boolean;
  /** What it used, when the server said (every Warren of this version does). */
  readonly usage: CommandUsage | undefined;
  constructor(f: { exitCode?: number | undefined; signal?: number | undefined; stdoutBytes?: Uint8Array; stderrBytes?: Uint8Array; pid?: number | undefined; timedOut?: boolean; stdoutTruncated?: boolean; stderrTruncated?: boolean; usage?: CommandUsage | undefined }) {
    this.exitCode = f.exitCode;
    this.signal = f.signal;
    this.stdoutBytes = f.stdoutBytes ?? new Uint8Array(0);
    this.stderrBytes = f.stderrBytes ?? new Uint8Array(0);
    this.pid = f.pid;
    this.timedOut = !!f.timedOut;
    this.stdoutTruncated = !!f.stdoutTruncated;
    this.stderrTruncated = !!f.stderrTruncated;
    this.usage = f.usage;
  }
  get stdout(): string { return dec.decode(this.stdoutBytes); }
  get stderr(): string { return dec.decode(this.stderrBytes); }
  /** True when the command exited with code 0 (and did not time out). */
  get ok(): boolean { return this.exitCode === 0 && !this.timedOut; }
  /** A short description of the failure, or undefined when ok (as E2B's `error`). */
  get error(): string | undefined {
    if (this.ok) return undefined;
    if (this.timedOut) return 'timed out';
    if (this.exitCode === undefined) return `killed by signal ${this.signal}`;
    return `exit code ${this.exitCode}`;
  }
}

/** One event of a command's output stream: `start` (pid), `stdout`/`stderr` (data), `exit`
 * (exitCode, signal, timedOut) or `error` (code, message). */
export interface CommandEvent {
  type: 'start' | 'stdout' | 'stderr' | 'exit' | 'error' | string;
  data: Uint8Array;
  text: string;
  pid: number | undefined;
  exitCode: number | undefined;
  signal: number | undefined;
  timedOut: boolean;
  code: string | undefined;
  message: string | undefined;
  /** exit: what the command used */
  usage: CommandUsage | undefined;
}

/** @internal */
export function b64decode(s: string): Uint8Array {
  const B = (globalThis as { Buffer?: { from(s: string, e: string): Uint8Array } }).Buffer;
  if (B) return B.from(s, 'base64');
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** @internal */
export function b64encode(b: Uint8Array): string {
  const B = (globalThis as { Buffer?: { from(b: Uint8Array): { toString(e: string): string } } }).Buffer;
  if (B) return B.from(b).toString('base64');
  let bin = '';
  for (let i = 0; i < b.length; i++) bin += String.fromCharCode(b[i]!);
  return btoa(bin);
}

/** @internal */
export function commandEventFromJson(d: J, encoding: 'base64' | 'utf8'): CommandEvent {
  let data: Uint8Array = new Uint8Array(0);
  if (typeof d.data === 'string') data = encoding === 'base64' ? b64decode(d.data) : new TextEncoder().encode(d.data);
  return {
    type: str(d.type), data, get text() { return dec.decode(data); }, pid: optInt(d.pid), exitCode: optInt(d.exit_code),
    signal: optInt(d.signal), timedOut: !!d.timed_out, code: optStr(d.code), message: optStr(d.message),
    usage: usageFromJson(d.usage),
  } as CommandEvent;
}

/** A change under a watched directory (`name` relative to the watched path). */
export interface FilesystemEvent { type: 'create' | 'write' | 'remove' | 'rename' | 'chmod' | string; name: string }

/** One entry of a sandbox's egress log. */
export interface NetworkLogEntry {
  id: string; time: Date | undefined; proto: string; address: string; port: number; name: string | undefined;
  bytesOut: number; bytesIn: number; allowed: boolean; rule: string; raw: J;
}

/** @internal */
export function networkLogFromJson(d: J): NetworkLogEntry {
  return {
    id: str(d.id), time: date(d.time), proto: str(d.proto), address: str(d.address), port: optInt(d.port) ?? 0,
    name: optStr(d.name), bytesOut: optInt(d.bytes_out) ?? 0, bytesIn: optInt(d.bytes_in) ?? 0,
    allowed: d.allowed === true, rule: str(d.rule), raw: d,
  };
}

export interface NetworkStats { packetsOut: number; bytesOut: number; packetsDropped: number; bytesDropped: number }

/** A CPU and memory sample of `sb.metrics()`. */
export interface MetricSample { timestamp: Date | undefined; cpuPct: number; cpuCount: number; memoryBytes: number; memoryLimitBytes: number }

/** `sb.diskUsage()`: the writable layer's use, its limit, and what enforces it. */
export interface DiskUsage { usedBytes: number; limitBytes: number | undefined; enforcedBy: string | undefined }

/** A listening socket of `sb.ports()`. */
export interface PortInfo { port: number; address: string; protocol: string }

/** A named volume of the team (`diskBytes` set by `Volume.get`). */
export interface VolumeInfo { name: string; createdAt: Date | undefined; diskBytes: number | undefined; raw: J }

/** @internal */
export function volumeFromJson(d: J): VolumeInfo {
  return { name: str(d.name), createdAt: date(d.created_at), diskBytes: optInt(d.disk_bytes), raw: d };
}

/** An API key's record (never its secret, except `key` in what createKey returns). */
export interface ApiKey { id: string; team: string; name: string; admin: boolean; createdAt: Date | undefined; key?: string; raw: J }

/** @internal */
export function apiKeyFromJson(d: J): ApiKey {
  const k: ApiKey = { id: str(d.id), team: str(d.team), name: str(d.name), admin: !!d.admin, createdAt: date(d.created_at), raw: d };
  if (typeof d.key === 'string') k.key = d.key;
  return k;
}

/** `runtime`: the isolation backend of a create that names none (and its template none);
 * `runtimes`: the backends a create may ask for there that can run (`ns`, `gvisor`); `team` and
 * `admin`: whose the client's key is (the console's sign-in asks this). */
export interface VersionInfo { version: string; api: string; runtime: string; runtimes: string[]; cgroup: string; domain: string | undefined; team: string; admin: boolean; raw: J }

/** @internal */
export function versionFromJson(d: J): VersionInfo {
  return {
    version: str(d.version), api: str(d.api), runtime: str(d.runtime), runtimes: arr(d.runtimes).filter((r): r is string => typeof r === 'string'),
    cgroup: str(d.cgroup), domain: optStr(d.domain) || undefined, team: str(d.team), admin: d.admin === true, raw: d,
  };
}

/** One group's sums of the usage ledger (`client.usage()`, docs/usage.md): the group's key is
 * `sandbox`, `template` or `day` (YYYY-MM-DD, UTC) by `groupBy`. */
export interface UsageRow {
  sandbox: string | undefined;
  template: string | undefined;
  day: string | undefined;
  team: string;
  from: Date | undefined;
  to: Date | undefined;
  intervals: number;
  sandboxSeconds: number;
  pausedSeconds: number;
  vcpuSeconds: number;
  cpuSeconds: number;
  gibSeconds: number;
  memoryGibSecondsMeasured: number;
  billedVcpuSeconds: number;
  peakMemoryBytes: number;
  netBytesIn: number;
  netBytesOut: number;
  raw: J;
}

/** A storage sample of the usage ledger: bytes a team keeps, by kind. */
export interface StorageSample { time: Date | undefined; team: string; kind: 'template' | 'snapshot' | 'paused' | 'volume' | string; bytes: number }

/** What `client.usage()` answers. `billedSeconds`: what `billedVcpuSeconds` counts (`allocated`,
 * `measured` or `max`). */
export interface UsageReport { billedSeconds: string; groupBy: string; team: string | undefined; rows: UsageRow[]; storage: StorageSample[]; raw: J }

/** @internal */
export function usageReportFromJson(d: J): UsageReport {
  const n = (v: unknown): number => optNum(v) ?? 0;
  return {
    billedSeconds: str(d.billed_seconds), groupBy: str(d.group_by), team: optStr(d.team), raw: d,
    rows: arr(d.rows).map((x) => {
      const o = obj(x);
      return {
        sandbox: optStr(o.sandbox), template: optStr(o.template), day: optStr(o.day), team: str(o.team), from: date(o.from), to: date(o.to),
        intervals: n(o.intervals), sandboxSeconds: n(o.sandbox_seconds), pausedSeconds: n(o.paused_seconds), vcpuSeconds: n(o.vcpu_seconds),
        cpuSeconds: n(o.cpu_seconds), gibSeconds: n(o.gib_seconds), memoryGibSecondsMeasured: n(o.memory_gib_seconds_measured),
        billedVcpuSeconds: n(o.billed_vcpu_seconds), peakMemoryBytes: n(o.peak_memory_bytes), netBytesIn: n(o.net_bytes_in),
        netBytesOut: n(o.net_bytes_out), raw: o,
      };
    }),
    storage: arr(d.storage).map((x) => { const o = obj(x); return { time: date(o.time), team: str(o.team), kind: str(o.kind), bytes: n(o.bytes) }; }),
  };
}

/** A token bucket of a team's limits: `rate` per second (0: none) and its `burst`. */
export interface LimitBucket { rate: number; burst: number }

/** A team's limits in force (`client.teamLimits()`, docs/operations.md "Limits"); 0 is no quota. */
export interface TeamLimits {
  team: string; requests: LimitBucket; creates: LimitBucket; bytes: LimitBucket;
  maxSandboxes: number; maxMemoryMb: number; overrides: J; raw: J;
}

/** @internal */
export function teamLimitsFromJson(d: J): TeamLimits {
  const b = (v: unknown): LimitBucket => { const o = obj(v); return { rate: optNum(o.rate) ?? 0, burst: optInt(o.burst) ?? 0 }; };
  return {
    team: str(d.team), requests: b(d.requests), creates: b(d.creates), bytes: b(d.bytes),
    maxSandboxes: optInt(d.max_sandboxes) ?? 0, maxMemoryMb: optInt(d.max_memory_mb) ?? 0, overrides: obj(d.overrides), raw: d,
  };
}
