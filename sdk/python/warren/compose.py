"""Compose files (docs/compose.md): what ``Sandbox.create(compose=...)`` sends."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["compose_context", "CONTEXT_MAX_FILES", "CONTEXT_MAX_BYTES"]

CONTEXT_MAX_FILES = 512
"""The most entries (files and empty directories) :func:`compose_context` puts in a context."""
CONTEXT_MAX_BYTES = 8 << 20
"""The most bytes of file content :func:`compose_context` puts in a context."""


def compose_context(directory: str | os.PathLike[str]) -> dict[str, str]:
    """The files of ``directory`` as the ``context`` of ``Sandbox.create(compose={...})``: the
    files a Compose file's ``env_file`` and bind volumes name, by their paths relative to
    ``directory`` (``{"app/main.py": "...", "web.env": "..."}``), and each empty directory as
    ``"dir/": ""``. The same rules as ``warren create --context DIR``: hidden entries
    (``.git``, ``.env``, ...), symlinks and special files are left out; a file that is not
    UTF-8 text, more than :data:`CONTEXT_MAX_FILES` entries or more than
    :data:`CONTEXT_MAX_BYTES` of content raises :class:`ValueError`. ``directory`` itself may be
    a symlink."""
    top = os.path.realpath(os.fspath(directory))
    if not os.path.isdir(top):
        raise NotADirectoryError(f"compose context {os.fspath(directory)!r} is not a directory")
    out: dict[str, str] = {}
    total = 0

    def add(key: str, value: str) -> None:
        if len(out) >= CONTEXT_MAX_FILES:
            raise ValueError(
                f"compose context {os.fspath(directory)!r}: more than {CONTEXT_MAX_FILES} files "
                "(the most a context holds)"
            )
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"compose context {os.fspath(directory)!r}: the name {key!r} is not UTF-8"
            ) from None
        out[key] = value

    def too_big() -> ValueError:
        return ValueError(
            f"compose context {os.fspath(directory)!r}: its files are more than "
            f"{CONTEXT_MAX_BYTES >> 20} MiB (the most a context holds)"
        )

    def walk(path: str, rel: str) -> None:
        nonlocal total
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            if e.name.startswith("."):
                continue
            name = f"{rel}{e.name}"
            if e.is_dir(follow_symlinks=False):
                before = len(out)
                walk(e.path, name + "/")
                if len(out) == before:
                    add(name + "/", "")
            elif e.is_file(follow_symlinks=False):
                size = e.stat(follow_symlinks=False).st_size
                if total + size > CONTEXT_MAX_BYTES:
                    raise too_big()
                with open(e.path, "rb") as f:
                    data = f.read(CONTEXT_MAX_BYTES - total + 1)
                if total + len(data) > CONTEXT_MAX_BYTES:
                    raise too_big()
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    raise ValueError(
                        f"compose context {os.fspath(directory)!r}: {name} is not UTF-8 text "
                        "(a context holds text files only)"
                    ) from None
                total += len(data)
                add(name, text)
            # symlinks, sockets, fifos, devices: a context holds none

    walk(top, "")
    return out


def compose_body(compose: str | Mapping[str, Any]) -> str | dict[str, Any]:
    """The create's ``compose``: the file's text, or ``{"file", "env", "context", "pull"}``
    checked (``pull``: ``{"insecure": bool, "username": str, "password": str}``, how images that
    are OCI references are pulled)."""
    if isinstance(compose, str):
        return compose
    if not isinstance(compose, Mapping):
        raise TypeError(
            "compose must be the Compose file's text (a str) or a dict with 'file', 'env' and "
            "'context'"
        )
    unknown = set(compose) - {"file", "env", "context", "pull"}
    if unknown:
        raise ValueError(f"compose: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    file = compose.get("file")
    if not isinstance(file, str):
        raise TypeError("compose['file'] must be the Compose file's text (a str)")
    body: dict[str, Any] = {"file": file}
    for key in ("env", "context"):
        value = compose.get(key)
        if value is None:
            continue
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise TypeError(f"compose[{key!r}] must map str to str")
        body[key] = dict(value)
    pull = compose.get("pull")
    if pull is not None:
        if not isinstance(pull, Mapping) or set(pull) - {"insecure", "username", "password"}:
            raise TypeError("compose['pull'] must be a dict of 'insecure', 'username', 'password'")
        body["pull"] = dict(pull)
    return body
