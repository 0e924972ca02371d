// SPDX-License-Identifier: Apache-2.0
// The code interpreter (templates such as code-interpreter-v1): `sb.runCode`, contexts. The
// daemon streams E2B's NDJSON lines unchanged (number_of_executions, stdout, stderr, result,
// error, end_of_execution).

import { type CallOptions, type Client, call, seg } from './client.cjs';
import { arr, obj, optInt, str } from './models.cjs';

/** One output line of a cell. */
export interface OutputMessage { line: string; timestamp: string | undefined; error: boolean }

/** A result of a cell, as a MIME bundle (`isMainResult`: the value of its last expression). */
export class Result {
  readonly isMainResult: boolean;
  readonly text: string | undefined;
  readonly html: string | undefined;
  readonly markdown: string | undefined;
  readonly svg: string | undefined;
  /** Base64 PNG. */
  readonly png: string | undefined;
  readonly jpeg: string | undefined;
  readonly pdf: string | undefined;
  readonly latex: string | undefined;
  readonly json: unknown;
  readonly javascript: string | undefined;
  readonly data: unknown;
  readonly chart: unknown;
  readonly extra: Record<string, unknown> | undefined;
  readonly raw: Record<string, unknown>;
  /** @internal */
  constructor(d: Record<string, unknown>) {
    const s = (k: string) => (typeof d[k] === 'string' ? (d[k] as string) : undefined);
    this.isMainResult = d.is_main_result === true;
    this.text = s('text'); this.html = s('html'); this.markdown = s('markdown'); this.svg = s('svg'); this.png = s('png');
    this.jpeg = s('jpeg'); this.pdf = s('pdf'); this.latex = s('latex'); this.json = d.json; this.javascript = s('javascript');
    this.data = d.data; this.chart = d.chart;
    this.extra = d.extra && typeof d.extra === 'object' ? (d.extra as Record<string, unknown>) : undefined;
    this.raw = d;
  }
  /** The MIME kinds this result has. */
  formats(): string[] {
    return ['text', 'html', 'markdown', 'svg', 'png', 'jpeg', 'pdf', 'latex', 'json', 'javascript', 'data', 'chart'].filter((k) => this.raw[k] !== undefined && this.raw[k] !== null);
  }
}

/** What a cell raised. */
export interface ExecutionError { name: string; value: string; traceback: string }

/** The outcome of `sb.runCode`. */
export class Execution {
  results: Result[] = [];
  logs: { stdout: string[]; stderr: string[] } = { stdout: [], stderr: [] };
  error: ExecutionError | undefined;
  executionCount: number | undefined;
  /** The text of the main result. */
  get text(): string | undefined { return this.results.find((r) => r.isMainResult)?.text; }
}

/** A code context: a kernel with its own state. */
export interface CodeContext { id: string; language: string; cwd: string }

export interface RunCodeOptions extends CallOptions {
  language?: string;
  /** A context (or its id) to run in. */
  context?: CodeContext | string;
  env?: Record<string, string>;
  /** Seconds the cell may run (the server interrupts it after). */
  timeout?: number;
  onStdout?: (msg: OutputMessage) => void | Promise<void>;
  onStderr?: (msg: OutputMessage) => void | Promise<void>;
  onResult?: (result: Result) => void | Promise<void>;
  onError?: (error: ExecutionError) => void | Promise<void>;
}

/** @internal */
export async function runCode(client: Client, sandboxId: string, code: string, opts: RunCodeOptions = {}): Promise<Execution> {
  const json: Record<string, unknown> = { code };
  if (opts.language !== undefined) json.language = opts.language;
  if (opts.context !== undefined) json.context_id = typeof opts.context === 'string' ? opts.context : opts.context.id;
  if (opts.env && Object.keys(opts.env).length) json.env = opts.env;
  if (opts.timeout !== undefined) json.timeout = Math.ceil(opts.timeout);
  const c = call(opts);
  if (c.requestTimeoutMs === undefined) c.requestTimeoutMs = opts.timeout !== undefined ? Math.ceil(opts.timeout) * 1000 + 30_000 : 0;
  const s = await client.stream('POST', `/v1/sandboxes/${seg(sandboxId)}/code`, { ...c, json, headers: { Accept: 'application/x-ndjson' }, retry: false });
  const ex = new Execution();
  try {
    for await (const d of s.json()) {
      switch (d.type) {
        case 'number_of_executions': ex.executionCount = optInt(d.execution_count); break;
        case 'stdout': case 'stderr': {
          const line = str(d.text);
          const msg: OutputMessage = { line, timestamp: typeof d.timestamp === 'string' ? d.timestamp : undefined, error: d.type === 'stderr' };
          ex.logs[d.type].push(line);
          await (d.type === 'stdout' ? opts.onStdout : opts.onStderr)?.(msg);
          break;
        }
        case 'result': {
          const r = new Result(d);
          ex.results.push(r);
          await opts.onResult?.(r);
          break;
        }
        case 'error': {
          ex.error = { name: str(d.name), value: str(d.value), traceback: str(d.traceback) };
          await opts.onError?.(ex.error);
          break;
        }
        default: break; // keepalive, end_of_execution
      }
    }
  } finally { s.close(); }
  return ex;
}

function ctxFromJson(d: Record<string, unknown>): CodeContext { return { id: str(d.id), language: str(d.language), cwd: str(d.cwd) }; }

/** @internal */
export const contexts = {
  async create(client: Client, id: string, opts: CallOptions & { language?: string; cwd?: string } = {}): Promise<CodeContext> {
    const json: Record<string, string> = {};
    if (opts.language !== undefined) json.language = opts.language;
    if (opts.cwd !== undefined) json.cwd = opts.cwd;
    return ctxFromJson((await client.request('POST', `/v1/sandboxes/${seg(id)}/code/contexts`, { ...call(opts), json, retry: false })).object());
  },
  async list(client: Client, id: string, opts: CallOptions = {}): Promise<CodeContext[]> {
    const d = (await client.request('GET', `/v1/sandboxes/${seg(id)}/code/contexts`, call(opts))).json();
    const items = Array.isArray(d) ? d : arr(obj(d).contexts);
    return items.map((x) => ctxFromJson(obj(x)));
  },
  async restart(client: Client, id: string, ctx: CodeContext | string, opts: CallOptions = {}): Promise<void> {
    const cid = typeof ctx === 'string' ? ctx : ctx.id;
    await client.request('POST', `/v1/sandboxes/${seg(id)}/code/contexts/${seg(cid)}/restart`, { ...call(opts), retry: false });
  },
  async remove(client: Client, id: string, ctx: CodeContext | string, opts: CallOptions = {}): Promise<void> {
    const cid = typeof ctx === 'string' ? ctx : ctx.id;
    await client.request('DELETE', `/v1/sandboxes/${seg(id)}/code/contexts/${seg(cid)}`, call(opts));
  },
};
