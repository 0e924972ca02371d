// SPDX-License-Identifier: Apache-2.0
// An interactive terminal in a sandbox: `sb.terminal()`, a PTY over the WebSocket of
// GET /v1/sandboxes/{id}/terminal. Works wherever there is a standard WebSocket (browsers, Node
// 22+, Node 20 with --experimental-websocket, or one passed in). The key goes in the
// subprotocols offered (`warren`, `warren.key.<key>`), since a browser's WebSocket cannot send
// an Authorization header (docs/console.md).

import { type CallOptions, type Client, seg } from './client.cjs';
import { APIConnectionError, AbortError, errorFromCode } from './errors.cjs';
import { optInt } from './models.cjs';

/** The part of the standard WebSocket a terminal uses. */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  readonly protocol: string;
  send(data: string | ArrayBufferLike | ArrayBufferView): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: string, listener: (ev: { data?: unknown; code?: number; reason?: string }) => void): void;
}
/** A WebSocket constructor (the standard one's shape). */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

export interface TerminalOptions extends Pick<CallOptions, 'signal'> {
  /** A shell command line to run instead of the user's shell. */
  cmd?: string;
  rows?: number;
  cols?: number;
  user?: string;
  cwd?: string;
  /** Called with each piece of the terminal's output. */
  onData?: (data: Uint8Array) => void;
  /** Called once when the terminal's process ends (or the connection does: both undefined). */
  onExit?: (exit: TerminalExit) => void;
  /** The WebSocket class to use (default the global WebSocket). */
  WebSocket?: WebSocketConstructor;
  /** Milliseconds to wait for the connection (default the client's timeout). */
  requestTimeoutMs?: number;
}

/** How a terminal's process ended: its exit code, or the signal that killed it. */
export interface TerminalExit { exitCode: number | undefined; signal: number | undefined }

/** The subprotocols that name a key to the daemon (`warren` is the one it answers with). */
export const TERMINAL_PROTOCOL = 'warren';
const KEY_PROTOCOL_PREFIX = 'warren.key.';
// RFC 6455: a subprotocol is an HTTP token.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

function checkSize(v: number | undefined, what: string): void {
  if (v !== undefined && (!Number.isInteger(v) || v < 1 || v > 65535)) throw new RangeError(`${what} must be 1 to 65535, not ${v}`);
}

/** A terminal in a sandbox. `write()` types into it, `resize()` tells its new size; the output
 * goes to `onData`; `exited` resolves when its process ends or the connection closes. */
export class Terminal {
  /** Resolves once the process has ended or the connection closed (both fields undefined then). */
  readonly exited: Promise<TerminalExit>;
  private resolveExit!: (e: TerminalExit) => void;
  private exit: TerminalExit | undefined;
  private readonly enc = new TextEncoder();

  /** @internal */
  constructor(private readonly ws: WebSocketLike, private readonly onExit?: (exit: TerminalExit) => void) {
    this.exited = new Promise((r) => { this.resolveExit = r; });
  }

  /** @internal */
  ended(e: TerminalExit): void {
    if (this.exit) return;
    this.exit = e;
    this.onExit?.(e);
    this.resolveExit(e);
  }

  /** True until the process ended or the connection closed. */
  get open(): boolean { return this.exit === undefined && this.ws.readyState === 1; }

  /** Send keyboard input (text as UTF-8, or bytes). */
  write(data: string | Uint8Array): void {
    if (!this.open) return;
    this.ws.send(typeof data === 'string' ? this.enc.encode(data) : data);
  }

  /** Tell the terminal its new size. */
  resize(rows: number, cols: number): void {
    checkSize(rows, 'rows');
    checkSize(cols, 'cols');
    if (this.open) this.ws.send(JSON.stringify({ type: 'resize', rows, cols }));
  }

  /** Close the connection (the daemon ends the process). */
  close(): void {
    try { this.ws.close(1000); } catch { /* already closing */ }
  }

  /** Open a terminal in sandbox `sandboxId` through `client` (an http(s) API URL). Rejects with
   * the API's error (NotFoundError, ConflictError for a paused sandbox, AuthenticationError, ...)
   * when the daemon refuses the WebSocket. */
  static async open(client: Client, sandboxId: string, opts: TerminalOptions = {}): Promise<Terminal> {
    const ep = client.endpoint;
    if (ep.scheme === 'unix') throw new TypeError('a terminal needs an http(s) API URL: a WebSocket cannot reach a unix socket');
    checkSize(opts.rows, 'rows');
    checkSize(opts.cols, 'cols');
    const WS = opts.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (typeof WS !== 'function') {
      throw new APIConnectionError('connection', 'no WebSocket in this runtime (browsers and Node 22 have one; Node 20 with --experimental-websocket)');
    }
    const key = client.apiKeyForWebSocket();
    const protocols = [TERMINAL_PROTOCOL];
    if (key !== undefined) {
      if (!TOKEN.test(key)) throw new TypeError('the API key has characters a WebSocket subprotocol cannot carry');
      protocols.push(KEY_PROTOCOL_PREFIX + key);
    }
    const path = client.url(`/v1/sandboxes/${seg(sandboxId)}/terminal`, {
      cmd: opts.cmd, rows: opts.rows, cols: opts.cols, user: opts.user, cwd: opts.cwd,
    });
    const url = ep.origin.replace(/^http/, 'ws') + path;
    const ws = new WS(url, protocols);
    ws.binaryType = 'arraybuffer';
    const term = new Terminal(ws, opts.onExit);
    let opened = false;
    ws.addEventListener('message', (ev) => {
      const d = ev.data;
      if (typeof d === 'string') {
        let m: Record<string, unknown> | undefined;
        try { m = JSON.parse(d) as Record<string, unknown>; } catch { return; }
        if (m && m.type === 'exit') term.ended({ exitCode: optInt(m.exit_code), signal: optInt(m.signal) });
        return;
      }
      const bytes = d instanceof ArrayBuffer ? new Uint8Array(d) : ArrayBuffer.isView(d) ? new Uint8Array(d.buffer, d.byteOffset, d.byteLength) : undefined;
      if (bytes && bytes.length) opts.onData?.(bytes);
      else if (typeof d === 'object' && d !== null && typeof (d as Blob).arrayBuffer === 'function') {
        void (d as Blob).arrayBuffer().then((b) => opts.onData?.(new Uint8Array(b)));
      }
    });
    ws.addEventListener('close', () => term.ended({ exitCode: undefined, signal: undefined }));
    const timeoutMs = opts.requestTimeoutMs ?? client.timeoutMs;
    await new Promise<void>((resolve, reject) => {
      const timer = timeoutMs > 0 ? setTimeout(() => { fail(new APIConnectionError('client_timeout', `terminal: no connection within ${timeoutMs} ms`)); }, timeoutMs) : undefined;
      const onAbort = () => fail(new AbortError('aborted', 'terminal: aborted'));
      const done = () => { if (timer) clearTimeout(timer); opts.signal?.removeEventListener('abort', onAbort); };
      const fail = (e: Error) => { if (opened) return; opened = true; done(); term.close(); reject(e); };
      if (opts.signal?.aborted) { onAbort(); return; }
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      ws.addEventListener('open', () => { if (opened) return; opened = true; done(); resolve(); });
      let asked = false;
      const refused = () => {
        if (opened || asked) return;
        asked = true;
        // The WebSocket API says nothing of why an upgrade was refused: ask the API about the
        // sandbox, whose answer (no such sandbox, a paused one, a bad key) is the reason.
        void client.request('GET', `/v1/sandboxes/${seg(sandboxId)}`, { requestTimeoutMs: 10_000 }).then(
          (r) => {
            const state = r.object().state;
            fail(state !== 'running'
              ? errorFromCode('conflict', `terminal: the sandbox is ${String(state)}, not running`, 409)
              : new APIConnectionError('connection', `terminal: the daemon refused the WebSocket at ${url.replace(/\?.*$/, '')}`));
          },
          (e: unknown) => fail(e instanceof Error ? e : new Error(String(e))),
        );
      };
      // A refused upgrade fires `error` (and then `close`, in most runtimes).
      ws.addEventListener('error', refused);
      ws.addEventListener('close', refused);
    });
    return term;
  }
}
