"""What a sandbox changed in its files (``Sandbox.diff``): plain data built from the JSON of
``GET /v1/sandboxes/{id}/diff``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["DiffAgainst", "FileChange", "FilesystemDiff", "FileDiff"]


def _mode(value: Any) -> int | None:
    if isinstance(value, str):
        try:
            return int(value, 8)
        except ValueError:
            return None
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class DiffAgainst:
    """What the sandbox was compared with: ``kind`` is ``"template"`` (its own image),
    ``"snapshot"`` or ``"sandbox"``; ``name`` the template's name, or the snapshot's or
    sandbox's id."""

    kind: str
    name: str


@dataclass(frozen=True)
class FileChange:
    """One changed path. ``change``: ``"added"``, ``"modified"``, ``"deleted"`` or
    ``"renamed"`` (then ``from_path`` is where it was). ``type``, ``size``, ``mode`` (permission
    bits as an int, ``0o644``), ``uid``, ``gid``: the entry as it is now (for a deletion: as it
    was); the ``old_*`` fields: as it was, for a modification or a rename."""

    path: str
    change: str
    type: str
    size: int
    mode: int
    uid: int | None = None
    gid: int | None = None
    old_type: str | None = None
    old_size: int | None = None
    old_mode: int | None = None
    from_path: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def permissions(self) -> str:
        """``mode`` as the API's octal string (``"0644"``)."""
        return format(self.mode, "04o")

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FileChange:
        return cls(
            path=str(d.get("path", "")),
            change=str(d.get("change", "")),
            type=str(d.get("type", "other")),
            size=_int(d.get("size")) or 0,
            mode=_mode(d.get("mode")) or 0,
            uid=_int(d.get("uid")),
            gid=_int(d.get("gid")),
            old_type=_str(d.get("old_type")),
            old_size=_int(d.get("old_size")),
            old_mode=_mode(d.get("old_mode")),
            from_path=_str(d.get("from")),
            raw=dict(d),
        )


def _against(d: Mapping[str, Any]) -> DiffAgainst:
    a = d.get("against")
    if not isinstance(a, Mapping):
        return DiffAgainst(kind="", name="")
    return DiffAgainst(kind=str(a.get("kind", "")), name=str(a.get("name", "")))


@dataclass(frozen=True)
class FilesystemDiff:
    """The changes of a sandbox's files, sorted by path; ``truncated`` when there were more
    than the listing's limit."""

    sandbox_id: str
    against: DiffAgainst
    changes: list[FileChange]
    truncated: bool
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FilesystemDiff:
        items = d.get("changes")
        return cls(
            sandbox_id=str(d.get("sandbox_id", "")),
            against=_against(d),
            changes=[FileChange.from_json(c) for c in (items if isinstance(items, list) else [])
                     if isinstance(c, Mapping)],
            truncated=bool(d.get("truncated", False)),
            raw=dict(d),
        )


@dataclass(frozen=True)
class FileDiff(FileChange):
    """One file's change with its unified diff (``diff``: ``--- a/PATH``, ``+++ b/PATH``, hunks;
    ``/dev/null`` for the side that lacks it; ``""`` when only its metadata changed). ``diff`` is
    None when the file is ``binary`` (a NUL byte or invalid UTF-8 on a side) or ``too_large``
    (a side over 1 MiB)."""

    binary: bool = False
    too_large: bool = False
    diff: str | None = None
    against: DiffAgainst = field(default_factory=lambda: DiffAgainst(kind="", name=""))

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FileDiff:
        c = FileChange.from_json(d)
        return cls(
            path=c.path,
            change=c.change,
            type=c.type,
            size=c.size,
            mode=c.mode,
            uid=c.uid,
            gid=c.gid,
            old_type=c.old_type,
            old_size=c.old_size,
            old_mode=c.old_mode,
            from_path=c.from_path,
            raw=dict(d),
            binary=bool(d.get("binary", False)),
            too_large=bool(d.get("too_large", False)),
            diff=_str(d.get("diff")),
            against=_against(d),
        )
