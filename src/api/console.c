/* SPDX-License-Identifier: Apache-2.0 */
/* The web console's static files (docs/console.md): the single-page app `make` builds into the
 * console directory (--console-dir; by default `console/` next to warrend), served under
 * /console/ with no key (the page is public; every API call it makes needs one). Only regular
 * files below the directory are served: the path is checked segment by segment (no `.`, `..`,
 * empty segment, backslash or control character; no hidden file), then opened with openat2
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS from the directory, so neither a path nor a link in the
 * tree can lead out of it. A path that names no file and is not an asset is one of the app's
 * own routes: it gets index.html. The files are small and read whole on the loop. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/xalloc.h"
#include "api_int.h"

#define CONSOLE_PREFIX "/console"
/* A path below /console/ longer than this is refused (the app's own are far shorter). */
#define CONSOLE_PATH_MAX 1024
/* A file larger than this is not served (the app's largest chunk is a few hundred KiB). */
#define CONSOLE_FILE_MAX (16u << 20)

/* The app runs only its own scripts from this origin (no inline script, no eval), talks to this
 * origin only (fetch, and the terminal's WebSocket: CSP 3 lets 'self' match ws: and wss: of the
 * same host), and may not be framed. Styles allow 'unsafe-inline' because xterm.js writes its
 * theme and cell measurements into <style> elements it makes at run time and has no nonce hook
 * for them. */
static const char csp[] =
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; "
    "manifest-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

/* The media type of a file by its extension ("application/octet-stream" for others). */
static const char *content_type(const char *name)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".json", "application/json"},
        {".map", "application/json"},
        {".webmanifest", "application/manifest+json"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".webp", "image/webp"},
        {".woff2", "font/woff2"},
        {".woff", "font/woff"},
        {".txt", "text/plain; charset=utf-8"},
        {".wasm", "application/wasm"},
    };
    const char *dot = strrchr(name, '.');

    if (dot != NULL && strchr(dot, '/') == NULL)
        for (size_t i = 0; i < WR_ARRAY_SIZE(types); i++)
            if (strcmp(dot, types[i].ext) == 0)
                return types[i].type;
    return "application/octet-stream";
}

/* Whether rel names an asset (under assets/, or with an extension the table above knows): a
 * missing asset is a 404, never the app's index.html (a script answered with HTML). */
static bool is_asset(const char *rel)
{
    const char *last = strrchr(rel, '/');

    if (strncmp(rel, "assets/", 7) == 0)
        return true;
    last = last ? last + 1 : rel;
    return strchr(last, '.') != NULL && strcmp(content_type(last), "application/octet-stream") != 0;
}

/* Whether the file's name carries a content hash, as Vite names what it writes below assets/
 * ("index-3f9a1c2B.js": a dash, then 8 of [A-Za-z0-9_-] before the extension): such a file never
 * changes, so it may be cached for good. */
static bool is_hashed(const char *rel)
{
    const char *name = strrchr(rel, '/'), *dot;

    if (strncmp(rel, "assets/", 7) != 0)
        return false;
    name = name ? name + 1 : rel;
    dot = strchr(name, '.');
    if (dot == NULL || dot - name < 9 || dot[-9] != '-')
        return false;
    for (const char *p = dot - 8; p < dot; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-'))
            return false;
    return true;
}

/* Check rel (the decoded path below /console/, no leading slash; "" for the index). Returns 0,
 * or -1 having answered: 400 for a path that could not name a file below the directory (`..`,
 * `.`, an empty segment, a backslash, a control character, too long), 404 for a hidden
 * file's. */
static int check_rel(struct wr_http_req *req, const char *rel)
{
    size_t n = strlen(rel);
    const char *seg = rel;

    if (n >= CONSOLE_PATH_MAX) {
        api_fail(req, WR_EINVAL, "the path is longer than %u bytes", CONSOLE_PATH_MAX);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)rel[i];
        if (ch < 0x20 || ch == 0x7f || ch == '\\') {
            api_fail(req, WR_EINVAL, "the console's paths have no backslash or control character");
            return -1;
        }
    }
    while (n > 0) {
        size_t len = strcspn(seg, "/");
        if (len == 0 || (len == 1 && seg[0] == '.') ||
            (len == 2 && seg[0] == '.' && seg[1] == '.')) {
            api_fail(req, WR_EINVAL,
                     "the path must name a file below /console/ (no `.`, `..` or empty segment)");
            return -1;
        }
        if (seg[0] == '.') {
            api_fail(req, WR_ENOTFOUND, "no such file in the console");
            return -1;
        }
        seg += len;
        if (*seg == '\0')
            break;
        seg++;
    }
    return 0;
}

/* Open rel below dfd as a regular file: no symlink anywhere on the way, nothing outside the
 * directory, no FIFO or device (opened O_NONBLOCK, so a FIFO cannot hang the loop, and refused
 * by its type). Returns the fd with *st filled, or -1 with errno (ENOENT for anything that is
 * not a regular file below the directory; EISDIR for a directory). */
static int open_beneath(int dfd, const char *rel, struct stat *st)
{
    struct open_how how = {
        .flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    _cleanup_close_ int fd = (int)syscall(SYS_openat2, dfd, rel, &how, sizeof(how));

    if (fd < 0) {
        /* ELOOP: a symlink on the way; EXDEV: the path would leave the directory. */
        if (errno == ELOOP || errno == EXDEV || errno == ENOTDIR)
            errno = ENOENT;
        return -1;
    }
    if (fstat(fd, st) < 0)
        return -1;
    if (S_ISDIR(st->st_mode)) {
        errno = EISDIR;
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        errno = ENOENT;
        return -1;
    }
    return steal_fd(&fd);
}

static void common_headers(struct wr_http_req *req)
{
    wr_http_resp_header(req, "X-Content-Type-Options", "nosniff");
    wr_http_resp_header(req, "Content-Security-Policy", csp);
    wr_http_resp_header(req, "Referrer-Policy", "no-referrer");
    wr_http_resp_header(req, "X-Frame-Options", "DENY");
    wr_http_resp_header(req, "Cross-Origin-Opener-Policy", "same-origin");
}

/* Answer the file fd (rel its name, for its type and caching). */
static void serve(struct wr_http_req *req, int fd, const struct stat *st, const char *rel)
{
    const char *inm = wr_http_req_header(req, "If-None-Match");
    _cleanup_free_ char *body = NULL;
    char etag[80];
    ssize_t got;

    snprintf(etag, sizeof(etag), "\"%" PRIx64 "-%" PRIx64 "-%lx\"", (uint64_t)st->st_ino,
             (uint64_t)st->st_size, (unsigned long)st->st_mtim.tv_sec ^ st->st_mtim.tv_nsec);
    wr_http_resp_header(req, "ETag", etag);
    wr_http_resp_header(req, "Cache-Control",
                        is_hashed(rel) ? "public, max-age=31536000, immutable" : "no-cache");
    if (inm != NULL && strcmp(inm, etag) == 0) {
        wr_http_respond(req, 304, NULL, NULL, 0);
        return;
    }
    if ((uint64_t)st->st_size > CONSOLE_FILE_MAX) {
        api_fail(req, WR_EINTERNAL, "the console's file is larger than %u MiB",
                 CONSOLE_FILE_MAX >> 20);
        return;
    }
    if (strcmp(wr_http_req_method(req), "HEAD") == 0) {
        wr_http_resp_start(req, 200, content_type(rel), (int64_t)st->st_size);
        wr_http_resp_end(req);
        return;
    }
    body = xmalloc((size_t)st->st_size + 1);
    got = wr_read_all(fd, body, (size_t)st->st_size);
    if (got != (ssize_t)st->st_size) {
        api_fail(req, WR_ESYS, "reading the console's file failed");
        return;
    }
    wr_http_respond(req, 200, content_type(rel), body, (size_t)got);
}

bool api_console_handle(struct wr_api *api, struct wr_http_req *req)
{
    const char *path = wr_http_req_path(req), *method = wr_http_req_method(req);
    const char *dir = api->console_dir;
    _cleanup_free_ char *rel = NULL;
    _cleanup_close_ int dfd = -1, fd = -1;
    struct api_note *n;
    struct stat st;
    size_t len;

    if (strncmp(path, CONSOLE_PREFIX, strlen(CONSOLE_PREFIX)) != 0 ||
        (path[strlen(CONSOLE_PREFIX)] != '\0' && path[strlen(CONSOLE_PREFIX)] != '/'))
        return false;
    n = api_note(req);
    n->api = "console";
    n->route = "/console/";
    common_headers(req);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        wr_http_resp_header(req, "Allow", "GET, HEAD");
        api_fail(req, WR_EMETHOD, "use GET or HEAD");
        return true;
    }
    if (path[strlen(CONSOLE_PREFIX)] == '\0') {
        /* The app's relative URLs need the slash. */
        wr_http_resp_header(req, "Location", CONSOLE_PREFIX "/");
        wr_http_respond(req, 301, NULL, NULL, 0);
        return true;
    }
    rel = xstrdup(path + strlen(CONSOLE_PREFIX) + 1);
    len = strlen(rel);
    if (len > 0 && rel[len - 1] == '/')
        rel[len - 1] = '\0'; /* "/console/sandboxes/" is the route "sandboxes" */
    if (check_rel(req, rel) < 0)
        return true;
    if (dir == NULL || (dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
        api_fail(req, WR_ENOTFOUND,
                 "the console is not installed: no directory `%s` (warrend --console-dir)",
                 dir ? dir : "");
        return true;
    }
    if (rel[0] != '\0')
        fd = open_beneath(dfd, rel, &st);
    if (fd < 0 && (rel[0] == '\0' || (!is_asset(rel) && (errno == ENOENT || errno == EISDIR)))) {
        /* The index, or one of the app's own routes. */
        free(rel);
        rel = xstrdup("index.html");
        fd = open_beneath(dfd, rel, &st);
        if (fd < 0) {
            api_fail(req, WR_ENOTFOUND, "the console is not installed: no index.html in `%s`", dir);
            return true;
        }
    }
    if (fd < 0) {
        api_fail(req, WR_ENOTFOUND, "no such file in the console");
        return true;
    }
    serve(req, fd, &st, rel);
    return true;
}
