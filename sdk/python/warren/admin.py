"""API keys (``/v1/keys``). Creating keys needs an admin key, or the unix socket (which acts
as the admin team)::

    from warren import admin
    k = admin.create_key("team-a", name="ci")      # k.key is the secret, shown once
    admin.list_keys()
    admin.delete_key(k.id)
"""

from __future__ import annotations

from .client import Client, path_segment, resolve_client
from .models import ApiKey, CreatedApiKey

__all__ = ["create_key", "list_keys", "delete_key"]


def create_key(
    team: str,
    name: str | None = None,
    admin: bool = False,
    *,
    api_url: str | None = None,
    api_key: str | None = None,
    client: Client | None = None,
) -> CreatedApiKey:
    """Make an API key for ``team`` (made if new); ``admin`` keys see every team."""
    body: dict[str, object] = {"team": team, "admin": admin}
    if name is not None:
        body["name"] = name
    c, owns = resolve_client(client, api_url, api_key)
    try:
        return CreatedApiKey.from_json(
            c.request("POST", "/v1/keys", json_body=body).json_object()
        )
    finally:
        if owns:
            c.close()


def list_keys(
    *,
    api_url: str | None = None,
    api_key: str | None = None,
    client: Client | None = None,
) -> list[ApiKey]:
    """The team's keys (an admin key sees all), never their secrets."""
    c, owns = resolve_client(client, api_url, api_key)
    try:
        doc = c.request("GET", "/v1/keys").json_object()
    finally:
        if owns:
            c.close()
    keys = doc.get("keys")
    return [ApiKey.from_json(k) for k in keys if isinstance(k, dict)] if isinstance(
        keys, list
    ) else []


def delete_key(
    key_id: str,
    *,
    api_url: str | None = None,
    api_key: str | None = None,
    client: Client | None = None,
) -> None:
    """Revoke a key (admin, or a key of one's own team)."""
    c, owns = resolve_client(client, api_url, api_key)
    try:
        c.request("DELETE", f"/v1/keys/{path_segment(key_id)}")
    finally:
        if owns:
            c.close()
