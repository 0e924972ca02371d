"""Named volumes (``/v1/volumes``): directories of the team that outlive sandboxes::

    from warren import Sandbox, Volume
    Volume.create("cache")
    with Sandbox.create(volumes=["cache:/cache"]) as sb:          # or "cache:/cache:ro"
        sb.commands.run("echo hi > /cache/x")
    Volume.get("cache").disk_bytes
    Volume.delete("cache")       # ConflictError while a sandbox mounts it
"""

from __future__ import annotations

from .client import Client, path_segment, resolve_client
from .models import VolumeInfo

__all__ = ["Volume"]


class Volume:
    """Class-level operations on the team's volumes. A name is 1-64 of ``[A-Za-z0-9_.-]``,
    not starting with ``.`` or ``-``; names are per team (another team's volume is not
    found)."""

    @staticmethod
    def create(
        name: str,
        *,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> VolumeInfo:
        """Make an empty volume (ConflictError if the team has one of that name)."""
        c, owns = resolve_client(client, api_url, api_key)
        try:
            r = c.request("POST", "/v1/volumes", json_body={"name": name})
            return VolumeInfo.from_json(r.json_object())
        finally:
            if owns:
                c.close()

    @staticmethod
    def list(
        *,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> list[VolumeInfo]:
        """The team's volumes, by name."""
        c, owns = resolve_client(client, api_url, api_key)
        try:
            doc = c.request("GET", "/v1/volumes").json_object()
        finally:
            if owns:
                c.close()
        vols = doc.get("volumes")
        if not isinstance(vols, list):
            return []
        return [VolumeInfo.from_json(v) for v in vols if isinstance(v, dict)]

    @staticmethod
    def get(
        name: str,
        *,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> VolumeInfo:
        """The volume with ``disk_bytes``, the space its files use (NotFoundError if none)."""
        c, owns = resolve_client(client, api_url, api_key)
        try:
            r = c.request("GET", f"/v1/volumes/{path_segment(name)}")
            return VolumeInfo.from_json(r.json_object())
        finally:
            if owns:
                c.close()

    @staticmethod
    def delete(
        name: str,
        *,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> None:
        """Delete the volume and all its files; returns once they are gone. ConflictError
        while a creating, running or paused sandbox mounts it."""
        c, owns = resolve_client(client, api_url, api_key)
        try:
            c.request("DELETE", f"/v1/volumes/{path_segment(name)}")
        finally:
            if owns:
                c.close()
