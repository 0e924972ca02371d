"""Exceptions raised by the Warren SDK.

Every error the API answers is JSON ``{"code": "...", "message": "..."}`` with a matching HTTP
status; :func:`error_from_response` turns it into the most specific subclass of
:class:`WarrenError`. Transport failures (no connection, client-side timeouts) are
:class:`APIConnectionError` and :class:`TimeoutException` with ``status`` ``None``.
"""

from __future__ import annotations

import builtins
import json
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import CommandResult

__all__ = [
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
    "TimeoutException",
    "APIConnectionError",
    "CommandExitError",
    "BuildError",
    "error_from_response",
    "error_from_code",
]


class WarrenError(Exception):
    """Base class of every error raised by the SDK.

    ``code`` is the API's error code (``not_found``, ``invalid``, ...) or an SDK code
    (``connection``, ``client_timeout``, ``exit``); ``status`` the HTTP status (``None`` when
    no response arrived); ``request_id`` the ``X-Request-Id`` of the failed request.
    """

    def __init__(
        self,
        code: str,
        message: str,
        status: int | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.request_id = request_id

    def __str__(self) -> str:
        parts = [self.message or self.code]
        extra = [self.code]
        if self.status is not None:
            extra.append(f"HTTP {self.status}")
        if self.request_id:
            extra.append(f"request {self.request_id}")
        parts.append(f"({', '.join(extra)})")
        return " ".join(parts)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, "
            f"status={self.status!r}, request_id={self.request_id!r})"
        )


class InvalidArgumentError(WarrenError):
    """400 ``invalid``: the request was malformed or a value is out of range."""


class AuthenticationError(WarrenError):
    """401 ``unauthorized``: no API key, or an unknown one."""


class PermissionDeniedError(WarrenError):
    """403 ``forbidden``: the key may not do this (e.g. an admin-only call)."""


class NotFoundError(WarrenError):
    """404 ``not_found``: no such sandbox, process, file or key (or another team's)."""


class MethodNotAllowedError(WarrenError):
    """405 ``method_not_allowed``."""


class ConflictError(WarrenError):
    """409 ``conflict``: e.g. the sandbox is not running, the process still runs, the
    directory exists or is not empty."""


class TooLargeError(WarrenError):
    """413 ``too_large``: a request body or value exceeds a limit."""


class RangeNotSatisfiableError(InvalidArgumentError):
    """416: the ``Range`` of a file download lies outside the file."""


class RateLimitError(WarrenError):
    """``limit`` (429, or 503 past the host's capacity). ``retry_after`` is the server's
    ``Retry-After`` in seconds, when given; ``reason`` says which limit (``"rate"`` or
    ``"quota"``: the team's own, 429; ``"capacity"``: the host's, 503), and ``policy`` which
    bucket or quota (``"requests"``, ``"creates"``, ``"bytes"``, ``"sandboxes"``,
    ``"memory"``), when the server said."""

    def __init__(
        self,
        code: str,
        message: str,
        status: int | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        reason: str | None = None,
        policy: str | None = None,
    ) -> None:
        super().__init__(code, message, status, request_id)
        self.retry_after = retry_after
        self.reason = reason
        self.policy = policy


class ServerError(WarrenError):
    """500 ``system`` / ``internal``: the daemon failed."""


class SandboxError(WarrenError):
    """502 ``protocol``: the sandbox's agent misbehaved (or the sandbox died mid-request)."""


class UnsupportedError(WarrenError):
    """501 ``unsupported``: this host cannot do that."""


class UpstreamError(WarrenError):
    """502 ``upstream``: a registry the daemon pulls from refused (401, 403) or did not answer;
    the message carries the registry's words."""


class BadContentError(WarrenError):
    """422 ``bad_content``: an image archive or blob failed its checks (not an archive, cut
    short, a digest that does not match, an unsafe entry)."""


class TimeoutException(WarrenError, builtins.TimeoutError):
    """504 ``timeout`` from the server, or ``client_timeout`` when the SDK's own socket timeout
    expired. Also an instance of the builtin :class:`TimeoutError`."""


def __getattr__(name: str) -> type[TimeoutException]:
    # TimeoutError: the deprecated name of TimeoutException (it shadowed the builtin).
    if name == "TimeoutError":
        warnings.warn(
            "warren.errors.TimeoutError is deprecated: use TimeoutException",
            DeprecationWarning,
            stacklevel=2,
        )
        return TimeoutException
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


class APIConnectionError(WarrenError, builtins.ConnectionError):
    """The daemon could not be reached or dropped the connection (``code == "connection"``)."""


class CommandExitError(WarrenError):
    """A command ended with a non-zero exit code, was killed by a signal or timed out, and
    ``check`` was true. ``result`` carries its output."""

    def __init__(self, result: CommandResult) -> None:
        if result.timed_out:
            what = "timed out"
        elif result.exit_code is None:
            what = f"was killed by signal {result.signal}"
        else:
            what = f"exited with code {result.exit_code}"
        stderr = result.stderr.strip()
        if len(stderr) > 500:
            stderr = "..." + stderr[-500:]
        message = f"command {what}" + (f": {stderr}" if stderr else "")
        super().__init__("exit", message)
        self.result = result

    @property
    def exit_code(self) -> int | None:
        return self.result.exit_code

    @property
    def signal(self) -> int | None:
        return self.result.signal

    @property
    def stdout(self) -> str:
        return self.result.stdout

    @property
    def stderr(self) -> str:
        return self.result.stderr

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.result,))


class BuildError(WarrenError):
    """A template build that failed once it had started (the server's ``error`` event):
    ``step`` is the 1-based step that failed (None when the failure was not a step's),
    ``line`` its line in the Dockerfile, ``exit_code`` the step's exit code when its command
    ended with one. ``code`` is the server's error code (``invalid`` for a failed command,
    ``system``, ...). Errors found before the first step (a bad Dockerfile, a name taken)
    are raised as the matching API error instead (:class:`InvalidArgumentError`, ...)."""

    def __init__(
        self,
        code: str,
        message: str,
        step: int | None = None,
        line: int | None = None,
        exit_code: int | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(code, message, None, request_id)
        self.step = step
        self.line = line
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message or self.code

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (self.code, self.message, self.step, self.line, self.exit_code, self.request_id),
        )


_BY_CODE: dict[str, type[WarrenError]] = {
    "invalid": InvalidArgumentError,
    "unauthorized": AuthenticationError,
    "forbidden": PermissionDeniedError,
    "not_found": NotFoundError,
    "method_not_allowed": MethodNotAllowedError,
    "conflict": ConflictError,
    "too_large": TooLargeError,
    "unsupported": UnsupportedError,
    "limit": RateLimitError,
    "system": ServerError,
    "internal": ServerError,
    "protocol": SandboxError,
    "upstream": UpstreamError,
    "bad_content": BadContentError,
    "timeout": TimeoutException,
}

_BY_STATUS: dict[int, type[WarrenError]] = {
    400: InvalidArgumentError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: ConflictError,
    413: TooLargeError,
    416: RangeNotSatisfiableError,
    422: BadContentError,
    429: RateLimitError,
    501: UnsupportedError,
    502: SandboxError,
    504: TimeoutException,
}


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None  # an HTTP date: the API documents seconds only
    return max(seconds, 0.0)


def error_from_code(
    code: str,
    message: str,
    status: int | None = None,
    request_id: str | None = None,
    retry_after: float | None = None,
) -> WarrenError:
    """The exception for an API error code (used for ``error`` events inside streams too)."""
    cls = _BY_CODE.get(code)
    if cls is None and status is not None:
        cls = _BY_STATUS.get(status)
        if cls is None and status >= 500:
            cls = ServerError
    if cls is None:
        cls = WarrenError
    if status == 416:
        cls = RangeNotSatisfiableError
    if cls is RateLimitError or (status == 503 and retry_after is not None):
        return RateLimitError(code, message, status, request_id, retry_after)
    return cls(code, message, status, request_id)


def error_from_response(
    status: int,
    body: bytes,
    request_id: str | None = None,
    retry_after_header: str | None = None,
) -> WarrenError:
    """The exception for a non-2xx response: its ``{"code","message"}`` body when it has one,
    else the status and the first line of the body."""
    code: str | None = None
    message: str | None = None
    reason: str | None = None
    policy: str | None = None
    try:
        doc = json.loads(body.decode("utf-8")) if body else None
    except (ValueError, UnicodeDecodeError):
        doc = None
    if isinstance(doc, dict):
        c, m = doc.get("code"), doc.get("message")
        if isinstance(c, str):
            code = c
        if isinstance(m, str):
            message = m
        r, p = doc.get("reason"), doc.get("policy")
        reason = r if isinstance(r, str) else None
        policy = p if isinstance(p, str) else None
    if code is None:
        code = _default_code(status)
    if message is None:
        first = body.decode("utf-8", errors="replace").strip().splitlines()[:1]
        message = first[0][:300] if first else f"HTTP {status}"
    err = error_from_code(code, message, status, request_id, _parse_retry_after(retry_after_header))
    if isinstance(err, RateLimitError):
        err.reason, err.policy = reason, policy
    return err


def _default_code(status: int) -> str:
    for code, cls in _BY_CODE.items():
        if _BY_STATUS.get(status) is cls:
            return code
    return "internal" if status >= 500 else "http_error"
