/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's files (include/warren.h): GET and PUT .../files streamed both ways (a file is
 * never held in memory unless the caller asks for a buffer), and stat, list, remove, mkdir. */
#include <stdlib.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "lib.h"

#define IO_SIZE  (64 * 1024)
#define READ_MAX (1ull << 32) /* warren_file_read_buf refuses a file larger than 4 GiB */

static int check_path(const char *id, const char *path, warren_error *err)
{
    if (wl_check_id(id, err) < 0)
        return -1;
    if (path == NULL || path[0] != '/')
        return wl_failf(err, WR_EINVAL, 0, "path `%s` must be absolute", path ? path : "(null)");
    return 0;
}

/* ---- read ----------------------------------------------------------------------------------- */

struct reader {
    warren_output_fn fn;
    void *ctx;
    bool stopped;
};

static int on_data(const char *data, size_t len, void *ctx, struct wr_err *err)
{
    struct reader *r = ctx;

    if (len > 0 && r->fn(data, len, r->ctx) != 0) {
        r->stopped = true;
        return wr_err_set(err, WR_EINTERNAL, 0, "stopped by a callback");
    }
    return 0;
}

int warren_file_read(warren *w, const char *id, const char *path, warren_output_fn fn, void *ctx,
                     warren_error *err)
{
    _cleanup_free_ char *target = NULL;
    struct reader r = {.fn = fn, .ctx = ctx};
    struct wl_http_resp resp;
    struct wr_err e;
    int ret = 0;

    if (check_path(id, path, err) < 0)
        return -1;
    if (fn == NULL)
        return wl_failf(err, WR_EINVAL, 0, "read %s: no callback for the data", path);
    target = wl_files_target(id, "files", path);
    struct wl_http_req req = {.method = "GET",
                              .target = target,
                              .accept = "application/octet-stream",
                              .on_body = on_data,
                              .ctx = &r};
    if (wl_http_request(w->http, &req, &resp, &e) < 0)
        return wl_fail(err, &e, 0, NULL);
    if (resp.status < 200 || resp.status > 299)
        ret = wl_fail_resp(err, &resp);
    else
        wl_ok(err);
    wl_http_resp_fini(&resp);
    return ret;
}

static int append(const void *data, size_t len, void *ctx)
{
    struct wr_buf *b = ctx;

    if (b->len + len > READ_MAX)
        return -1;
    wr_buf_append(b, data, len);
    return 0;
}

int warren_file_read_buf(warren *w, const char *id, const char *path, void **data, size_t *len,
                         warren_error *err)
{
    struct wr_buf b = {0};

    if (warren_file_read(w, id, path, append, &b, err) < 0) {
        if (b.len + 1 > READ_MAX && err != NULL && err->code == WARREN_EINTERNAL)
            wl_failf(err, WR_ETOOBIG, 0, "read %s: larger than %llu bytes", path, READ_MAX);
        wr_buf_fini(&b);
        return -1;
    }
    *len = b.len;
    *data = wr_buf_steal_str(&b);
    return 0;
}

/* ---- write ---------------------------------------------------------------------------------- */

/* "/v1/sandboxes/ID/files?path=P[&mode=0NNN]" */
static char *write_target(const char *id, const char *path, unsigned mode)
{
    _cleanup_free_ char *t = wl_files_target(id, "files", path);

    if (mode == 0)
        return steal_pointer(&t);
    return xasprintf("%s&mode=0%o", t, mode & 07777);
}

/* Send req whole (MEM or FD) and read the answer. */
static int put(warren *w, const struct wl_http_req *req, warren_error *err)
{
    struct wl_http_resp resp;
    struct wr_err e;
    int ret = 0;

    if (wl_http_request(w->http, req, &resp, &e) < 0)
        return wl_fail(err, &e, 0, NULL);
    if (resp.status < 200 || resp.status > 299)
        ret = wl_fail_resp(err, &resp);
    else
        wl_ok(err);
    wl_http_resp_fini(&resp);
    return ret;
}

int warren_file_write_buf(warren *w, const char *id, const char *path, unsigned mode,
                          const void *data, size_t len, warren_error *err)
{
    _cleanup_free_ char *target = NULL;

    if (check_path(id, path, err) < 0)
        return -1;
    target = write_target(id, path, mode);
    struct wl_http_req req = {.method = "PUT",
                              .target = target,
                              .content_type = "application/octet-stream",
                              .body_kind = WL_BODY_MEM,
                              .body = data,
                              .body_len = len};
    return put(w, &req, err);
}

int warren_file_write_fd(warren *w, const char *id, const char *path, unsigned mode, int fd,
                         int64_t len, warren_error *err)
{
    _cleanup_free_ char *target = NULL;

    if (check_path(id, path, err) < 0)
        return -1;
    target = write_target(id, path, mode);
    struct wl_http_req req = {.method = "PUT",
                              .target = target,
                              .content_type = "application/octet-stream",
                              .body_kind = WL_BODY_FD,
                              .body_fd = fd,
                              .body_fd_len = len >= 0 ? len : -1};
    return put(w, &req, err);
}

int warren_file_write(warren *w, const char *id, const char *path, unsigned mode,
                      warren_input_fn fn, void *ctx, warren_error *err)
{
    _cleanup_free_ char *target = NULL, *buf = NULL;
    struct wl_http_resp resp = {0};
    struct wr_err e;
    bool abandoned = false;
    int ret;

    if (check_path(id, path, err) < 0)
        return -1;
    if (fn == NULL)
        return wl_failf(err, WR_EINVAL, 0, "write %s: no callback for the data", path);
    target = write_target(id, path, mode);
    buf = xmalloc(IO_SIZE);
    struct wl_http_req req = {.method = "PUT",
                              .target = target,
                              .content_type = "application/octet-stream",
                              .body_kind = WL_BODY_STREAM};
    if (wl_http_begin(w->http, &req, &e) < 0)
        return wl_fail(err, &e, 0, NULL);
    for (;;) {
        long n = fn(buf, IO_SIZE, -1, ctx);
        if (n < 0) {
            abandoned = true;
            break;
        }
        if (n == 0)
            break;
        if (wl_http_chunk(w->http, buf, (size_t)(n > IO_SIZE ? IO_SIZE : n), &e) < 0)
            break; /* the answer says why */
    }
    if (abandoned) {
        /* A body cut short is never a file: close the connection without its last chunk, so
         * the daemon drops what it had. */
        wl_http_abort(w->http);
        return wl_failf(err, WR_EINTERNAL, 0, "write %s: stopped by a callback", path);
    }
    (void)wl_http_end(w->http, &e);
    if (wl_http_response(w->http, &req, &resp, &e) < 0)
        return wl_fail(err, &e, 0, NULL);
    ret = resp.status >= 200 && resp.status <= 299 ? 0 : wl_fail_resp(err, &resp);
    if (ret == 0)
        wl_ok(err);
    wl_http_resp_fini(&resp);
    return ret;
}

/* ---- stat, list, remove, mkdir -------------------------------------------------------------- */

static char *dup_or_null(const json_t *j, const char *key)
{
    const char *s = json_string_value(json_object_get(j, key));
    return s ? xstrdup(s) : NULL;
}

static void info_of(const json_t *j, warren_file_info *fi)
{
    const char *type = json_string_value(json_object_get(j, "type"));
    const char *mode = json_string_value(json_object_get(j, "mode"));

    memset(fi, 0, sizeof(*fi));
    fi->name = dup_or_null(j, "name");
    fi->path = dup_or_null(j, "path");
    fi->mtime = dup_or_null(j, "mtime");
    fi->link = dup_or_null(j, "link");
    fi->size = (int64_t)json_integer_value(json_object_get(j, "size"));
    fi->mode = mode ? (unsigned)strtoul(mode, NULL, 8) : 0;
    fi->type = type == NULL                   ? WARREN_OTHER
               : strcmp(type, "file") == 0    ? WARREN_FILE
               : strcmp(type, "dir") == 0     ? WARREN_DIR
               : strcmp(type, "symlink") == 0 ? WARREN_SYMLINK
                                              : WARREN_OTHER;
}

void warren_file_info_fini(warren_file_info *fi)
{
    if (fi == NULL)
        return;
    free(fi->name);
    free(fi->path);
    free(fi->mtime);
    free(fi->link);
    memset(fi, 0, sizeof(*fi));
}

int warren_file_stat(warren *w, const char *id, const char *path, warren_file_info *info,
                     warren_error *err)
{
    _cleanup_free_ char *t = NULL;
    json_t *j = NULL;

    if (check_path(id, path, err) < 0)
        return -1;
    t = wl_files_target(id, "files/stat", path);
    if (wl_api(w, "GET", t, NULL, NULL, &j, err) < 0)
        return -1;
    info_of(j, info);
    json_decref(j);
    return 0;
}

long warren_file_list(warren *w, const char *id, const char *path, int depth,
                      warren_file_info **entries, warren_error *err)
{
    _cleanup_free_ char *t = NULL, *base = NULL;
    json_t *j = NULL, *list, *e;
    size_t i, n;

    *entries = NULL;
    if (check_path(id, path, err) < 0)
        return -1;
    if (depth < 0 || depth > 16)
        return wl_failf(err, WR_EINVAL, 0, "list %s: depth %d: want 1 to 16", path, depth);
    base = wl_files_target(id, "files/list", path);
    t = xasprintf("%s&depth=%d", base, depth ? depth : 1);
    if (wl_api(w, "GET", t, NULL, NULL, &j, err) < 0)
        return -1;
    list = json_object_get(j, "entries");
    if (!json_is_array(list)) {
        json_decref(j);
        return wl_failf(err, WR_EPROTO, 0, "bad answer from warrend: no `entries` array");
    }
    n = json_array_size(list);
    if (n > 0)
        *entries = xcalloc(n, sizeof(**entries));
    json_array_foreach(list, i, e) info_of(e, &(*entries)[i]);
    json_decref(j);
    return (long)n;
}

void warren_file_list_free(warren_file_info *entries, size_t n)
{
    for (size_t i = 0; entries != NULL && i < n; i++)
        warren_file_info_fini(&entries[i]);
    free(entries);
}

int warren_file_remove(warren *w, const char *id, const char *path, int recursive,
                       warren_error *err)
{
    _cleanup_free_ char *t = NULL, *base = NULL;

    if (check_path(id, path, err) < 0)
        return -1;
    base = wl_files_target(id, "files", path);
    t = recursive ? xasprintf("%s&recursive=true", base) : steal_pointer(&base);
    return wl_api(w, "DELETE", t, NULL, NULL, NULL, err) < 0 ? -1 : 0;
}

int warren_file_mkdir(warren *w, const char *id, const char *path, unsigned mode, warren_error *err)
{
    _cleanup_free_ char *t = NULL;
    char m[16];
    json_t *body;
    int r;

    if (check_path(id, path, err) < 0)
        return -1;
    t = xasprintf("/v1/sandboxes/%s/files/mkdir", id);
    snprintf(m, sizeof(m), "0%o", (mode ? mode : 0755) & 07777);
    body = json_pack("{s:s, s:b, s:s}", "path", path, "parents", 1, "mode", m);
    r = wl_api(w, "POST", t, body, NULL, NULL, err);
    json_decref(body);
    return r < 0 ? -1 : 0;
}
