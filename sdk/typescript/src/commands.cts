// SPDX-License-Identifier: Apache-2.0
// Running commands in a sandbox: `sandbox.commands`.

import { type CallOptions, type Client, type StreamResponse, call, seg } from './client.cjs';
import { APIConnectionError, CommandExitError, ConflictError, NotFoundError, type WarrenError, errorFromCode } from './errors.cjs';
import {
  type CommandEvent, CommandResult, type CommandUsage, type ProcessInfo, arr, b64decode, b64encode, commandEventFromJson, obj, optInt,
  processFromJson, usageFromJson,
} from './models.cjs';

/** Receives output decoded as UTF-8 (a character split between chunks is kept whole). */
export type OutputCallback = (text: string) => void | Promise<void>;
/** A signal: a number (Linux numbering) or a name ("TERM", "SIGTERM"). */
export type Signal = number | string;

export interface RunOptions extends CallOptions {
  env?: Record<string, string>;
  cwd?: string;
  user?: string;
  /** Seconds after which the server SIGKILLs the command (0: none). */
  timeout?: number;
  /** Written to the command's stdin, which is then closed. */
  stdin?: string | Uint8Array;
  onStdout?: OutputCallback;
  onStderr?: OutputCallback;
  /** Return a CommandHandle once the command started instead of waiting for it. */
  background?: boolean;
  /** Throw CommandExitError for a non-zero exit, a signal or a timeout (default true). */
  check?: boolean;
  /** Bytes kept per stream without callbacks (server default 10 MiB). */
  maxOutput?: number;
  /** Limits of this command's own, below the sandbox's (a cgroup of its own; more than the
   * sandbox has: InvalidArgumentError `exceeds_sandbox`). */
  cpus?: number;
  memoryMb?: number;
  /** `cgroup`: measure its usage in a cgroup of its own even without limits. */
  usage?: 'rusage' | 'cgroup';
  /** In a sandbox made from a Compose file: run it inside this service (its root, environment,
   * working directory and user; `sb.services()` lists them). */
  service?: string;
}

export interface WaitOptions extends CallOptions {
  /** Seconds to wait at most (TimeoutError from the server after). */
  timeout?: number;
  /** Override the handle's check. */
  check?: boolean;
}

const NDJSON = { Accept: 'application/x-ndjson' };
const WAIT_MARGIN_MS = 30_000;

class Output {
  stdout: Uint8Array[] = [];
  stderr: Uint8Array[] = [];
  private dec = { stdout: new TextDecoder(), stderr: new TextDecoder() };
  constructor(private cb: { stdout?: OutputCallback | undefined; stderr?: OutputCallback | undefined }) {}
  async feed(stream: 'stdout' | 'stderr', data: Uint8Array): Promise<void> {
    this[stream].push(data);
    const cb = this.cb[stream];
    if (cb && data.length) {
      const text = this.dec[stream].decode(data, { stream: true });
      if (text) await cb(text);
    }
  }
  async flush(): Promise<void> {
    for (const s of ['stdout', 'stderr'] as const) {
      const cb = this.cb[s];
      if (cb) { const t = this.dec[s].decode(); if (t) await cb(t); }
    }
  }
  bytes(s: 'stdout' | 'stderr'): Uint8Array {
    const parts = this[s];
    const n = parts.reduce((a, p) => a + p.length, 0);
    const out = new Uint8Array(n);
    let o = 0;
    for (const p of parts) { out.set(p, o); o += p.length; }
    return out;
  }
  result(ev: { exitCode?: number | undefined; signal?: number | undefined; timedOut?: boolean; usage?: CommandUsage | undefined } | undefined, pid: number | undefined): CommandResult {
    return new CommandResult({ exitCode: ev?.exitCode, signal: ev?.signal, timedOut: ev?.timedOut ?? false, stdoutBytes: this.bytes('stdout'), stderrBytes: this.bytes('stderr'), pid, usage: ev?.usage });
  }
}

function eventError(ev: CommandEvent, requestId: string | undefined): WarrenError {
  return errorFromCode(ev.code ?? 'internal', ev.message ?? "the command's stream failed", undefined, requestId);
}

function seconds(v: number): number {
  if (!(v >= 0)) throw new RangeError('timeout must be >= 0');
  return Math.ceil(v);
}

/** A command running in the sandbox (`run(..., {background: true})` or `commands.connect(pid)`).
 * With callbacks its output goes to them as it comes; `for await (const ev of handle)` attaches
 * and yields its events; `wait()` returns the result (with the output, when it was read). */
export class CommandHandle implements AsyncIterable<CommandEvent> {
  private reader: Promise<CommandResult | undefined> | undefined;
  private stream: StreamResponse | undefined;
  private out: Output | undefined;
  private exitEv: CommandEvent | undefined;

  /** @internal */
  constructor(private readonly commands: Commands, readonly pid: number, private readonly check = true) {}

  /** @internal Read the rest of `events` in the background into `out`. */
  startReader(stream: StreamResponse, events: AsyncIterator<Record<string, unknown>>, out: Output, encoding: 'base64' | 'utf8'): void {
    this.stream = stream;
    this.out = out;
    this.reader = (async () => {
      try {
        for (;;) {
          const n = await events.next();
          if (n.done) break;
          const ev = commandEventFromJson(n.value, encoding);
          if (ev.type === 'stdout' || ev.type === 'stderr') await out.feed(ev.type, ev.data);
          else if (ev.type === 'exit') { this.exitEv = ev; await out.flush(); return out.result(ev, this.pid); }
          else if (ev.type === 'error') throw eventError(ev, stream.requestId);
        }
        return undefined;
      } finally { stream.close(); }
    })();
    this.reader.catch(() => {}); // surfaced by wait()
  }

  /** Wait for the command to end. Throws CommandExitError when it failed and check is on. */
  async wait(opts: WaitOptions = {}): Promise<CommandResult> {
    const check = opts.check ?? this.check;
    let result: CommandResult | undefined;
    if (this.reader) {
      result = await this.reader;
      if (!result) {
        const info = await this.commands.waitProcess(this.pid, opts);
        result = this.out!.result({ exitCode: info.exitCode, signal: info.signal }, this.pid);
      }
    } else {
      // Attach: the server replays the output kept since the start (its last 1 MiB), then the rest.
      const out = new Output({});
      let exit: CommandEvent | undefined;
      for await (const ev of this.events(opts)) {
        if (ev.type === 'stdout' || ev.type === 'stderr') await out.feed(ev.type, ev.data);
        else if (ev.type === 'exit') exit = ev;
      }
      if (exit) result = out.result(exit, this.pid);
      else {
        const info = await this.commands.waitProcess(this.pid, opts);
        result = out.result({ exitCode: info.exitCode, signal: info.signal }, this.pid);
      }
    }
    if (check && !result.ok) throw new CommandExitError(result);
    return result;
  }

  /** Attach and yield the process's events (its kept output first, then as it comes, then exit). */
  async *events(opts: CallOptions = {}): AsyncGenerator<CommandEvent> {
    const s = await this.commands.attach(this.pid, opts);
    for await (const d of s.json()) {
      const ev = commandEventFromJson(d, 'base64');
      yield ev;
      if (ev.type === 'error') throw eventError(ev, s.requestId);
      if (ev.type === 'exit') return;
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<CommandEvent> { return this.events(); }

  /** Stop reading output (callbacks are not called any more); the command goes on. */
  disconnect(): void { this.stream?.close(); }
  /** SIGKILL the process's group; false if there was no such running process. */
  kill(opts?: CallOptions): Promise<boolean> { return this.commands.kill(this.pid, opts); }
  signal(sig: Signal, opts?: CallOptions): Promise<void> { return this.commands.signal(this.pid, sig, opts); }
  sendStdin(data: string | Uint8Array, opts?: CallOptions): Promise<void> { return this.commands.sendStdin(this.pid, data, opts); }
  closeStdin(opts?: CallOptions): Promise<void> { return this.commands.closeStdin(this.pid, opts); }
  /** Resize the terminal of a pty process. */
  async resize(rows: number, cols: number, opts?: CallOptions): Promise<void> {
    await this.commands.client.request('POST', this.commands.proc(this.pid, '/resize'), { ...call(opts), json: { rows, cols } });
  }
  info(opts?: CallOptions): Promise<ProcessInfo> { return this.commands.get(this.pid, opts); }
  /** The exit event, once the reader saw it. */
  get exited(): boolean { return this.exitEv !== undefined; }
}

/** `sandbox.commands`. */
export class Commands {
  private readonly base: string;
  /** @internal */
  constructor(readonly client: Client, readonly sandboxId: string) {
    this.base = `/v1/sandboxes/${seg(sandboxId)}`;
  }

  /** @internal */
  proc(pid: number, suffix = ''): string { return `${this.base}/processes/${seg(pid)}${suffix}`; }

  /** Run `cmd`: a string is a shell command line (`/bin/sh -c`), an array an argv. Foreground
   * (default): resolves to a CommandResult once it ended (streaming the output to
   * onStdout/onStderr as it comes); `background: true` resolves to a CommandHandle once it
   * started. */
  run(cmd: string | string[], opts: RunOptions & { background: true }): Promise<CommandHandle>;
  run(cmd: string | string[], opts?: RunOptions & { background?: false }): Promise<CommandResult>;
  run(cmd: string | string[], opts?: RunOptions): Promise<CommandResult | CommandHandle>;
  async run(cmd: string | string[], opts: RunOptions = {}): Promise<CommandResult | CommandHandle> {
    if (typeof cmd === 'string' ? !cmd : !cmd.length) throw new TypeError('empty command');
    const body: Record<string, unknown> = { cmd: typeof cmd === 'string' ? cmd : [...cmd] };
    if (opts.env && Object.keys(opts.env).length) body.env = opts.env;
    if (opts.cwd !== undefined) body.cwd = opts.cwd;
    if (opts.user !== undefined) body.user = opts.user;
    if (opts.timeout !== undefined) body.timeout = seconds(opts.timeout);
    if (opts.stdin !== undefined && !opts.background) {
      if (typeof opts.stdin === 'string') body.stdin = opts.stdin;
      else { body.stdin = b64encode(opts.stdin); body.stdin_encoding = 'base64'; }
    }
    if (opts.maxOutput !== undefined) body.max_output = opts.maxOutput;
    if (opts.cpus !== undefined) body.cpus = opts.cpus;
    if (opts.memoryMb !== undefined) body.memory_mb = Math.trunc(opts.memoryMb);
    if (opts.usage !== undefined) body.usage = opts.usage;
    if (opts.service !== undefined) body.service = opts.service;
    const check = opts.check ?? true;
    const c = call(opts);
    if (c.requestTimeoutMs === undefined) c.requestTimeoutMs = body.timeout ? (body.timeout as number) * 1000 + WAIT_MARGIN_MS : 0;
    const streaming = !!(opts.onStdout || opts.onStderr);
    // exec has side effects: never repeated.
    if (opts.background && !streaming) {
      body.mode = 'background';
      const r = await this.client.request('POST', `${this.base}/exec`, { ...call(opts), json: body, retry: false });
      const h = new CommandHandle(this, processFromJson(r.object()).pid, check);
      if (opts.stdin !== undefined) { await h.sendStdin(opts.stdin, c); await h.closeStdin(c); }
      return h;
    }
    if (!streaming) {
      body.mode = 'wait';
      body.encoding = 'base64';
      const r = await this.client.request('POST', `${this.base}/exec`, { ...c, json: body, retry: false });
      const d = r.object();
      const result = new CommandResult({
        exitCode: optInt(d.exit_code), signal: optInt(d.signal),
        stdoutBytes: typeof d.stdout === 'string' ? b64decode(d.stdout) : undefined,
        stderrBytes: typeof d.stderr === 'string' ? b64decode(d.stderr) : undefined,
        pid: optInt(d.pid), timedOut: !!d.timed_out, stdoutTruncated: !!d.stdout_truncated, stderrTruncated: !!d.stderr_truncated,
        usage: usageFromJson(d.usage),
      });
      if (check && !result.ok) throw new CommandExitError(result);
      return result;
    }
    body.mode = 'stream';
    body.encoding = 'base64';
    const stream = await this.client.stream('POST', `${this.base}/exec`, { ...c, json: body, headers: NDJSON, retry: false });
    const events = stream.json();
    const out = new Output({ stdout: opts.onStdout, stderr: opts.onStderr });
    let pid: number | undefined;
    if (opts.background) {
      try {
        for (;;) {
          const n = await events.next();
          if (n.done) throw new APIConnectionError('connection', 'the exec stream ended before the command started', undefined, stream.requestId);
          const ev = commandEventFromJson(n.value, 'base64');
          if (ev.type === 'start' && ev.pid !== undefined) {
            const h = new CommandHandle(this, ev.pid, check);
            h.startReader(stream, events, out, 'base64');
            if (opts.stdin !== undefined) { await h.sendStdin(opts.stdin, c); await h.closeStdin(c); }
            return h;
          }
          if (ev.type === 'error') throw eventError(ev, stream.requestId);
        }
      } catch (e) { stream.close(); throw e; }
    }
    let done = false;
    try {
      for await (const d of events) {
        const ev = commandEventFromJson(d, 'base64');
        if (ev.type === 'start') pid = ev.pid;
        else if (ev.type === 'stdout' || ev.type === 'stderr') await out.feed(ev.type, ev.data);
        else if (ev.type === 'exit') {
          done = true;
          await out.flush();
          const result = out.result(ev, pid);
          if (check && !result.ok) throw new CommandExitError(result);
          return result;
        } else if (ev.type === 'error') { done = true; throw eventError(ev, stream.requestId); }
      }
      done = true;
      throw new APIConnectionError('connection', `the exec stream ended before the command's exit (process ${pid} may still run)`, undefined, stream.requestId);
    } catch (e) {
      // A callback failed or the call was aborted: do not leave the command running.
      if (!done && pid !== undefined) await this.kill(pid).catch(() => false);
      throw e;
    } finally { stream.close(); }
  }

  /** The processes started through the API (running, and ended until released). */
  async list(opts?: CallOptions): Promise<ProcessInfo[]> {
    const d = (await this.client.request('GET', `${this.base}/processes`, call(opts))).object();
    return arr(d.processes).map((p) => processFromJson(obj(p)));
  }

  async get(pid: number, opts?: CallOptions): Promise<ProcessInfo> {
    return processFromJson((await this.client.request('GET', this.proc(pid), call(opts))).object());
  }

  /** A handle on a running (or ended) process; with callbacks its output from now on goes to
   * them. NotFoundError if there is no such process. */
  async connect(pid: number, opts: { onStdout?: OutputCallback; onStderr?: OutputCallback; check?: boolean } & CallOptions = {}): Promise<CommandHandle> {
    const h = new CommandHandle(this, pid, opts.check ?? true);
    if (!opts.onStdout && !opts.onStderr) { await this.get(pid, opts); return h; }
    const s = await this.attach(pid, opts);
    h.startReader(s, s.json(), new Output({ stdout: opts.onStdout, stderr: opts.onStderr }), 'base64');
    return h;
  }

  /** SIGKILL the process's group; false if there was no such running process. */
  async kill(pid: number, opts?: CallOptions): Promise<boolean> {
    try { await this.signal(pid, 'SIGKILL', opts); } catch (e) {
      if (e instanceof NotFoundError || e instanceof ConflictError) return false;
      throw e;
    }
    return true;
  }

  async signal(pid: number, sig: Signal, opts?: CallOptions): Promise<void> {
    await this.client.request('POST', this.proc(pid, '/signal'), { ...call(opts), json: { signal: sig } });
  }

  async sendStdin(pid: number, data: string | Uint8Array, opts?: CallOptions): Promise<void> {
    const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
    await this.client.request('POST', this.proc(pid, '/stdin'), { ...call(opts), body: bytes, retry: false });
  }

  async closeStdin(pid: number, opts?: CallOptions): Promise<void> {
    await this.client.request('POST', this.proc(pid, '/stdin/close'), call(opts));
  }

  /** Forget an ended process (ConflictError while it runs). */
  async release(pid: number, opts?: CallOptions): Promise<void> {
    await this.client.request('DELETE', this.proc(pid), call(opts));
  }

  /** @internal */
  attach(pid: number, opts: CallOptions = {}): Promise<StreamResponse> {
    return this.client.stream('GET', this.proc(pid, '/attach'), { ...call(opts), query: { encoding: 'base64' }, headers: NDJSON });
  }

  /** @internal */
  async waitProcess(pid: number, opts: WaitOptions = {}): Promise<ProcessInfo> {
    const c = call(opts);
    const query: Record<string, number> = {};
    if (opts.timeout !== undefined) query.timeout = seconds(opts.timeout);
    if (c.requestTimeoutMs === undefined) c.requestTimeoutMs = opts.timeout !== undefined ? query.timeout! * 1000 + WAIT_MARGIN_MS : 0;
    return processFromJson((await this.client.request('GET', this.proc(pid, '/wait'), { ...c, query })).object());
  }
}
