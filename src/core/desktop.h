/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's desktop and browser (src/core/desktop.c): the X display :0 of a sandbox of the
 * `desktop` template (scripts/templates/desktop.sh), driven with the tools of the template
 * (Xvfb, startxfce4, scrot, xdotool, xprop, chromium) run inside the sandbox through its
 * process machinery, as the template's user, with DISPLAY=:0. No in-sandbox daemon: each call
 * is one or a few short processes. Every argument reaches a tool as an argv entry of its own,
 * never through a shell; the few shell scripts run here are fixed texts whose only inputs are
 * numbers checked by the caller, as positional parameters.
 *
 * All calls on the loop thread. Each calls its callback exactly once, never before it returns;
 * the sandbox is referenced until then. A tool that is missing (another template) fails with
 * WR_ECONFLICT naming it; a desktop that is not started, with WR_ECONFLICT "not running". */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

struct wr_live_sb;

#define WR_DESKTOP_DISPLAY  ":0"
#define WR_DESKTOP_MAX_DIM  8192  /* width and height of the screen, 1 to this */
#define WR_DESKTOP_MAX_TEXT 16384 /* bytes of text typed in one call */
#define WR_DESKTOP_MAX_KEYS 8     /* keys of one chord */
#define WR_BROWSER_CDP_PORT 9222  /* Chromium's DevTools port on the sandbox's 127.0.0.1 */

struct wr_desktop_info {
    bool running; /* an X server answers on :0 */
    unsigned width, height;
};
typedef void (*wr_desktop_info_cb)(void *ctx, const struct wr_desktop_info *info,
                                   const struct wr_err *err);

/* Whether the display runs, and its size (0 x 0 when it does not). */
void wr_desktop_info(struct wr_live_sb *sb, wr_desktop_info_cb cb, void *ctx);

/* Start Xvfb on :0 (width x height x 24, dpi; as @e2b/desktop starts it) and an XFCE session,
 * both background processes of the sandbox, and answer once xfce4-session, xfwm4 and xfdesktop
 * run (up to 60 s: WR_ETIMEOUT). Idempotent: a display that runs already is answered as it is
 * (its size unchanged). The caller checks the numbers (1..WR_DESKTOP_MAX_DIM, dpi 1..1000). */
void wr_desktop_start(struct wr_live_sb *sb, unsigned width, unsigned height, unsigned dpi,
                      wr_desktop_info_cb cb, void *ctx);

/* A PNG of the screen (with the pointer drawn when cursor): p, n valid during the call. */
typedef void (*wr_desktop_png_cb)(void *ctx, const uint8_t *p, size_t n, const struct wr_err *err);
void wr_desktop_screenshot(struct wr_live_sb *sb, bool cursor, wr_desktop_png_cb cb, void *ctx);

enum wr_mouse_action {
    WR_MOUSE_MOVE,
    WR_MOUSE_CLICK,
    WR_MOUSE_DOUBLE_CLICK,
    WR_MOUSE_DOWN,
    WR_MOUSE_UP,
    WR_MOUSE_SCROLL,
    WR_MOUSE_DRAG,
};

/* A pointer action. has_xy: move to x, y first (needed by move and drag). button: 1 left, 2
 * middle, 3 right. scroll: up (true) or down, amount clicks of the wheel (1..100). drag: press
 * at x, y, move to to_x, to_y, release. Coordinates are 0..WR_DESKTOP_MAX_DIM-1 (checked by the
 * caller; xdotool clamps them to the screen). */
struct wr_desktop_mouse {
    enum wr_mouse_action action;
    bool has_xy;
    unsigned x, y;
    unsigned button;
    bool up;
    unsigned amount;
    unsigned to_x, to_y;
};
/* The pointer's position after the action. */
typedef void (*wr_desktop_point_cb)(void *ctx, unsigned x, unsigned y, const struct wr_err *err);
void wr_desktop_mouse(struct wr_live_sb *sb, const struct wr_desktop_mouse *m,
                      wr_desktop_point_cb cb, void *ctx);
/* Where the pointer is. */
void wr_desktop_cursor(struct wr_live_sb *sb, wr_desktop_point_cb cb, void *ctx);

typedef void (*wr_desktop_done_cb)(void *ctx, const struct wr_err *err);

/* Whether text may be typed: valid UTF-8 (the caller's JSON string), 1..WR_DESKTOP_MAX_TEXT
 * bytes, no control characters but tab and newline. Returns 0, or -1 with err (WR_EINVAL). */
int wr_desktop_text_check(const char *text, size_t n, struct wr_err *err);
/* Type text (checked with wr_desktop_text_check) into the focused window. */
void wr_desktop_type(struct wr_live_sb *sb, const char *text, wr_desktop_done_cb cb, void *ctx);

/* The X keysym of a key name: E2B's names (enter, ctrl, alt, shift, cmd, esc, tab, page_up,
 * f1..f12, ...: @e2b/desktop's map), a keysym name itself ([A-Za-z][A-Za-z0-9_]{0,31}, e.g.
 * Return, F5, a), or one printable ASCII character. Writes it into out (at least 40 bytes) and
 * returns 0, or -1 with err (WR_EINVAL naming the key). */
int wr_desktop_key_map(const char *name, char *out, size_t outsz, struct wr_err *err);
/* Press keys (1..WR_DESKTOP_MAX_KEYS names, mapped with wr_desktop_key_map) as one chord. */
void wr_desktop_keys(struct wr_live_sb *sb, const char *const *keys, size_t n,
                     wr_desktop_done_cb cb, void *ctx);

struct wr_desktop_window {
    char *id; /* X window id, decimal (xdotool's) */
    char *title;
    char *cls; /* WM_CLASS's class ("" if none) */
    bool focused;
};
/* The windows the window manager shows (valid during the call). */
typedef void (*wr_desktop_windows_cb)(void *ctx, const struct wr_desktop_window *w, size_t n,
                                      const struct wr_err *err);
void wr_desktop_windows(struct wr_live_sb *sb, wr_desktop_windows_cb cb, void *ctx);

/* Start Chromium (if nothing answers on 127.0.0.1:WR_BROWSER_CDP_PORT inside yet) with its
 * DevTools endpoint there, a profile of its own (~/.cdp-profile), --no-sandbox (a Warren sandbox
 * forbids the user namespaces Chromium's own sandbox needs) and no background traffic; on the
 * display when it runs, else headless; answer once the endpoint answers (30 s). */
void wr_browser_start(struct wr_live_sb *sb, wr_desktop_done_cb cb, void *ctx);

/* Chromium's GET /json/version inside (body: its JSON, valid during the call), fetched from
 * inside the sandbox; WR_ECONFLICT "no browser" when nothing answers on the port. */
typedef void (*wr_browser_version_cb)(void *ctx, const char *body, size_t n,
                                      const struct wr_err *err);
void wr_browser_version(struct wr_live_sb *sb, wr_browser_version_cb cb, void *ctx);
