"""Plain data returned by the SDK (immutable dataclasses built from the API's JSON)."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import StrEnum
from typing import Any, Mapping

__all__ = [
    "SandboxState",
    "SandboxInfo",
    "VolumeInfo",
    "VolumeMount",
    "FileType",
    "FileInfo",
    "ProcessInfo",
    "ServiceInfo",
    "CommandResult",
    "CommandEvent",
    "FilesystemEventType",
    "FilesystemEvent",
    "NetworkLogEntry",
    "ApiKey",
    "CreatedApiKey",
    "VersionInfo",
]

_FRACTION = re.compile(r"(\.\d{6})\d+")


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as an aware datetime (UTC when it has no offset); None if absent
    or unparsable."""
    if not isinstance(value, str) or not value:
        return None
    text = _FRACTION.sub(r"\1", value.strip())
    if text.endswith(("z", "Z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_dict(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items()}


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class SandboxState(StrEnum):
    CREATING = "creating"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"
    ERROR = "error"


@dataclass(frozen=True)
class VolumeMount:
    """A volume mounted in a sandbox: its ``name``, the ``path`` inside, and whether it is
    ``readonly`` there. Pass these (or ``"NAME:/path[:ro]"`` strings) to
    ``Sandbox.create(volumes=[...])``."""

    name: str
    path: str
    readonly: bool = False

    @classmethod
    def parse(cls, spec: str | Mapping[str, Any] | VolumeMount) -> VolumeMount:
        """A mount from ``"NAME:/path"``, ``"NAME:/path:ro"`` (or ``:rw``), a dict with
        ``name``, ``path`` and ``readonly``, or a VolumeMount."""
        if isinstance(spec, VolumeMount):
            return spec
        if isinstance(spec, Mapping):
            return cls(str(spec["name"]), str(spec["path"]), bool(spec.get("readonly", False)))
        parts = str(spec).split(":")
        if len(parts) == 3 and parts[2] in ("ro", "rw"):
            return cls(parts[0], parts[1], parts[2] == "ro")
        if len(parts) == 2:
            return cls(parts[0], parts[1])
        raise ValueError(f"volume {spec!r} must be NAME:/path or NAME:/path:ro")

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> VolumeMount:
        return cls(str(d.get("name", "")), str(d.get("path", "")), bool(d.get("readonly")))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "readonly": self.readonly}


@dataclass(frozen=True)
class VolumeInfo:
    """A named volume of the team. ``disk_bytes`` (space its files use) is set by
    ``Volume.get``, None in lists."""

    name: str
    created_at: datetime
    disk_bytes: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> VolumeInfo:
        return cls(
            name=str(d.get("name", "")),
            created_at=parse_time(d.get("created_at")) or _EPOCH,
            disk_bytes=_opt_int(d.get("disk_bytes")),
            raw=dict(d),
        )


@dataclass(frozen=True)
class SandboxInfo:
    """A sandbox as the API describes it. ``state`` compares equal to plain strings
    (``info.state == "running"``); an unknown state is kept as the server's string.

    ``on_timeout``: what the deadline does, ``"kill"`` or ``"pause"``; ``timeout``: the
    timeout given at create (seconds). While paused, ``paused_mode`` says how (``"memory"``:
    every process frozen, memory kept; ``"disk"``: the files kept, the processes ended, the
    memory freed) and ``remaining_ms`` is the time left on the stopped deadline clock
    (``expires_at`` is then now + that); both are None otherwise. ``paused_reason``: why it
    was paused, ``"timeout"``, ``"budget"`` (its own budget's hard cap), or None (asked for). ``processes_kept`` is set only by
    :meth:`~warren.Sandbox.resume`: True when the same processes went on (a pause in memory),
    False when they did not (a pause to disk: the sandbox runs a fresh init on its files).
    ``runtime``: its isolation backend, ``"ns"`` or ``"gvisor"``.
    """

    id: str
    template: str
    state: str
    cpus: float
    memory_mb: int
    created_at: datetime
    expires_at: datetime
    metadata: dict[str, str]
    disk_mb: int | None = None
    reason: str | None = None
    on_timeout: str = "kill"
    timeout: int | None = None
    paused_mode: str | None = None
    remaining_ms: int | None = None
    paused_reason: str | None = None
    processes_kept: bool | None = None
    volumes: list[VolumeMount] = field(default_factory=list)
    network: NetworkPolicy | None = None
    runtime: str = "ns"
    devices: list[str] = field(default_factory=list)
    #: The services of the Compose file it was made from, in start order (empty for none).
    services: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def sandbox_id(self) -> str:
        """Alias of ``id`` (the e2b name)."""
        return self.id

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SandboxInfo:
        state = str(d.get("state", ""))
        try:
            state = SandboxState(state)
        except ValueError:
            pass
        reason = d.get("reason")
        paused_mode = d.get("paused_mode")
        kept = d.get("processes_kept")
        return cls(
            id=str(d.get("id", "")),
            template=str(d.get("template", "")),
            state=state,
            cpus=float(d.get("cpus") or 0),
            memory_mb=int(d.get("memory_mb") or 0),
            disk_mb=_opt_int(d.get("disk_mb")),
            created_at=parse_time(d.get("created_at")) or _EPOCH,
            expires_at=parse_time(d.get("expires_at")) or _EPOCH,
            metadata=_str_dict(d.get("metadata")),
            reason=reason if isinstance(reason, str) else None,
            on_timeout=str(d.get("on_timeout") or "kill"),
            timeout=_opt_int(d.get("timeout")),
            paused_mode=paused_mode if isinstance(paused_mode, str) else None,
            remaining_ms=_opt_int(d.get("remaining_ms")),
            paused_reason=d["paused_reason"] if isinstance(d.get("paused_reason"), str) else None,
            processes_kept=kept if isinstance(kept, bool) else None,
            volumes=[
                VolumeMount.from_json(v) for v in (d.get("volumes") or []) if isinstance(v, dict)
            ],
            network=NetworkPolicy.from_json(d["network"])
            if isinstance(d.get("network"), dict)
            else None,
            runtime=str(d.get("runtime") or "ns"),
            devices=[str(x) for x in (d.get("devices") or []) if isinstance(x, str)],
            services=[str(x) for x in (d.get("services") or []) if isinstance(x, str)],
            raw=dict(d),
        )


@dataclass(frozen=True)
class NetworkPolicy:
    """A sandbox's network (docs/networking.md). ``enabled``: it has an address of its own
    (``address``) in a network namespace the host owns; False: loopback only, nothing to
    change later. ``internet``: egress beyond ``allow_out`` (addresses, CIDR blocks, names and
    ``*.names`` always reachable) unless ``deny_out`` (addresses and CIDR blocks) says no.
    Private ranges, link-local (the metadata address), CGNAT, the host and other sandboxes are
    never reachable, whatever the policy says. ``max_connections``: concurrent egress
    connections at most. ``ports_public``: False when requests to its ports need its traffic
    token."""

    enabled: bool
    internet: bool
    allow_out: list[str] = field(default_factory=list)
    deny_out: list[str] = field(default_factory=list)
    max_connections: int | None = None
    address: str | None = None
    ports_public: bool = True
    mask_host: str | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> NetworkPolicy:
        ports = d.get("ports") if isinstance(d.get("ports"), dict) else {}
        assert isinstance(ports, dict)
        address = d.get("address")
        mask = ports.get("mask_host")
        return cls(
            enabled=bool(d.get("enabled")),
            internet=bool(d.get("internet")),
            allow_out=[str(x) for x in (d.get("allow_out") or [])],
            deny_out=[str(x) for x in (d.get("deny_out") or [])],
            max_connections=_opt_int(d.get("max_connections")),
            address=address if isinstance(address, str) else None,
            ports_public=ports.get("public") is not False,
            mask_host=mask if isinstance(mask, str) else None,
        )


@dataclass(frozen=True)
class NetworkStats:
    """Counters of a sandbox's traffic: what its policy let out, what it dropped, and what
    came back to it through the host (not the DNS stub's or the HTTP proxy's answers)."""

    packets_out: int
    bytes_out: int
    packets_dropped: int
    bytes_dropped: int
    packets_in: int = 0
    bytes_in: int = 0


class FileType(StrEnum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"
    OTHER = "other"


@dataclass(frozen=True)
class FileInfo:
    """A file system entry. ``mode`` is the permission bits as an int (``0o644``);
    ``permissions`` the same as the API's octal string (``"0644"``)."""

    name: str
    path: str
    type: FileType
    size: int
    mode: int
    mtime: datetime
    uid: int | None = None
    gid: int | None = None
    link: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_dir(self) -> bool:
        return self.type == FileType.DIR

    @property
    def is_file(self) -> bool:
        return self.type == FileType.FILE

    @property
    def is_symlink(self) -> bool:
        return self.type == FileType.SYMLINK

    @property
    def permissions(self) -> str:
        return format(self.mode, "04o")

    @property
    def modified_time(self) -> datetime:
        """Alias of ``mtime`` (the e2b name)."""
        return self.mtime

    @property
    def symlink_target(self) -> str | None:
        """Alias of ``link`` (the e2b name)."""
        return self.link

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FileInfo:
        try:
            ftype = FileType(str(d.get("type", "other")))
        except ValueError:
            ftype = FileType.OTHER
        raw_mode = d.get("mode")
        mode = 0
        if isinstance(raw_mode, str):
            try:
                mode = int(raw_mode, 8)
            except ValueError:
                mode = 0
        elif isinstance(raw_mode, int):
            mode = raw_mode
        link = d.get("link")
        return cls(
            name=str(d.get("name", "")),
            path=str(d.get("path", "")),
            type=ftype,
            size=int(d.get("size") or 0),
            mode=mode,
            mtime=parse_time(d.get("mtime")) or _EPOCH,
            uid=_opt_int(d.get("uid")),
            gid=_opt_int(d.get("gid")),
            link=link if isinstance(link, str) else None,
            raw=dict(d),
        )


@dataclass(frozen=True)
class ProcessInfo:
    """A process started through the API. ``pid`` is the API's process id (what every process
    endpoint takes); ``os_pid`` the pid inside the sandbox."""

    pid: int
    cmd: list[str]
    running: bool
    os_pid: int | None = None
    pty: bool = False
    exit_code: int | None = None
    signal: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ProcessInfo:
        cmd = d.get("cmd")
        return cls(
            pid=int(d.get("pid") or 0),
            cmd=[str(a) for a in cmd] if isinstance(cmd, list) else [],
            running=bool(d.get("running")),
            os_pid=_opt_int(d.get("os_pid")),
            pty=bool(d.get("pty", False)),
            exit_code=_opt_int(d.get("exit_code")),
            signal=_opt_int(d.get("signal")),
            raw=dict(d),
        )


@dataclass(frozen=True)
class ServiceInfo:
    """A service of a sandbox made from a Compose file (:meth:`Sandbox.services`).

    ``state``: ``"waiting"`` (for the services it depends on), ``"starting"``, ``"running"``,
    ``"healthy"`` / ``"unhealthy"`` (by its healthcheck), ``"restarting"``, ``"exited"``,
    ``"failed"`` or ``"defining"``. ``pid``: its process inside the sandbox while it runs.
    ``exit_code`` / ``signal``: how it last ended; ``message``: what warren-init said about it
    (why it failed, say)."""

    name: str
    image: str
    state: str
    ports: list[int] = field(default_factory=list)
    pid: int | None = None
    restarts: int = 0
    exit_code: int | None = None
    signal: int | None = None
    message: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ServiceInfo:
        ports = d.get("ports")
        message = d.get("message")
        return cls(
            name=str(d.get("name", "")),
            image=str(d.get("image", "")),
            state=str(d.get("state", "")),
            ports=[p for p in ports if _opt_int(p) is not None] if isinstance(ports, list) else [],
            pid=_opt_int(d.get("pid")),
            restarts=_opt_int(d.get("restarts")) or 0,
            exit_code=_opt_int(d.get("exit_code")),
            signal=_opt_int(d.get("signal")),
            message=message if isinstance(message, str) else None,
            raw=dict(d),
        )


@dataclass(frozen=True)
class CommandUsage:
    """What one command used (docs/usage.md, "Per-command usage"): ``cpu_seconds`` (user +
    system), ``memory_peak_bytes``, ``wall_seconds`` (start to end). ``source`` says where the
    figures come from: ``rusage`` (warren-init's wait4: the command and the descendants it
    waited for; the peak is the largest single process's resident set) or ``cgroup`` (the
    command's own cgroup, read by the daemon: every process it started, memory summed)."""

    cpu_seconds: float
    memory_peak_bytes: int
    wall_seconds: float
    source: str = "rusage"

    @classmethod
    def from_json(cls, d: Any) -> CommandUsage | None:
        if not isinstance(d, Mapping):
            return None
        return cls(
            cpu_seconds=float(d.get("cpu_seconds") or 0.0),
            memory_peak_bytes=int(d.get("memory_peak_bytes") or 0),
            wall_seconds=float(d.get("wall_seconds") or 0.0),
            source=str(d.get("source") or "rusage"),
        )


@dataclass(frozen=True)
class CommandResult:
    """The outcome of a command. ``stdout``/``stderr`` are the output decoded as UTF-8 (invalid
    sequences become U+FFFD); ``stdout_bytes``/``stderr_bytes`` the exact bytes.

    ``exit_code`` is ``None`` when the process was killed by a signal (then ``signal`` is set).
    Output is empty for a background command whose output was not read through the SDK.
    """

    exit_code: int | None
    signal: int | None = None
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""
    pid: int | None = None
    timed_out: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    usage: CommandUsage | None = None

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode("utf-8", errors="replace")

    @property
    def ok(self) -> bool:
        """True when the command exited with code 0."""
        return self.exit_code == 0 and not self.timed_out

    @property
    def error(self) -> str | None:
        """A short description of the failure, or None when ``ok`` (as e2b's ``error``)."""
        if self.ok:
            return None
        if self.timed_out:
            return "timed out"
        if self.exit_code is None:
            return f"killed by signal {self.signal}"
        return f"exit code {self.exit_code}"


def decode_data(data: Any, encoding: str) -> bytes:
    """Output data of an exec event or result, in the request's ``encoding``."""
    if not isinstance(data, str):
        return b""
    if encoding == "base64":
        return base64.b64decode(data)
    return data.encode("utf-8")


@dataclass(frozen=True)
class CommandEvent:
    """One event of a command's output stream.

    ``type`` is ``start`` (``pid`` set), ``stdout``/``stderr`` (``data`` set), ``exit``
    (``exit_code``, ``signal``, ``timed_out``) or ``error`` (``code``, ``message``: the sandbox
    went away or the stream failed before the exit).
    """

    type: str
    data: bytes = b""
    pid: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    code: str | None = None
    message: str | None = None
    usage: CommandUsage | None = None

    @property
    def text(self) -> str:
        """``data`` decoded as UTF-8 (invalid sequences become U+FFFD)."""
        return self.data.decode("utf-8", errors="replace")

    @classmethod
    def from_json(cls, d: Mapping[str, Any], encoding: str) -> CommandEvent:
        code, message = d.get("code"), d.get("message")
        return cls(
            type=str(d.get("type", "")),
            data=decode_data(d.get("data"), encoding),
            pid=_opt_int(d.get("pid")),
            exit_code=_opt_int(d.get("exit_code")),
            signal=_opt_int(d.get("signal")),
            timed_out=bool(d.get("timed_out", False)),
            code=code if isinstance(code, str) else None,
            message=message if isinstance(message, str) else None,
            usage=CommandUsage.from_json(d.get("usage")),
        )


class FilesystemEventType(StrEnum):
    CREATE = "create"
    WRITE = "write"
    REMOVE = "remove"
    RENAME = "rename"
    CHMOD = "chmod"


@dataclass(frozen=True)
class FilesystemEvent:
    """A change under a watched directory; ``name`` is relative to the watched path. ``type``
    is a :class:`FilesystemEventType` (or the server's string if unknown)."""

    type: str
    name: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FilesystemEvent:
        t = str(d.get("type", ""))
        try:
            t = FilesystemEventType(t)
        except ValueError:
            pass
        return cls(type=t, name=str(d.get("name", "")))


@dataclass(frozen=True)
class NetworkLogEntry:
    """One entry of a sandbox's egress log: a connection (``proto`` "tcp", "udp", "icmp"), a
    DNS question ("dns") or a denied packet, with its destination, the name asked for (TLS SNI,
    HTTP Host or DNS question; None if none), the bytes each way, and whether it was allowed and
    by which rule. ``id`` is the cursor to continue after."""

    id: str
    time: datetime | None
    proto: str
    address: str
    port: int
    name: str | None
    bytes_out: int
    bytes_in: int
    allowed: bool
    rule: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> NetworkLogEntry:
        name = d.get("name")
        return cls(
            id=str(d.get("id", "")),
            time=parse_time(d.get("time")),
            proto=str(d.get("proto", "")),
            address=str(d.get("address", "")),
            port=_opt_int(d.get("port")) or 0,
            name=name if isinstance(name, str) else None,
            bytes_out=_opt_int(d.get("bytes_out")) or 0,
            bytes_in=_opt_int(d.get("bytes_in")) or 0,
            allowed=d.get("allowed") is True,
            rule=str(d.get("rule", "")),
        )


@dataclass(frozen=True)
class Event:
    """A lifecycle event of a sandbox (``GET /v1/events``): ``type`` is one of
    sandbox.created, .started, .failed, .paused, .resumed, .snapshotted, .forked, .timed_out, .killed and
    .stopped; ``data`` holds the type's fields (e.g. ``paused_mode``). ``id`` is the cursor."""

    id: str
    time: datetime | None
    type: str
    sandbox_id: str
    team: str
    data: dict[str, Any]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Event:
        data = d.get("data")
        return cls(
            id=str(d.get("id", "")),
            time=parse_time(d.get("time")),
            type=str(d.get("type", "")),
            sandbox_id=str(d.get("sandbox_id", "")),
            team=str(d.get("team", "")),
            data=dict(data) if isinstance(data, dict) else {},
        )


@dataclass(frozen=True)
class Webhook:
    """A team's webhook (``/v1/webhooks``): each lifecycle event of the team whose type
    ``events`` names (empty: every event) is POSTed to ``url``, signed with the secret. The
    secret is in ``secret`` only in the answer of the create (or of an update that set one).
    ``format`` is ``warren`` (the event as ``GET /v1/events`` shows it) or ``e2b``."""

    id: str
    team: str
    name: str
    url: str
    events: list[str]
    enabled: bool
    format: str
    created_at: datetime | None
    secret: str | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Webhook:
        ev = d.get("events")
        sec = d.get("secret")
        return cls(
            id=str(d.get("id", "")),
            team=str(d.get("team", "")),
            name=str(d.get("name", "")),
            url=str(d.get("url", "")),
            events=[str(e) for e in ev] if isinstance(ev, list) else [],
            enabled=bool(d.get("enabled", True)),
            format=str(d.get("format", "warren")),
            created_at=parse_time(d.get("created_at")),
            secret=sec if isinstance(sec, str) else None,
        )


@dataclass(frozen=True)
class WebhookDelivery:
    """One event's delivery to a webhook: ``state`` is pending (attempts left), delivered (a
    2xx answer) or dead (every attempt failed: the dead-letter record, see
    :meth:`Client.webhook_redeliver`). ``body`` is the JSON that was (or will be) sent."""

    id: int
    delivery_id: str
    webhook_id: str
    event_id: str
    type: str
    state: str
    attempts: int
    last_status: int
    last_error: str
    created_at: datetime | None
    last_attempt_at: datetime | None
    next_attempt_at: datetime | None
    body: Any

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> WebhookDelivery:
        return cls(
            id=int(d.get("id", 0)),
            delivery_id=str(d.get("delivery_id", "")),
            webhook_id=str(d.get("webhook_id", "")),
            event_id=str(d.get("event_id", "")),
            type=str(d.get("type", "")),
            state=str(d.get("state", "")),
            attempts=int(d.get("attempts", 0)),
            last_status=int(d.get("last_status", 0)),
            last_error=str(d.get("last_error", "")),
            created_at=parse_time(d.get("created_at")),
            last_attempt_at=parse_time(d.get("last_attempt_at")),
            next_attempt_at=parse_time(d.get("next_attempt_at")),
            body=d.get("body"),
        )


@dataclass(frozen=True)
class AuditRecord:
    """One state-changing request in the team's audit trail (``GET /v1/audit``): when, who (the
    team and the id of the key, never the key), from where (the peer address), the action and
    its object, and the result (the HTTP status and, for an error, its code). ``id`` is the
    cursor to continue after."""

    id: str
    time: datetime | None
    request_id: str
    team: str
    key_id: str
    peer: str
    action: str
    object_kind: str
    object_id: str
    method: str
    route: str
    status: int
    code: str | None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> AuditRecord:
        def part(name: str) -> Mapping[str, Any]:
            v = d.get(name)
            return v if isinstance(v, dict) else {}

        who, obj, req, res = part("who"), part("object"), part("request"), part("result")
        code = res.get("code")
        return cls(
            id=str(d.get("id", "")),
            time=parse_time(d.get("time")),
            request_id=str(d.get("request_id", "")),
            team=str(who.get("team", "")),
            key_id=str(who.get("key_id", "")),
            peer=str(d.get("from", "")),
            action=str(d.get("action", "")),
            object_kind=str(obj.get("kind", "")),
            object_id=str(obj.get("id", "")),
            method=str(req.get("method", "")),
            route=str(req.get("route", "")),
            status=_opt_int(res.get("status")) or 0,
            code=code if isinstance(code, str) else None,
        )


@dataclass(frozen=True)
class ApiKey:
    """An API key's record (never its secret)."""

    id: str
    team: str
    name: str
    admin: bool
    created_at: datetime
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ApiKey:
        return cls(
            id=str(d.get("id", "")),
            team=str(d.get("team", "")),
            name=str(d.get("name") or ""),
            admin=bool(d.get("admin", False)),
            created_at=parse_time(d.get("created_at")) or _EPOCH,
            raw=dict(d),
        )


@dataclass(frozen=True)
class CreatedApiKey(ApiKey):
    """A new key: ``key`` is the secret, shown this once."""

    key: str = field(default="", repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CreatedApiKey:
        base = ApiKey.from_json(d)
        return cls(
            id=base.id,
            team=base.team,
            name=base.name,
            admin=base.admin,
            created_at=base.created_at,
            raw=base.raw,
            key=str(d.get("key", "")),
        )


@dataclass(frozen=True)
class VersionInfo:
    version: str
    api: str
    runtime: str  # the isolation backend of a create that names none (and its template none)
    cgroup: str
    domain: str | None = None  # ports are served as <port>-<id>.<domain> (warrend --domain)
    team: str | None = None  # the caller's team
    admin: bool = False  # the caller's key is an admin's
    # the backends a create may ask for there that can run ("ns", "gvisor")
    runtimes: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> VersionInfo:
        domain = d.get("domain")
        team = d.get("team")
        return cls(
            version=str(d.get("version", "")),
            api=str(d.get("api", "")),
            runtime=str(d.get("runtime", "")),
            cgroup=str(d.get("cgroup", "")),
            domain=domain if isinstance(domain, str) and domain else None,
            team=team if isinstance(team, str) else None,
            admin=d.get("admin") is True,
            runtimes=[str(r) for r in (d.get("runtimes") or []) if isinstance(r, str)],
            raw=dict(d),
        )
