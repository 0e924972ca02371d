"""The sandbox's file system: ``sandbox.files``."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import IO, Any, Literal, overload

from .client import Client, StreamResponse, path_segment
from .errors import ConflictError, NotFoundError
from .models import FileInfo, FilesystemEvent

__all__ = ["Files", "WatchHandle", "FileData", "CHUNK_SIZE"]

CHUNK_SIZE = 256 * 1024

FileData = str | bytes | bytearray | memoryview | IO[bytes] | IO[str] | Iterable[bytes]
"""What can be written: text (UTF-8 encoded), bytes, a file object open for reading (binary or
text; read and sent in chunks), or an iterable of bytes chunks."""


def _read_blocks(f: IO[bytes] | IO[str], size: int) -> Iterator[bytes]:
    while True:
        block = f.read(size)
        if not block:
            return
        yield block.encode("utf-8") if isinstance(block, str) else bytes(block)


def _iter_chunks(it: Iterable[bytes | str]) -> Iterator[bytes]:
    for chunk in it:
        if chunk:
            yield chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)


def _body(data: FileData) -> bytes | Iterator[bytes]:
    """bytes for an in-memory payload (sent with Content-Length), else an iterator of chunks
    (sent with chunked transfer encoding, never held whole in memory)."""
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if hasattr(data, "read"):
        return _read_blocks(data, CHUNK_SIZE)  # type: ignore[arg-type]
    return _iter_chunks(data)


def _mode_str(mode: int | str | None) -> str | None:
    if mode is None:
        return None
    if isinstance(mode, int):
        return format(mode, "04o")
    return mode


class WatchHandle:
    """A running directory watch (see :meth:`Files.watch_dir`). Stop it with :meth:`stop`
    (or ``with``). ``error`` holds what ended it abnormally (a stream failure, or an exception
    raised by ``on_event``)."""

    def __init__(
        self,
        stream: StreamResponse,
        on_event: Callable[[FilesystemEvent], None],
        on_exit: Callable[[BaseException | None], None] | None,
        path: str,
    ) -> None:
        self.path = path
        self.error: BaseException | None = None
        self._stream = stream
        self._on_event = on_event
        self._on_exit = on_exit
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"warren-watch {path}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for doc in self._stream.iter_json():
                self._on_event(FilesystemEvent.from_json(doc))
        except BaseException as e:
            if not self._stream.aborted:
                self.error = e
        finally:
            self._stream.close()
            self._stopped.set()
            if self._on_exit is not None:
                try:
                    self._on_exit(self.error)
                except Exception:
                    pass

    @property
    def running(self) -> bool:
        return not self._stopped.is_set()

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop watching (returns once the reader thread ended, or after ``timeout``)."""
        self._stream.abort()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the watch to end; True if it did."""
        return self._stopped.wait(timeout)

    def __enter__(self) -> WatchHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<WatchHandle {self.path!r} {'running' if self.running else 'stopped'}>"


class Files:
    """``sandbox.files``. Paths are absolute paths inside the sandbox; ``user`` acts as that
    user of the sandbox (name or uid; default the template's user). ``service``: in a sandbox
    made from a Compose file, the paths are in that service's root (docs/compose.md)."""

    def __init__(self, client: Client, sandbox_id: str) -> None:
        self._client = client
        self.sandbox_id = sandbox_id
        self._base = f"/v1/sandboxes/{path_segment(sandbox_id)}/files"

    @staticmethod
    def _q(path: str, user: str | None, service: str | None = None, **extra: Any) -> dict[str, Any]:
        q: dict[str, Any] = {"path": path}
        if user is not None:
            q["user"] = user
        if service is not None:
            q["service"] = service
        q.update(extra)
        return q

    # ---- reading ------------------------------------------------------------------------

    @overload
    def read(
        self,
        path: str,
        *,
        format: Literal["text"] = "text",
        user: str | None = None,
        offset: int = 0,
        length: int | None = None,
        service: str | None = None,
    ) -> str: ...

    @overload
    def read(
        self,
        path: str,
        *,
        format: Literal["bytes"],
        user: str | None = None,
        offset: int = 0,
        length: int | None = None,
        service: str | None = None,
    ) -> bytes: ...

    @overload
    def read(
        self,
        path: str,
        *,
        format: Literal["stream"],
        user: str | None = None,
        offset: int = 0,
        length: int | None = None,
        service: str | None = None,
    ) -> StreamResponse: ...

    def read(
        self,
        path: str,
        *,
        format: Literal["text", "bytes", "stream"] = "text",
        user: str | None = None,
        offset: int = 0,
        length: int | None = None,
        service: str | None = None,
    ) -> str | bytes | StreamResponse:
        """A file's content: ``"text"`` (UTF-8; invalid sequences become U+FFFD), ``"bytes"``
        or ``"stream"`` (a :class:`~warren.StreamResponse`: iterate it for chunks or call
        ``.read(n)``; use it with ``with``). ``offset``/``length`` read part of the file (an
        HTTP Range)."""
        if format not in ("text", "bytes", "stream"):
            raise ValueError(f"format must be 'text', 'bytes' or 'stream', not {format!r}")
        if offset < 0 or (length is not None and length < 0):
            raise ValueError("offset and length must be >= 0")
        headers: dict[str, str] = {}
        if length == 0:
            if format == "stream":
                length = None  # a Range cannot be empty; read from offset and stop at once
            else:
                self.get_info(path, user=user, service=service)  # still report a missing file
                return "" if format == "text" else b""
        if length is not None:
            headers["Range"] = f"bytes={offset}-{offset + length - 1}"
        elif offset:
            headers["Range"] = f"bytes={offset}-"
        query = self._q(path, user, service)
        if format == "stream":
            return self._client.stream("GET", self._base, query=query, headers=headers)
        r = self._client.request("GET", self._base, query=query, headers=headers)
        body = r.body
        if headers and r.status == 200:  # the server ignored the Range: cut here
            body = body[offset:] if length is None else body[offset : offset + length]
        return body.decode("utf-8", errors="replace") if format == "text" else body

    def download(
        self,
        path: str,
        fileobj: IO[bytes],
        *,
        user: str | None = None,
        chunk_size: int = CHUNK_SIZE,
        service: str | None = None,
    ) -> int:
        """Stream a file into ``fileobj`` (open for binary writing); returns the bytes
        written."""
        total = 0
        with self._client.stream("GET", self._base, query=self._q(path, user, service)) as stream:
            for chunk in stream.iter_chunks(chunk_size):
                fileobj.write(chunk)
                total += len(chunk)
        return total

    # ---- writing ------------------------------------------------------------------------

    def write(
        self,
        path: str,
        data: FileData,
        *,
        mode: int | str | None = None,
        user: str | None = None,
        parents: bool = True,
        service: str | None = None,
    ) -> FileInfo:
        """Write (create or atomically replace) a file; returns its info. A file object or
        iterable is streamed (chunked), not held in memory. ``mode``: permission bits of a
        new file (``0o600`` or ``"0600"``); ``parents``: create missing directories."""
        query = self._q(
            path, user, service, mode=_mode_str(mode), parents=None if parents else False
        )
        r = self._client.request("PUT", self._base, query=query, data=_body(data))
        return FileInfo.from_json(r.json_object())

    def upload(
        self,
        path: str,
        fileobj: IO[bytes] | IO[str],
        *,
        mode: int | str | None = None,
        user: str | None = None,
        service: str | None = None,
    ) -> FileInfo:
        """Stream a local file object into ``path`` (as :meth:`write`)."""
        return self.write(path, fileobj, mode=mode, user=user, service=service)

    def write_files(
        self,
        files: Iterable[tuple[str, FileData]],
        *,
        user: str | None = None,
        service: str | None = None,
    ) -> builtins.list[FileInfo]:
        """Write several files (one request each, in order); returns their infos."""
        return [self.write(path, data, user=user, service=service) for path, data in files]

    # ---- metadata -----------------------------------------------------------------------

    def list(
        self, path: str, depth: int = 1, *, user: str | None = None, service: str | None = None
    ) -> builtins.list[FileInfo]:
        """A directory's entries (``depth`` levels, 1-16), ``name`` relative to ``path``."""
        doc = self._client.request(
            "GET", f"{self._base}/list", query=self._q(path, user, service, depth=depth)
        ).json_object()
        entries = doc.get("entries")
        if not isinstance(entries, builtins.list):
            return []
        return [FileInfo.from_json(e) for e in entries if isinstance(e, dict)]

    def get_info(
        self, path: str, *, user: str | None = None, service: str | None = None
    ) -> FileInfo:
        """Stat ``path`` (a symlink is not followed). NotFoundError if it does not exist."""
        r = self._client.request("GET", f"{self._base}/stat", query=self._q(path, user, service))
        return FileInfo.from_json(r.json_object())

    def stat(self, path: str, *, user: str | None = None, service: str | None = None) -> FileInfo:
        """Alias of :meth:`get_info`."""
        return self.get_info(path, user=user, service=service)

    def exists(self, path: str, *, user: str | None = None, service: str | None = None) -> bool:
        try:
            self.get_info(path, user=user, service=service)
        except NotFoundError:
            return False
        return True

    def remove(
        self,
        path: str,
        recursive: bool = False,
        *,
        user: str | None = None,
        service: str | None = None,
    ) -> None:
        """Remove a file or directory (a non-empty directory needs ``recursive``)."""
        query = self._q(path, user, service, recursive="true" if recursive else None)
        self._client.request("DELETE", self._base, query=query)

    def rename(
        self, old_path: str, new_path: str, *, user: str | None = None, service: str | None = None
    ) -> FileInfo:
        """Move ``old_path`` to ``new_path``; returns the info of the moved entry."""
        body: dict[str, Any] = {"from": old_path, "to": new_path}
        if user is not None:
            body["user"] = user
        if service is not None:
            body["service"] = service
        self._client.request("POST", f"{self._base}/move", json_body=body)
        return self.get_info(new_path, user=user, service=service)

    def make_dir(
        self,
        path: str,
        *,
        mode: int | str | None = None,
        parents: bool = True,
        user: str | None = None,
        service: str | None = None,
    ) -> bool:
        """Make a directory (and its parents); False if it already existed (the server
        answered 409 conflict)."""
        body: dict[str, Any] = {"path": path, "parents": parents}
        if mode is not None:
            body["mode"] = _mode_str(mode)
        if user is not None:
            body["user"] = user
        if service is not None:
            body["service"] = service
        try:
            self._client.request("POST", f"{self._base}/mkdir", json_body=body)
        except ConflictError as conflict:
            # 409 also means "the sandbox is not running": False only for an existing dir.
            try:
                existing = self.get_info(path, user=user, service=service)
            except NotFoundError:
                raise conflict from None
            if existing.is_dir:
                return False
            raise
        return True

    # ---- watching -----------------------------------------------------------------------

    def watch_dir(
        self,
        path: str,
        on_event: Callable[[FilesystemEvent], None],
        recursive: bool = False,
        *,
        on_exit: Callable[[BaseException | None], None] | None = None,
        service: str | None = None,
    ) -> WatchHandle:
        """Watch a directory: ``on_event`` is called (from a background thread) for each
        change. Returns once the server accepted the watch (NotFoundError otherwise).
        ``on_exit(error_or_None)`` is called when the watch ends. Stop it with
        ``handle.stop()``."""
        query = {"path": path, "recursive": "true" if recursive else None, "service": service}
        stream = self._client.stream(
            "GET", f"{self._base}/watch", query=query,
            headers={"Accept": "application/x-ndjson"},
        )
        return WatchHandle(stream, on_event, on_exit, path)

    def iter_watch(
        self, path: str, *, recursive: bool = False, service: str | None = None
    ) -> Iterator[FilesystemEvent]:
        """The same watch as a blocking iterator (close the iterator to stop)."""
        query = {"path": path, "recursive": "true" if recursive else None, "service": service}
        stream = self._client.stream(
            "GET", f"{self._base}/watch", query=query,
            headers={"Accept": "application/x-ndjson"},
        )

        def gen() -> Iterator[FilesystemEvent]:
            with stream:
                for doc in stream.iter_json():
                    yield FilesystemEvent.from_json(doc)

        return gen()

