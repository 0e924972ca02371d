"""The :class:`Sandbox` class: create, connect to, list and kill sandboxes."""

from __future__ import annotations

import base64
import builtins
import json
import math
import os
import socket
import struct
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, overload
from urllib.parse import quote

from .client import UNSET, Client, Timeout, path_segment, resolve_client
from .commands import Commands
from .compose import compose_body
from .code import (
    CodeContext,
    Execution,
    OutputHandler,
    ResultHandler,
    create_context,
    list_contexts,
    remove_context,
    restart_context,
    run_code,
)
from .desktop import Browser, Desktop
from .diff import FileDiff, FilesystemDiff
from .errors import NotFoundError, WarrenError, error_from_code
from .files import Files
from .images import ForkResult, Snapshot, Template
from .models import (
    NetworkLogEntry,
    NetworkPolicy,
    NetworkStats,
    SandboxInfo,
    SandboxState,
    ServiceInfo,
    VolumeMount,
)

__all__ = ["Sandbox", "TcpStream"]


def _seconds(value: float, what: str) -> int:
    if value <= 0:
        raise ValueError(f"{what} must be > 0")
    return int(math.ceil(value))


class Sandbox:
    """A sandbox. Make one with :meth:`create`, or :meth:`connect` to an existing one.

    ``with Sandbox.create() as sb:`` kills the sandbox when the block ends. A sandbox made by
    ``create``/``connect`` without ``client=`` owns its connection pool (closed by
    :meth:`kill` / :meth:`close`); pass a shared :class:`~warren.Client` to reuse connections
    across many sandboxes.
    """

    def __init__(
        self,
        sandbox_id: str,
        *,
        client: Client,
        info: SandboxInfo | None = None,
        owns_client: bool = False,
    ) -> None:
        self._id = sandbox_id
        self._client = client
        self._owns_client = owns_client
        self._info = info
        self.commands: Commands = Commands(client, sandbox_id)
        self.files: Files = Files(client, sandbox_id)
        self.desktop: Desktop = Desktop(client, sandbox_id)
        self.browser: Browser = Browser(client, sandbox_id)

    # ---- class-level operations ---------------------------------------------------------

    @classmethod
    def create(
        cls,
        template: str | Template | Snapshot = "base",
        *,
        size: str | None = None,
        cpus: float | None = None,
        memory_mb: int | None = None,
        disk_mb: int | None = None,
        timeout: float | None = None,
        on_timeout: Literal["kill", "pause"] | None = None,
        env: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        volumes: Sequence[str | Mapping[str, Any] | VolumeMount] | None = None,
        internet: bool | None = None,
        allow_out: Sequence[str] | None = None,
        deny_out: Sequence[str] | None = None,
        max_connections: int | None = None,
        public_ports: bool | None = None,
        network: bool | None = None,
        idempotency_key: str | None = None,
        budget: float | Mapping[str, Any] | None = None,
        runtime: Literal["ns", "gvisor"] | None = None,
        devices: Sequence[str] | None = None,
        compose: str | Mapping[str, Any] | None = None,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
        request_timeout: Timeout = UNSET,
    ) -> Sandbox:
        """Start a sandbox from ``template`` and return it running.

        ``runtime``: its isolation backend, ``"ns"`` (namespaces and seccomp around the host's
        kernel) or ``"gvisor"`` (inside gVisor's user-space kernel); default: the template's,
        else ``"ns"``. A runtime the server does not allow raises
        :class:`~warren.InvalidArgumentError`; ``"gvisor"`` where runsc is missing raises
        :class:`~warren.UnsupportedError`.

        ``devices``: host devices for it alone while it lives, by CDI name
        (``"vendor.com/class=name"``, :meth:`Client.devices` lists them; docs/devices.md). An
        unknown one raises :class:`~warren.InvalidArgumentError`; one another sandbox holds
        raises :class:`~warren.RateLimitError` (503, ``reason == "capacity"``).

        ``compose``: run the services of a Compose file in the sandbox, all in this one sandbox
        (docs/compose.md lists the keys Warren reads): the file's text (a str: the YAML or JSON
        itself, not a path), or a dict ``{"file": text, "env": {...}, "context": {...}}`` where
        ``env`` holds the variables of the file's ``${VAR}`` interpolation and ``context`` the
        files its ``env_file`` and bind volumes name (:func:`warren.compose_context` builds it
        from a directory). The other arguments still apply to the sandbox as a whole.
        :meth:`services`, :meth:`service_logs`, ``commands.run(..., service=)`` and the
        ``service=`` of ``files`` then reach each service. A key Warren does not support raises
        :class:`~warren.UnsupportedError` whose message names the key and its line
        (``services.web.privileged (line 7): not supported``); other errors in the file
        :class:`~warren.InvalidArgumentError`.

        ``budget``: its own spend cap (docs/usage.md, "Budgets"): a number is a hard cap in
        billed vCPU-seconds; a dict is the API's ``{"unit": "vcpu_seconds" | "money", "soft",
        "hard"}``. Past the hard cap the server pauses it to disk (``paused_reason ==
        "budget"``); :meth:`set_budget` raises the cap, then :meth:`resume`.

        ``template``: a template's name, or a snapshot's id (``snap-...``) or name (the
        sandbox then starts with the snapshot's files); a :class:`~warren.Template` or
        :class:`~warren.Snapshot` object works too.
        ``size``: a size preset of the server's (``"small"``, ``"medium"``, ``"large"`` unless
        its operator set others) for cpus and memory; ``cpus`` or ``memory_mb`` given beside it
        win. ``disk_mb``: a limit on its files (btrfs qgroup or project quota); a host that cannot
        enforce one raises :class:`~warren.UnsupportedError` rather than ignoring it.
        ``timeout``: seconds until the server kills it (server default 300; extend with
        :meth:`set_timeout`). ``on_timeout``: ``"kill"`` (default) or ``"pause"``: at the
        deadline the sandbox is paused in memory instead (``state == "paused"``, ``reason ==
        "timeout"``), and :meth:`resume` gives it its ``timeout`` again. ``env``: environment of every command. ``metadata``: string
        labels to filter :meth:`list` by. ``volumes``: the team's volumes to mount, each
        ``"NAME:/path"``, ``"NAME:/path:ro"``, a dict or a :class:`~warren.VolumeMount` (at
        most 16). Network (docs/networking.md): ``internet`` (default: the server's),
        ``allow_out`` (addresses, CIDR blocks, names, ``*.names`` reachable whatever else is
        denied), ``deny_out`` (addresses and CIDR blocks), ``max_connections`` (concurrent egress
        connections), ``public_ports=False`` (requests to its ports need its traffic token);
        ``network=False``: loopback only, no address of its own (the cheapest sandbox; its policy
        cannot change later). ``idempotency_key``: a retried create with the same
        key returns the first sandbox. Past the team's rate or quota (429) or the host's capacity
        (503) raises :class:`~warren.RateLimitError` (see ``retry_after`` and ``reason``).
        """
        if isinstance(template, Template):
            template = template.name
        elif isinstance(template, Snapshot):
            template = template.id
        body: dict[str, Any] = {"template": template}
        if size is not None:
            body["size"] = size
        if cpus is not None:
            body["cpus"] = cpus
        if memory_mb is not None:
            body["memory_mb"] = int(memory_mb)
        if disk_mb is not None:
            body["disk_mb"] = int(disk_mb)
        if timeout is not None:
            body["timeout"] = _seconds(timeout, "timeout")
        if on_timeout is not None:
            if on_timeout not in ("kill", "pause"):
                raise ValueError("on_timeout must be 'kill' or 'pause'")
            body["on_timeout"] = on_timeout
        if env:
            body["env"] = dict(env)
        if metadata:
            body["metadata"] = dict(metadata)
        if volumes:
            body["volumes"] = [VolumeMount.parse(v).to_json() for v in volumes]
        net = _network_body(internet, allow_out, deny_out, max_connections)
        if public_ports is not None:
            net["ports"] = {"public": bool(public_ports)}
        if network is not None:
            net["enabled"] = bool(network)
        if net:
            body["network"] = net
        if budget is not None:
            body["budget"] = _budget_body(budget)
        if runtime is not None:
            body["runtime"] = runtime
        if devices:
            body["devices"] = list(devices)
        if compose is not None:
            body["compose"] = compose_body(compose)
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        c, owns = resolve_client(client, api_url, api_key)
        try:
            r = c.request(
                "POST", "/v1/sandboxes", json_body=body, headers=headers, timeout=request_timeout
            )
            info = SandboxInfo.from_json(r.json_object())
        except BaseException:
            if owns:
                c.close()
            raise
        return cls(info.id, client=c, info=info, owns_client=owns)

    @classmethod
    def connect(
        cls,
        sandbox_id: str,
        *,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> Sandbox:
        """The existing sandbox ``sandbox_id`` (NotFoundError if there is none for this
        key's team)."""
        c, owns = resolve_client(client, api_url, api_key)
        try:
            info = _get_info(c, sandbox_id)
        except BaseException:
            if owns:
                c.close()
            raise
        return cls(info.id or sandbox_id, client=c, info=info, owns_client=owns)

    @classmethod
    def list(
        cls,
        *,
        state: str | Sequence[str] | None = None,
        metadata: Mapping[str, str] | None = None,
        limit: int | None = None,
        page_size: int | None = None,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> Iterator[SandboxInfo]:
        """The team's sandboxes, oldest first, fetched page by page as you iterate.

        ``state``: one state or several (default on the server: all but ``stopped`` and
        ``error``); ``metadata``: keep sandboxes having all these labels; ``limit``: stop after
        this many; ``page_size``: sandboxes per request (1-1000).
        """
        query: builtins.list[tuple[str, Any]] = []
        if state is not None:
            query.append(("state", state if isinstance(state, str) else ",".join(state)))
        for key, value in (metadata or {}).items():
            query.append(("metadata", f"{key}={value}"))
        if page_size is None and limit is not None:
            page_size = min(max(limit, 1), 1000)
        if page_size is not None:
            query.append(("limit", page_size))
        c, owns = resolve_client(client, api_url, api_key)

        def pages() -> Iterator[SandboxInfo]:
            yielded = 0
            cursor: str | None = None
            try:
                while True:
                    q = query + ([("cursor", cursor)] if cursor else [])
                    doc = c.request("GET", "/v1/sandboxes", query=q).json_object()
                    items = doc.get("sandboxes")
                    for d in items if isinstance(items, builtins.list) else []:
                        if limit is not None and yielded >= limit:
                            return
                        if isinstance(d, dict):
                            yielded += 1
                            yield SandboxInfo.from_json(d)
                    nxt = doc.get("next_cursor")
                    if not isinstance(nxt, str) or not nxt or nxt == cursor:
                        return
                    if limit is not None and yielded >= limit:
                        return
                    cursor = nxt
            finally:
                if owns:
                    c.close()

        return pages()

    # ---- instance -----------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self._id

    @property
    def sandbox_id(self) -> str:
        """Alias of ``id`` (the e2b name)."""
        return self._id

    @property
    def client(self) -> Client:
        return self._client

    @property
    def runtime(self) -> str | None:
        """Its isolation backend, ``"ns"`` or ``"gvisor"``, from the last known info (None
        without one)."""
        return self._info.runtime if self._info is not None else None

    @property
    def info(self) -> SandboxInfo | None:
        """The last known info (from create/connect/get_info/set_timeout), without a
        request."""
        return self._info

    # ---- exposed ports -------------------------------------------------------------------

    def get_host(self, port: int) -> str:
        """Where port ``port`` of the sandbox is reached from outside, through the daemon.

        With a domain (the daemon's ``--domain``, from ``GET /v1/version``) it is E2B's
        shape, ``"<port>-<id>.<domain>"`` (a host name: put ``https://`` in front, behind the
        wildcard TLS front proxy). Without one it is the native path URL,
        ``"<api_url>/v1/sandboxes/<id>/ports/<port>"`` (requests there need the API key, which
        the daemon does not pass on to the sandbox).
        """
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise ValueError(f"port must be 1 to 65535, not {port!r}")
        domain = self._client.version().domain  # the daemon's --domain
        if domain:
            return f"{port}-{self._id}.{domain}"
        ep = self._client.endpoint
        if ep.scheme == "unix":
            base = f"http+unix://{quote(ep.unix_path or '', safe='')}"
        else:
            host = f"[{ep.host}]" if ":" in ep.host else ep.host
            base = f"{ep.scheme}://{host}{f':{ep.port}' if ep.port else ''}{ep.base_path}"
        return f"{base}/v1/sandboxes/{path_segment(self._id)}/ports/{port}"

    def ports(self) -> builtins.list[dict[str, Any]]:
        """The TCP sockets listening in the sandbox: ``[{"port", "address", "protocol"}]``."""
        r = self._client.request("GET", f"/v1/sandboxes/{path_segment(self._id)}/ports")
        ports = r.json_object().get("ports", [])
        return [dict(p) for p in ports if isinstance(p, dict)]

    # ---- Compose services (a sandbox made with compose=; docs/compose.md) ---------------------

    def services(self) -> builtins.list[ServiceInfo]:
        """The services of a sandbox made from a Compose file, in the order they start, each
        with its state (``"healthy"``, ``"exited"``, ...), process, restarts, image, ports and
        how it ended. Empty for a sandbox made without one."""
        r = self._client.request("GET", f"/v1/sandboxes/{path_segment(self._id)}/services")
        items = r.json_object().get("services")
        if not isinstance(items, builtins.list):
            return []
        return [ServiceInfo.from_json(d) for d in items if isinstance(d, dict)]

    def service_logs(self, name: str) -> bytes:
        """Service ``name``'s log as bytes, unchanged: its stdout and stderr, and the lines
        warren-init adds (starts, exits, health checks, restarts). :class:`~warren.NotFoundError`
        for a service the sandbox does not have."""
        r = self._client.request(
            "GET",
            f"/v1/sandboxes/{path_segment(self._id)}/services/{path_segment(name)}/logs",
            headers={"Accept": "application/octet-stream"},
        )
        return r.body

    def connect_tcp(self, port: int, *, timeout: float | None = 30.0) -> TcpStream:
        """A raw TCP byte stream to port ``port`` inside the sandbox, over the daemon's
        WebSocket (``/v1/sandboxes/<id>/ports/<port>/tcp``). Use it with ``with``."""
        return TcpStream(self._client, self._id, port, timeout=timeout)

    # ---- code interpreter (a code-interpreter-v1 sandbox; docs/code-interpreter.md) -------

    def run_code(
        self,
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
        """Run a cell in the sandbox's code interpreter and return its :class:`Execution`
        (``.text``, ``.results``, ``.logs``, ``.error``, ``.execution_count``). State is kept
        across calls, per context: the default Python one, the default of ``language``
        (``"python"``, ``"javascript"``, ``"bash"``), or ``context`` (from :meth:`create_code_context`). ``env``
        is set for this cell only. ``timeout`` (seconds) interrupts the cell, which then ends
        with an error named ``TimeoutError``. The callbacks get each stdout/stderr message
        (:class:`~warren.code.OutputMessage`) and result as they come. A sandbox without an
        interpreter raises :class:`~warren.ConflictError` (``no_interpreter``); an unknown
        context :class:`~warren.NotFoundError`. A cell that raises does not raise here: see
        ``.error``."""
        return run_code(
            self._client,
            self._id,
            code,
            language=language,
            context=context,
            env=env,
            timeout=timeout,
            on_stdout=on_stdout,
            on_stderr=on_stderr,
            on_result=on_result,
        )

    def create_code_context(
        self, language: str | None = None, cwd: str | None = None
    ) -> CodeContext:
        """A new interpreter state of its own (default: Python in ``/home/user``)."""
        return create_context(self._client, self._id, language, cwd)

    def list_code_contexts(self) -> builtins.list[CodeContext]:
        """The contexts made with :meth:`create_code_context` (not the default ones)."""
        return list_contexts(self._client, self._id)

    def restart_code_context(self, context: CodeContext | str) -> None:
        """Restart the context's kernel: its state is gone."""
        restart_context(self._client, self._id, context)

    def remove_code_context(self, context: CodeContext | str) -> None:
        """Stop the context's kernel and forget it."""
        remove_context(self._client, self._id, context)

    def get_info(self) -> SandboxInfo:
        self._info = _get_info(self._client, self._id)
        return self._info

    def is_running(self) -> bool:
        """True while the sandbox exists and is ``running``."""
        try:
            return self.get_info().state == SandboxState.RUNNING
        except NotFoundError:
            return False

    def budget(self) -> dict[str, Any]:
        """Its own budget and what it spent (``GET /v1/sandboxes/{id}/budget``): ``budget``
        (None without one), ``used`` (in the budget's unit), ``state`` (``ok``, ``soft``,
        ``hard``), ``vcpu_seconds``, ``gib_seconds``, ``currency``, ``prices``."""
        return self._client.request(
            "GET", "/v1/sandboxes/%s/budget" % path_segment(self.id)
        ).json_object()

    def set_budget(
        self,
        hard: float | None = None,
        *,
        soft: float | None = None,
        unit: str = "vcpu_seconds",
    ) -> dict[str, Any]:
        """Set its own budget (``PUT /v1/sandboxes/{id}/budget``); None for both caps removes
        it. A sandbox paused for its budget stays paused: :meth:`resume` it."""
        if hard is None and soft is None:
            self._client.request("DELETE", "/v1/sandboxes/%s/budget" % path_segment(self.id))
            return {"budget": None}
        return self._client.request(
            "PUT",
            "/v1/sandboxes/%s/budget" % path_segment(self.id),
            json_body=_budget_body({"unit": unit, "soft": soft, "hard": hard}),
        ).json_object()

    def set_timeout(self, timeout: float) -> SandboxInfo:
        """Kill the sandbox ``timeout`` seconds from now (extends or shortens its life);
        returns the info with the new ``expires_at``."""
        r = self._client.request(
            "POST",
            f"/v1/sandboxes/{path_segment(self._id)}/timeout",
            json_body={"timeout": _seconds(timeout, "timeout")},
        )
        self._info = SandboxInfo.from_json(r.json_object())
        return self._info

    # ---- network ------------------------------------------------------------------------

    def network(self) -> NetworkPolicy:
        """Its network: the egress policy in force and its address."""
        r = self._client.request("GET", f"/v1/sandboxes/{path_segment(self._id)}/network")
        return NetworkPolicy.from_json(r.json_object())

    def update_network(
        self,
        *,
        internet: bool | None = None,
        allow_out: Sequence[str] | None = None,
        deny_out: Sequence[str] | None = None,
        max_connections: int | None = None,
    ) -> NetworkPolicy:
        """Replace its egress policy while it runs: the arguments are the whole new policy
        (what they leave out is cleared; ``internet`` defaults to on). Connections open already
        are not cut. A sandbox made with ``network=False`` raises
        :class:`~warren.ConflictError`."""
        r = self._client.request(
            "PUT",
            f"/v1/sandboxes/{path_segment(self._id)}/network",
            json_body=_network_body(internet, allow_out, deny_out, max_connections),
        )
        return NetworkPolicy.from_json(r.json_object())

    def network_stats(self) -> NetworkStats:
        """Packets and bytes its policy let out, those it dropped, and those it received."""
        r = self._client.request("GET", f"/v1/sandboxes/{path_segment(self._id)}/network/stats")
        d = r.json_object()
        return NetworkStats(
            packets_out=int(d.get("packets_out") or 0),
            bytes_out=int(d.get("bytes_out") or 0),
            packets_dropped=int(d.get("packets_dropped") or 0),
            bytes_dropped=int(d.get("bytes_dropped") or 0),
            packets_in=int(d.get("packets_in") or 0),
            bytes_in=int(d.get("bytes_in") or 0),
        )

    def pause(self, mode: str = "memory") -> SandboxInfo:
        """Pause the sandbox; its deadline's clock stops. Until :meth:`resume`, commands and
        file operations raise :class:`~warren.ConflictError`.

        ``mode="memory"`` (default): every process is frozen with its memory, and
        :meth:`resume` thaws the same processes. ``mode="disk"``: the files are kept, every
        process ends and its memory is freed; :meth:`resume` starts fresh processes on the
        same files. The returned info's ``paused_mode`` says which happened. Pausing a sandbox
        that is not running raises ConflictError."""
        if mode not in ("memory", "disk"):
            raise ValueError("mode must be 'memory' or 'disk'")
        r = self._client.request(
            "POST",
            f"/v1/sandboxes/{path_segment(self._id)}/pause",
            json_body={"mode": mode},
        )
        self._info = SandboxInfo.from_json(r.json_object())
        return self._info

    def resume(self, timeout: float | None = None) -> SandboxInfo:
        """Resume a paused sandbox. It expires after the time it had left when paused (all of
        its ``timeout`` if its deadline paused it), or after ``timeout`` seconds if given.

        The returned info's ``processes_kept`` says what came back: True after a pause in
        memory (the same processes go on where they stopped), False after a pause to disk (the
        files are there, the old processes are gone: it runs a fresh init). A sandbox that is
        not paused raises :class:`~warren.ConflictError`."""
        body: dict[str, Any] = {}
        if timeout is not None:
            body["timeout"] = _seconds(timeout, "timeout")
        r = self._client.request(
            "POST", f"/v1/sandboxes/{path_segment(self._id)}/resume", json_body=body
        )
        self._info = SandboxInfo.from_json(r.json_object())
        return self._info

    def snapshot(self, name: str | None = None) -> Snapshot:
        """Capture the sandbox's files as a snapshot (its processes are frozen for the
        capture, ``freeze_ms`` says how long, then go on; a paused sandbox stays paused).
        ``Sandbox.create(template=snap.id)`` (or its ``name``) starts sandboxes with these
        files. ``name``: 1 to 64 of ``[A-Za-z0-9._-]``, not starting with ``.`` or ``snap-``,
        unique among the team's images. :class:`~warren.ConflictError` if the sandbox is
        stopped or busy (being paused, resumed, deleted or captured), or the name is taken;
        :class:`~warren.InvalidArgumentError` for a bad name."""
        body: dict[str, Any] = {}
        if name is not None:
            body["name"] = name
        r = self._client.request(
            "POST", f"/v1/sandboxes/{path_segment(self._id)}/snapshots", json_body=body
        )
        return Snapshot.from_json(r.json_object())

    def fork(
        self,
        count: int = 1,
        timeout: float | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ForkResult:
        """Copy the running sandbox into ``count`` new ones (1-100). Each starts with this
        sandbox's files and config (and fresh processes); this one is frozen for a moment and
        goes on. ``timeout``: the copies' timeout in seconds (default: this sandbox's);
        ``metadata``: their labels. Copies that could not be made (say, past the host's
        capacity) are in the result's ``errors``, the others in ``sandboxes``; the call itself
        raises only when none could be attempted (:class:`~warren.InvalidArgumentError` for a
        bad ``count``, :class:`~warren.ConflictError` if this sandbox is stopped or busy)."""
        body: dict[str, Any] = {"count": count}
        if timeout is not None:
            body["timeout"] = _seconds(timeout, "timeout")
        if metadata:
            body["metadata"] = dict(metadata)
        r = self._client.request(
            "POST", f"/v1/sandboxes/{path_segment(self._id)}/fork", json_body=body
        )
        doc = r.json_object()
        made: builtins.list[Sandbox] = []
        items = doc.get("sandboxes")
        for d in items if isinstance(items, builtins.list) else []:
            if isinstance(d, dict):
                info = SandboxInfo.from_json(d)
                made.append(Sandbox(info.id, client=self._client, info=info))
        errors: builtins.list[WarrenError] = []
        errs = doc.get("errors")
        for e in errs if isinstance(errs, builtins.list) else []:
            if isinstance(e, dict):
                errors.append(
                    error_from_code(str(e.get("code", "")), str(e.get("message", "")), None,
                                    r.request_id)
                )
        freeze = doc.get("freeze_ms")
        return ForkResult(
            sandboxes=made,
            errors=errors,
            freeze_ms=float(freeze) if isinstance(freeze, (int, float)) else 0.0,
            capture=str(doc.get("capture", "")),
            raw=doc,
            processes_kept=doc.get("processes_kept") is True,
        )

    @overload
    def diff(
        self, against: str | None = None, path: str | None = None,
        content: Literal[False] = False, *, limit: int | None = None,
    ) -> FilesystemDiff: ...

    @overload
    def diff(
        self, against: str | None = None, path: str | None = None, *,
        content: Literal[True], limit: int | None = None,
    ) -> FileDiff: ...

    @overload
    def diff(
        self, against: str | None = None, path: str | None = None, content: bool = False, *,
        limit: int | None = None,
    ) -> FilesystemDiff | FileDiff: ...

    def diff(
        self,
        against: str | None = None,
        path: str | None = None,
        content: bool = False,
        *,
        limit: int | None = None,
    ) -> FilesystemDiff | FileDiff:
        """What this sandbox (running or paused) added, modified, deleted and renamed in its
        files: against its own template or image (``against=None``), a snapshot (id or name) or
        another sandbox of the same lineage (a fork of the same parent, its parent). ``path``:
        only the changes at and below it; with ``content=True``, the unified diff of that one
        file (:class:`FileDiff`). ``limit``: most changes listed (default 10000; the result's
        ``truncated`` says there were more). :class:`~warren.NotFoundError` for an unknown
        ``against`` and for a ``path`` that did not change; :class:`~warren.InvalidArgumentError`
        for a relative path or a directory's content; :class:`~warren.ConflictError` when the
        two share no layer."""
        q: list[str] = []
        if against is not None:
            q.append("against=" + quote(against, safe=""))
        if path is not None:
            q.append("path=" + quote(path, safe="/"))
        if content:
            if path is None:
                raise ValueError("content=True needs a path")
            q.append("content=1")
        if limit is not None:
            q.append("limit=%d" % limit)
        url = f"/v1/sandboxes/{path_segment(self._id)}/diff" + ("?" + "&".join(q) if q else "")
        doc = self._client.request("GET", url).json_object()
        if content:
            return FileDiff.from_json(doc)
        return FilesystemDiff.from_json(doc)

    def is_paused(self) -> bool:
        """True while the sandbox exists and is ``paused``."""
        try:
            return self.get_info().state == SandboxState.PAUSED
        except NotFoundError:
            return False

    def network_log(
        self, follow: bool = False, *, after: str | None = None, page_size: int = 1000
    ) -> Iterator[NetworkLogEntry]:
        """The sandbox's egress log, oldest first: every connection, DNS question and denied
        packet with its destination, name, bytes and the rule that decided (the newest 10,000
        are kept, also after the sandbox stopped, as long as its record). ``after``: only the
        entries after this cursor (an entry's ``id``). With ``follow``, the iterator goes on
        with each new entry as it is written and ends when the sandbox's record is deleted
        (close the iterator to stop earlier). NotFoundError for a sandbox the key's team does
        not have."""
        path = f"/v1/sandboxes/{path_segment(self._id)}/network/log"
        c = self._client
        if follow:
            stream = c.stream(
                "GET", path, query={"follow": "1", "after": after},
                headers={"Accept": "application/x-ndjson"},
            )

            def live() -> Iterator[NetworkLogEntry]:
                with stream:
                    for doc in stream.iter_json():
                        yield NetworkLogEntry.from_json(doc)

            return live()
        size = min(max(page_size, 1), 1000)
        # The first page is fetched now, so that a missing sandbox raises here.
        first = c.request("GET", path, query={"after": after, "limit": size}).json_object()

        def pages() -> Iterator[NetworkLogEntry]:
            doc = first
            while True:
                items = doc.get("entries")
                items = items if isinstance(items, builtins.list) else []
                for d in items:
                    if isinstance(d, dict):
                        yield NetworkLogEntry.from_json(d)
                nxt = doc.get("next")
                if len(items) < size or not isinstance(nxt, str) or not nxt:
                    return
                doc = c.request("GET", path, query={"after": nxt, "limit": size}).json_object()

        return pages()

    def kill(self) -> bool:
        """Kill and delete the sandbox; False if it did not exist (any more). Closes the
        connections this object owns."""
        try:
            self._client.request("DELETE", f"/v1/sandboxes/{path_segment(self._id)}")
        except NotFoundError:
            return False
        finally:
            self.close()
        return True

    def close(self) -> None:
        """Close the idle connections this object owns (the sandbox keeps running)."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.kill()
        except WarrenError:
            if exc is None:
                raise  # do not hide the block's own exception behind a failed kill

    def __repr__(self) -> str:
        state = f" {self._info.state}" if self._info is not None else ""
        return f"<Sandbox {self._id}{state}>"


def _get_info(client: Client, sandbox_id: str) -> SandboxInfo:
    r = client.request("GET", f"/v1/sandboxes/{path_segment(sandbox_id)}")
    return SandboxInfo.from_json(r.json_object())


def _network_body(
    internet: bool | None,
    allow_out: Sequence[str] | None,
    deny_out: Sequence[str] | None,
    max_connections: int | None,
) -> dict[str, Any]:
    net: dict[str, Any] = {}
    if internet is not None:
        net["internet"] = bool(internet)
    if allow_out is not None:
        if isinstance(allow_out, str):
            raise TypeError("allow_out must be a list of strings, not a string")
        net["allow_out"] = [str(x) for x in allow_out]
    if deny_out is not None:
        if isinstance(deny_out, str):
            raise TypeError("deny_out must be a list of strings, not a string")
        net["deny_out"] = [str(x) for x in deny_out]
    if max_connections is not None:
        net["max_connections"] = int(max_connections)
    return net
class TcpStream:
    """A raw TCP stream to a port of a sandbox, carried in binary WebSocket messages
    (:meth:`Sandbox.connect_tcp`). ``send`` writes bytes, ``recv`` returns the next bytes
    (``b""`` once the sandbox's side closed), ``shutdown_write`` ends our side (the server sees
    EOF), ``close`` closes."""

    def __init__(self, client: Client, sandbox_id: str, port: int, *, timeout: float | None) -> None:
        if not isinstance(port, int) or not 1 <= port <= 65535:
            raise ValueError(f"port must be 1 to 65535, not {port!r}")
        conn = client.endpoint.connection(timeout)
        conn.connect()
        sock = conn.sock
        assert sock is not None
        self._sock: socket.socket = sock
        self._buf = b""
        self._closed = False
        key = base64.b64encode(os.urandom(16)).decode()
        target = client.endpoint.base_path + f"/v1/sandboxes/{path_segment(sandbox_id)}/ports/{port}/tcp"
        head = [f"GET {target} HTTP/1.1", "Host: localhost", "Upgrade: websocket",
                "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
        if client.api_key:
            head.append(f"Authorization: Bearer {client.api_key}")
        self._sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        resp = b""
        while b"\r\n\r\n" not in resp:
            chunk = self._sock.recv(4096)
            if not chunk:
                break
            resp += chunk
        headpart, _, rest = resp.partition(b"\r\n\r\n")
        status = headpart.split(b" ", 2)[1] if b" " in headpart else b"0"
        if status != b"101":
            self._sock.close()
            try:
                msg = json.loads(rest.decode(errors="replace")).get("message", "")
            except ValueError:
                msg = rest.decode(errors="replace")
            code = "port_not_open" if status == b"502" else "upstream"
            raise WarrenError(code, f"port {port}: {msg or headpart.decode(errors='replace')}",
                              int(status) if status.isdigit() else None)
        self._buf = rest

    def _rx(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise EOFError
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _send_frame(self, op: int, payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            hdr = bytes([0x80 | op, 0x80 | n])
        elif n < 65536:
            hdr = bytes([0x80 | op, 0x80 | 126]) + struct.pack(">H", n)
        else:
            hdr = bytes([0x80 | op, 0x80 | 127]) + struct.pack(">Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self._sock.sendall(hdr + mask + masked)

    def send(self, data: bytes) -> None:
        for i in range(0, len(data), 65536):
            self._send_frame(2, data[i:i + 65536])

    def shutdown_write(self) -> None:
        self._send_frame(2, b"")

    def recv(self) -> bytes:
        """The next bytes from the sandbox; ``b""`` once its side closed."""
        while not self._closed:
            try:
                h = self._rx(2)
                op, n = h[0] & 15, h[1] & 127
                if n == 126:
                    n = struct.unpack(">H", self._rx(2))[0]
                elif n == 127:
                    n = struct.unpack(">Q", self._rx(8))[0]
                payload = self._rx(n)
            except EOFError:
                self._closed = True
                break
            if op == 8:
                self._closed = True
                try:
                    self._send_frame(8, payload[:2])
                except OSError:
                    pass
                break
            if op == 9:
                self._send_frame(10, payload)
            elif op in (0, 1, 2) and payload:
                return payload
        return b""

    def close(self) -> None:
        try:
            if not self._closed:
                self._send_frame(8, struct.pack(">H", 1000))
        except OSError:
            pass
        self._sock.close()
        self._closed = True

    def __enter__(self) -> TcpStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _budget_body(budget: float | Mapping[str, Any]) -> dict[str, Any]:
    """A budget as the API takes it: a number is a hard cap in vCPU-seconds."""
    if isinstance(budget, bool):
        raise TypeError("budget must be a number or a mapping")
    if isinstance(budget, (int, float)):
        return {"unit": "vcpu_seconds", "hard": budget}
    return {k: v for k, v in dict(budget).items() if v is not None}
