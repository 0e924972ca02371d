"""The code interpreter: stateful cells in a ``code-interpreter-v1`` sandbox.

``sb.run_code("x + 2")`` posts the cell to ``POST /v1/sandboxes/{id}/code`` and reads the NDJSON
lines of the server in the sandbox (E2B's wire: ``number_of_executions``, ``stdout``,
``stderr``, ``result``, ``error``, ``end_of_execution``) into an :class:`Execution`. See
docs/code-interpreter.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .client import Client, path_segment

__all__ = [
    "CodeContext",
    "Execution",
    "ExecutionError",
    "Logs",
    "OutputMessage",
    "Result",
    "run_code",
]

# The result keys of the wire (E2B's names for the MIME types).
_FORMATS = (
    "text",
    "html",
    "markdown",
    "svg",
    "png",
    "jpeg",
    "pdf",
    "latex",
    "json",
    "javascript",
    "data",
    "chart",
)


@dataclass(frozen=True)
class OutputMessage:
    """One stdout or stderr message of a cell, as it came."""

    line: str
    timestamp: str
    error: bool  # True for stderr


@dataclass(frozen=True)
class Result:
    """One display of a cell: the value of its last expression (``is_main_result``) or
    something it displayed (a plot, ``display(...)``). Each format is None when absent; ``png``
    and ``jpeg`` are base64 as the kernel sends them."""

    is_main_result: bool = False
    text: str | None = None
    html: str | None = None
    markdown: str | None = None
    svg: str | None = None
    png: str | None = None
    jpeg: str | None = None
    pdf: str | None = None
    latex: str | None = None
    json: Any = None
    javascript: str | None = None
    data: Any = None
    chart: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> Result:
        kw: dict[str, Any] = {k: j.get(k) for k in _FORMATS}
        extra = j.get("extra")
        return cls(
            is_main_result=bool(j.get("is_main_result")),
            extra=dict(extra) if isinstance(extra, Mapping) else {},
            **kw,
        )

    def formats(self) -> list[str]:
        """The names of the formats present (``["text", "png"]``)."""
        return [k for k in _FORMATS if getattr(self, k) is not None] + list(self.extra)


@dataclass(frozen=True)
class ExecutionError:
    """The exception a cell raised."""

    name: str
    value: str
    traceback: str


@dataclass
class Logs:
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)


@dataclass
class Execution:
    """What a cell produced."""

    results: list[Result] = field(default_factory=list)
    logs: Logs = field(default_factory=Logs)
    error: ExecutionError | None = None
    execution_count: int | None = None

    @property
    def text(self) -> str | None:
        """The text of the main result (the value of the cell's last expression), or None."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None


@dataclass(frozen=True)
class CodeContext:
    """A separate interpreter state (its own kernel) in the sandbox."""

    id: str
    language: str
    cwd: str

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> CodeContext:
        return cls(
            id=str(j.get("id", "")),
            language=str(j.get("language", "")),
            cwd=str(j.get("cwd", "")),
        )


OutputHandler = Callable[[OutputMessage], None]
ResultHandler = Callable[[Result], None]


def _code_path(sandbox_id: str, rest: str = "") -> str:
    return f"/v1/sandboxes/{path_segment(sandbox_id)}/code{rest}"


def run_code(
    client: Client,
    sandbox_id: str,
    code: str,
    *,
    language: str | None = None,
    context: CodeContext | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    on_stdout: OutputHandler | None = None,
    on_stderr: OutputHandler | None = None,
    on_result: ResultHandler | None = None,
) -> Execution:
    """Run one cell (see :meth:`warren.Sandbox.run_code`)."""
    if language is not None and context is not None:
        raise ValueError("pass either language or context, not both")
    body: dict[str, Any] = {"code": code}
    if language is not None:
        body["language"] = language
    if context is not None:
        body["context_id"] = context.id if isinstance(context, CodeContext) else context
    if env:
        body["env"] = dict(env)
    if timeout is not None:
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        body["timeout"] = timeout
    ex = Execution()
    with client.stream("POST", _code_path(sandbox_id), json_body=body) as s:
        for line in s.iter_json():
            kind = line.get("type")
            if kind == "number_of_executions":
                n = line.get("execution_count")
                ex.execution_count = n if isinstance(n, int) else None
            elif kind in ("stdout", "stderr"):
                text = str(line.get("text", ""))
                msg = OutputMessage(text, str(line.get("timestamp", "")), kind == "stderr")
                if kind == "stdout":
                    ex.logs.stdout.append(text)
                    if on_stdout is not None:
                        on_stdout(msg)
                else:
                    ex.logs.stderr.append(text)
                    if on_stderr is not None:
                        on_stderr(msg)
            elif kind == "result":
                r = Result.from_json(line)
                ex.results.append(r)
                if on_result is not None:
                    on_result(r)
            elif kind == "error":
                ex.error = ExecutionError(
                    str(line.get("name", "")),
                    str(line.get("value", "")),
                    str(line.get("traceback", "")),
                )
            elif kind == "end_of_execution":
                break
    return ex


def create_context(
    client: Client, sandbox_id: str, language: str | None = None, cwd: str | None = None
) -> CodeContext:
    body: dict[str, Any] = {}
    if language is not None:
        body["language"] = language
    if cwd is not None:
        body["cwd"] = cwd
    return CodeContext.from_json(
        client.request("POST", _code_path(sandbox_id, "/contexts"), json_body=body).json_object()
    )


def list_contexts(client: Client, sandbox_id: str) -> list[CodeContext]:
    j = client.request("GET", _code_path(sandbox_id, "/contexts")).json()
    if not isinstance(j, list):
        return []
    return [CodeContext.from_json(c) for c in j if isinstance(c, Mapping)]


def _context_id(context: CodeContext | str) -> str:
    return context.id if isinstance(context, CodeContext) else context


def restart_context(client: Client, sandbox_id: str, context: CodeContext | str) -> None:
    client.request(
        "POST", _code_path(sandbox_id, f"/contexts/{path_segment(_context_id(context))}/restart")
    )


def remove_context(client: Client, sandbox_id: str, context: CodeContext | str) -> None:
    client.request(
        "DELETE", _code_path(sandbox_id, f"/contexts/{path_segment(_context_id(context))}")
    )
