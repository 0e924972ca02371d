"""Running commands in a sandbox: ``sandbox.commands``."""

from __future__ import annotations

import base64
import codecs
import math
import signal as _signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, overload

from .client import UNSET, Client, StreamResponse, Timeout, path_segment
from .errors import (
    APIConnectionError,
    CommandExitError,
    ConflictError,
    NotFoundError,
    TimeoutException,
    WarrenError,
    error_from_code,
)
from .models import CommandEvent, CommandResult, CommandUsage, ProcessInfo, decode_data

__all__ = ["Commands", "CommandHandle", "OutputCallback", "Signal"]

OutputCallback = Callable[[str], None]
"""Receives output decoded as UTF-8 (a multi-byte character split between chunks is kept
whole; invalid sequences become U+FFFD)."""

Signal = int | str | _signal.Signals
"""A signal: a number (as inside the sandbox, i.e. Linux numbering), a name (``"TERM"``,
``"SIGTERM"``) or a :class:`signal.Signals` (sent by name, so portable)."""

_NDJSON = {"Accept": "application/x-ndjson"}
# openapi.yaml gives attach no `encoding` parameter, so its output is UTF-8 text (invalid bytes
# become U+FFFD). Set to "base64" to ask for exact bytes (`?encoding=base64`) once it is.
_ATTACH_ENCODING = "base64"
_WAIT_MARGIN = 30.0  # seconds of HTTP timeout beyond a server-side timeout


def _timeout_seconds(value: float) -> int:
    if value < 0:
        raise ValueError("timeout must be >= 0")
    return int(math.ceil(value))


def _signal_value(sig: Signal) -> int | str:
    if isinstance(sig, _signal.Signals):
        return sig.name
    return sig


class _Output:
    """Accumulates a command's output and feeds the str callbacks."""

    def __init__(
        self, on_stdout: OutputCallback | None, on_stderr: OutputCallback | None
    ) -> None:
        self.stdout = bytearray()
        self.stderr = bytearray()
        self._cb = {"stdout": on_stdout, "stderr": on_stderr}
        self._dec = {
            "stdout": codecs.getincrementaldecoder("utf-8")(errors="replace"),
            "stderr": codecs.getincrementaldecoder("utf-8")(errors="replace"),
        }
        self.lock = threading.Lock()

    def feed(self, stream: str, data: bytes) -> None:
        with self.lock:
            (self.stdout if stream == "stdout" else self.stderr).extend(data)
        cb = self._cb.get(stream)
        if cb is not None and data:
            text = self._dec[stream].decode(data)
            if text:
                cb(text)

    def flush(self) -> None:
        for stream, cb in self._cb.items():
            if cb is not None:
                text = self._dec[stream].decode(b"", final=True)
                if text:
                    cb(text)


def _result(
    ev: CommandEvent | None,
    out: _Output,
    pid: int | None,
    *,
    exit_code: int | None = None,
    signal: int | None = None,
) -> CommandResult:
    with out.lock:
        stdout, stderr = bytes(out.stdout), bytes(out.stderr)
    if ev is not None:
        exit_code, signal = ev.exit_code, ev.signal
    return CommandResult(
        exit_code=exit_code,
        signal=signal,
        stdout_bytes=stdout,
        stderr_bytes=stderr,
        pid=pid,
        timed_out=ev.timed_out if ev is not None else False,
        usage=ev.usage if ev is not None else None,
    )


def _event_error(ev: CommandEvent, request_id: str | None) -> WarrenError:
    return error_from_code(
        ev.code or "internal", ev.message or "the command's stream failed", None, request_id
    )


class CommandHandle:
    """A command running in the sandbox (``run(..., background=True)`` or
    ``commands.connect(pid)``).

    Output reaches the handle in one of two ways: through callbacks given to ``run``/``connect``
    (read by a background thread, from the command's start for ``run``), or by iterating the
    handle (``for event in handle:``), which attaches to the process and yields its
    :class:`~warren.CommandEvent` s from now on. Without either, :meth:`wait` returns only the
    exit status.
    """

    def __init__(self, commands: Commands, pid: int, *, check: bool = True) -> None:
        self._commands = commands
        self.pid: int = pid
        self._check = check
        self._out = _Output(None, None)
        self._exit: CommandEvent | None = None
        self._stream_error: WarrenError | None = None
        self._transport_error: WarrenError | None = None
        self._callback_error: BaseException | None = None
        self._stream: StreamResponse | None = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"<CommandHandle pid={self.pid} sandbox={self._commands.sandbox_id}>"

    # ---- output -------------------------------------------------------------------------

    @property
    def stdout(self) -> str:
        """The stdout received so far."""
        with self._out.lock:
            return bytes(self._out.stdout).decode("utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        """The stderr received so far."""
        with self._out.lock:
            return bytes(self._out.stderr).decode("utf-8", errors="replace")

    @property
    def exit_code(self) -> int | None:
        """The exit code if the handle has seen the exit, else None (see :meth:`wait`)."""
        return self._exit.exit_code if self._exit is not None else None

    def _start_reader(
        self,
        stream: StreamResponse,
        events: Iterator[dict[str, Any]],
        on_stdout: OutputCallback | None,
        on_stderr: OutputCallback | None,
        encoding: str,
    ) -> None:
        self._out = _Output(on_stdout, on_stderr)
        self._stream = stream
        self._thread = threading.Thread(
            target=self._pump,
            args=(stream, events, encoding),
            name=f"warren-cmd-{self.pid}",
            daemon=True,
        )
        self._thread.start()

    def _pump(
        self, stream: StreamResponse, events: Iterator[dict[str, Any]], encoding: str
    ) -> None:
        try:
            for doc in events:
                ev = CommandEvent.from_json(doc, encoding)
                if ev.type in ("stdout", "stderr"):
                    try:
                        self._out.feed(ev.type, ev.data)
                    except BaseException as e:  # a callback failed: stop reading
                        self._callback_error = e
                        return
                elif ev.type == "exit":
                    self._exit = ev
                    break
                elif ev.type == "error":
                    self._stream_error = _event_error(ev, stream.request_id)
                    break
            try:
                self._out.flush()
            except BaseException as e:
                self._callback_error = e
        except WarrenError as e:
            self._transport_error = e
        finally:
            stream.close()

    def __iter__(self) -> Iterator[CommandEvent]:
        return self.events()

    def events(self, *, timeout: float | None = None) -> Iterator[CommandEvent]:
        """Attach to the process and yield its events: the output kept since it started (the
        server replays its last 1 MiB), then new output, ending after ``exit`` (an ``error``
        event raises). Output seen here also accumulates in the handle. ``timeout`` bounds each
        read of the stream."""
        if self._thread is not None:
            raise RuntimeError("this handle's output already goes to its callbacks")
        stream = self._commands._attach(self.pid, timeout=timeout)
        with stream:
            for doc in stream.iter_json():
                ev = CommandEvent.from_json(doc, _ATTACH_ENCODING)
                if ev.type in ("stdout", "stderr"):
                    self._out.feed(ev.type, ev.data)
                elif ev.type == "exit":
                    self._exit = ev
                elif ev.type == "error":
                    raise _event_error(ev, stream.request_id)
                yield ev
                if ev.type == "exit":
                    return

    # ---- control ------------------------------------------------------------------------

    def wait(self, timeout: float | None = None, *, check: bool | None = None) -> CommandResult:
        """Wait for the end (at most ``timeout`` seconds, else :class:`~warren.TimeoutException`)
        and return the result; with ``check`` (default: as given to ``run``) a non-zero exit
        raises :class:`~warren.CommandExitError`."""
        check = self._check if check is None else check
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutException(
                    "client_timeout", f"process {self.pid} still running after {timeout} s"
                )
            if self._callback_error is not None:
                raise self._callback_error
            if self._stream_error is not None:
                raise self._stream_error
        if self._exit is None and self._thread is None:
            # Attach: the server replays the output kept since the start (its last 1 MiB),
            # then the rest and the exit, so the result has the command's output.
            for _ in self.events(timeout=timeout):
                pass
        if self._exit is not None:
            result = _result(self._exit, self._out, self.pid)
        else:
            info = self._commands._wait(self.pid, timeout)
            result = _result(None, self._out, self.pid, exit_code=info.exit_code, signal=info.signal)
        if check and not result.ok:
            raise CommandExitError(result)
        return result

    def disconnect(self) -> None:
        """Stop reading output (the callbacks are not called any more); the command goes on."""
        stream = self._stream
        if stream is not None:
            stream.abort()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    def kill(self) -> bool:
        """SIGKILL the process's group. False if there was no such (running) process."""
        return self._commands.kill(self.pid)

    def signal(self, sig: Signal) -> None:
        """Send a signal to the process's group."""
        self._commands.signal(self.pid, sig)

    def send_stdin(self, data: str | bytes) -> None:
        self._commands.send_stdin(self.pid, data)

    def close_stdin(self) -> None:
        self._commands.close_stdin(self.pid)

    def resize(self, rows: int, cols: int) -> None:
        """Resize the terminal of a pty process."""
        self._commands._client.request(
            "POST", self._commands._proc(self.pid, "/resize"),
            json_body={"rows": rows, "cols": cols},
        )

    def info(self) -> ProcessInfo:
        return self._commands.get(self.pid)

    def release(self) -> None:
        """Forget the ended process on the server (ConflictError while it runs)."""
        self._commands.release(self.pid)


class Commands:
    """``sandbox.commands``."""

    def __init__(self, client: Client, sandbox_id: str) -> None:
        self._client = client
        self.sandbox_id = sandbox_id
        self._base = f"/v1/sandboxes/{path_segment(sandbox_id)}"

    def _proc(self, pid: int, suffix: str = "") -> str:
        return f"{self._base}/processes/{path_segment(pid)}{suffix}"

    @overload
    def run(
        self,
        cmd: str | Sequence[str],
        *,
        background: Literal[False] = False,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        user: str | None = None,
        timeout: float | None = None,
        stdin: str | bytes | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        check: bool = True,
        max_output: int | None = None,
        cpus: float | None = None,
        memory_mb: int | None = None,
        usage: str | None = None,
        service: str | None = None,
        request_timeout: Timeout = UNSET,
    ) -> CommandResult: ...

    @overload
    def run(
        self,
        cmd: str | Sequence[str],
        *,
        background: Literal[True],
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        user: str | None = None,
        timeout: float | None = None,
        stdin: str | bytes | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        check: bool = True,
        max_output: int | None = None,
        cpus: float | None = None,
        memory_mb: int | None = None,
        usage: str | None = None,
        service: str | None = None,
        request_timeout: Timeout = UNSET,
    ) -> CommandHandle: ...

    @overload
    def run(
        self,
        cmd: str | Sequence[str],
        *,
        background: bool,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        user: str | None = None,
        timeout: float | None = None,
        stdin: str | bytes | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        check: bool = True,
        max_output: int | None = None,
        cpus: float | None = None,
        memory_mb: int | None = None,
        usage: str | None = None,
        service: str | None = None,
        request_timeout: Timeout = UNSET,
    ) -> CommandResult | CommandHandle: ...

    def run(
        self,
        cmd: str | Sequence[str],
        *,
        background: bool = False,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        user: str | None = None,
        timeout: float | None = None,
        stdin: str | bytes | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        check: bool = True,
        max_output: int | None = None,
        cpus: float | None = None,
        memory_mb: int | None = None,
        usage: str | None = None,
        service: str | None = None,
        request_timeout: Timeout = UNSET,
    ) -> CommandResult | CommandHandle:
        """Run ``cmd``: a string is a shell command line (``/bin/sh -c``), a list an argv.

        ``timeout`` (seconds; ``0`` none) makes the server SIGKILL the command when it runs
        longer. ``stdin`` is written to the command's stdin, which is then closed.

        Foreground (default): waits and returns a :class:`~warren.CommandResult`; a non-zero
        exit, a signal or a timeout raises :class:`~warren.CommandExitError` unless
        ``check=False``. With ``on_stdout``/``on_stderr`` the output is streamed to them as it
        comes (in this thread); if a callback raises (or on KeyboardInterrupt) the command is
        killed. ``max_output`` caps the bytes kept per stream without callbacks (server
        default 10 MiB; see ``stdout_truncated``).

        ``cpus`` and ``memory_mb`` limit this command (and what it starts) below the sandbox's
        own limits, in a cgroup of its own (more than the sandbox has: 400
        ``exceeds_sandbox``). Every result carries ``usage`` (:class:`~warren.CommandUsage`);
        ``usage="cgroup"`` measures it in a cgroup of its own even without limits.

        ``service``: in a sandbox made from a Compose file, run it inside that service (its
        root, environment, working directory and user); :meth:`Sandbox.services` lists them.

        ``background=True``: returns a :class:`CommandHandle` once the command started. With
        callbacks its whole output goes to them from a background thread; ``handle.wait()``
        then returns it too.

        ``request_timeout`` bounds the wait for each HTTP response (default: the command's
        ``timeout`` plus a margin, or no limit).
        """
        body: dict[str, Any] = {"cmd": cmd if isinstance(cmd, str) else list(cmd)}
        if isinstance(cmd, str) and not cmd:
            raise ValueError("empty command")
        if not isinstance(cmd, str) and not body["cmd"]:
            raise ValueError("empty argv")
        if env:
            body["env"] = dict(env)
        if cwd is not None:
            body["cwd"] = cwd
        if user is not None:
            body["user"] = user
        if timeout is not None:
            body["timeout"] = _timeout_seconds(timeout)
        if stdin is not None and not background:
            if isinstance(stdin, str):
                body["stdin"] = stdin
            else:
                body["stdin"] = base64.b64encode(stdin).decode("ascii")
                body["stdin_encoding"] = "base64"
        if max_output is not None:
            body["max_output"] = max_output
        if cpus is not None:
            body["cpus"] = cpus
        if memory_mb is not None:
            body["memory_mb"] = int(memory_mb)
        if usage is not None:
            body["usage"] = usage
        if service is not None:
            body["service"] = service
        if request_timeout is UNSET:
            http_timeout: float | None = (
                body["timeout"] + _WAIT_MARGIN if body.get("timeout") else None
            )
        else:
            http_timeout = request_timeout
        streaming = on_stdout is not None or on_stderr is not None

        if background and not streaming:
            body["mode"] = "background"
            r = self._client.request(
                "POST", f"{self._base}/exec", json_body=body, timeout=request_timeout
            )
            info = ProcessInfo.from_json(r.json_object())
            handle = CommandHandle(self, info.pid, check=check)
            if stdin is not None:
                handle.send_stdin(stdin)
                handle.close_stdin()
            return handle

        if not streaming:
            body["mode"] = "wait"
            body["encoding"] = "base64"
            r = self._client.request(
                "POST", f"{self._base}/exec", json_body=body, timeout=http_timeout
            )
            d = r.json_object()
            result = CommandResult(
                exit_code=d.get("exit_code") if isinstance(d.get("exit_code"), int) else None,
                signal=d.get("signal") if isinstance(d.get("signal"), int) else None,
                stdout_bytes=decode_data(d.get("stdout"), "base64"),
                stderr_bytes=decode_data(d.get("stderr"), "base64"),
                pid=d.get("pid") if isinstance(d.get("pid"), int) else None,
                timed_out=bool(d.get("timed_out", False)),
                stdout_truncated=bool(d.get("stdout_truncated", False)),
                stderr_truncated=bool(d.get("stderr_truncated", False)),
                usage=CommandUsage.from_json(d.get("usage")),
            )
            if check and not result.ok:
                raise CommandExitError(result)
            return result

        body["mode"] = "stream"
        body["encoding"] = "base64"
        stream = self._client.stream(
            "POST", f"{self._base}/exec", json_body=body, headers=_NDJSON, timeout=http_timeout
        )
        events = stream.iter_json()
        if background:
            handle = self._start_streamed(stream, events, on_stdout, on_stderr, check)
            if stdin is not None:
                handle.send_stdin(stdin)
                handle.close_stdin()
            return handle
        return self._run_streamed(stream, events, on_stdout, on_stderr, check)

    def _start_streamed(
        self,
        stream: StreamResponse,
        events: Iterator[dict[str, Any]],
        on_stdout: OutputCallback | None,
        on_stderr: OutputCallback | None,
        check: bool,
    ) -> CommandHandle:
        """Read up to the ``start`` event here, the rest in the handle's thread."""
        try:
            for doc in events:
                ev = CommandEvent.from_json(doc, "base64")
                if ev.type == "start" and ev.pid is not None:
                    handle = CommandHandle(self, ev.pid, check=check)
                    handle._start_reader(stream, events, on_stdout, on_stderr, "base64")
                    return handle
                if ev.type == "error":
                    raise _event_error(ev, stream.request_id)
            raise APIConnectionError(
                "connection", "the exec stream ended before the command started", None,
                stream.request_id,
            )
        except BaseException:
            stream.close()
            raise

    def _run_streamed(
        self,
        stream: StreamResponse,
        events: Iterator[dict[str, Any]],
        on_stdout: OutputCallback | None,
        on_stderr: OutputCallback | None,
        check: bool,
    ) -> CommandResult:
        out = _Output(on_stdout, on_stderr)
        pid: int | None = None
        done = False
        try:
            for doc in events:
                ev = CommandEvent.from_json(doc, "base64")
                if ev.type == "start":
                    pid = ev.pid
                elif ev.type in ("stdout", "stderr"):
                    out.feed(ev.type, ev.data)
                elif ev.type == "exit":
                    done = True
                    out.flush()
                    result = _result(ev, out, pid)
                    if check and not result.ok:
                        raise CommandExitError(result)
                    return result
                elif ev.type == "error":
                    done = True
                    raise _event_error(ev, stream.request_id)
            done = True
            raise APIConnectionError(
                "connection",
                f"the exec stream ended before the command's exit (process {pid} may still run)",
                None,
                stream.request_id,
            )
        except BaseException:
            if not done and pid is not None:
                # A callback failed or we were interrupted: do not leave the command running.
                try:
                    self.kill(pid)
                except Exception:
                    pass
            raise
        finally:
            stream.close()

    # ---- processes ----------------------------------------------------------------------

    def list(self) -> list[ProcessInfo]:
        """The processes started through the API (running, and ended until released)."""
        doc = self._client.request("GET", f"{self._base}/processes").json_object()
        procs = doc.get("processes")
        return [ProcessInfo.from_json(p) for p in procs if isinstance(p, dict)] if isinstance(
            procs, list
        ) else []

    def get(self, pid: int) -> ProcessInfo:
        return ProcessInfo.from_json(self._client.request("GET", self._proc(pid)).json_object())

    def connect(
        self,
        pid: int,
        *,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        check: bool = True,
    ) -> CommandHandle:
        """A handle on a running (or ended) process. With callbacks, its output from now on
        goes to them from a background thread. Raises NotFoundError if there is no such
        process."""
        handle = CommandHandle(self, pid, check=check)
        if on_stdout is None and on_stderr is None:
            self.get(pid)
            return handle
        stream = self._attach(pid)
        handle._start_reader(stream, stream.iter_json(), on_stdout, on_stderr, _ATTACH_ENCODING)
        return handle

    def kill(self, pid: int) -> bool:
        """SIGKILL the process's group; False if there was no such running process."""
        try:
            self.signal(pid, "SIGKILL")
        except (NotFoundError, ConflictError):
            return False
        return True

    def signal(self, pid: int, sig: Signal) -> None:
        self._client.request(
            "POST", self._proc(pid, "/signal"), json_body={"signal": _signal_value(sig)}
        )

    def send_stdin(self, pid: int, data: str | bytes) -> None:
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        self._client.request("POST", self._proc(pid, "/stdin"), data=payload)

    def close_stdin(self, pid: int) -> None:
        self._client.request("POST", self._proc(pid, "/stdin/close"))

    def release(self, pid: int) -> None:
        """Forget an ended process (ConflictError while it runs)."""
        self._client.request("DELETE", self._proc(pid))

    def _attach(self, pid: int, *, timeout: float | None = None) -> StreamResponse:
        query = {"encoding": _ATTACH_ENCODING} if _ATTACH_ENCODING != "utf8" else None
        return self._client.stream(
            "GET", self._proc(pid, "/attach"), query=query, headers=_NDJSON, timeout=timeout
        )

    def _wait(self, pid: int, timeout: float | None) -> ProcessInfo:
        query: dict[str, Any] = {}
        http_timeout: float | None = None
        if timeout is not None:
            query["timeout"] = _timeout_seconds(timeout)
            http_timeout = query["timeout"] + _WAIT_MARGIN
        r = self._client.request(
            "GET", self._proc(pid, "/wait"), query=query, timeout=http_timeout
        )
        return ProcessInfo.from_json(r.json_object())
