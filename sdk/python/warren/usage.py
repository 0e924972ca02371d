"""The usage ledger (``GET /v1/usage``, docs/usage.md): typed rows."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any


def _f(d: dict[str, Any], k: str) -> float:
    v = d.get(k)
    return float(v) if isinstance(v, (int, float)) else 0.0


def _i(d: dict[str, Any], k: str) -> int:
    v = d.get(k)
    return int(v) if isinstance(v, (int, float)) else 0


def _s(d: dict[str, Any], k: str) -> str | None:
    v = d.get(k)
    return v if isinstance(v, str) else None


@dataclass(frozen=True)
class UsageRow:
    """The sums of one group: ``key`` is the sandbox id, template name or day (YYYY-MM-DD,
    UTC) after ``group_by``."""

    key: str
    team: str
    template: str | None
    start: str
    end: str
    intervals: int
    sandbox_seconds: float
    paused_seconds: float
    vcpu_seconds: float
    cpu_seconds: float
    gib_seconds: float
    memory_gib_seconds_measured: float
    billed_vcpu_seconds: float
    peak_memory_bytes: int
    net_bytes_in: int
    net_bytes_out: int

    @classmethod
    def from_json(cls, d: dict[str, Any], group_by: str) -> UsageRow:
        return cls(
            key=_s(d, group_by) or "",
            team=_s(d, "team") or "",
            template=_s(d, "template"),
            start=_s(d, "from") or "",
            end=_s(d, "to") or "",
            intervals=_i(d, "intervals"),
            sandbox_seconds=_f(d, "sandbox_seconds"),
            paused_seconds=_f(d, "paused_seconds"),
            vcpu_seconds=_f(d, "vcpu_seconds"),
            cpu_seconds=_f(d, "cpu_seconds"),
            gib_seconds=_f(d, "gib_seconds"),
            memory_gib_seconds_measured=_f(d, "memory_gib_seconds_measured"),
            billed_vcpu_seconds=_f(d, "billed_vcpu_seconds"),
            peak_memory_bytes=_i(d, "peak_memory_bytes"),
            net_bytes_in=_i(d, "net_bytes_in"),
            net_bytes_out=_i(d, "net_bytes_out"),
        )


@dataclass(frozen=True)
class StorageSample:
    """Bytes a team stored of one kind (template, snapshot, paused, volume) at a sample time."""

    time: str
    team: str
    kind: str
    bytes: int


@dataclass(frozen=True)
class Usage:
    """A ``GET /v1/usage`` answer: what a billed vCPU-second is (``allocated``, ``measured``
    or ``max``), the grouping, the rows and the storage samples."""

    billed_seconds: str
    group_by: str
    rows: list[UsageRow]
    storage: list[StorageSample]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Usage:
        group_by = _s(d, "group_by") or "sandbox"
        rows = d.get("rows")
        storage = d.get("storage")
        return cls(
            billed_seconds=_s(d, "billed_seconds") or "allocated",
            group_by=group_by,
            rows=[UsageRow.from_json(r, group_by) for r in rows if isinstance(r, dict)]
            if isinstance(rows, list)
            else [],
            storage=[
                StorageSample(
                    time=_s(s, "time") or "",
                    team=_s(s, "team") or "",
                    kind=_s(s, "kind") or "",
                    bytes=_i(s, "bytes"),
                )
                for s in storage
                if isinstance(s, dict)
            ]
            if isinstance(storage, list)
            else [],
        )


def time_param(t: _dt.datetime | int | float | str | None) -> str | None:
    """A ``from``/``to`` value: a datetime (naive: UTC) or unix seconds or a string as is."""
    if t is None or isinstance(t, str):
        return t
    if isinstance(t, _dt.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=_dt.timezone.utc)
        return str(int(t.timestamp()))
    return str(int(t))
