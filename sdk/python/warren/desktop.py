"""A sandbox's desktop and browser: ``sandbox.desktop`` and ``sandbox.browser``.

The sandbox needs the ``desktop`` template (Xvfb, XFCE, xdotool, scrot, Chromium); see
docs/desktop.md. Coordinates are pixels from the top left corner of the screen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from .client import Client, path_segment

__all__ = ["Desktop", "Browser", "Window"]

Button = Literal["left", "middle", "right"]


class Window:
    """A window the window manager shows."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.id: str = str(data.get("id", ""))
        self.title: str = str(data.get("title", ""))
        self.window_class: str = str(data.get("class", ""))
        self.focused: bool = bool(data.get("focused", False))

    def __repr__(self) -> str:
        return (
            f"Window(id={self.id!r}, title={self.title!r}, class={self.window_class!r}, "
            f"focused={self.focused})"
        )


class Desktop:
    """The X display of a sandbox (``:0``), driven through the daemon's desktop API."""

    def __init__(self, client: Client, sandbox_id: str) -> None:
        self._client = client
        self._base = f"/v1/sandboxes/{path_segment(sandbox_id)}/desktop"

    def info(self) -> dict[str, Any]:
        """``{"running", "display", "width", "height"}``."""
        return self._client.request("GET", self._base).json_object()

    def start(
        self, width: int | None = None, height: int | None = None, dpi: int | None = None
    ) -> dict[str, Any]:
        """Start Xvfb and an XFCE session (default 1024x768, 96 dpi) and wait until they run.
        Idempotent: a running display is left as it is. Returns :meth:`info`."""
        body: dict[str, Any] = {}
        if width is not None:
            body["width"] = width
        if height is not None:
            body["height"] = height
        if dpi is not None:
            body["dpi"] = dpi
        return self._client.request(
            "POST", self._base + "/start", json_body=body, timeout=120
        ).json_object()

    def screenshot(self, *, cursor: bool = False) -> bytes:
        """A PNG of the screen (with the pointer drawn when ``cursor``)."""
        q = {"cursor": "1"} if cursor else None
        return self._client.request("GET", self._base + "/screenshot", query=q).body

    def _mouse(self, body: dict[str, Any]) -> tuple[int, int]:
        j = self._client.request("POST", self._base + "/mouse", json_body=body).json_object()
        return int(j["x"]), int(j["y"])

    @staticmethod
    def _at(body: dict[str, Any], x: int | None, y: int | None) -> dict[str, Any]:
        if (x is None) != (y is None):
            raise ValueError("x and y go together")
        if x is not None:
            body["x"], body["y"] = x, y
        return body

    def move(self, x: int, y: int) -> tuple[int, int]:
        """Move the pointer; returns where it is."""
        return self._mouse({"action": "move", "x": x, "y": y})

    def click(
        self, x: int | None = None, y: int | None = None, *, button: Button = "left"
    ) -> tuple[int, int]:
        """Click (at x, y if given)."""
        return self._mouse(self._at({"action": "click", "button": button}, x, y))

    def double_click(
        self, x: int | None = None, y: int | None = None, *, button: Button = "left"
    ) -> tuple[int, int]:
        return self._mouse(self._at({"action": "double_click", "button": button}, x, y))

    def mouse_down(self, *, button: Button = "left") -> tuple[int, int]:
        return self._mouse({"action": "down", "button": button})

    def mouse_up(self, *, button: Button = "left") -> tuple[int, int]:
        return self._mouse({"action": "up", "button": button})

    def scroll(
        self,
        direction: Literal["up", "down"] = "down",
        amount: int = 1,
        *,
        x: int | None = None,
        y: int | None = None,
    ) -> tuple[int, int]:
        """Turn the wheel ``amount`` clicks (at x, y if given)."""
        body = {"action": "scroll", "direction": direction, "amount": amount}
        return self._mouse(self._at(body, x, y))

    def drag(
        self, from_xy: tuple[int, int], to_xy: tuple[int, int], *, button: Button = "left"
    ) -> tuple[int, int]:
        """Press at ``from_xy``, move to ``to_xy``, release."""
        return self._mouse(
            {
                "action": "drag",
                "x": from_xy[0],
                "y": from_xy[1],
                "to_x": to_xy[0],
                "to_y": to_xy[1],
                "button": button,
            }
        )

    def cursor(self) -> tuple[int, int]:
        """Where the pointer is."""
        j = self._client.request("GET", self._base + "/mouse").json_object()
        return int(j["x"]), int(j["y"])

    def type(self, text: str) -> None:
        """Type text into the focused window (tab and newline included)."""
        self._client.request("POST", self._base + "/keyboard", json_body={"text": text})

    def key(self, *keys: str | Sequence[str]) -> None:
        """Press one chord: ``key("ctrl", "c")``, ``key(["ctrl", "c"])``, ``key("enter")``."""
        names: list[str] = []
        for k in keys:
            if isinstance(k, str):
                names.append(k)
            else:
                names.extend(k)
        self._client.request("POST", self._base + "/keyboard", json_body={"keys": names})

    def windows(self) -> list[Window]:
        j = self._client.request("GET", self._base + "/windows").json_object()
        return [Window(w) for w in j.get("windows", [])]


class Browser:
    """Chromium in the sandbox, for a Chrome DevTools Protocol client (Playwright, Puppeteer)."""

    def __init__(self, client: Client, sandbox_id: str) -> None:
        self._client = client
        self._base = f"/v1/sandboxes/{path_segment(sandbox_id)}"

    def start(self) -> str:
        """Start Chromium (on the desktop when it runs, else headless) if it is not running;
        returns the CDP WebSocket URL (``ws://.../v1/sandboxes/{id}/cdp``), which takes the API
        key in ``Authorization: Bearer``."""
        j = self._client.request(
            "POST", self._base + "/browser/start", json_body={}, timeout=60
        ).json_object()
        return str(j["cdp_url"])

    def version(self) -> dict[str, Any]:
        """Chromium's ``/json/version``, its ``webSocketDebuggerUrl`` pointing at the daemon."""
        return self._client.request("GET", self._base + "/cdp/json/version").json_object()
