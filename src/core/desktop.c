/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's desktop and browser: the tools of the `desktop` template run inside the sandbox,
 * one short process at a time, with their output collected. See desktop.h.
 *
 * An operation is a `dop`: a chain of steps, each a process run to its end (run) or started in
 * the background (bg, for Xvfb, the XFCE session and Chromium, which outlive the call and are
 * listed among the sandbox's processes). A step's end is handled on the next loop turn (a zero
 * timer), where the ended process is also released, never from inside its own callbacks. */
#include "desktop.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"

#define RUN_TIMEOUT_MS 15000       /* a short tool */
#define SHOT_MAX       (64u << 20) /* a screenshot's PNG */
#define OUT_MAX        (1u << 20)  /* any other tool's output */
#define ERR_KEEP       2048        /* the end of stderr kept for a message */
#define CDP_PROFILE    "--user-data-dir=/tmp/.warren-cdp-profile"
#define TYPE_DELAY_MS  "12"

/* Fixed scripts: their only inputs are positional numbers. */
#define SH_INFO "xdpyinfo >/dev/null 2>&1 || exit 3; xdotool getdisplaygeometry"
#define SH_WAIT_X                                                                                  \
    "for i in $(seq 200); do xdpyinfo >/dev/null 2>&1 && exit 0; sleep 0.05; done; exit 1"
#define SH_WAIT_XFCE                                                                               \
    "for i in $(seq 600); do pgrep -x xfce4-session >/dev/null && pgrep -x xfwm4 >/dev/null && "   \
    "pgrep -x xfdesktop >/dev/null && exit 0; sleep 0.1; done; exit 1"
#define SH_CDP_UP   "curl -sf -o /dev/null --max-time 2 http://127.0.0.1:9222/json/version"
#define SH_WAIT_CDP "for i in $(seq 300); do " SH_CDP_UP " && exit 0; sleep 0.1; done; exit 1"
#define SH_WINDOWS                                                                                 \
    "xdpyinfo >/dev/null 2>&1 || exit 3\n"                                                         \
    "f=$(xprop -root _NET_ACTIVE_WINDOW 2>/dev/null | sed -n 's/.*# "                              \
    "\\(0x[0-9a-fA-F]*\\).*/\\1/p')\n"                                                             \
    "[ -n \"$f\" ] && [ \"$f\" != 0x0 ] && f=$(printf '%d' \"$f\") || f=$(xdotool getwindowfocus " \
    "2>/dev/null)\n"                                                                               \
    "ids=$(xprop -root _NET_CLIENT_LIST 2>/dev/null | sed -n 's/.*# //p' | tr ',' ' ')\n"          \
    "[ -n \"$ids\" ] || ids=$(xdotool search --onlyvisible --name . 2>/dev/null)\n"                \
    "for w in $ids; do\n"                                                                          \
    "  w=$(printf '%d' \"$w\")\n"                                                                  \
    "  c=$(xprop -id \"$w\" WM_CLASS 2>/dev/null | sed -n 's/^WM_CLASS[^=]*= \"[^\"]*\", "         \
    "\"\\(.*\\)\"$/\\1/p')\n"                                                                      \
    "  t=$(xdotool getwindowname \"$w\" 2>/dev/null)\n"                                            \
    "  t=$(printf '%s' \"$t\" | tr '\\t\\r\\n' '   ')\n"                                           \
    "  [ \"$w\" = \"$f\" ] && a=1 || a=0\n"                                                        \
    "  printf '%s\\t%s\\t%s\\t%s\\n' \"$w\" \"$a\" \"$c\" \"$t\"\n"                                \
    "done\n"

enum op {
    OP_INFO,
    OP_START,
    OP_SHOT,
    OP_POINT,
    OP_DONE,
    OP_WINDOWS,
    OP_BROWSER,
    OP_VERSION,
};

struct dop {
    struct wr_live_sb *sb; /* referenced */
    enum op op;
    void *ctx;
    union {
        wr_desktop_info_cb info;
        wr_desktop_png_cb png;
        wr_desktop_point_cb point;
        wr_desktop_done_cb done;
        wr_desktop_windows_cb windows;
        wr_browser_version_cb version;
    } cb;
    void (*next)(struct dop *d); /* the step after the current one */
    const char *what;            /* the current step's tool, for messages */
    struct wr_proc_sub sub;
    uint32_t proc_id;
    bool bg;
    uv_timer_t timer;
    struct wr_buf out, errout;
    size_t max_out;
    bool over;
    struct wr_exit ex;
    bool timed_out;
    bool failed; /* the step could not run: err */
    struct wr_err err;
    unsigned w, h, dpi;
    bool running; /* OP_BROWSER: the display runs */
    /* OP_START: the other starts of the same sandbox that came meanwhile, answered with it */
    struct start_wait *waiters;
    struct dop *next_start;
};

struct start_wait {
    struct start_wait *next;
    wr_desktop_info_cb cb;
    void *ctx;
};

/* The starts in flight, one per sandbox. */
static struct dop *starting;

static struct dop *dop_new(struct wr_live_sb *sb, enum op op, void *ctx)
{
    struct dop *d = xcalloc(1, sizeof(*d));

    d->sb = sb;
    wr_live_sb_ref(sb);
    d->op = op;
    d->ctx = ctx;
    wr_buf_init(&d->out);
    wr_buf_init(&d->errout);
    uv_timer_init(wr_live_sb_loop(sb), &d->timer);
    d->timer.data = d;
    return d;
}

static void dop_closed(uv_handle_t *h)
{
    struct dop *d = h->data;

    wr_live_sb_unref(d->sb);
    wr_buf_fini(&d->out);
    wr_buf_fini(&d->errout);
    free(d);
}

static void dop_free(struct dop *d)
{
    uv_close((uv_handle_t *)&d->timer, dop_closed);
}

/* A buffer as a C string (never NULL). */
/* b's bytes as a string: NUL-terminated, also when nothing was ever appended (an empty
 * buffer has no storage, and appending nothing gives it none). */
static char *bstr(struct wr_buf *b)
{
    wr_buf_reserve(b, 1);
    b->data[b->len] = '\0';
    return (char *)b->data;
}

/* Answer a start and the starts that waited for it. */
static void start_answer(struct dop *d, const struct wr_desktop_info *info,
                         const struct wr_err *err)
{
    for (struct dop **pp = &starting; *pp != NULL; pp = &(*pp)->next_start)
        if (*pp == d) {
            *pp = d->next_start;
            break;
        }
    d->cb.info(d->ctx, info, err);
    while (d->waiters != NULL) {
        struct start_wait *w = d->waiters;
        d->waiters = w->next;
        w->cb(w->ctx, info, err);
        free(w);
    }
}

/* Answer the operation's error and end it. */
static void dop_fail(struct dop *d, const struct wr_err *err)
{
    switch (d->op) {
    case OP_INFO:
        d->cb.info(d->ctx, NULL, err);
        break;
    case OP_START:
        start_answer(d, NULL, err);
        break;
    case OP_SHOT:
        d->cb.png(d->ctx, NULL, 0, err);
        break;
    case OP_POINT:
        d->cb.point(d->ctx, 0, 0, err);
        break;
    case OP_DONE:
    case OP_BROWSER:
        d->cb.done(d->ctx, err);
        break;
    case OP_WINDOWS:
        d->cb.windows(d->ctx, NULL, 0, err);
        break;
    case OP_VERSION:
        d->cb.version(d->ctx, NULL, 0, err);
        break;
    }
    dop_free(d);
}

static void dop_failf(struct dop *d, enum wr_err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void dop_failf(struct dop *d, enum wr_err_kind kind, const char *fmt, ...)
{
    struct wr_err err;
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    wr_err_set(&err, kind, 0, "%s", msg);
    dop_fail(d, &err);
}

/* The end of stderr, one line, for a message. */
static const char *err_tail(struct dop *d)
{
    char *s = bstr(&d->errout);
    size_t n = d->errout.len;

    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    for (char *p = s; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
    return n > 200 ? s + n - 200 : s;
}

/* The step ended badly: an error that says why (no X server, a missing tool, the tool's own
 * message). True if it did (d is then answered and freed). */
static bool step_failed(struct dop *d)
{
    const char *tail;

    if (d->failed) {
        struct wr_err err = d->err;
        if (d->err.sys_errno == ENOENT)
            wr_err_set(&err, WR_ECONFLICT, ENOENT,
                       "sandbox %s has no %s (a desktop needs the `desktop` template)",
                       wr_live_sb_id(d->sb), d->what);
        dop_fail(d, &err); /* a paused or stopping sandbox: its own error */
        return true;
    }
    if (d->bg)
        return false;
    if (d->over) {
        dop_failf(d, WR_EUPSTREAM, "sandbox %s: the output of %s is too large",
                  wr_live_sb_id(d->sb), d->what);
        return true;
    }
    if (d->timed_out) {
        dop_failf(d, WR_ETIMEOUT, "sandbox %s: %s did not finish in time", wr_live_sb_id(d->sb),
                  d->what);
        return true;
    }
    if (d->ex.signal == 0 && d->ex.exit_code == 0)
        return false;
    tail = err_tail(d);
    if (d->ex.signal == 0 && d->ex.exit_code == 127)
        dop_failf(d, WR_ECONFLICT, "sandbox %s has no %s (a desktop needs the `desktop` template)",
                  wr_live_sb_id(d->sb), d->what);
    else if (strstr(tail, "display") != NULL || strstr(tail, "xdo instance") != NULL ||
             (d->ex.signal == 0 && d->ex.exit_code == 3))
        dop_failf(
            d, WR_ECONFLICT,
            "the desktop of sandbox %s is not running (POST /v1/sandboxes/{id}/desktop/start)",
            wr_live_sb_id(d->sb));
    else
        dop_failf(d, WR_EUPSTREAM, "sandbox %s: %s", wr_live_sb_id(d->sb),
                  *tail ? tail : "the tool failed");
    return true;
}

/* ---- running a step ------------------------------------------------------------------------ */

static void step_next(uv_timer_t *t)
{
    struct dop *d = t->data;
    struct wr_proc *p;

    if (d->proc_id != 0 && !d->bg && wr_live_sb_alive(d->sb) &&
        (p = wr_live_sb_proc(d->sb, d->proc_id)) != NULL && !wr_proc_running(p)) {
        struct wr_err err;
        (void)wr_proc_release(p, &err);
    }
    d->proc_id = 0;
    d->next(d);
}

static void step_end_later(struct dop *d)
{
    uv_timer_start(&d->timer, step_next, 0, 0);
}

static bool run_output(struct wr_proc_sub *sub, int stream, const uint8_t *p, size_t n)
{
    struct dop *d = (struct dop *)((char *)sub - offsetof(struct dop, sub));

    if (stream == 1) {
        if (d->out.len + n > d->max_out)
            d->over = true;
        else
            wr_buf_append(&d->out, p, n);
    } else if (d->errout.len < ERR_KEEP) {
        wr_buf_append(&d->errout, p, n < ERR_KEEP - d->errout.len ? n : ERR_KEEP - d->errout.len);
    }
    return false;
}

static void run_exit(struct wr_proc_sub *sub, const struct wr_exit *ex, bool timed_out)
{
    struct dop *d = (struct dop *)((char *)sub - offsetof(struct dop, sub));

    d->ex = *ex;
    d->timed_out = timed_out;
    wr_proc_unsubscribe(sub);
    step_end_later(d);
}

static void run_lost(struct wr_proc_sub *sub, const struct wr_err *err)
{
    struct dop *d = (struct dop *)((char *)sub - offsetof(struct dop, sub));

    d->failed = true;
    d->err = *err;
    wr_proc_unsubscribe(sub);
    step_end_later(d);
}

static void run_started(void *ctx, struct wr_proc *p, const struct wr_err *err)
{
    struct dop *d = ctx;

    if (err != NULL) {
        d->failed = true;
        d->err = *err;
        step_end_later(d);
        return;
    }
    d->proc_id = wr_proc_id(p);
    if (d->bg) {
        step_end_later(d);
        return;
    }
    wr_proc_stdin_close(p, NULL, NULL);
    d->sub =
        (struct wr_proc_sub){.on_output = run_output, .on_exit = run_exit, .on_lost = run_lost};
    wr_proc_subscribe(p, &d->sub, true);
}

/* Run argv (NULL-terminated) as the template's user with DISPLAY=:0; then next(d) with the
 * outcome in d. bg: do not wait for its end. */
static void step(struct dop *d, const char *const *argv, bool bg, uint64_t timeout_ms,
                 size_t max_out, void (*next)(struct dop *d))
{
    char *env[] = {(char *)"DISPLAY=" WR_DESKTOP_DISPLAY, NULL};
    struct wr_spawn sp = {.uid = -1, .gid = -1};

    d->next = next;
    d->what = argv[0];
    if (strcmp(argv[0], "/bin/sh") == 0 && argv[1] != NULL && argv[2] != NULL)
        d->what = strstr(argv[2], "curl")       ? "curl"
                  : strstr(argv[2], "xdpyinfo") ? "xdpyinfo"
                                                : "pgrep";
    d->bg = bg;
    d->failed = d->over = d->timed_out = false;
    d->ex = (struct wr_exit){0};
    d->max_out = max_out;
    wr_buf_fini(&d->out);
    wr_buf_fini(&d->errout);
    sp.argv = (char **)argv;
    sp.env = env;
    wr_live_sb_spawn(d->sb, &sp, bg ? 0 : timeout_ms, run_started, d);
}

static void sh(struct dop *d, const char *script, void (*next)(struct dop *d))
{
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    step(d, argv, false, 70000, OUT_MAX, next);
}

/* ---- info and start ------------------------------------------------------------------------ */

/* SH_INFO's outcome into *info; false (answered) on an error other than "not running". */
static bool parse_info(struct dop *d, struct wr_desktop_info *info)
{
    *info = (struct wr_desktop_info){0};
    if (!d->failed && !d->timed_out && d->ex.signal == 0 && d->ex.exit_code == 3)
        return true;
    if (step_failed(d))
        return false;
    if (sscanf(bstr(&d->out), "%u %u", &info->width, &info->height) != 2) {
        dop_failf(d, WR_EUPSTREAM, "sandbox %s: xdotool getdisplaygeometry answered %s",
                  wr_live_sb_id(d->sb), bstr(&d->out));
        return false;
    }
    info->running = true;
    return true;
}

static void info_done(struct dop *d)
{
    struct wr_desktop_info info;

    if (!parse_info(d, &info))
        return;
    if (d->op == OP_START)
        start_answer(d, &info, NULL);
    else
        d->cb.info(d->ctx, &info, NULL);
    dop_free(d);
}

void wr_desktop_info(struct wr_live_sb *sb, wr_desktop_info_cb cb, void *ctx)
{
    struct dop *d = dop_new(sb, OP_INFO, ctx);

    d->cb.info = cb;
    sh(d, SH_INFO, info_done);
}

static void start_xfce_up(struct dop *d)
{
    if (d->ex.signal == 0 && d->ex.exit_code == 1 && !d->failed && !d->timed_out) {
        dop_failf(d, WR_ETIMEOUT,
                  "sandbox %s: the XFCE session did not start in 60 s (xfce4-session, xfwm4, "
                  "xfdesktop)",
                  wr_live_sb_id(d->sb));
        return;
    }
    if (step_failed(d))
        return;
    sh(d, SH_INFO, info_done);
}

static void start_xfce(struct dop *d)
{
    if (step_failed(d))
        return;
    sh(d, SH_WAIT_XFCE, start_xfce_up);
}

static void start_x_up(struct dop *d)
{
    const char *argv[] = {"startxfce4", NULL};

    if (d->ex.signal == 0 && d->ex.exit_code == 1 && !d->failed && !d->timed_out) {
        dop_failf(d, WR_ETIMEOUT, "sandbox %s: Xvfb did not answer on :0 in 10 s",
                  wr_live_sb_id(d->sb));
        return;
    }
    if (step_failed(d))
        return;
    step(d, argv, true, 0, 0, start_xfce);
}

static void start_x(struct dop *d)
{
    if (step_failed(d))
        return;
    sh(d, SH_WAIT_X, start_x_up);
}

static void start_probed(struct dop *d)
{
    struct wr_desktop_info info;
    char screen[48], dpi[16];
    const char *argv[] = {"Xvfb", WR_DESKTOP_DISPLAY, "-ac",  "-screen", "0",
                          screen, "-retro",           "-dpi", dpi,       "-nolisten",
                          "tcp",  "-nolisten",        "unix", NULL};

    if (!parse_info(d, &info))
        return;
    if (info.running) {
        start_answer(d, &info, NULL);
        dop_free(d);
        return;
    }
    snprintf(screen, sizeof(screen), "%ux%ux24", d->w, d->h);
    snprintf(dpi, sizeof(dpi), "%u", d->dpi);
    step(d, argv, true, 0, 0, start_x);
}

void wr_desktop_start(struct wr_live_sb *sb, unsigned width, unsigned height, unsigned dpi,
                      wr_desktop_info_cb cb, void *ctx)
{
    struct dop *d;

    /* One start at a time per sandbox (two would make two XFCE sessions): a second waits for
     * the first's answer. */
    for (d = starting; d != NULL; d = d->next_start)
        if (d->sb == sb) {
            struct start_wait *w = xcalloc(1, sizeof(*w)), **pp = &d->waiters;
            w->cb = cb;
            w->ctx = ctx;
            while (*pp != NULL)
                pp = &(*pp)->next;
            *pp = w;
            return;
        }
    d = dop_new(sb, OP_START, ctx);
    d->next_start = starting;
    starting = d;

    d->cb.info = cb;
    d->w = width;
    d->h = height;
    d->dpi = dpi;
    sh(d, SH_INFO, start_probed);
}

/* ---- screenshot ---------------------------------------------------------------------------- */

static void shot_done(struct dop *d)
{
    if (step_failed(d))
        return;
    if (d->out.len < 8 || memcmp(d->out.data, "\x89PNG\r\n\x1a\n", 8) != 0) {
        dop_failf(d, WR_EUPSTREAM, "sandbox %s: scrot did not write a PNG", wr_live_sb_id(d->sb));
        return;
    }
    d->cb.png(d->ctx, (const uint8_t *)d->out.data, d->out.len, NULL);
    dop_free(d);
}

void wr_desktop_screenshot(struct wr_live_sb *sb, bool cursor, wr_desktop_png_cb cb, void *ctx)
{
    struct dop *d = dop_new(sb, OP_SHOT, ctx);
    const char *with[] = {"scrot", "--pointer", "-", NULL};
    const char *without[] = {"scrot", "-", NULL};

    d->cb.png = cb;
    step(d, cursor ? with : without, false, RUN_TIMEOUT_MS, SHOT_MAX, shot_done);
}

/* ---- the pointer --------------------------------------------------------------------------- */

static void point_done(struct dop *d)
{
    unsigned x, y;
    const char *s;

    if (step_failed(d))
        return;
    /* getmouselocation: "x:100 y:200 screen:0 window:1293", the last line. */
    s = bstr(&d->out);
    for (const char *p = s; (p = strstr(p, "x:")) != NULL; p++)
        s = p;
    if (sscanf(s, "x:%u y:%u", &x, &y) != 2) {
        dop_failf(d, WR_EUPSTREAM, "sandbox %s: xdotool getmouselocation answered %s",
                  wr_live_sb_id(d->sb), bstr(&d->out));
        return;
    }
    d->cb.point(d->ctx, x, y, NULL);
    dop_free(d);
}

/* argv of xdotool for m, its numbers in nums (room for 8 of 12 bytes). */
static size_t mouse_argv(const struct wr_desktop_mouse *m, const char **argv, char nums[][12])
{
    size_t n = 0, k = 0;
#define NUM(v) (snprintf(nums[k], 12, "%u", (unsigned)(v)), nums[k++])

    argv[n++] = "xdotool";
    if (m->has_xy) {
        argv[n++] = "mousemove";
        argv[n++] = "--sync";
        argv[n++] = NUM(m->x);
        argv[n++] = NUM(m->y);
    }
    switch (m->action) {
    case WR_MOUSE_MOVE:
        break;
    case WR_MOUSE_CLICK:
        argv[n++] = "click";
        argv[n++] = NUM(m->button);
        break;
    case WR_MOUSE_DOUBLE_CLICK:
        argv[n++] = "click";
        argv[n++] = "--repeat";
        argv[n++] = "2";
        argv[n++] = NUM(m->button);
        break;
    case WR_MOUSE_DOWN:
        argv[n++] = "mousedown";
        argv[n++] = NUM(m->button);
        break;
    case WR_MOUSE_UP:
        argv[n++] = "mouseup";
        argv[n++] = NUM(m->button);
        break;
    case WR_MOUSE_SCROLL:
        argv[n++] = "click";
        argv[n++] = "--repeat";
        argv[n++] = NUM(m->amount);
        argv[n++] = m->up ? "4" : "5";
        break;
    case WR_MOUSE_DRAG:
        argv[n++] = "mousedown";
        argv[n++] = NUM(m->button);
        argv[n++] = "sleep";
        argv[n++] = "0.05";
        argv[n++] = "mousemove";
        argv[n++] = "--sync";
        argv[n++] = NUM(m->to_x);
        argv[n++] = NUM(m->to_y);
        argv[n++] = "sleep";
        argv[n++] = "0.05";
        argv[n++] = "mouseup";
        argv[n++] = NUM(m->button);
        break;
    }
#undef NUM
    argv[n++] = "getmouselocation";
    argv[n] = NULL;
    return n;
}

void wr_desktop_mouse(struct wr_live_sb *sb, const struct wr_desktop_mouse *m,
                      wr_desktop_point_cb cb, void *ctx)
{
    struct dop *d = dop_new(sb, OP_POINT, ctx);
    const char *argv[32];
    char nums[8][12];

    d->cb.point = cb;
    mouse_argv(m, argv, nums);
    step(d, argv, false, RUN_TIMEOUT_MS, OUT_MAX, point_done);
}

void wr_desktop_cursor(struct wr_live_sb *sb, wr_desktop_point_cb cb, void *ctx)
{
    struct dop *d = dop_new(sb, OP_POINT, ctx);
    const char *argv[] = {"xdotool", "getmouselocation", NULL};

    d->cb.point = cb;
    step(d, argv, false, RUN_TIMEOUT_MS, OUT_MAX, point_done);
}

/* ---- the keyboard -------------------------------------------------------------------------- */

int wr_desktop_text_check(const char *text, size_t n, struct wr_err *err)
{
    if (n == 0 || n > WR_DESKTOP_MAX_TEXT)
        return wr_err_set(err, WR_EINVAL, 0, "`text` must be 1 to %u bytes",
                          (unsigned)WR_DESKTOP_MAX_TEXT);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f)
            return wr_err_set(err, WR_EINVAL, 0,
                              "`text` has a control character (0x%02x) at byte %zu: only tab and "
                              "newline are typed",
                              c, i);
    }
    return 0;
}

static void done_done(struct dop *d)
{
    if (step_failed(d))
        return;
    d->cb.done(d->ctx, NULL);
    dop_free(d);
}

void wr_desktop_type(struct wr_live_sb *sb, const char *text, wr_desktop_done_cb cb, void *ctx)
{
    struct dop *d = dop_new(sb, OP_DONE, ctx);
    const char *argv[] = {"xdotool", "type", "--delay", TYPE_DELAY_MS, "--", text, NULL};

    d->cb.done = cb;
    step(d, argv, false, RUN_TIMEOUT_MS + 30 * (uint64_t)strlen(text), OUT_MAX, done_done);
}

static const struct {
    const char *name, *sym;
} key_names[] = {
    /* @e2b/desktop's map (its names, lower case), so an agent's names mean the same here. */
    {"alt", "Alt_L"},
    {"alt_left", "Alt_L"},
    {"alt_right", "Alt_R"},
    {"backspace", "BackSpace"},
    {"break", "Pause"},
    {"caps_lock", "Caps_Lock"},
    {"cmd", "Super_L"},
    {"command", "Super_L"},
    {"control", "Control_L"},
    {"control_left", "Control_L"},
    {"control_right", "Control_R"},
    {"ctrl", "Control_L"},
    {"del", "Delete"},
    {"delete", "Delete"},
    {"down", "Down"},
    {"end", "End"},
    {"enter", "Return"},
    {"esc", "Escape"},
    {"escape", "Escape"},
    {"home", "Home"},
    {"insert", "Insert"},
    {"left", "Left"},
    {"menu", "Menu"},
    {"meta", "Meta_L"},
    {"num_lock", "Num_Lock"},
    {"page_down", "Page_Down"},
    {"page_up", "Page_Up"},
    {"pause", "Pause"},
    {"print", "Print"},
    {"return", "Return"},
    {"right", "Right"},
    {"scroll_lock", "Scroll_Lock"},
    {"shift", "Shift_L"},
    {"shift_left", "Shift_L"},
    {"shift_right", "Shift_R"},
    {"space", "space"},
    {"super", "Super_L"},
    {"super_left", "Super_L"},
    {"super_right", "Super_R"},
    {"tab", "Tab"},
    {"up", "Up"},
    {"win", "Super_L"},
    {"windows", "Super_L"},
};

/* Printable ASCII that is not a keysym name by itself: xdotool's names for it. */
static const struct {
    char c;
    const char *sym;
} punct[] = {
    {' ', "space"},      {'!', "exclam"},       {'"', "quotedbl"},    {'#', "numbersign"},
    {'$', "dollar"},     {'%', "percent"},      {'&', "ampersand"},   {'\'', "apostrophe"},
    {'(', "parenleft"},  {')', "parenright"},   {'*', "asterisk"},    {'+', "plus"},
    {',', "comma"},      {'-', "minus"},        {'.', "period"},      {'/', "slash"},
    {':', "colon"},      {';', "semicolon"},    {'<', "less"},        {'=', "equal"},
    {'>', "greater"},    {'?', "question"},     {'@', "at"},          {'[', "bracketleft"},
    {'\\', "backslash"}, {']', "bracketright"}, {'^', "asciicircum"}, {'_', "underscore"},
    {'`', "grave"},      {'{', "braceleft"},    {'|', "bar"},         {'}', "braceright"},
    {'~', "asciitilde"},
};

int wr_desktop_key_map(const char *name, char *out, size_t outsz, struct wr_err *err)
{
    size_t n = strlen(name);
    char lower[40];
    int k;

    if (n == 1 && name[0] > 0x20 && name[0] < 0x7f && !isalnum((unsigned char)name[0])) {
        for (size_t i = 0; i < WR_ARRAY_SIZE(punct); i++)
            if (punct[i].c == name[0]) {
                snprintf(out, outsz, "%s", punct[i].sym);
                return 0;
            }
    }
    if (n == 1 && isalnum((unsigned char)name[0])) { /* a letter or digit is its keysym */
        snprintf(out, outsz, "%s", name);
        return 0;
    }
    if (n == 0 || n > 32 || !isalpha((unsigned char)name[0]))
        goto bad;
    for (size_t i = 0; i < n; i++) {
        if (!isalnum((unsigned char)name[i]) && name[i] != '_')
            goto bad;
        lower[i] = (char)tolower((unsigned char)name[i]);
    }
    lower[n] = '\0';
    for (size_t i = 0; i < WR_ARRAY_SIZE(key_names); i++)
        if (strcmp(lower, key_names[i].name) == 0) {
            snprintf(out, outsz, "%s", key_names[i].sym);
            return 0;
        }
    if (lower[0] == 'f' && n <= 3 && isdigit((unsigned char)lower[1])) {
        k = lower[1] - '0';
        if (n == 3)
            k = isdigit((unsigned char)lower[2]) ? k * 10 + (lower[2] - '0') : 0;
        if (k >= 1 && k <= 24) {
            snprintf(out, outsz, "F%d", k);
            return 0;
        }
    }
    /* A keysym name as it is (xdotool knows Return, a, A, KP_Enter, ...). */
    snprintf(out, outsz, "%s", name);
    return 0;
bad:
    return wr_err_set(err, WR_EINVAL, 0,
                      "key `%.40s` is not a key name (enter, ctrl, alt, shift, tab, esc, f1, a "
                      "keysym such as Return, or one character)",
                      name);
}

void wr_desktop_keys(struct wr_live_sb *sb, const char *const *keys, size_t n,
                     wr_desktop_done_cb cb, void *ctx)
{
    struct dop *d = dop_new(sb, OP_DONE, ctx);
    struct wr_buf chord = {0};
    char sym[40];
    struct wr_err err;

    d->cb.done = cb;
    for (size_t i = 0; i < n; i++) {
        if (wr_desktop_key_map(keys[i], sym, sizeof(sym), &err) < 0)
            continue; /* checked by the caller */
        if (chord.len > 0)
            wr_buf_puts(&chord, "+");
        wr_buf_puts(&chord, sym);
    }
    {
        const char *argv[] = {"xdotool", "key", "--", bstr(&chord), NULL};
        step(d, argv, false, RUN_TIMEOUT_MS, OUT_MAX, done_done);
    }
    wr_buf_fini(&chord);
}

/* ---- windows ------------------------------------------------------------------------------- */

static void windows_done(struct dop *d)
{
    struct wr_desktop_window *w = NULL;
    size_t n = 0, cap = 0;
    char *line, *save = NULL;

    if (step_failed(d))
        return;
    for (line = strtok_r(bstr(&d->out), "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char *f[4] = {line, NULL, NULL, NULL};
        for (int i = 1; i < 4; i++) {
            f[i] = strchr(f[i - 1], '\t');
            if (f[i] == NULL)
                break;
            *f[i]++ = '\0';
        }
        if (f[3] == NULL || f[0][0] == '\0')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            w = xrealloc(w, cap * sizeof(*w));
        }
        w[n++] = (struct wr_desktop_window){
            .id = f[0], .focused = strcmp(f[1], "1") == 0, .cls = f[2], .title = f[3]};
    }
    d->cb.windows(d->ctx, w, n, NULL);
    free(w);
    dop_free(d);
}

void wr_desktop_windows(struct wr_live_sb *sb, wr_desktop_windows_cb cb, void *ctx)
{
    struct dop *d = dop_new(sb, OP_WINDOWS, ctx);

    d->cb.windows = cb;
    sh(d, SH_WINDOWS, windows_done);
}

/* ---- the browser --------------------------------------------------------------------------- */

static void browser_up(struct dop *d)
{
    if (d->ex.signal == 0 && d->ex.exit_code == 1 && !d->failed && !d->timed_out) {
        dop_failf(d, WR_ETIMEOUT,
                  "sandbox %s: Chromium's DevTools endpoint did not answer on port 9222 in 30 s",
                  wr_live_sb_id(d->sb));
        return;
    }
    done_done(d);
}

static void browser_launched(struct dop *d)
{
    if (step_failed(d))
        return;
    sh(d, SH_WAIT_CDP, browser_up);
}

static void browser_probed_display(struct dop *d)
{
    struct wr_desktop_info info;
    const char *argv[] = {"chromium", "--remote-debugging-address=127.0.0.1",
                          "--remote-debugging-port=9222", CDP_PROFILE,
                          /* THE NETWORK RULE: no traffic of the browser's own (also set by the
                           * template's /etc/chromium.d/warren and its policies). */
                          "--no-sandbox", "--no-first-run", "--no-default-browser-check",
                          "--disable-background-networking", "--disable-component-update",
                          "--disable-sync", "--disable-default-apps", "--disable-breakpad",
                          "--disable-domain-reliability", "--metrics-recording-only",
                          "--password-store=basic", "about:blank", NULL, NULL};

    if (!parse_info(d, &info))
        return;
    if (!info.running) { /* no display: headless, before about:blank */
        size_t n = WR_ARRAY_SIZE(argv) - 2;
        argv[n] = argv[n - 1];
        argv[n - 1] = "--headless=new";
    }
    step(d, argv, true, 0, 0, browser_launched);
}

static void browser_probed(struct dop *d)
{
    if (!d->failed && !d->timed_out && d->ex.signal == 0 && d->ex.exit_code == 0) {
        done_done(d); /* a browser answers already */
        return;
    }
    d->failed = false;
    sh(d, SH_INFO, browser_probed_display);
}

void wr_browser_start(struct wr_live_sb *sb, wr_desktop_done_cb cb, void *ctx)
{
    struct dop *d = dop_new(sb, OP_BROWSER, ctx);

    d->cb.done = cb;
    sh(d, SH_CDP_UP, browser_probed);
}

static void version_done(struct dop *d)
{
    if (d->failed || d->timed_out || d->ex.signal != 0 || d->ex.exit_code != 0) {
        if (d->failed || (d->ex.signal == 0 && d->ex.exit_code == 127)) {
            step_failed(d);
            return;
        }
        dop_failf(d, WR_ECONFLICT,
                  "no browser answers on port 9222 of sandbox %s (POST "
                  "/v1/sandboxes/{id}/browser/start)",
                  wr_live_sb_id(d->sb));
        return;
    }
    d->cb.version(d->ctx, bstr(&d->out), d->out.len, NULL);
    dop_free(d);
}

void wr_browser_version(struct wr_live_sb *sb, wr_browser_version_cb cb, void *ctx)
{
    struct dop *d = dop_new(sb, OP_VERSION, ctx);
    const char *argv[] = {"curl", "-sf", "--max-time", "5", "http://127.0.0.1:9222/json/version",
                          NULL};

    d->cb.version = cb;
    step(d, argv, false, RUN_TIMEOUT_MS, OUT_MAX, version_done);
}
