"""Templates and snapshots: the images sandboxes start from.

::

    from warren import Sandbox, Snapshot, Template

    [t.name for t in Template.list()]
    with Sandbox.create() as sb:
        sb.files.write("/tmp/state", "ready")
        snap = sb.snapshot(name="ready")            # its files, captured
    with Sandbox.create(template="ready") as copy:  # a snapshot's id or name works as a template
        copy.files.read("/tmp/state")
    Snapshot.delete("ready")
    Template.import_archive("app.tar", "app")      # a docker-archive or oci-archive
    Template.pull("127.0.0.1:5000/team/app:1", "app2", insecure=True)

    # A template from a Dockerfile (FROM, RUN, ENV, WORKDIR, USER, COPY), COPY reading from a
    # build context directory:
    t = Template.build("app", context="./app",   # ./app/Dockerfile
                       on_output=lambda stream, data: print(data, end=""))
"""

from __future__ import annotations

import builtins
import io
import os
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any

from .client import Client, path_segment, resolve_client
from .errors import BuildError, WarrenError
from .models import _EPOCH, _opt_int, parse_time

if TYPE_CHECKING:
    from .sandbox import Sandbox

__all__ = ["Template", "BuildStep", "Snapshot", "ForkResult"]

_CHUNK = 256 * 1024


@dataclass(frozen=True)
class BuildStep:
    """A step of a template build, as it starts: ``step`` of ``of`` (1-based), its ``line`` in
    the Dockerfile, the ``instruction`` as written (continuations joined), and whether its
    layer came from the cache (``cached``: the step did not run)."""

    step: int
    of: int
    line: int
    instruction: str
    cached: bool


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _context_tar(context: str | os.PathLike[str], dockerfile: str | None) -> IO[bytes]:
    """The directory ``context`` as a tar archive in a temporary file (rewound). With
    ``dockerfile`` (text), the archive's top-level ``Dockerfile`` is that text instead of the
    directory's own."""
    root = os.fspath(context)
    if not os.path.isdir(root):
        raise NotADirectoryError(f"build context {root!r} is not a directory")
    f = tempfile.TemporaryFile()
    try:
        with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as t:

            def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
                if dockerfile is not None and info.name == "./Dockerfile":
                    return None
                if not (info.isfile() or info.isdir() or info.issym() or info.islnk()):
                    return None  # sockets, fifos, devices: a context cannot hold them
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                return info

            t.add(root, arcname=".", recursive=True, filter=keep)
            if dockerfile is not None:
                data = dockerfile.encode("utf-8")
                info = tarfile.TarInfo("Dockerfile")
                info.size = len(data)
                info.mode = 0o644
                t.addfile(info, io.BytesIO(data))
        f.seek(0)
    except BaseException:
        f.close()
        raise
    return f


def _chunks(f: IO[bytes]) -> Iterator[bytes]:
    while True:
        b = f.read(_CHUNK)
        if not b:
            return
        yield b


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _file_chunks(path: str | os.PathLike[str]) -> Iterator[bytes]:
    with open(path, "rb") as f:
        yield from _chunks(f)


def _opt_number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


@dataclass(frozen=True)
class Template:
    """A template sandboxes can be created from.

    ``kind``: ``"dir"`` (a directory managed on the host's disk; it cannot be deleted through
    the API) or ``"template"`` (built, made of layers). ``shared``: every team's (a directory
    template, or one an admin shared; its name is reserved), else the team's own. ``team``:
    whose it is, told to admin keys only. ``size_bytes`` and ``created_at`` are None when the
    server does not know them; ``in_use`` counts the team's sandboxes running on it.
    """

    name: str
    kind: str
    size_bytes: int | None
    layers: int
    created_at: datetime | None
    in_use: int
    shared: bool = False
    team: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Template:
        return cls(
            name=str(d.get("name", "")),
            kind=str(d.get("kind", "")),
            size_bytes=_opt_int(d.get("size_bytes")),
            layers=_opt_int(d.get("layers")) or 0,
            created_at=parse_time(d.get("created_at")),
            in_use=_opt_int(d.get("in_use")) or 0,
            shared=d.get("shared") is True,
            team=str(d["team"]) if isinstance(d.get("team"), str) else None,
            raw=dict(d),
        )

    @classmethod
    def list(
        cls,
        *,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> builtins.list[Template]:
        """Every template the team can use."""
        c, owns = resolve_client(client, api_url, api_key)
        try:
            doc = c.request("GET", "/v1/templates").json_object()
        finally:
            if owns:
                c.close()
        items = doc.get("templates")
        return [cls.from_json(t) for t in items if isinstance(t, dict)] if isinstance(
            items, builtins.list
        ) else []

    @classmethod
    def get(
        cls,
        name: str,
        *,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> Template:
        """The template ``name`` (:class:`~warren.NotFoundError` if there is none)."""
        c, owns = resolve_client(client, api_url, api_key)
        try:
            r = c.request("GET", f"/v1/templates/{path_segment(name)}")
        finally:
            if owns:
                c.close()
        return cls.from_json(r.json_object())

    @classmethod
    def build(
        cls,
        name: str,
        dockerfile: str | os.PathLike[str] | None = None,
        context: str | os.PathLike[str] | None = None,
        *,
        replace: bool = False,
        shared: bool = False,
        runtime: str | None = None,
        on_step: Callable[[BuildStep], None] | None = None,
        on_output: Callable[[str, str], None] | None = None,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> Template:
        """Build the template ``name`` from a Dockerfile (the subset FROM, RUN, ENV, WORKDIR,
        USER, COPY; see docs/templates.md) and return it.

        ``dockerfile``: the Dockerfile's text (a ``str``), or a path to it (an
        ``os.PathLike`` such as :class:`pathlib.Path`). ``context``: a directory, sent as a
        tar archive made with :mod:`tarfile`, that COPY reads from; without ``dockerfile``
        its top-level ``Dockerfile`` is used, with one it replaces that file. Without a
        context, COPY fails. ``replace``: replace the team's template of that name (else
        :class:`~warren.ConflictError`). ``shared`` (admin keys only): a template every team
        uses; its name is then reserved. A shared template's name cannot be taken by a team.
        ``runtime``: the isolation backend its sandboxes run on when a create does not say
        (``"ns"`` or ``"gvisor"``; default: the FROM image's); the steps themselves run on the
        server's default.

        ``on_step`` is called as each step starts (with a :class:`BuildStep`), ``on_output``
        with ``("stdout" | "stderr", text)`` as the steps' commands write.

        Raises :class:`~warren.BuildError` (``step``, ``line``, ``exit_code``) when a step
        fails; errors found before the first step are the API's:
        :class:`~warren.InvalidArgumentError` for a bad or unsupported instruction (the message
        names the line), :class:`~warren.NotFoundError` for an unknown FROM,
        :class:`~warren.ConflictError` for a name taken, :class:`~warren.TooLargeError`.
        """
        text: str | None
        if isinstance(dockerfile, os.PathLike):
            with open(os.fspath(dockerfile), encoding="utf-8") as df:
                text = df.read()
        else:
            text = dockerfile
        if text is None and context is None:
            raise ValueError("Template.build needs a dockerfile, a context, or both")
        query: dict[str, str] = {"name": name}
        if replace:
            query["replace"] = "true"
        if shared:
            query["shared"] = "true"
        if runtime is not None:
            query["runtime"] = runtime
        archive: IO[bytes] | None = None
        body: bytes | Iterator[bytes]
        if context is not None:
            archive = _context_tar(context, text)
            body = _chunks(archive)
            ctype = "application/x-tar"
        else:
            assert text is not None
            body = text.encode("utf-8")
            ctype = "text/plain; charset=utf-8"
        c, owns = resolve_client(client, api_url, api_key)
        try:
            with c.stream(
                "POST",
                "/v1/templates/build",
                query=query,
                data=body,
                headers={"Content-Type": ctype, "Accept": "application/x-ndjson"},
            ) as stream:
                for ev in stream.iter_json():
                    kind = ev.get("type")
                    if kind == "step":
                        if on_step is not None:
                            on_step(
                                BuildStep(
                                    step=_int(ev.get("step")) or 0,
                                    of=_int(ev.get("of")) or 0,
                                    line=_int(ev.get("line")) or 0,
                                    instruction=str(ev.get("instruction", "")),
                                    cached=ev.get("cached") is True,
                                )
                            )
                    elif kind in ("stdout", "stderr"):
                        data = ev.get("data")
                        if on_output is not None and isinstance(data, str):
                            on_output(str(kind), data)
                    elif kind == "done":
                        t = ev.get("template")
                        if isinstance(t, dict):
                            return cls.get(name, client=c)
                        raise WarrenError(
                            "bad_response", "build: `done` without a template", None,
                            stream.request_id,
                        )
                    elif kind == "error":
                        raise BuildError(
                            str(ev.get("code", "error")),
                            str(ev.get("message", "the build failed")),
                            step=_int(ev.get("step")),
                            line=_int(ev.get("line")),
                            exit_code=_int(ev.get("exit_code")),
                            request_id=stream.request_id,
                        )
                raise WarrenError(
                    "bad_response", "build: the answer ended before the build did", None,
                    stream.request_id,
                )
        finally:
            if archive is not None:
                archive.close()
            if owns:
                c.close()

    @classmethod
    def delete(
        cls,
        name: str,
        *,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> None:
        """Delete the template ``name``. Sandboxes that use it keep running on its layers,
        which are freed when the last one ends. :class:`~warren.NotFoundError` if there is no
        such template; :class:`~warren.ConflictError` for a directory template (managed on
        the host's disk) or another team's."""
        c, owns = resolve_client(client, api_url, api_key)
        try:
            c.request("DELETE", f"/v1/templates/{path_segment(name)}")
        finally:
            if owns:
                c.close()

    @classmethod
    def prune_cache(
        cls,
        *,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> int:
        """Forget the team's build cache (an admin key: every team's) and return how many
        cached steps were forgotten. The next builds run their steps again; the cached layers
        are freed unless a template, snapshot or sandbox uses them."""
        c, owns = resolve_client(client, api_url, api_key)
        try:
            doc = c.request("POST", "/v1/templates/prune").json_object()
        finally:
            if owns:
                c.close()
        n = doc.get("pruned_steps")
        return n if isinstance(n, int) else 0

    @classmethod
    def import_archive(
        cls,
        path: str | os.PathLike[str],
        name: str,
        *,
        replace: bool = False,
        shared: bool = False,
        timeout: float | None = 600,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> Template:
        """Make template ``name`` from the image archive at ``path``: a docker-archive
        (``docker save``) or an oci-archive, streamed to the server (never read whole here).

        A name that is taken raises :class:`~warren.ConflictError` unless ``replace``; an archive
        that is not one, is cut short or fails its digests raises a
        :class:`~warren.WarrenError` with code ``bad_content`` (HTTP 422). ``shared`` as for
        :meth:`build`."""
        c, owns = resolve_client(client, api_url, api_key)
        query = {"name": name}
        if replace:
            query["replace"] = "true"
        if shared:
            query["shared"] = "true"
        try:
            r = c.request(
                "POST",
                "/v1/templates/import",
                query=query,
                data=_file_chunks(path),
                headers={"Content-Type": "application/x-tar"},
                timeout=timeout,
            )
            return cls.from_json(r.json_object())
        finally:
            if owns:
                c.close()

    @classmethod
    def pull(
        cls,
        image: str,
        name: str,
        *,
        username: str | None = None,
        password: str | None = None,
        insecure: bool = False,
        replace: bool = False,
        shared: bool = False,
        timeout: float | None = 600,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> Template:
        """Make template ``name`` from ``image`` (``host[:port]/repo[:tag]`` or
        ``...@sha256:<hex>``), pulled by the server from its registry; ``insecure`` for plain
        http. An image or tag the registry does not have raises
        :class:`~warren.NotFoundError`; a registry that refuses (401, 403) or does not answer
        raises a :class:`~warren.WarrenError` with code ``upstream`` (HTTP 502). ``shared`` as
        for :meth:`build`."""
        c, owns = resolve_client(client, api_url, api_key)
        body: dict[str, Any] = {
            "name": name,
            "image": image,
            "insecure": insecure,
            "replace": replace,
        }
        if shared:
            body["shared"] = True
        if username is not None:
            body["username"] = username
        if password is not None:
            body["password"] = password
        try:
            r = c.request("POST", "/v1/templates/pull", json_body=body, timeout=timeout)
            return cls.from_json(r.json_object())
        finally:
            if owns:
                c.close()


@dataclass(frozen=True)
class Snapshot:
    """A running sandbox's files captured as an image: ``Sandbox.create(template=snap.id)`` (or
    its ``name``) starts sandboxes with those files.

    ``freeze_ms``: how long the sandbox's processes were frozen for the capture;
    ``capture_ms``: how long the whole capture took; ``capture``: how the files were captured
    (``"btrfs-snapshot"``, ``"reflink-copy"`` or ``"copy"``). The server reports these three
    only when the snapshot is made (:meth:`Sandbox.snapshot <warren.Sandbox.snapshot>`);
    they are None in what :meth:`list` and :meth:`get` return.
    """

    id: str
    name: str | None
    sandbox_id: str | None
    size_bytes: int | None
    layers: int
    created_at: datetime
    freeze_ms: float | None = None
    capture_ms: float | None = None
    capture: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Snapshot:
        return cls(
            id=str(d.get("id", "")),
            name=_opt_str(d.get("name")),
            sandbox_id=_opt_str(d.get("sandbox_id")),
            size_bytes=_opt_int(d.get("size_bytes")),
            layers=_opt_int(d.get("layers")) or 0,
            created_at=parse_time(d.get("created_at")) or _EPOCH,
            freeze_ms=_opt_number(d.get("freeze_ms")),
            capture_ms=_opt_number(d.get("capture_ms")),
            capture=_opt_str(d.get("capture")),
            raw=dict(d),
        )

    @classmethod
    def list(
        cls,
        sandbox_id: str | None = None,
        *,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> builtins.list[Snapshot]:
        """The team's snapshots; only those taken of ``sandbox_id`` if given."""
        c, owns = resolve_client(client, api_url, api_key)
        try:
            query = {"sandbox_id": sandbox_id} if sandbox_id is not None else None
            doc = c.request("GET", "/v1/snapshots", query=query).json_object()
        finally:
            if owns:
                c.close()
        items = doc.get("snapshots")
        return [cls.from_json(s) for s in items if isinstance(s, dict)] if isinstance(
            items, builtins.list
        ) else []

    @classmethod
    def get(
        cls,
        snapshot: str,
        *,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> Snapshot:
        """The snapshot with this id (``snap-...``) or name (:class:`~warren.NotFoundError` if
        there is none)."""
        c, owns = resolve_client(client, api_url, api_key)
        try:
            r = c.request("GET", f"/v1/snapshots/{path_segment(snapshot)}")
        finally:
            if owns:
                c.close()
        return cls.from_json(r.json_object())

    @classmethod
    def delete(
        cls,
        snapshot: str,
        *,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> None:
        """Delete the snapshot with this id or name (:class:`~warren.NotFoundError` if there is
        none). Sandboxes created from it keep running."""
        c, owns = resolve_client(client, api_url, api_key)
        try:
            c.request("DELETE", f"/v1/snapshots/{path_segment(snapshot)}")
        finally:
            if owns:
                c.close()


@dataclass(frozen=True)
class ForkResult:
    """What :meth:`Sandbox.fork <warren.Sandbox.fork>` made: ``sandboxes``, the copies (each
    running, with the parent's files and config; they share the parent's client), and
    ``errors``, one :class:`~warren.WarrenError` per copy that could not be made (e.g. a
    :class:`~warren.RateLimitError` past the host's capacity). ``freeze_ms``: how long the
    parent was frozen; ``capture``: how its files were captured. The copies' ``template`` is
    the id of the snapshot they were made from, deleted once they exist. ``processes_kept``:
    the copies continue the parent's processes and memory (a running sandbox on the gvisor
    runtime), not fresh ones."""

    sandboxes: list[Sandbox]
    errors: list[WarrenError]
    freeze_ms: float
    capture: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    processes_kept: bool = False

    @property
    def ok(self) -> bool:
        """True when every copy asked for was made."""
        return not self.errors

    def kill_all(self) -> None:
        """Kill every copy (those already gone are skipped)."""
        for sb in self.sandboxes:
            sb.kill()
