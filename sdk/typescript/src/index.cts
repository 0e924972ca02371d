// SPDX-License-Identifier: Apache-2.0
// Warren's TypeScript SDK. The CommonJS build is the one copy of every class; the ESM entry
// (dist/index.mjs) re-exports it, so `instanceof` holds whichever way the package was loaded.

export {
  Client, Response, StreamResponse, VERSION, DEFAULT_API_URL, DEFAULT_TIMEOUT_MS, ENV_API_URL, ENV_API_KEY,
  type BodyInit, type CallOptions, type ClientOptions, type ConnectionOptions, type Query, type RequestArgs, type UsageOptions,
} from './client.cjs';
export {
  WarrenError, InvalidArgumentError, AuthenticationError, PermissionDeniedError, NotFoundError, MethodNotAllowedError,
  ConflictError, TooLargeError, RangeNotSatisfiableError, BadContentError, ServerError, UnsupportedError, SandboxError,
  UpstreamError, NoSpaceError, RateLimitError, TimeoutError, APIConnectionError, AbortError, CommandExitError, BuildError,
  errorFromCode, errorFromResponse, parseRetryAfter,
} from './errors.cjs';
export {
  CommandResult,
  type ApiKey, type CommandEvent, type CommandUsage, type DiskUsage, type FileInfo, type FileType, type FilesystemEvent, type MetricSample,
  type NetworkLogEntry, type NetworkPolicy, type NetworkStats, type PortInfo, type ProcessInfo, type SandboxInfo,
  type SandboxState, type ServiceInfo, type VersionInfo, type VolumeInfo, type VolumeMount,
  type LimitBucket, type StorageSample, type TeamLimits, type UsageReport, type UsageRow,
} from './models.cjs';
export { composeContext, CONTEXT_MAX_BYTES, CONTEXT_MAX_FILES, type ComposeSpec } from './compose.cjs';
export { Commands, CommandHandle, type OutputCallback, type RunOptions, type Signal, type WaitOptions } from './commands.cjs';
export { Files, WatchHandle, type FileData, type ReadOptions, type ServiceOptions, type UserOptions, type WriteOptions } from './files.cjs';
export { Template, Snapshot, type BuildOptions, type BuildStep } from './images.cjs';
export { Volume, admin } from './volume.cjs';
export { Terminal, TERMINAL_PROTOCOL, type TerminalExit, type TerminalOptions, type WebSocketConstructor, type WebSocketLike } from './terminal.cjs';
export { Execution, Result, type CodeContext, type ExecutionError, type OutputMessage, type RunCodeOptions } from './code.cjs';
export {
  Sandbox, Desktop, Browser,
  type CreateOptions, type Diff, type DiffChange, type DesktopInfo, type DesktopWindow, type FileDiff, type ForkResult,
  type ListOptions, type MouseButton, type NetworkOptions,
} from './sandbox.cjs';
