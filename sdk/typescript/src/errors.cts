// SPDX-License-Identifier: Apache-2.0
// The SDK's errors. Every error the API answers is JSON {"code","message"} with an HTTP status;
// errorFromResponse() turns it into the most specific subclass of WarrenError. Transport
// failures are APIConnectionError (code "connection") and TimeoutError (code "client_timeout"),
// with status undefined. One copy of these classes exists at runtime whether the package was
// loaded with import or require (the ESM entry re-exports the CommonJS one), so instanceof holds.

import type { CommandResult } from './models.cjs';

/** Base class of every error raised by the SDK. */
export class WarrenError extends Error {
  /** The API's error code (`not_found`, `invalid`, ...) or an SDK one (`connection`,
   * `client_timeout`, `aborted`, `exit`, `bad_response`). */
  readonly code: string;
  /** The HTTP status; undefined when no response arrived. */
  readonly status: number | undefined;
  /** The X-Request-Id of the failed request. */
  readonly requestId: string | undefined;

  constructor(code: string, message: string, status?: number, requestId?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.requestId = requestId;
  }

  override toString(): string {
    const extra = [this.code];
    if (this.status !== undefined) extra.push(`HTTP ${this.status}`);
    if (this.requestId) extra.push(`request ${this.requestId}`);
    return `${this.name}: ${this.message || this.code} (${extra.join(', ')})`;
  }
}

/** 400 `invalid`: the request was malformed or a value is out of range. */
export class InvalidArgumentError extends WarrenError {}
/** 401 `unauthorized`: no API key, or an unknown one. */
export class AuthenticationError extends WarrenError {}
/** 403 `forbidden`: the key may not do this (an admin-only call, say). */
export class PermissionDeniedError extends WarrenError {}
/** 404 `not_found`: no such sandbox, process, file, template or key (or another team's). */
export class NotFoundError extends WarrenError {}
/** 405 `method_not_allowed`. */
export class MethodNotAllowedError extends WarrenError {}
/** 409 `conflict`: the sandbox is not running or is paused, the name is taken, ... */
export class ConflictError extends WarrenError {}
/** 413 `too_large`: a body or value exceeds a limit. */
export class TooLargeError extends WarrenError {}
/** 416: the Range of a file read lies outside the file. */
export class RangeNotSatisfiableError extends InvalidArgumentError {}
/** 422 `bad_content`: an image archive or blob failed its checks. */
export class BadContentError extends WarrenError {}
/** 500 `system` / `internal`: the daemon failed. */
export class ServerError extends WarrenError {}
/** 501 `unsupported`: this host cannot do that. */
export class UnsupportedError extends WarrenError {}
/** 502 `protocol` (the sandbox's agent misbehaved), `start_failed` (a template's start command). */
export class SandboxError extends WarrenError {}
/** 502 `upstream`: a registry or a sandbox's server refused or did not answer. */
export class UpstreamError extends WarrenError {}
/** 507 `no_space`: the sandbox's disk is full, or the host's state filesystem is at its reserve. */
export class NoSpaceError extends WarrenError {}

/** `limit` (429, or 503 past the host's capacity). `retryAfter` is the server's Retry-After in
 * seconds, when it gave one. Thrown once the SDK's retries (if any) are used up. */
export class RateLimitError extends WarrenError {
  readonly retryAfter: number | undefined;
  constructor(code: string, message: string, status?: number, requestId?: string, retryAfter?: number) {
    super(code, message, status, requestId);
    this.retryAfter = retryAfter;
  }
}

/** 504 `timeout` from the server, or `client_timeout` when the SDK's own request timeout
 * expired. */
export class TimeoutError extends WarrenError {}

/** The daemon could not be reached or dropped the connection (`code === "connection"`); also
 * `aborted` when the caller's AbortSignal fired. */
export class APIConnectionError extends WarrenError {}

/** The caller's AbortSignal fired (code `aborted`). */
export class AbortError extends APIConnectionError {}

/** A command ended with a non-zero exit code, was killed by a signal or timed out, and
 * `check` was on. `result` carries its output. */
export class CommandExitError extends WarrenError {
  readonly result: CommandResult;
  constructor(result: CommandResult) {
    let what: string;
    if (result.timedOut) what = 'timed out';
    else if (result.exitCode === undefined) what = `was killed by signal ${result.signal}`;
    else what = `exited with code ${result.exitCode}`;
    let stderr = result.stderr.trim();
    if (stderr.length > 500) stderr = '...' + stderr.slice(-500);
    super('exit', `command ${what}` + (stderr ? `: ${stderr}` : ''));
    this.result = result;
  }
  get exitCode(): number | undefined { return this.result.exitCode; }
  get signal(): number | undefined { return this.result.signal; }
  get stdout(): string { return this.result.stdout; }
  get stderr(): string { return this.result.stderr; }
}

/** A template build that failed once it had started (the server's `error` event): `step` (1-based)
 * and `line` of the step that failed, `exitCode` of its command when it had one. */
export class BuildError extends WarrenError {
  readonly step: number | undefined;
  readonly line: number | undefined;
  readonly exitCode: number | undefined;
  constructor(code: string, message: string, step?: number, line?: number, exitCode?: number, requestId?: string) {
    super(code, message, undefined, requestId);
    this.step = step;
    this.line = line;
    this.exitCode = exitCode;
  }
}

type ErrorClass = new (code: string, message: string, status?: number, requestId?: string) => WarrenError;

const BY_CODE: Record<string, ErrorClass> = {
  invalid: InvalidArgumentError,
  unauthorized: AuthenticationError,
  forbidden: PermissionDeniedError,
  not_found: NotFoundError,
  method_not_allowed: MethodNotAllowedError,
  conflict: ConflictError,
  no_interpreter: ConflictError,
  too_large: TooLargeError,
  unsupported: UnsupportedError,
  limit: RateLimitError,
  system: ServerError,
  internal: ServerError,
  protocol: SandboxError,
  start_failed: SandboxError,
  upstream: UpstreamError,
  bad_content: BadContentError,
  timeout: TimeoutError,
  no_space: NoSpaceError,
};

const BY_STATUS: Record<number, ErrorClass> = {
  400: InvalidArgumentError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  405: MethodNotAllowedError,
  408: TimeoutError,
  409: ConflictError,
  413: TooLargeError,
  416: RangeNotSatisfiableError,
  422: BadContentError,
  429: RateLimitError,
  501: UnsupportedError,
  502: SandboxError,
  504: TimeoutError,
  507: NoSpaceError,
};

const MAX_RETRY_AFTER_S = 24 * 3600;

/** Retry-After as seconds: a number of seconds or an HTTP date; undefined if absent or bad. */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  if (!value) return undefined;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.min(Number(v), MAX_RETRY_AFTER_S);
  const t = Date.parse(v);
  if (Number.isNaN(t)) return undefined;
  return Math.min(Math.max((t - now) / 1000, 0), MAX_RETRY_AFTER_S);
}

/** The error for an API error code (also used for `error` events inside streams). */
export function errorFromCode(code: string, message: string, status?: number, requestId?: string, retryAfter?: number): WarrenError {
  let cls: ErrorClass | undefined = BY_CODE[code];
  if (cls === undefined && status !== undefined) {
    cls = BY_STATUS[status];
    if (cls === undefined && status >= 500) cls = ServerError;
  }
  if (cls === undefined) cls = WarrenError;
  if (status === 416) cls = RangeNotSatisfiableError;
  if (cls === RateLimitError || (status === 503 && retryAfter !== undefined))
    return new RateLimitError(code, message, status, requestId, retryAfter);
  return new cls(code, message, status, requestId);
}

function defaultCode(status: number): string {
  const cls = BY_STATUS[status];
  for (const [code, c] of Object.entries(BY_CODE)) if (c === cls) return code;
  return status >= 500 ? 'internal' : 'http_error';
}

/** The error for a non-2xx response: its {"code","message"} body if it has one, else the status
 * and the body's first line. */
export function errorFromResponse(status: number, body: string, requestId?: string, retryAfterHeader?: string | null): WarrenError {
  let code: string | undefined;
  let message: string | undefined;
  try {
    const doc: unknown = body ? JSON.parse(body) : undefined;
    if (doc && typeof doc === 'object' && !Array.isArray(doc)) {
      const d = doc as Record<string, unknown>;
      if (typeof d.code === 'string') code = d.code;
      if (typeof d.message === 'string') message = d.message;
    }
  } catch { /* not JSON */ }
  if (code === undefined) code = defaultCode(status);
  if (message === undefined) {
    const first = body.trim().split('\n')[0];
    message = first ? first.slice(0, 300) : `HTTP ${status}`;
  }
  return errorFromCode(code, message, status, requestId, parseRetryAfter(retryAfterHeader));
}
