/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for src/proto: the input is a byte stream from a (hostile) peer. It goes
 * through wr_reader at several split points, which must all yield the same frames; every frame's
 * payload, and the raw input, goes through every typed decoder; whatever decodes is re-encoded and
 * must decode again to the same value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/proto/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

static int strv_eq(char **a, char **b)
{
    size_t i;

    for (i = 0; a[i] != NULL && b[i] != NULL; i++)
        if (strcmp(a[i], b[i]) != 0)
            return 0;
    return a[i] == NULL && b[i] == NULL;
}

static int str_eq(const char *a, const char *b)
{
    return (a == NULL || b == NULL) ? a == b : strcmp(a, b) == 0;
}

static void spawn_roundtrip(const struct wr_spawn *s)
{
    struct wr_buf b;
    struct wr_spawn t;
    struct wr_err err;

    wr_buf_init(&b);
    wr_spawn_encode(&b, 1, s);
    /* a decoded spawn always fits back into a frame: the encoder emits only fields the decoded
     * message had, at the same sizes */
    check(b.len >= WR_FRAME_HDR_SIZE);
    check(wr_spawn_decode(b.data + WR_FRAME_HDR_SIZE, b.len - WR_FRAME_HDR_SIZE, &t, &err) == 0);
    check(strv_eq(s->argv, t.argv) && strv_eq(s->env, t.env));
    check(str_eq(s->cwd, t.cwd) && str_eq(s->user, t.user));
    check(s->uid == t.uid && s->gid == t.gid && s->pty == t.pty);
    check(s->rows == t.rows && s->cols == t.cols);
    wr_spawn_fini(&t);
    wr_buf_fini(&b);
}

static void proc_roundtrip(const struct wr_proc_info *pi)
{
    struct wr_buf b;
    struct wr_proc_info t;
    struct wr_err err;

    wr_buf_init(&b);
    wr_proc_info_encode(&b, 1, pi);
    check(wr_proc_info_decode(b.data + WR_FRAME_HDR_SIZE, b.len - WR_FRAME_HDR_SIZE, &t, &err) ==
          0);
    check(pi->proc_id == t.proc_id && pi->pid == t.pid && pi->pty == t.pty &&
          pi->running == t.running);
    wr_proc_info_fini(&t);
    wr_buf_fini(&b);
}

static void stat_roundtrip(const struct wr_stat *st)
{
    struct wr_buf b;
    struct wr_stat t;
    struct wr_err err;

    wr_buf_init(&b);
    wr_stat_encode(&b, 1, st);
    check(wr_stat_decode(b.data + WR_FRAME_HDR_SIZE, b.len - WR_FRAME_HDR_SIZE, &t, &err) == 0);
    check(str_eq(st->name, t.name) && str_eq(st->link, t.link));
    check(st->type == t.type && st->mode == t.mode && st->size == t.size &&
          st->mtime_ns == t.mtime_ns && st->uid == t.uid && st->gid == t.gid);
    wr_stat_fini(&t);
    wr_buf_fini(&b);
}

/* No leading '/', no empty, "." or ".." component. */
static int relative_path(const char *s)
{
    if (*s == '\0' || *s == '/')
        return 0;
    for (;;) {
        size_t len = strcspn(s, "/");
        if (len == 0 || (len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
        if (s[len] == '\0')
            return 1;
        s += len + 1;
    }
}

static void watch_event_roundtrip(const struct wr_watch_event *ev)
{
    struct wr_buf b;
    struct wr_watch_event t;
    struct wr_err err;

    wr_buf_init(&b);
    wr_watch_event_encode(&b, 1, ev);
    check(wr_watch_event_decode(b.data + WR_FRAME_HDR_SIZE, b.len - WR_FRAME_HDR_SIZE, &t, &err) ==
          0);
    check(ev->op == t.op && strcmp(ev->name, t.name) == 0);
    wr_watch_event_fini(&t);
    wr_buf_fini(&b);
}

static void file_req_roundtrip(uint16_t type, const struct wr_file_req *r)
{
    struct wr_buf b;
    struct wr_file_req t;
    struct wr_err err;

    wr_buf_init(&b);
    wr_file_req_encode(&b, type, 1, r);
    check(wr_file_req_decode(type, b.data + WR_FRAME_HDR_SIZE, b.len - WR_FRAME_HDR_SIZE, &t,
                             &err) == 0);
    check(strcmp(r->path, t.path) == 0 && (r->user == NULL) == (t.user == NULL) &&
          r->uid == t.uid && r->gid == t.gid && r->offset == t.offset && r->length == t.length &&
          r->flags == t.flags && r->depth == t.depth && r->has_mode == t.has_mode &&
          r->mode == t.mode && r->nofollow == t.nofollow && r->parents == t.parents &&
          r->recursive == t.recursive && (r->dest == NULL) == (t.dest == NULL));
    wr_file_req_fini(&t);
    wr_buf_fini(&b);
}

/* Every file request type's decoder over one payload. */
static void decode_file_reqs(const uint8_t *p, size_t n)
{
    struct wr_file_req r;
    struct wr_err err;

    for (uint16_t type = WR_MSG_FILE_READ; type <= WR_MSG_FILE_WATCH; type++) {
        if (type == WR_MSG_DATA || type == WR_MSG_DATA_END || type == WR_MSG_STAT)
            continue;
        if (wr_file_req_decode(type, p, n, &r, &err) == 0) {
            check(r.path != NULL && r.path[0] == '/' && strlen(r.path) <= WR_MAX_PATH &&
                  r.mode <= 07777 && r.uid >= -1 && r.gid >= -1);
            check(type != WR_MSG_FILE_RENAME || (r.dest != NULL && r.dest[0] == '/'));
            file_req_roundtrip(type, &r);
            wr_file_req_fini(&r);
        } else {
            check(err.kind == WR_EPROTO && r.path == NULL && r.dest == NULL && r.user == NULL);
        }
    }
}

/* A Compose service's definition and state (SERVICE, SERVICE_INFO). */
static void service_roundtrip(const struct wr_service *s)
{
    struct wr_buf b;
    struct wr_service t;
    struct wr_err err;

    wr_buf_init(&b);
    wr_service_encode(&b, 1, s);
    check(wr_service_decode(b.data + WR_FRAME_HDR_SIZE, b.len - WR_FRAME_HDR_SIZE, &t, &err) == 0);
    check(str_eq(s->name, t.name) && str_eq(s->root, t.root) && strv_eq(s->sp.argv, t.sp.argv));
    check(s->restart == t.restart && s->restart_max == t.restart_max &&
          s->health_retries == t.health_retries && s->health_interval_ms == t.health_interval_ms);
    wr_service_fini(&t);
    wr_buf_fini(&b);
}

static void service_info_roundtrip(const struct wr_service_info *si)
{
    struct wr_buf b;
    struct wr_service_info t;
    struct wr_err err;

    wr_buf_init(&b);
    wr_service_info_encode(&b, 1, si);
    check(wr_service_info_decode(b.data + WR_FRAME_HDR_SIZE, b.len - WR_FRAME_HDR_SIZE, &t, &err) ==
          0);
    check(str_eq(si->name, t.name) && str_eq(si->state, t.state) && si->pid == t.pid &&
          si->restarts == t.restarts);
    wr_service_info_fini(&t);
    wr_buf_fini(&b);
}

/* Run every decoder over one payload. */
static void decode_all(const uint8_t *p, size_t n)
{
    struct wr_err err;
    struct wr_spawn sp;
    struct wr_proc_info pi;
    struct wr_stat st;
    struct wr_exit ex;
    struct wr_watch_event we;
    struct wr_tlv_iter it;
    struct wr_field f;
    char msg[32], *s;
    int errnum, rc;
    uint64_t u;
    int64_t i;

    wr_tlv_iter_init(&it, p, n);
    while ((rc = wr_tlv_next(&it, &f)) == 1) {
        check(f.val >= p && f.val + f.len <= p + n);
        (void)wr_field_u64(&f, &u);
        (void)wr_field_i64(&f, &i);
        if (wr_field_strdup(&f, WR_MAX_STR, &s) == 0) {
            check(strlen(s) == f.len);
            free(s);
        }
    }

    if (wr_spawn_decode(p, n, &sp, &err) == 0) {
        check(sp.argv != NULL && sp.argv[0] != NULL && sp.env != NULL);
        spawn_roundtrip(&sp);
        wr_spawn_fini(&sp);
    } else {
        check(err.kind == WR_EPROTO && sp.argv == NULL && sp.env == NULL);
    }
    if (wr_proc_info_decode(p, n, &pi, &err) == 0) {
        check(pi.argv != NULL);
        proc_roundtrip(&pi);
        wr_proc_info_fini(&pi);
    }
    if (wr_stat_decode(p, n, &st, &err) == 0) {
        check(st.type >= WR_FT_FILE && st.type <= WR_FT_OTHER && st.mode <= 07777);
        stat_roundtrip(&st);
        wr_stat_fini(&st);
    }
    {
        struct wr_port_listen *pl = NULL, *pl2 = NULL;
        size_t np = 0, np2 = 0;
        if (wr_port_list_decode(p, n, &pl, &np, &err) == 0) {
            struct wr_buf pb;
            wr_buf_init(&pb);
            wr_port_list_encode(&pb, 1, pl, np);
            check(wr_port_list_decode(pb.data + WR_FRAME_HDR_SIZE, pb.len - WR_FRAME_HDR_SIZE, &pl2,
                                      &np2, &err) == 0);
            check(np == np2);
            for (size_t k = 0; k < np; k++)
                check(pl[k].port == pl2[k].port && strcmp(pl[k].addr, pl2[k].addr) == 0);
            free(pl);
            free(pl2);
            wr_buf_fini(&pb);
        }
    }
    if (wr_watch_event_decode(p, n, &we, &err) == 0) {
        check(we.op >= WR_WATCH_CREATE && we.op <= WR_WATCH_CHMOD &&
              strlen(we.name) <= WR_MAX_PATH && relative_path(we.name));
        watch_event_roundtrip(&we);
        wr_watch_event_fini(&we);
    } else {
        check(err.kind == WR_EPROTO && we.name == NULL);
    }
    {
        struct wr_service sv;
        struct wr_service_info si;
        if (wr_service_decode(p, n, &sv, &err) == 0) {
            check(wr_service_name_ok(sv.name) && sv.sp.argv != NULL && sv.sp.argv[0] != NULL);
            service_roundtrip(&sv);
            wr_service_fini(&sv);
        }
        if (wr_service_info_decode(p, n, &si, &err) == 0) {
            check(wr_service_name_ok(si.name) && si.state != NULL);
            service_info_roundtrip(&si);
            wr_service_info_fini(&si);
        }
    }
    decode_file_reqs(p, n);
    (void)wr_exit_decode(p, n, &ex, &err);
    if (wr_error_decode(p, n, &errnum, msg, sizeof(msg), &err) == 0)
        check(strlen(msg) < sizeof(msg) && errnum >= 0);
    (void)wr_error_decode(p, n, &errnum, msg, 1, &err);
    (void)wr_msg_get_u64(p, n, WR_TAG_PROC_ID, &u);
    if (wr_msg_get_str(p, n, WR_TAG_PATH, WR_MAX_PATH, &s) == 0)
        free(s);
}

/* Feed the stream in pieces of `step` bytes, decode each frame and hash what came out. */
static uint64_t run_reader(const uint8_t *data, size_t size, size_t step, int decode)
{
    struct wr_reader r;
    struct wr_frame_hdr h;
    struct wr_err err;
    const uint8_t *payload;
    uint64_t hash = 1469598103934665603ull;
    int rc = 0;

    wr_reader_init(&r);
    for (size_t off = 0; off < size && rc >= 0; off += step) {
        size_t n = size - off < step ? size - off : step;
        wr_reader_feed(&r, data + off, n);
        while ((rc = wr_reader_next(&r, &h, &payload, &err)) == 1) {
            check(h.len <= WR_FRAME_MAX_PAYLOAD);
            hash = (hash ^ h.len ^ (uint64_t)h.type << 32 ^ (uint64_t)h.flags << 48) *
                   1099511628211ull;
            hash = (hash ^ h.id) * 1099511628211ull;
            for (uint32_t k = 0; k < h.len; k++)
                hash = (hash ^ payload[k]) * 1099511628211ull;
            if (decode)
                decode_all(payload, h.len);
        }
        /* unread bytes: at most one frame plus this feed, plus the reader's small prefix */
        check(r.in.len <= WR_FRAME_HDR_SIZE + WR_FRAME_MAX_PAYLOAD + n + 64);
    }
    hash = (hash ^ (uint64_t)(rc + 1)) * 1099511628211ull;
    wr_reader_fini(&r);
    return hash;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t whole;

    decode_all(data, size);
    whole = run_reader(data, size, size ? size : 1, 1);
    check(run_reader(data, size, 1, 0) == whole);
    check(run_reader(data, size, 13, 0) == whole);
    if (size > 0)
        check(run_reader(data, size, 1 + data[0] % 64, 0) == whole);
    return 0;
}
