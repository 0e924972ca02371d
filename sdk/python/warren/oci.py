"""Templates from OCI images: an image archive imported, or an image pulled from a registry.

::

    from warren import Sandbox, Template

    Template.import_archive("busybox.tar", "busybox")        # docker-archive or oci-archive
    Template.pull("127.0.0.1:5000/team/app:1", "app", insecure=True)
    with Sandbox.create(template="app") as sb:
        sb.commands.run("cat /etc/os-release")
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .client import Client, resolve_client
from .models import _opt_int, parse_time

__all__ = ["Template"]

_CHUNK = 256 * 1024


def _chunks(path: str | os.PathLike[str]) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while True:
            b = f.read(_CHUNK)
            if not b:
                return
            yield b


@dataclass(frozen=True)
class Template:
    """A template sandboxes can be created from.

    ``kind``: ``"dir"`` (a directory managed on the host's disk) or ``"template"`` (made of
    layers: imported, pulled, built). ``size_bytes`` and ``created_at`` are None when the server
    does not know them; ``in_use`` counts the sandboxes running on it.
    """

    name: str
    kind: str
    size_bytes: int | None
    layers: int
    created_at: datetime | None
    in_use: int
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
            raw=dict(d),
        )

    @classmethod
    def import_archive(
        cls,
        path: str | os.PathLike[str],
        name: str,
        *,
        replace: bool = False,
        timeout: float | None = 600,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> Template:
        """Make template ``name`` from the image archive at ``path``: a docker-archive
        (``docker save``) or an oci-archive, streamed to the server (never read whole here).

        A name that is taken raises :class:`~warren.ConflictError` unless ``replace``; an archive
        that is not one, is cut short or fails its digests raises a
        :class:`~warren.WarrenError` with code ``bad_content`` (HTTP 422)."""
        c, owns = resolve_client(client, api_url, api_key)
        query = {"name": name}
        if replace:
            query["replace"] = "true"
        try:
            r = c.request(
                "POST",
                "/v1/templates/import",
                query=query,
                data=_chunks(path),
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
        timeout: float | None = 600,
        api_url: str | None = None,
        api_key: str | None = None,
        client: Client | None = None,
    ) -> Template:
        """Make template ``name`` from ``image`` (``host[:port]/repo[:tag]`` or
        ``...@sha256:<hex>``), pulled by the server from its registry; ``insecure`` for plain
        http. An image or tag the registry does not have raises
        :class:`~warren.NotFoundError`; a registry that refuses (401, 403) or does not answer
        raises a :class:`~warren.WarrenError` with code ``upstream`` (HTTP 502)."""
        c, owns = resolve_client(client, api_url, api_key)
        body: dict[str, Any] = {
            "name": name,
            "image": image,
            "insecure": insecure,
            "replace": replace,
        }
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
