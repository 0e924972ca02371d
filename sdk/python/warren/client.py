"""HTTP transport: a small thread-safe keep-alive pool over a unix socket or TCP.

:class:`Client` is what every :class:`~warren.Sandbox` talks through. Most users never build
one: ``Sandbox.create(api_url=..., api_key=...)`` does. Build one explicitly to share
connections between several sandboxes (``Sandbox.create(client=c)``) or to call the API
directly (``c.request("GET", "/v1/version").json()``).
"""

from __future__ import annotations

import enum
import http.client
import json
import os
import select
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, Final, TypeVar
from urllib.parse import quote, unquote, urlencode, urlsplit

from ._version import __version__
from .errors import APIConnectionError, TimeoutException, WarrenError, error_from_response
from .models import AuditRecord, Event, VersionInfo, Webhook, WebhookDelivery
from .usage import Usage, time_param

T = TypeVar("T")

__all__ = [
    "Client",
    "Response",
    "StreamResponse",
    "UnixHTTPConnection",
    "Endpoint",
    "DEFAULT_API_URL",
    "DEFAULT_TIMEOUT",
    "ENV_API_URL",
    "ENV_API_KEY",
    "path_segment",
]

ENV_API_URL: Final = "WARREN_API_URL"
ENV_API_KEY: Final = "WARREN_API_KEY"
DEFAULT_API_URL: Final = "unix:///run/warrend/warrend.sock"
DEFAULT_TIMEOUT: Final = 60.0
"""Default seconds to wait for a response (per socket operation)."""
DEFAULT_CONNECT_TIMEOUT: Final = 10.0
_IDLE_MAX_AGE: Final = 50.0  # the daemon drops idle keep-alive connections after 60 s
_IDEMPOTENT: Final = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
_STALE_ERRORS: Final = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
)


class _Unset(enum.Enum):
    UNSET = 0


UNSET: Final = _Unset.UNSET
"""Sentinel: "use the client's default" (``None`` means "no timeout")."""

Timeout = float | None | _Unset
Query = Mapping[str, Any] | Sequence[tuple[str, Any]] | None


def path_segment(value: str | int) -> str:
    """Percent-encode one path segment (a sandbox id, a pid, a key id)."""
    return quote(str(value), safe="")


class UnixHTTPConnection(http.client.HTTPConnection):
    """An :class:`http.client.HTTPConnection` over a unix stream socket."""

    def __init__(self, unix_path: str, timeout: float | None = DEFAULT_CONNECT_TIMEOUT) -> None:
        super().__init__("localhost", timeout=timeout)
        self.unix_path = unix_path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.unix_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


@dataclass(frozen=True)
class Endpoint:
    """Where the daemon listens: ``unix:///path/to.sock``, ``http://host:port[/prefix]`` or
    ``https://...``. A bare absolute path is taken as a unix socket."""

    scheme: str
    host: str = "localhost"
    port: int | None = None
    unix_path: str | None = None
    base_path: str = ""

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        url = url.strip()
        if url.startswith("/"):
            return cls(scheme="unix", unix_path=url)
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme in ("unix", "http+unix"):
            if scheme == "http+unix":  # http+unix://%2Frun%2Fwarrend.sock
                path = unquote(parts.netloc) + parts.path
            else:
                path = parts.netloc + parts.path
            if not path:
                raise ValueError(f"no socket path in API URL {url!r}")
            return cls(scheme="unix", unix_path=path)
        if scheme in ("http", "https"):
            if not parts.hostname:
                raise ValueError(f"no host in API URL {url!r}")
            return cls(
                scheme=scheme,
                host=parts.hostname,
                port=parts.port,
                base_path=parts.path.rstrip("/"),
            )
        raise ValueError(
            f"unsupported API URL {url!r}: expected unix:///path, http://host:port or https://..."
        )

    def connection(self, timeout: float | None) -> http.client.HTTPConnection:
        if self.scheme == "unix":
            assert self.unix_path is not None
            return UnixHTTPConnection(self.unix_path, timeout=timeout)
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def __str__(self) -> str:
        if self.scheme == "unix":
            return f"unix://{self.unix_path}"
        port = f":{self.port}" if self.port else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}{port}{self.base_path}"


class _Pool:
    """Idle keep-alive connections. A connection is used by one thread at a time: taken out
    with acquire(), given back with release() once its response was read to the end."""

    def __init__(self, endpoint: Endpoint, max_idle: int, connect_timeout: float | None) -> None:
        self._endpoint = endpoint
        self._max_idle = max_idle
        self._connect_timeout = connect_timeout
        self._idle: deque[tuple[http.client.HTTPConnection, float]] = deque()
        self._lock = threading.Lock()

    def acquire(self) -> tuple[http.client.HTTPConnection, bool]:
        """A connection and whether it was reused (already connected)."""
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._idle:
                    break
                conn, since = self._idle.pop()
            if now - since < _IDLE_MAX_AGE and not _is_dropped(conn):
                return conn, True
            conn.close()
        return self._endpoint.connection(self._connect_timeout), False

    def release(self, conn: http.client.HTTPConnection) -> None:
        if conn.sock is None:
            return
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle = list(self._idle)
            self._idle.clear()
        for conn, _ in idle:
            conn.close()


def _is_dropped(conn: http.client.HTTPConnection) -> bool:
    """An idle connection that is readable was closed by the server (or is out of sync)."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock, select.POLLIN | select.POLLPRI)
            return bool(poller.poll(0))
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _set_timeout(conn: http.client.HTTPConnection, timeout: float | None) -> None:
    conn.timeout = timeout
    if conn.sock is not None:
        conn.sock.settimeout(timeout)


def _encode_query(query: Query) -> str:
    if not query:
        return ""
    items = query.items() if isinstance(query, Mapping) else query
    pairs: list[tuple[str, str]] = []
    for key, value in items:
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        pairs.append((key, str(value)))
    return urlencode(pairs, quote_via=quote) if pairs else ""


class Response:
    """A response read to the end."""

    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def request_id(self) -> str | None:
        return self.headers.get("X-Request-Id")

    def json(self) -> Any:
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except ValueError as e:
            raise WarrenError(
                "bad_response",
                f"the server answered invalid JSON (HTTP {self.status}): {e}",
                self.status,
                self.request_id,
            ) from None

    def json_object(self) -> dict[str, Any]:
        doc = self.json()
        if not isinstance(doc, dict):
            raise WarrenError(
                "bad_response",
                f"expected a JSON object (HTTP {self.status})",
                self.status,
                self.request_id,
            )
        return doc

    def __repr__(self) -> str:
        return f"<Response {self.status} request_id={self.request_id!r} {len(self.body)} bytes>"


class StreamResponse:
    """A 2xx response whose body is read incrementally (NDJSON lines or raw chunks).

    Close it (or use ``with``) when done: a body read to its end gives the connection back to
    the pool, an abandoned one closes it. :meth:`abort` may be called from another thread to
    stop a blocked reader; the reader then sees the end of the stream.
    """

    def __init__(
        self,
        client: Client,
        conn: http.client.HTTPConnection,
        resp: http.client.HTTPResponse,
    ) -> None:
        self._client = client
        self._conn: http.client.HTTPConnection | None = conn
        self._resp = resp
        self._lock = threading.Lock()
        self._aborted = False
        self.status: int = resp.status
        self.headers: http.client.HTTPMessage = resp.headers

    @property
    def request_id(self) -> str | None:
        return self.headers.get("X-Request-Id")

    @property
    def aborted(self) -> bool:
        return self._aborted

    def _wrap(self, e: BaseException) -> WarrenError | None:
        """The error to raise for a failed read, or None when the stream was aborted."""
        if self._aborted:
            return None
        if isinstance(e, socket.timeout):
            return TimeoutException(
                "client_timeout", "timed out reading the response stream", None, self.request_id
            )
        return APIConnectionError(
            "connection", f"response stream broken: {e!r}", None, self.request_id
        )

    def read(self, n: int = -1) -> bytes:
        """Up to n bytes (all the rest with n < 0); b"" at the end."""
        if self._aborted:
            return b""
        try:
            data = self._resp.read() if n < 0 else self._resp.read1(n) if n > 0 else b""
        except (OSError, http.client.HTTPException, ValueError) as e:
            err = self._wrap(e)
            self.close()
            if err is None:
                return b""
            raise err from e
        if not data and n != 0:
            self.close()
        return data

    def readline(self) -> bytes:
        """One line with its newline (b"" at the end)."""
        if self._aborted:
            return b""
        try:
            line = self._resp.readline()
        except (OSError, http.client.HTTPException, ValueError) as e:
            err = self._wrap(e)
            self.close()
            if err is None:
                return b""
            raise err from e
        if not line:
            self.close()
        return line

    def iter_chunks(self, size: int = 256 * 1024) -> Iterator[bytes]:
        try:
            while True:
                chunk = self.read(size)
                if not chunk:
                    return
                yield chunk
        finally:
            self.close()

    def iter_lines(self) -> Iterator[bytes]:
        """Non-empty lines, without their line ending."""
        try:
            while True:
                line = self.readline()
                if not line:
                    return
                line = line.rstrip(b"\r\n")
                if line:
                    yield line
        finally:
            self.close()

    def iter_json(self) -> Iterator[dict[str, Any]]:
        """One JSON object per NDJSON line."""
        for line in self.iter_lines():
            try:
                doc = json.loads(line)
            except ValueError as e:
                self.close()
                raise WarrenError(
                    "bad_response", f"invalid NDJSON line: {e}", self.status, self.request_id
                ) from None
            if isinstance(doc, dict):
                yield doc

    def __iter__(self) -> Iterator[bytes]:
        """The body in chunks (as :meth:`iter_chunks`)."""
        return self.iter_chunks()

    def abort(self) -> None:
        """Stop the stream now, from any thread (a blocked read returns as at the end)."""
        self._aborted = True
        with self._lock:
            conn = self._conn
            if conn is None:
                return  # already closed (and perhaps back in the pool: do not touch it)
            sock = conn.sock or _response_socket(self._resp)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is None:
            return
        resp = self._resp
        if not resp.isclosed() and not resp.chunked and resp.length == 0:
            resp.close()  # a Content-Length body read to its end
        reusable = not self._aborted and resp.isclosed() and not resp.will_close
        if reusable:
            self._client._pool.release(conn)
        else:
            resp.close()
            conn.close()

    def __enter__(self) -> StreamResponse:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _response_socket(resp: http.client.HTTPResponse) -> socket.socket | None:
    """The socket under a response whose connection handed it over (Connection: close)."""
    fp = getattr(resp, "fp", None)
    raw = getattr(fp, "raw", None)
    sock = getattr(raw, "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


class Client:
    """A connection to ``warrend``.

    ``api_url`` defaults to ``$WARREN_API_URL``, else ``unix:///run/warrend/warrend.sock``;
    ``api_key`` to ``$WARREN_API_KEY`` (not needed on the unix socket). ``timeout`` is the
    default seconds to wait on a response (``None``: forever; streams never time out unless
    asked); ``connect_timeout`` bounds connecting. Idle keep-alive connections are pooled
    (at most ``max_idle_connections``) and shared safely between threads.
    """

    def __init__(
        self,
        api_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        max_idle_connections: int = 8,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.api_url: str = api_url or os.environ.get(ENV_API_URL) or DEFAULT_API_URL
        key = api_key if api_key is not None else os.environ.get(ENV_API_KEY)
        self._api_key: str | None = key or None
        self.endpoint: Endpoint = Endpoint.parse(self.api_url)
        self.timeout: float | None = timeout
        self.connect_timeout: float | None = connect_timeout
        self._headers: dict[str, str] = {"User-Agent": f"warren-python/{__version__}"}
        if headers:
            self._headers.update(headers)
        self._pool = _Pool(self.endpoint, max_idle_connections, connect_timeout)

    @property
    def api_key(self) -> str | None:
        return self._api_key

    def __repr__(self) -> str:
        return f"<warren.Client {self.endpoint} key={'yes' if self._api_key else 'no'}>"

    # ---- plumbing ------------------------------------------------------------------------

    def _url(self, path: str, query: Query) -> str:
        q = _encode_query(query)
        return self.endpoint.base_path + path + (f"?{q}" if q else "")

    def _headers_for(
        self, headers: Mapping[str, str] | None, request_id: str | None
    ) -> dict[str, str]:
        h = dict(self._headers)
        if self._api_key:
            h["Authorization"] = f"Bearer {self._api_key}"
        h["X-Request-Id"] = request_id or f"py-{uuid.uuid4().hex[:20]}"
        if headers:
            h.update(headers)
        return h

    def _timeout(self, timeout: Timeout) -> float | None:
        return self.timeout if timeout is UNSET else timeout

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Query,
        body: bytes | Iterable[bytes] | None,
        headers: dict[str, str],
        timeout: float | None,
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send one request and read the response head, on a pooled connection. A reused
        connection found closed by the server is retried once on a fresh one when the body
        can be sent again and the request surely was not processed (or is idempotent)."""
        url = self._url(path, query)
        streamed = False
        if body is None or isinstance(body, bytes):
            if method in ("POST", "PUT", "PATCH"):
                headers.setdefault("Content-Length", str(len(body or b"")))
        else:
            streamed = True
            headers.setdefault("Transfer-Encoding", "chunked")
        request_id = headers.get("X-Request-Id")
        first_attempt = True
        while True:
            conn, reused = self._pool.acquire()
            sent = False
            try:
                if conn.sock is None:
                    _set_timeout(conn, self.connect_timeout)
                    conn.connect()
                _set_timeout(conn, timeout)
                try:
                    conn.request(method, url, body=body, headers=headers, encode_chunked=streamed)
                except _STALE_ERRORS:
                    if not streamed:
                        raise
                    # The server may have answered (say, 404) and stopped reading our body.
                    try:
                        resp = conn.getresponse()
                    except Exception:
                        pass
                    else:
                        return conn, resp
                    raise
                sent = True
                return conn, conn.getresponse()
            except socket.timeout as e:
                conn.close()
                raise TimeoutException(
                    "client_timeout",
                    f"{method} {path}: no response within {timeout} s",
                    None,
                    request_id,
                ) from e
            except _STALE_ERRORS as e:
                conn.close()
                if (
                    first_attempt
                    and reused
                    and not streamed
                    and (not sent or method in _IDEMPOTENT or "Idempotency-Key" in headers)
                ):
                    first_attempt = False
                    continue
                raise APIConnectionError(
                    "connection", f"{method} {path}: connection to {self.endpoint} lost: {e}",
                    None, request_id,
                ) from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise APIConnectionError(
                    "connection", f"{method} {path}: cannot reach warrend at {self.endpoint}: {e}",
                    None, request_id,
                ) from e
            except BaseException:
                conn.close()
                raise

    def _finish(
        self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse, path: str
    ) -> Response:
        try:
            body = resp.read()
        except socket.timeout as e:
            conn.close()
            raise TimeoutException(
                "client_timeout", f"{path}: timed out reading the response", None,
                resp.headers.get("X-Request-Id"),
            ) from e
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise APIConnectionError(
                "connection", f"{path}: response broken: {e!r}", None,
                resp.headers.get("X-Request-Id"),
            ) from e
        except BaseException:
            conn.close()
            raise
        if resp.will_close or not resp.isclosed():
            conn.close()
        else:
            self._pool.release(conn)
        return Response(resp.status, resp.headers, body)

    @staticmethod
    def _raise_for_status(r: Response) -> None:
        if r.status >= 400:
            raise error_from_response(
                r.status, r.body, r.request_id, r.headers.get("Retry-After")
            )

    @staticmethod
    def _prepare_body(
        json_body: Any, data: bytes | Iterable[bytes] | None, headers: dict[str, str]
    ) -> bytes | Iterable[bytes] | None:
        if json_body is not UNSET:
            headers.setdefault("Content-Type", "application/json")
            return json.dumps(json_body, separators=(",", ":")).encode("utf-8")
        if data is not None:
            headers.setdefault("Content-Type", "application/octet-stream")
        return data

    # ---- public --------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Query = None,
        json_body: Any = UNSET,
        data: bytes | Iterable[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: Timeout = UNSET,
        request_id: str | None = None,
        check: bool = True,
    ) -> Response:
        """One request, its response read whole. ``json_body`` is sent as JSON; ``data`` as
        bytes (a bytes object with Content-Length, an iterable of bytes chunked). With
        ``check`` a non-2xx status raises the matching :class:`~warren.WarrenError`."""
        h = self._headers_for(headers, request_id)
        body = self._prepare_body(json_body, data, h)
        conn, resp = self._send(
            method, path, query=query, body=body, headers=h, timeout=self._timeout(timeout)
        )
        r = self._finish(conn, resp, path)
        if check:
            self._raise_for_status(r)
        return r

    def stream(
        self,
        method: str,
        path: str,
        *,
        query: Query = None,
        json_body: Any = UNSET,
        data: bytes | Iterable[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: Timeout = None,
        request_id: str | None = None,
    ) -> StreamResponse:
        """A request whose 2xx response body is read incrementally (see
        :class:`StreamResponse`); a non-2xx status raises. ``timeout`` (default none) bounds
        each read."""
        h = self._headers_for(headers, request_id)
        body = self._prepare_body(json_body, data, h)
        conn, resp = self._send(
            method, path, query=query, body=body, headers=h, timeout=self._timeout(timeout)
        )
        if resp.status >= 300:
            r = self._finish(conn, resp, path)
            self._raise_for_status(r)
            raise WarrenError("bad_response", f"unexpected HTTP {r.status}", r.status, r.request_id)
        return StreamResponse(self, conn, resp)

    def health(self, *, timeout: Timeout = UNSET) -> bool:
        """True when the daemon answers ``GET /v1/health``; False when it cannot be reached."""
        try:
            r = self.request("GET", "/v1/health", timeout=timeout, check=False)
        except (APIConnectionError, TimeoutException):
            return False
        return r.status == 200

    def version(self) -> VersionInfo:
        return VersionInfo.from_json(self.request("GET", "/v1/version").json_object())

    def devices(self) -> list[dict[str, Any]]:
        """The host's devices from its CDI specs (``GET /v1/devices``, docs/devices.md): each
        ``{"name", "kind", "in_use"}``, and ``"refused"`` (why a create naming it is refused)
        where Warren cannot give it."""
        got = self.request("GET", "/v1/devices").json_object().get("devices")
        return [d for d in got if isinstance(d, dict)] if isinstance(got, list) else []

    def team_limits(self, team: str | None = None) -> dict[str, Any]:
        """A team's limits in force (``GET /v1/teams/{team}/limits``): ``requests``,
        ``creates`` and ``bytes`` buckets (``{"rate", "burst"}``, rate 0: off),
        ``max_sandboxes``, ``max_memory_mb`` (0: none) and the ``overrides`` that make them.
        ``team``: another team's (admin keys); None: the key's own."""
        t = team if team is not None else self.version().team
        if not t:
            raise ValueError("the daemon does not say the key's team: name it")
        return self.request("GET", f"/v1/teams/{path_segment(t)}/limits").json_object()

    def set_team_limits(self, team: str, **overrides: Any) -> dict[str, Any]:
        """Change a team's overrides of the daemon's limits (admin keys): each keyword
        (``requests``/``creates``/``bytes`` as ``{"rate": R, "burst": B}`` or None for off,
        ``max_sandboxes``, ``max_memory_mb``) replaces that override; the others are kept.
        Returns the limits now in force."""
        allowed = {"requests", "creates", "bytes", "max_sandboxes", "max_memory_mb"}
        bad = sorted(set(overrides) - allowed)
        if bad:
            raise TypeError("unknown limits: " + ", ".join(bad))
        path = f"/v1/teams/{path_segment(team)}/limits"
        cur = self.request("GET", path).json_object().get("overrides")
        body: dict[str, Any] = dict(cur) if isinstance(cur, dict) else {}
        for k, v in overrides.items():
            body[k] = {"rate": 0, "burst": 0} if v is None and k in ("requests", "creates", "bytes") else v
        return self.request("PUT", path, json_body=body).json_object()

    def reset_team_limits(self, team: str) -> None:
        """Drop a team's overrides (admin keys): the daemon's defaults again."""
        self.request("DELETE", f"/v1/teams/{path_segment(team)}/limits")

    def warm_pools(self) -> list[dict[str, Any]]:
        """The daemon's warm pools (``GET /v1/warm-pools``): one ``{"template", "target",
        "ready"}`` per template it keeps sandboxes of, started (and, for a template with a
        start command, ready) ahead of creates."""
        pools = self.request("GET", "/v1/warm-pools").json_object().get("pools")
        return [p for p in pools if isinstance(p, dict)] if isinstance(pools, list) else []

    def usage(
        self,
        *,
        start: Any = None,
        end: Any = None,
        group_by: str = "sandbox",
        team: str | None = None,
    ) -> Usage:
        """The usage ledger (``GET /v1/usage``) of the caller's team, or of ``team`` (an
        admin's), for intervals starting in [start, end) (datetimes, unix seconds or RFC 3339
        strings; None: no bound), grouped by ``sandbox``, ``template`` or ``day``."""
        q: dict[str, str] = {"group_by": group_by}
        for k, v in (("from", time_param(start)), ("to", time_param(end)), ("team", team)):
            if v is not None:
                q[k] = v
        return Usage.from_json(self.request("GET", "/v1/usage", query=q).json_object())

    def budget(self, team: str) -> dict[str, Any]:
        """A team's budget and its spend this period (``GET /v1/teams/{team}/budget``; a team's
        key reads its own). Keys: ``team``, ``budget`` (``{"unit", "soft", "hard", "period"}``
        or None), ``used``, ``state`` (``ok``, ``soft``, ``hard``), ``period_start``,
        ``period_end``, ``vcpu_seconds``, ``gib_seconds``, ``currency``, ``prices``."""
        return self.request("GET", "/v1/teams/%s/budget" % path_segment(team)).json_object()

    def set_budget(
        self,
        team: str,
        *,
        hard: float | None = None,
        soft: float | None = None,
        unit: str = "vcpu_seconds",
        period: str = "month",
    ) -> dict[str, Any]:
        """Set a team's budget (``PUT /v1/teams/{team}/budget``, an admin key): caps in
        ``unit`` (``vcpu_seconds`` or ``money`` at the operator's prices) over ``period``
        (``month``: the calendar month in UTC; ``total``: all time). Past ``soft`` responses
        carry ``Warren-Budget``; past ``hard`` creates raise :class:`~warren.RateLimitError`
        with ``reason == "budget"``."""
        body: dict[str, Any] = {"unit": unit, "period": period}
        if hard is not None:
            body["hard"] = hard
        if soft is not None:
            body["soft"] = soft
        return self.request(
            "PUT", "/v1/teams/%s/budget" % path_segment(team), json_body=body
        ).json_object()

    def delete_budget(self, team: str) -> None:
        """Remove a team's budget (``DELETE /v1/teams/{team}/budget``, an admin key)."""
        self.request("DELETE", "/v1/teams/%s/budget" % path_segment(team))

    def usage_csv(
        self,
        *,
        start: Any = None,
        end: Any = None,
        group_by: str = "sandbox",
        team: str | None = None,
    ) -> str:
        """The same as :meth:`usage`, as the daemon's CSV text (a header line, then a row per
        group)."""
        q: dict[str, str] = {"group_by": group_by, "format": "csv"}
        for k, v in (("from", time_param(start)), ("to", time_param(end)), ("team", team)):
            if v is not None:
                q[k] = v
        return self.request("GET", "/v1/usage", query=q).body.decode("utf-8")

    def audit(
        self,
        *,
        since: datetime | str | int | None = None,
        until: datetime | str | int | None = None,
        action: str | None = None,
        object_id: str | None = None,
        team: str | None = None,
        page_size: int = 100,
    ) -> Iterator[AuditRecord]:
        """The audit trail (``GET /v1/audit``), oldest first, every page: each state-changing
        request of the key's team. ``since``/``until``: a datetime, an RFC 3339 UTC string or
        milliseconds since the epoch; ``action``: one action ("sandbox.create") or a prefix
        ("sandbox."); ``object_id``: records about that object only; ``team``: another team's
        trail (admin keys; "" for every team; ForbiddenError otherwise). The first page is
        fetched at once, so that a bad filter raises here."""
        def when(v: datetime | str | int | None) -> str | None:
            if isinstance(v, datetime):
                t = v.astimezone(timezone.utc) if v.tzinfo else v.replace(tzinfo=timezone.utc)
                return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)
            return None if v is None else str(v)

        size = min(max(page_size, 1), 1000)
        query: dict[str, str | int | None] = {
            "from": when(since), "to": when(until), "action": action, "object": object_id,
            "team": team, "limit": size,
        }
        return self._pages("/v1/audit", query, "cursor", AuditRecord.from_json)

    def events(
        self,
        *,
        sandbox_id: str | None = None,
        type: str | None = None,
        team: str | None = None,
        after: str | None = None,
        follow: bool = False,
        page_size: int = 100,
    ) -> Iterator[Event]:
        """The team's lifecycle events (``GET /v1/events``), oldest first, every page.
        ``type``: one type ("sandbox.paused") or a prefix ("sandbox."); ``after``: only those
        after this event id. With ``follow``, the iterator reads ``GET /v1/events/stream``
        (Server-Sent Events): the stored events after ``after``, then each as it happens, until
        the daemon stops (close the iterator to stop earlier). The first request is made at
        once, so that a bad filter raises here."""
        query: dict[str, str | int | None] = {
            "sandbox": sandbox_id, "type": type, "team": team, "after": after,
        }
        if follow:
            stream = self.stream("GET", "/v1/events/stream", query=query,
                                 headers={"Accept": "text/event-stream"})

            def live() -> Iterator[Event]:
                with stream:
                    data: list[str] = []
                    while raw := stream.readline():  # an empty line ends each event
                        line = raw.decode().rstrip("\r\n")
                        if line.startswith("data: "):
                            data.append(line[6:])
                        elif line == "" and data:
                            doc = json.loads("\n".join(data))
                            data = []
                            if isinstance(doc, dict):
                                yield Event.from_json(doc)

            return live()
        size = min(max(page_size, 1), 1000)
        return self._pages("/v1/events", dict(query, limit=size), "after", Event.from_json)

    def _pages(
        self,
        path: str,
        query: dict[str, str | int | None],
        cursor_param: str,
        parse: Callable[[dict[str, Any]], T],
    ) -> Iterator[T]:
        """Every item of a paginated list (``{"events": [...], "next_cursor": ...}``), the
        next page asked with ``cursor_param=next_cursor``. The first page is fetched here, at
        once, so that a bad query raises at the call, not at the first ``next()``."""
        first = self.request("GET", path, query=query).json_object()

        def pages() -> Iterator[T]:
            doc = first
            while True:
                items = doc.get("events")
                items = items if isinstance(items, list) else []
                for d in items:
                    if isinstance(d, dict):
                        yield parse(d)
                nxt = doc.get("next_cursor")
                if not items or not isinstance(nxt, str) or not nxt:
                    return
                doc = self.request(
                    "GET", path, query=dict(query, **{cursor_param: nxt})
                ).json_object()

        return pages()

    def webhook_create(
        self,
        url: str,
        *,
        events: Sequence[str] | None = None,
        name: str | None = None,
        secret: str | None = None,
        enabled: bool = True,
        team: str | None = None,
    ) -> Webhook:
        """Register a webhook (``POST /v1/webhooks``) for the team's lifecycle events of the
        types in ``events`` (prefixes like "sandbox." allowed; None: every event). Without
        ``secret`` the daemon makes one; the returned Webhook carries it (only this once).
        ``team``: another team's (admin keys)."""
        body: dict[str, Any] = {"url": url, "enabled": enabled}
        for k, v in (("events", list(events) if events is not None else None), ("name", name),
                     ("secret", secret), ("team", team)):
            if v is not None:
                body[k] = v
        return Webhook.from_json(
            self.request("POST", "/v1/webhooks", json_body=body).json_object())

    def webhooks(self) -> list[Webhook]:
        """The team's webhooks (``GET /v1/webhooks``; an admin key: every team's)."""
        doc = self.request("GET", "/v1/webhooks").json_object()
        items = doc.get("webhooks")
        return [Webhook.from_json(w) for w in items if isinstance(w, dict)] if isinstance(
            items, list) else []

    def webhook(self, webhook_id: str) -> Webhook:
        """One webhook (``GET /v1/webhooks/{id}``)."""
        return Webhook.from_json(
            self.request("GET", "/v1/webhooks/" + quote(webhook_id, safe="")).json_object())

    def webhook_update(self, webhook_id: str, **fields: Any) -> Webhook:
        """Change a webhook's url, events, name, secret or enabled (``PATCH``)."""
        return Webhook.from_json(self.request(
            "PATCH", "/v1/webhooks/" + quote(webhook_id, safe=""), json_body=fields
        ).json_object())

    def webhook_delete(self, webhook_id: str) -> None:
        """Delete a webhook and its deliveries (``DELETE /v1/webhooks/{id}``)."""
        self.request("DELETE", "/v1/webhooks/" + quote(webhook_id, safe=""))

    def webhook_deliveries(
        self, webhook_id: str, *, state: str | None = None, page_size: int = 100
    ) -> list[WebhookDelivery]:
        """A webhook's deliveries, oldest first, every page; ``state``: pending, delivered or
        dead (the dead-letter record)."""
        out: list[WebhookDelivery] = []
        after: str | None = None
        path = "/v1/webhooks/" + quote(webhook_id, safe="") + "/deliveries"
        while True:
            doc = self.request("GET", path, query={
                "state": state, "after": after, "limit": min(max(page_size, 1), 1000)
            }).json_object()
            items = doc.get("deliveries")
            items = items if isinstance(items, list) else []
            out += [WebhookDelivery.from_json(d) for d in items if isinstance(d, dict)]
            nxt = doc.get("next_cursor")
            if not items or not isinstance(nxt, str) or not nxt:
                return out
            after = nxt

    def webhook_redeliver(self, webhook_id: str, delivery: int) -> None:
        """Send a finished (dead or delivered) delivery again, from its first attempt."""
        self.request("POST", "/v1/webhooks/%s/deliveries/%d/redeliver"
                     % (quote(webhook_id, safe=""), delivery))

    def close(self) -> None:
        """Close the idle pooled connections (the client stays usable)."""
        self._pool.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def resolve_client(
    client: Client | None, api_url: str | None, api_key: str | None
) -> tuple[Client, bool]:
    """The client to use and whether the caller owns it (made here, to close when done)."""
    if client is not None:
        if api_url is not None or api_key is not None:
            raise ValueError("pass either client or api_url/api_key, not both")
        return client, False
    return Client(api_url, api_key), True
