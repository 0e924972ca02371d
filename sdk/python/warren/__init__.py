"""Python SDK for Warren, a self-hosted sandbox platform for AI agents.

::

    from warren import Sandbox

    with Sandbox.create() as sb:
        print(sb.commands.run("echo hello").stdout)
        sb.files.write("/tmp/x.txt", "data")

The daemon's address comes from ``api_url=`` or ``$WARREN_API_URL`` (``http://host:port`` or
``unix:///path/to.sock``; default ``unix:///run/warrend/warrend.sock``), the key from
``api_key=`` or ``$WARREN_API_KEY``.
"""

import warnings as _warnings

from . import admin
from ._version import __version__
from .client import (
    DEFAULT_API_URL,
    Client,
    Endpoint,
    Response,
    StreamResponse,
    UnixHTTPConnection,
)
from .commands import CommandHandle, Commands, OutputCallback, Signal
from .compose import CONTEXT_MAX_BYTES, CONTEXT_MAX_FILES, compose_context
from .code import CodeContext, Execution, ExecutionError, Logs, OutputMessage, Result
from .errors import (
    APIConnectionError,
    AuthenticationError,
    BadContentError,
    BuildError,
    CommandExitError,
    ConflictError,
    InvalidArgumentError,
    MethodNotAllowedError,
    NotFoundError,
    PermissionDeniedError,
    RangeNotSatisfiableError,
    RateLimitError,
    SandboxError,
    ServerError,
    TimeoutException,
    TooLargeError,
    UnsupportedError,
    UpstreamError,
    WarrenError,
)
from .desktop import Browser, Desktop, Window
from .files import FileData, Files, WatchHandle
from .images import BuildStep, ForkResult, Snapshot, Template
from .models import (
    ApiKey,
    CommandEvent,
    CommandResult,
    CommandUsage,
    CreatedApiKey,
    FileInfo,
    FilesystemEvent,
    FilesystemEventType,
    NetworkLogEntry,
    AuditRecord,
    Event,
    Webhook,
    WebhookDelivery,
    FileType,
    NetworkPolicy,
    NetworkStats,
    ProcessInfo,
    SandboxInfo,
    SandboxState,
    ServiceInfo,
    VersionInfo,
    VolumeInfo,
    VolumeMount,
)
from .diff import DiffAgainst, FileChange, FileDiff, FilesystemDiff
from .sandbox import Sandbox
from .volume import Volume
from .usage import StorageSample, Usage, UsageRow

__all__ = [
    "Browser",
    "Desktop",
    "Window",
    "__version__",
    "admin",
    # client
    "Client",
    "Endpoint",
    "Response",
    "StreamResponse",
    "UnixHTTPConnection",
    "DEFAULT_API_URL",
    # sandbox
    "Sandbox",
    "Volume",
    # Compose
    "compose_context",
    "CONTEXT_MAX_FILES",
    "CONTEXT_MAX_BYTES",
    "ServiceInfo",
    # usage ledger
    "Usage",
    "UsageRow",
    "StorageSample",
    "VolumeInfo",
    "VolumeMount",
    "Commands",
    "CommandHandle",
    "OutputCallback",
    "Signal",
    "Execution",
    "ExecutionError",
    "Logs",
    "OutputMessage",
    "Result",
    "CodeContext",
    "Files",
    "FileData",
    "WatchHandle",
    # images
    "Template",
    "BuildStep",
    "Snapshot",
    "ForkResult",
    # models
    "SandboxInfo",
    "SandboxState",
    "NetworkPolicy",
    "NetworkStats",
    "FileInfo",
    "FileType",
    "ProcessInfo",
    "CommandResult",
    "CommandUsage",
    "CommandEvent",
    "FilesystemEvent",
    "FilesystemEventType",
    "NetworkLogEntry",
    "AuditRecord",
    "Event",
    "Webhook",
    "WebhookDelivery",
    "ApiKey",
    "CreatedApiKey",
    "VersionInfo",
    # diff
    "DiffAgainst",
    "FileChange",
    "FileDiff",
    "FilesystemDiff",
    # errors
    "WarrenError",
    "InvalidArgumentError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "MethodNotAllowedError",
    "ConflictError",
    "TooLargeError",
    "RangeNotSatisfiableError",
    "RateLimitError",
    "ServerError",
    "SandboxError",
    "UnsupportedError",
    "UpstreamError",
    "BadContentError",
    "TimeoutException",
    "APIConnectionError",
    "CommandExitError",
    "BuildError",
]


def __getattr__(name: str) -> type[TimeoutException]:
    # TimeoutError: the deprecated name of TimeoutException (it shadowed the builtin under
    # `from warren import *`); not in __all__.
    if name == "TimeoutError":
        _warnings.warn(
            "warren.TimeoutError is deprecated: use warren.TimeoutException",
            DeprecationWarning,
            stacklevel=2,
        )
        return TimeoutException
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
