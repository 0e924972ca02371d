/* SPDX-License-Identifier: Apache-2.0 */
/* The control protocol's encoders and decoders (see proto.h and docs/design/protocol.md). Every
 * decoder here reads bytes a compromised sandbox may have written: lengths are checked against the
 * bytes present before use, counts and string sizes are bounded before anything is allocated, and
 * integers are assembled byte by byte so neither host endianness nor alignment matters.
 *
 * Decoding rules shared by the typed decoders:
 *   - the whole payload must be well-formed TLV, even past the fields the decoder wants;
 *   - unknown tags are skipped;
 *   - a singular tag that appears twice is rejected (not "last wins"), so two readers of the same
 *     bytes can never disagree about which value counted;
 *   - integers are exactly 8 bytes; values that would be truncated when stored into a narrower
 *     struct field (u32 proc id, u16 rows, bool, mode, uid/gid) are rejected;
 *   - strings contain no NUL and are at most WR_MAX_STR bytes (WR_MAX_PATH for paths). */
#include "proto.h"

#include <arpa/inet.h>
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/strv.h"
#include "../util/xalloc.h"

#define FIELD_HDR_SIZE 6 /* u16 tag, u32 len */

/* ---- little-endian helpers ----------------------------------------------------------------- */

static void put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* ---- encoding ------------------------------------------------------------------------------ */

static void put_hdr(uint8_t *p, uint32_t len, uint16_t type, uint16_t flags, uint32_t id)
{
    put_le32(p, len);
    put_le16(p + 4, type);
    put_le16(p + 6, flags);
    put_le32(p + 8, id);
}

size_t wr_msg_begin(struct wr_buf *b, uint16_t type, uint16_t flags, uint32_t id)
{
    uint8_t hdr[WR_FRAME_HDR_SIZE];
    size_t start = b->len;

    put_hdr(hdr, 0, type, flags, id);
    wr_buf_append(b, hdr, sizeof(hdr));
    return start;
}

static void put_field_hdr(struct wr_buf *b, uint16_t tag, size_t n)
{
    uint8_t h[FIELD_HDR_SIZE];

    put_le16(h, tag);
    /* A value this long cannot fit in a frame: wr_msg_end() will drop the whole frame, so the
     * truncated length never reaches the wire. */
    put_le32(h + 2, n > UINT32_MAX ? UINT32_MAX : (uint32_t)n);
    wr_buf_append(b, h, sizeof(h));
}

void wr_msg_put_u64(struct wr_buf *b, uint16_t tag, uint64_t v)
{
    uint8_t val[8];

    put_le64(val, v);
    put_field_hdr(b, tag, sizeof(val));
    wr_buf_append(b, val, sizeof(val));
}

void wr_msg_put_i64(struct wr_buf *b, uint16_t tag, int64_t v)
{
    wr_msg_put_u64(b, tag, (uint64_t)v); /* two's complement */
}

void wr_msg_put_str(struct wr_buf *b, uint16_t tag, const char *s)
{
    wr_msg_put_bytes(b, tag, s, strlen(s));
}

void wr_msg_put_bytes(struct wr_buf *b, uint16_t tag, const void *p, size_t n)
{
    put_field_hdr(b, tag, n);
    wr_buf_append(b, p, n);
}

int wr_msg_end(struct wr_buf *b, size_t start)
{
    size_t payload;

    assert(start <= b->len && b->len - start >= WR_FRAME_HDR_SIZE);
    payload = b->len - start - WR_FRAME_HDR_SIZE;
    if (payload > WR_FRAME_MAX_PAYLOAD) {
        b->len = start;
        return -1;
    }
    put_le32(b->data + start, (uint32_t)payload);
    return 0;
}

void wr_frame_raw(struct wr_buf *b, uint16_t type, uint16_t flags, uint32_t id, const void *p,
                  size_t n)
{
    uint8_t hdr[WR_FRAME_HDR_SIZE];

    assert(n <= WR_FRAME_MAX_PAYLOAD);
    put_hdr(hdr, (uint32_t)n, type, flags, id);
    wr_buf_reserve(b, sizeof(hdr) + n);
    wr_buf_append(b, hdr, sizeof(hdr));
    wr_buf_append(b, p, n);
}

void wr_msg_ok(struct wr_buf *b, uint32_t id)
{
    size_t start = wr_msg_begin(b, WR_MSG_OK, 0, id);
    (void)wr_msg_end(b, start);
}

void wr_msg_error(struct wr_buf *b, uint32_t id, int errnum, const char *message)
{
    size_t start = wr_msg_begin(b, WR_MSG_ERROR, 0, id);

    wr_msg_put_i64(b, WR_TAG_ERRNO, errnum);
    /* The decoder rejects longer messages, so cut them here rather than lose the reply. */
    if (message != NULL)
        wr_msg_put_bytes(b, WR_TAG_MESSAGE, message, strnlen(message, WR_MAX_STR));
    (void)wr_msg_end(b, start);
}

/* ---- frame header and reader --------------------------------------------------------------- */

int wr_frame_hdr_parse(const uint8_t *p, struct wr_frame_hdr *hdr, struct wr_err *err)
{
    hdr->len = get_le32(p);
    hdr->type = get_le16(p + 4);
    hdr->flags = get_le16(p + 6);
    hdr->id = get_le32(p + 8);
    if (hdr->len > WR_FRAME_MAX_PAYLOAD)
        return wr_err_set(err, WR_EPROTO, 0, "frame type %u: payload of %u bytes exceeds %u",
                          hdr->type, hdr->len, WR_FRAME_MAX_PAYLOAD);
    return 0;
}

/* Handed-out bytes stay in place until the next wr_reader_feed() (the returned payload must
 * remain valid) and are then dropped in one memmove, so draining many small frames from one
 * large read costs linear, not quadratic, time. */

void wr_reader_init(struct wr_reader *r)
{
    wr_buf_init(&r->in);
    r->off = 0;
}

void wr_reader_fini(struct wr_reader *r)
{
    wr_buf_fini(&r->in);
    r->off = 0;
}

/* True if the unread bytes start with a complete header that wr_frame_hdr_parse() rejects. */
static bool rd_poisoned(const struct wr_reader *r)
{
    return r->in.len - r->off >= WR_FRAME_HDR_SIZE &&
           get_le32(r->in.data + r->off) > WR_FRAME_MAX_PAYLOAD;
}

void wr_reader_feed(struct wr_reader *r, const void *p, size_t n)
{
    size_t unread;

    if (n == 0)
        return;
    /* After a bad header the stream is dead; keep the buffer from growing if the caller keeps
     * feeding instead of closing the connection. */
    if (rd_poisoned(r))
        return;
    unread = r->in.len - r->off;
    if (unread == 0 && r->in.cap > WR_FRAME_MAX_PAYLOAD) {
        /* Give back the memory of a past large frame once it is fully consumed. */
        wr_reader_fini(r);
    } else if (r->off > 0) {
        memmove(r->in.data, r->in.data + r->off, unread);
        r->in.len = unread;
        r->off = 0;
    }
    wr_buf_append(&r->in, p, n);
}

int wr_reader_next(struct wr_reader *r, struct wr_frame_hdr *hdr, const uint8_t **payload,
                   struct wr_err *err)
{
    size_t avail = r->in.len - r->off;
    const uint8_t *p;

    if (avail < WR_FRAME_HDR_SIZE)
        return 0;
    p = r->in.data + r->off;
    if (wr_frame_hdr_parse(p, hdr, err) < 0)
        return -1; /* not consumed: every later call fails the same way */
    if (avail - WR_FRAME_HDR_SIZE < hdr->len)
        return 0;
    *payload = p + WR_FRAME_HDR_SIZE;
    r->off += WR_FRAME_HDR_SIZE + hdr->len;
    return 1;
}

/* ---- TLV ----------------------------------------------------------------------------------- */

void wr_tlv_iter_init(struct wr_tlv_iter *it, const uint8_t *p, size_t n)
{
    it->p = p;
    it->n = n;
    it->off = 0;
}

int wr_tlv_next(struct wr_tlv_iter *it, struct wr_field *f)
{
    size_t left = it->n - it->off;
    uint32_t len;

    if (left == 0)
        return 0;
    if (left < FIELD_HDR_SIZE)
        return -1;
    len = get_le32(it->p + it->off + 2);
    if (len > left - FIELD_HDR_SIZE)
        return -1;
    f->tag = get_le16(it->p + it->off);
    f->len = len;
    f->val = it->p + it->off + FIELD_HDR_SIZE;
    it->off += FIELD_HDR_SIZE + (size_t)len;
    return 1;
}

int wr_field_u64(const struct wr_field *f, uint64_t *out)
{
    if (f->len != 8)
        return -1;
    *out = get_le64(f->val);
    return 0;
}

int wr_field_i64(const struct wr_field *f, int64_t *out)
{
    uint64_t u;

    if (wr_field_u64(f, &u) < 0)
        return -1;
    *out = (int64_t)u; /* two's complement; gcc and clang define the conversion */
    return 0;
}

int wr_field_strdup(const struct wr_field *f, size_t max, char **out)
{
    char *s;

    if (f->len > max || memchr(f->val, '\0', f->len) != NULL)
        return -1;
    s = xmalloc((size_t)f->len + 1);
    memcpy(s, f->val, f->len);
    s[f->len] = '\0';
    *out = s;
    return 0;
}

/* ---- helpers for the typed decoders -------------------------------------------------------- */

static const char *tag_name(uint16_t tag)
{
    switch (tag) {
    case WR_TAG_VERSION:
        return "version";
    case WR_TAG_ERRNO:
        return "errno";
    case WR_TAG_MESSAGE:
        return "message";
    case WR_TAG_PID:
        return "pid";
    case WR_TAG_PROC_ID:
        return "proc_id";
    case WR_TAG_ARGV:
        return "argv";
    case WR_TAG_ENV:
        return "env";
    case WR_TAG_CWD:
        return "cwd";
    case WR_TAG_UID:
        return "uid";
    case WR_TAG_GID:
        return "gid";
    case WR_TAG_PTY:
        return "pty";
    case WR_TAG_ROWS:
        return "rows";
    case WR_TAG_COLS:
        return "cols";
    case WR_TAG_SIGNAL:
        return "signal";
    case WR_TAG_EXIT_CODE:
        return "exit_code";
    case WR_TAG_RUNNING:
        return "running";
    case WR_TAG_USER:
        return "user";
    case WR_TAG_CPU_NS:
        return "cpu_ns";
    case WR_TAG_MAXRSS_BYTES:
        return "maxrss_bytes";
    case WR_TAG_WALL_NS:
        return "wall_ns";
    case WR_TAG_FDS:
        return "fds";
    case WR_TAG_CGROUP:
        return "cgroup";
    case WR_TAG_PATH:
        return "path";
    case WR_TAG_NAME:
        return "name";
    case WR_TAG_TYPE:
        return "type";
    case WR_TAG_MODE:
        return "mode";
    case WR_TAG_SIZE:
        return "size";
    case WR_TAG_MTIME_NS:
        return "mtime_ns";
    case WR_TAG_LINK:
        return "link";
    case WR_TAG_DEST:
        return "dest";
    case WR_TAG_FLAGS:
        return "flags";
    case WR_TAG_OFFSET:
        return "offset";
    case WR_TAG_LENGTH:
        return "length";
    case WR_TAG_DEPTH:
        return "depth";
    case WR_TAG_RECURSIVE:
        return "recursive";
    case WR_TAG_PARENTS:
        return "parents";
    case WR_TAG_NOFOLLOW:
        return "nofollow";
    case WR_TAG_RESTARTS:
        return "restarts";
    case WR_TAG_SERVICE:
        return "service";
    case WR_TAG_ROOT:
        return "root";
    case WR_TAG_DEPEND:
        return "depend";
    case WR_TAG_HEALTH_ARGV:
        return "health_argv";
    case WR_TAG_HEALTH_INTERVAL_MS:
        return "health_interval_ms";
    case WR_TAG_HEALTH_TIMEOUT_MS:
        return "health_timeout_ms";
    case WR_TAG_HEALTH_START_MS:
        return "health_start_ms";
    case WR_TAG_HEALTH_RETRIES:
        return "health_retries";
    case WR_TAG_RESTART:
        return "restart";
    case WR_TAG_RESTART_MAX:
        return "restart_max";
    case WR_TAG_STOP_SIGNAL:
        return "stop_signal";
    case WR_TAG_STATE:
        return "state";
    default:
        return "field";
    }
}

/* Tracks which singular tags a decoder has seen; all defined tags are below 64. */
struct seen {
    uint64_t bits;
};

static int once(struct seen *s, const char *msg, uint16_t tag, struct wr_err *err)
{
    uint64_t bit = 1ull << (tag & 63);

    if (s->bits & bit)
        return wr_err_set(err, WR_EPROTO, 0, "%s: duplicate %s", msg, tag_name(tag));
    s->bits |= bit;
    return 0;
}

static bool has(const struct seen *s, uint16_t tag)
{
    return (s->bits >> (tag & 63)) & 1;
}

static int field_u64(const struct wr_field *f, uint64_t max, const char *msg, uint64_t *out,
                     struct wr_err *err)
{
    if (wr_field_u64(f, out) < 0)
        return wr_err_set(err, WR_EPROTO, 0, "%s: %s is %u bytes, not 8", msg, tag_name(f->tag),
                          f->len);
    if (*out > max)
        return wr_err_set(err, WR_EPROTO, 0, "%s: %s out of range", msg, tag_name(f->tag));
    return 0;
}

static int field_i64(const struct wr_field *f, const char *msg, int64_t *out, struct wr_err *err)
{
    if (wr_field_i64(f, out) < 0)
        return wr_err_set(err, WR_EPROTO, 0, "%s: %s is %u bytes, not 8", msg, tag_name(f->tag),
                          f->len);
    return 0;
}

static int field_bool(const struct wr_field *f, const char *msg, bool *out, struct wr_err *err)
{
    uint64_t v;

    if (field_u64(f, 1, msg, &v, err) < 0)
        return -1;
    *out = v != 0;
    return 0;
}

/* A uid or gid: -1 ("unset") or a value uid_t can hold without wrapping. Range-checked here
 * because a truncating cast of 2^32 to uid_t would silently mean root. */
static int field_id(const struct wr_field *f, const char *msg, int64_t *out, struct wr_err *err)
{
    if (field_i64(f, msg, out, err) < 0)
        return -1;
    if (*out < -1 || *out >= (int64_t)UINT32_MAX)
        return wr_err_set(err, WR_EPROTO, 0, "%s: %s out of range", msg, tag_name(f->tag));
    return 0;
}

static int field_str(const struct wr_field *f, size_t max, const char *msg, char **out,
                     struct wr_err *err)
{
    if (f->len > max)
        return wr_err_set(err, WR_EPROTO, 0, "%s: %s longer than %zu bytes", msg, tag_name(f->tag),
                          max);
    if (wr_field_strdup(f, max, out) < 0)
        return wr_err_set(err, WR_EPROTO, 0, "%s: %s contains a NUL byte", msg, tag_name(f->tag));
    return 0;
}

static int truncated(const char *msg, struct wr_err *err)
{
    return wr_err_set(err, WR_EPROTO, 0, "%s: field runs past the payload", msg);
}

/* Count the occurrences of a repeated tag, checking the TLV structure on the way. The count
 * bounds the array the caller then fills, so nothing is allocated from an unchecked length. */
static int count_tag(const uint8_t *p, size_t n, uint16_t tag, size_t *count, const char *msg,
                     struct wr_err *err)
{
    struct wr_tlv_iter it;
    struct wr_field f;
    int rc;

    *count = 0;
    wr_tlv_iter_init(&it, p, n);
    while ((rc = wr_tlv_next(&it, &f)) == 1)
        if (f.tag == tag)
            (*count)++;
    if (rc < 0)
        return truncated(msg, err);
    if (*count > WR_MAX_ARGS)
        return wr_err_set(err, WR_EPROTO, 0, "%s: more than %d %s entries", msg, WR_MAX_ARGS,
                          tag_name(tag));
    return 0;
}

/* Room left in the frame begun at `start` for more payload. */
static size_t frame_room(const struct wr_buf *b, size_t start)
{
    size_t used = b->len - start - WR_FRAME_HDR_SIZE;
    return used >= WR_FRAME_MAX_PAYLOAD ? 0 : WR_FRAME_MAX_PAYLOAD - used;
}

/* ---- SPAWN --------------------------------------------------------------------------------- */

/* The fields SPAWN and SERVICE share (not SERVICE itself). */
static void spawn_put(struct wr_buf *b, const struct wr_spawn *s)
{
    for (char **a = s->argv; a != NULL && *a != NULL; a++)
        wr_msg_put_str(b, WR_TAG_ARGV, *a);
    for (char **e = s->env; e != NULL && *e != NULL; e++)
        wr_msg_put_str(b, WR_TAG_ENV, *e);
    if (s->cwd != NULL)
        wr_msg_put_str(b, WR_TAG_CWD, s->cwd);
    if (s->user != NULL)
        wr_msg_put_str(b, WR_TAG_USER, s->user);
    if (s->uid != -1)
        wr_msg_put_i64(b, WR_TAG_UID, s->uid);
    if (s->gid != -1)
        wr_msg_put_i64(b, WR_TAG_GID, s->gid);
    if (s->pty)
        wr_msg_put_u64(b, WR_TAG_PTY, 1);
    if (s->rows != 0)
        wr_msg_put_u64(b, WR_TAG_ROWS, s->rows);
    if (s->cols != 0)
        wr_msg_put_u64(b, WR_TAG_COLS, s->cols);
    if (s->nfds != 0)
        wr_msg_put_u64(b, WR_TAG_FDS, s->nfds);
    if (s->cgroup != NULL)
        wr_msg_put_str(b, WR_TAG_CGROUP, s->cgroup);
}

/* If argv and env together exceed WR_FRAME_MAX_PAYLOAD the frame is not appended at all (b->len
 * is unchanged); callers that take argv from a tenant should bound it first. */
void wr_spawn_encode(struct wr_buf *b, uint32_t id, const struct wr_spawn *s)
{
    size_t start = wr_msg_begin(b, WR_MSG_SPAWN, 0, id);

    spawn_put(b, s);
    if (s->service != NULL)
        wr_msg_put_str(b, WR_TAG_SERVICE, s->service);
    (void)wr_msg_end(b, start);
}

/* A CGROUP value: a plain name the host may join under a sandbox's cgroup. */
static int field_cgroup(const struct wr_field *f, const char *msg, char **out, struct wr_err *err)
{
    if (f->len == 0 || f->len > WR_CGROUP_NAME_MAX)
        return wr_err_set(err, WR_EPROTO, 0, "%s: cgroup of %u bytes", msg, f->len);
    for (uint32_t i = 0; i < f->len; i++) {
        uint8_t c = f->val[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return wr_err_set(err, WR_EPROTO, 0, "%s: cgroup is not a plain name", msg);
    }
    return field_str(f, WR_CGROUP_NAME_MAX, msg, out, err);
}

/* An environment entry must look like KEY=VALUE with a non-empty KEY. */
static bool env_ok(const char *e)
{
    const char *eq = strchr(e, '=');
    return eq != NULL && eq != e;
}

bool wr_service_name_ok(const char *name)
{
    size_t len = strlen(name);

    if (len == 0 || len > WR_SERVICE_NAME_MAX || name[0] == '.' || name[0] == '_' || name[0] == '-')
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* A SERVICE value: a service name. */
static int field_service(const struct wr_field *f, const char *msg, char **out, struct wr_err *err)
{
    if (field_str(f, WR_SERVICE_NAME_MAX, msg, out, err) < 0)
        return -1;
    if (!wr_service_name_ok(*out))
        return wr_err_set(err, WR_EPROTO, 0, "%s: service is not a service name", msg);
    return 0;
}

/* The SPAWN fields of a SPAWN (msg "spawn") or a SERVICE (msg "service"). */
static int spawn_fields(const uint8_t *p, size_t n, struct wr_spawn *s, const char *msg,
                        struct wr_err *err)
{
    struct wr_tlv_iter it;
    struct wr_field f;
    struct seen seen = {0};
    size_t nargv, nenv, ia = 0, ie = 0;
    uint64_t v;
    int rc;

    if (count_tag(p, n, WR_TAG_ARGV, &nargv, msg, err) < 0 ||
        count_tag(p, n, WR_TAG_ENV, &nenv, msg, err) < 0)
        return -1;
    if (nargv == 0)
        return wr_err_set(err, WR_EPROTO, 0, "%s: no argv", msg);
    s->argv = xcalloc(nargv + 1, sizeof(char *));
    s->env = xcalloc(nenv + 1, sizeof(char *));

    wr_tlv_iter_init(&it, p, n);
    while ((rc = wr_tlv_next(&it, &f)) == 1) {
        switch (f.tag) {
        case WR_TAG_ARGV:
            if (field_str(&f, WR_MAX_STR, msg, &s->argv[ia], err) < 0)
                return -1;
            ia++;
            break;
        case WR_TAG_ENV:
            if (field_str(&f, WR_MAX_STR, msg, &s->env[ie], err) < 0)
                return -1;
            if (!env_ok(s->env[ie++]))
                return wr_err_set(err, WR_EPROTO, 0, "%s: env entry is not KEY=VALUE", msg);
            break;
        case WR_TAG_CWD:
            if (once(&seen, msg, f.tag, err) < 0 ||
                field_str(&f, WR_MAX_PATH, msg, &s->cwd, err) < 0)
                return -1;
            break;
        case WR_TAG_USER:
            if (once(&seen, msg, f.tag, err) < 0 ||
                field_str(&f, WR_MAX_STR, msg, &s->user, err) < 0)
                return -1;
            break;
        case WR_TAG_UID:
            if (once(&seen, msg, f.tag, err) < 0 || field_id(&f, msg, &s->uid, err) < 0)
                return -1;
            break;
        case WR_TAG_GID:
            if (once(&seen, msg, f.tag, err) < 0 || field_id(&f, msg, &s->gid, err) < 0)
                return -1;
            break;
        case WR_TAG_PTY:
            if (once(&seen, msg, f.tag, err) < 0 || field_bool(&f, msg, &s->pty, err) < 0)
                return -1;
            break;
        case WR_TAG_ROWS:
            if (once(&seen, msg, f.tag, err) < 0 || field_u64(&f, UINT16_MAX, msg, &v, err) < 0)
                return -1;
            s->rows = (uint16_t)v;
            break;
        case WR_TAG_COLS:
            if (once(&seen, msg, f.tag, err) < 0 || field_u64(&f, UINT16_MAX, msg, &v, err) < 0)
                return -1;
            s->cols = (uint16_t)v;
            break;
        case WR_TAG_FDS:
            if (once(&seen, msg, f.tag, err) < 0 ||
                field_u64(&f, WR_SPAWN_FDS_MAX, msg, &v, err) < 0)
                return -1;
            s->nfds = (uint32_t)v;
            break;
        case WR_TAG_CGROUP:
            if (once(&seen, msg, f.tag, err) < 0 || field_cgroup(&f, msg, &s->cgroup, err) < 0)
                return -1;
            break;
        case WR_TAG_SERVICE:
            if (once(&seen, msg, f.tag, err) < 0 || field_service(&f, msg, &s->service, err) < 0)
                return -1;
            break;
        default:
            break;
        }
    }
    if (rc < 0)
        return truncated(msg, err);
    return 0;
}

int wr_spawn_decode(const uint8_t *p, size_t n, struct wr_spawn *s, struct wr_err *err)
{
    memset(s, 0, sizeof(*s));
    s->uid = s->gid = -1;
    if (spawn_fields(p, n, s, "spawn", err) < 0) {
        wr_spawn_fini(s);
        return -1;
    }
    return 0;
}

void wr_spawn_fini(struct wr_spawn *s)
{
    wr_strv_free(s->argv);
    wr_strv_free(s->env);
    free(s->cwd);
    free(s->user);
    free(s->cgroup);
    free(s->service);
    memset(s, 0, sizeof(*s));
    s->uid = s->gid = -1;
}

/* ---- SERVICE ------------------------------------------------------------------------------- */

int wr_service_depend_parse(const char *dep, size_t *name_len, enum wr_depend *cond)
{
    const char *eq = strchr(dep, '=');
    char name[WR_SERVICE_NAME_MAX + 1];
    size_t len;

    if (eq == NULL || eq[1] < '0' || eq[1] > '0' + WR_DEPEND_COMPLETED || eq[2] != '\0')
        return -1;
    len = (size_t)(eq - dep);
    if (len == 0 || len > WR_SERVICE_NAME_MAX)
        return -1;
    memcpy(name, dep, len);
    name[len] = '\0';
    if (!wr_service_name_ok(name))
        return -1;
    *name_len = len;
    *cond = (enum wr_depend)(eq[1] - '0');
    return 0;
}

void wr_service_encode(struct wr_buf *b, uint32_t id, const struct wr_service *s)
{
    size_t start = wr_msg_begin(b, WR_MSG_SERVICE, 0, id);

    wr_msg_put_str(b, WR_TAG_SERVICE, s->name);
    spawn_put(b, &s->sp);
    if (s->root != NULL)
        wr_msg_put_str(b, WR_TAG_ROOT, s->root);
    for (char **d = s->depends; d != NULL && *d != NULL; d++)
        wr_msg_put_str(b, WR_TAG_DEPEND, *d);
    for (char **a = s->health_argv; a != NULL && *a != NULL; a++)
        wr_msg_put_str(b, WR_TAG_HEALTH_ARGV, *a);
    if (s->health_interval_ms != 0)
        wr_msg_put_u64(b, WR_TAG_HEALTH_INTERVAL_MS, s->health_interval_ms);
    if (s->health_timeout_ms != 0)
        wr_msg_put_u64(b, WR_TAG_HEALTH_TIMEOUT_MS, s->health_timeout_ms);
    if (s->health_start_period_ms != 0)
        wr_msg_put_u64(b, WR_TAG_HEALTH_START_MS, s->health_start_period_ms);
    if (s->health_retries != 0)
        wr_msg_put_u64(b, WR_TAG_HEALTH_RETRIES, s->health_retries);
    if (s->restart != WR_RESTART_NO)
        wr_msg_put_u64(b, WR_TAG_RESTART, s->restart);
    if (s->restart_max != 0)
        wr_msg_put_u64(b, WR_TAG_RESTART_MAX, s->restart_max);
    if (s->stop_signal != 0)
        wr_msg_put_u64(b, WR_TAG_STOP_SIGNAL, s->stop_signal);
    (void)wr_msg_end(b, start);
}

/* The fields of a SERVICE beyond SPAWN's (spawn_fields read those, SERVICE included). */
static int service_fields(const uint8_t *p, size_t n, struct wr_service *s, struct wr_err *err)
{
    static const char msg[] = "service";
    struct wr_tlv_iter it;
    struct wr_field f;
    struct seen seen = {0};
    size_t ndep, nhealth, id = 0, ih = 0;
    uint64_t v;
    int rc;

    if (count_tag(p, n, WR_TAG_DEPEND, &ndep, msg, err) < 0 ||
        count_tag(p, n, WR_TAG_HEALTH_ARGV, &nhealth, msg, err) < 0)
        return -1;
    if (ndep > WR_SERVICE_DEPENDS_MAX)
        return wr_err_set(err, WR_EPROTO, 0, "service: more than %d depend entries",
                          WR_SERVICE_DEPENDS_MAX);
    if (ndep > 0)
        s->depends = xcalloc(ndep + 1, sizeof(char *));
    if (nhealth > 0)
        s->health_argv = xcalloc(nhealth + 1, sizeof(char *));

    wr_tlv_iter_init(&it, p, n);
    while ((rc = wr_tlv_next(&it, &f)) == 1) {
        uint64_t *ms = NULL;
        uint32_t *u32 = NULL;
        uint64_t max = 0;

        switch (f.tag) {
        case WR_TAG_ROOT:
            if (once(&seen, msg, f.tag, err) < 0 ||
                field_str(&f, WR_MAX_PATH, msg, &s->root, err) < 0)
                return -1;
            if (s->root[0] != '/')
                return wr_err_set(err, WR_EPROTO, 0, "service: root is not an absolute path");
            break;
        case WR_TAG_DEPEND: {
            size_t len;
            enum wr_depend cond;
            if (field_str(&f, WR_SERVICE_NAME_MAX + 2, msg, &s->depends[id], err) < 0)
                return -1;
            if (wr_service_depend_parse(s->depends[id++], &len, &cond) < 0)
                return wr_err_set(err, WR_EPROTO, 0, "service: depend is not NAME=CONDITION");
            break;
        }
        case WR_TAG_HEALTH_ARGV:
            if (field_str(&f, WR_MAX_STR, msg, &s->health_argv[ih], err) < 0)
                return -1;
            ih++;
            break;
        case WR_TAG_HEALTH_INTERVAL_MS:
            ms = &s->health_interval_ms;
            break;
        case WR_TAG_HEALTH_TIMEOUT_MS:
            ms = &s->health_timeout_ms;
            break;
        case WR_TAG_HEALTH_START_MS:
            ms = &s->health_start_period_ms;
            break;
        case WR_TAG_HEALTH_RETRIES:
            u32 = &s->health_retries, max = UINT32_MAX;
            break;
        case WR_TAG_RESTART:
            u32 = &s->restart, max = WR_RESTART_UNLESS_STOPPED;
            break;
        case WR_TAG_RESTART_MAX:
            u32 = &s->restart_max, max = UINT32_MAX;
            break;
        case WR_TAG_STOP_SIGNAL:
            u32 = &s->stop_signal, max = 64;
            break;
        default:
            break;
        }
        if (ms != NULL && (once(&seen, msg, f.tag, err) < 0 ||
                           field_u64(&f, WR_SERVICE_MS_MAX, msg, ms, err) < 0))
            return -1;
        if (u32 != NULL) {
            if (once(&seen, msg, f.tag, err) < 0 || field_u64(&f, max, msg, &v, err) < 0)
                return -1;
            if (f.tag == WR_TAG_STOP_SIGNAL && v == 0)
                return wr_err_set(err, WR_EPROTO, 0, "service: stop_signal out of range");
            *u32 = (uint32_t)v;
        }
    }
    if (rc < 0)
        return truncated(msg, err);
    return 0;
}

int wr_service_decode(const uint8_t *p, size_t n, struct wr_service *s, struct wr_err *err)
{
    memset(s, 0, sizeof(*s));
    s->sp.uid = s->sp.gid = -1;
    if (spawn_fields(p, n, &s->sp, "service", err) < 0)
        goto fail;
    /* A service's name travels as SERVICE, which spawn_fields has checked. */
    s->name = steal_pointer(&s->sp.service);
    if (s->name == NULL) {
        wr_err_set(err, WR_EPROTO, 0, "service: no name");
        goto fail;
    }
    if (s->sp.pty) {
        wr_err_set(err, WR_EPROTO, 0, "service %s: a service has no terminal", s->name);
        goto fail;
    }
    if (service_fields(p, n, s, err) < 0)
        goto fail;
    return 0;
fail:
    wr_service_fini(s);
    return -1;
}

void wr_service_fini(struct wr_service *s)
{
    wr_spawn_fini(&s->sp);
    free(s->name);
    free(s->root);
    wr_strv_free(s->depends);
    wr_strv_free(s->health_argv);
    memset(s, 0, sizeof(*s));
    s->sp.uid = s->sp.gid = -1;
}

/* ---- SERVICE_INFO -------------------------------------------------------------------------- */

void wr_service_info_encode(struct wr_buf *b, uint32_t id, const struct wr_service_info *si)
{
    size_t start = wr_msg_begin(b, WR_MSG_SERVICE_INFO, 0, id);

    wr_msg_put_str(b, WR_TAG_SERVICE, si->name);
    wr_msg_put_str(b, WR_TAG_STATE, si->state);
    wr_msg_put_i64(b, WR_TAG_PID, si->pid);
    wr_msg_put_u64(b, WR_TAG_RESTARTS, si->restarts);
    if (si->has_exit && si->signal != 0)
        wr_msg_put_i64(b, WR_TAG_SIGNAL, si->signal);
    else if (si->has_exit)
        wr_msg_put_i64(b, WR_TAG_EXIT_CODE, si->exit_code);
    if (si->message != NULL)
        wr_msg_put_bytes(b, WR_TAG_MESSAGE, si->message, strnlen(si->message, WR_MAX_STR));
    (void)wr_msg_end(b, start);
}

static bool state_ok(const char *st)
{
    size_t len = strlen(st);

    if (len == 0 || len > WR_SERVICE_STATE_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (st[i] < 'a' || st[i] > 'z')
            return false;
    return true;
}

static int service_info_fields(const uint8_t *p, size_t n, struct wr_service_info *si,
                               struct wr_err *err)
{
    static const char msg[] = "service info";
    struct wr_tlv_iter it;
    struct wr_field f;
    struct seen seen = {0};
    int64_t v;
    int rc;

    wr_tlv_iter_init(&it, p, n);
    while ((rc = wr_tlv_next(&it, &f)) == 1) {
        switch (f.tag) {
        case WR_TAG_SERVICE:
            if (once(&seen, msg, f.tag, err) < 0 || field_service(&f, msg, &si->name, err) < 0)
                return -1;
            break;
        case WR_TAG_STATE:
            if (once(&seen, msg, f.tag, err) < 0 ||
                field_str(&f, WR_SERVICE_STATE_MAX, msg, &si->state, err) < 0)
                return -1;
            if (!state_ok(si->state))
                return wr_err_set(err, WR_EPROTO, 0, "service info: state is not a word");
            break;
        case WR_TAG_PID:
            if (once(&seen, msg, f.tag, err) < 0 || field_i64(&f, msg, &si->pid, err) < 0)
                return -1;
            if (si->pid < 0 || si->pid > INT32_MAX)
                return wr_err_set(err, WR_EPROTO, 0, "service info: pid out of range");
            break;
        case WR_TAG_RESTARTS:
            if (once(&seen, msg, f.tag, err) < 0 ||
                field_u64(&f, INT64_MAX, msg, &si->restarts, err) < 0)
                return -1;
            break;
        case WR_TAG_EXIT_CODE:
        case WR_TAG_SIGNAL:
            if (once(&seen, msg, f.tag, err) < 0 || field_i64(&f, msg, &v, err) < 0)
                return -1;
            if (f.tag == WR_TAG_EXIT_CODE ? v < 0 || v > 255 : v < 1 || v > 64)
                return wr_err_set(err, WR_EPROTO, 0, "service info: %s out of range",
                                  tag_name(f.tag));
            *(f.tag == WR_TAG_EXIT_CODE ? &si->exit_code : &si->signal) = v;
            si->has_exit = true;
            break;
        case WR_TAG_MESSAGE:
            if (once(&seen, msg, f.tag, err) < 0 ||
                field_str(&f, WR_MAX_STR, msg, &si->message, err) < 0)
                return -1;
            break;
        default:
            break;
        }
    }
    if (rc < 0)
        return truncated(msg, err);
    if (!has(&seen, WR_TAG_SERVICE) || !has(&seen, WR_TAG_STATE))
        return wr_err_set(err, WR_EPROTO, 0, "service info: missing service or state");
    if (has(&seen, WR_TAG_EXIT_CODE) && has(&seen, WR_TAG_SIGNAL))
        return wr_err_set(err, WR_EPROTO, 0, "service info: both exit_code and signal");
    return 0;
}

int wr_service_info_decode(const uint8_t *p, size_t n, struct wr_service_info *si,
                           struct wr_err *err)
{
    memset(si, 0, sizeof(*si));
    if (service_info_fields(p, n, si, err) < 0) {
        wr_service_info_fini(si);
        return -1;
    }
    return 0;
}

void wr_service_info_fini(struct wr_service_info *si)
{
    free(si->name);
    free(si->state);
    free(si->message);
    memset(si, 0, sizeof(*si));
}

/* ---- PROC ---------------------------------------------------------------------------------- */

/* The fixed fields go first; argv entries follow while they fit, so a process started with an
 * argv near the frame limit still gets listed (with its argv cut short) instead of vanishing. */
void wr_proc_info_encode(struct wr_buf *b, uint32_t id, const struct wr_proc_info *pi)
{
    size_t start = wr_msg_begin(b, WR_MSG_PROC, 0, id);

    wr_msg_put_u64(b, WR_TAG_PROC_ID, pi->proc_id);
    wr_msg_put_i64(b, WR_TAG_PID, pi->pid);
    wr_msg_put_u64(b, WR_TAG_PTY, pi->pty);
    wr_msg_put_u64(b, WR_TAG_RUNNING, pi->running);
    if (!pi->running) {
        if (pi->signal != 0)
            wr_msg_put_i64(b, WR_TAG_SIGNAL, pi->signal);
        else
            wr_msg_put_i64(b, WR_TAG_EXIT_CODE, pi->exit_code);
    }
    if (pi->cgroup != NULL)
        wr_msg_put_str(b, WR_TAG_CGROUP, pi->cgroup);
    for (char **a = pi->argv; a != NULL && *a != NULL; a++) {
        size_t len = strnlen(*a, (size_t)WR_MAX_STR + 1);
        if (len > WR_MAX_STR || FIELD_HDR_SIZE + len > frame_room(b, start))
            break;
        wr_msg_put_bytes(b, WR_TAG_ARGV, *a, len);
    }
    (void)wr_msg_end(b, start);
}

static int proc_info_fields(const uint8_t *p, size_t n, struct wr_proc_info *pi, struct wr_err *err)
{
    static const char msg[] = "proc";
    struct wr_tlv_iter it;
    struct wr_field f;
    struct seen seen = {0};
    size_t nargv, ia = 0;
    uint64_t v;
    int rc;

    if (count_tag(p, n, WR_TAG_ARGV, &nargv, msg, err) < 0)
        return -1;
    pi->argv = xcalloc(nargv + 1, sizeof(char *));

    wr_tlv_iter_init(&it, p, n);
    while ((rc = wr_tlv_next(&it, &f)) == 1) {
        switch (f.tag) {
        case WR_TAG_ARGV:
            if (field_str(&f, WR_MAX_STR, msg, &pi->argv[ia], err) < 0)
                return -1;
            ia++;
            break;
        case WR_TAG_PROC_ID:
            if (once(&seen, msg, f.tag, err) < 0 || field_u64(&f, UINT32_MAX, msg, &v, err) < 0)
                return -1;
            pi->proc_id = (uint32_t)v;
            break;
        case WR_TAG_PID:
            if (once(&seen, msg, f.tag, err) < 0 || field_i64(&f, msg, &pi->pid, err) < 0)
                return -1;
            break;
        case WR_TAG_PTY:
            if (once(&seen, msg, f.tag, err) < 0 || field_bool(&f, msg, &pi->pty, err) < 0)
                return -1;
            break;
        case WR_TAG_RUNNING:
            if (once(&seen, msg, f.tag, err) < 0 || field_bool(&f, msg, &pi->running, err) < 0)
                return -1;
            break;
        case WR_TAG_EXIT_CODE:
            if (once(&seen, msg, f.tag, err) < 0 || field_i64(&f, msg, &pi->exit_code, err) < 0)
                return -1;
            break;
        case WR_TAG_SIGNAL:
            if (once(&seen, msg, f.tag, err) < 0 || field_i64(&f, msg, &pi->signal, err) < 0)
                return -1;
            break;
        case WR_TAG_CGROUP:
            if (once(&seen, msg, f.tag, err) < 0 || field_cgroup(&f, msg, &pi->cgroup, err) < 0)
                return -1;
            break;
        default:
            break;
        }
    }
    if (rc < 0)
        return truncated(msg, err);
    if (!has(&seen, WR_TAG_PROC_ID) || !has(&seen, WR_TAG_PID))
        return wr_err_set(err, WR_EPROTO, 0, "proc: missing proc_id or pid");
    return 0;
}

int wr_proc_info_decode(const uint8_t *p, size_t n, struct wr_proc_info *pi, struct wr_err *err)
{
    memset(pi, 0, sizeof(*pi));
    if (proc_info_fields(p, n, pi, err) < 0) {
        wr_proc_info_fini(pi);
        return -1;
    }
    return 0;
}

void wr_proc_info_fini(struct wr_proc_info *pi)
{
    wr_strv_free(pi->argv);
    free(pi->cgroup);
    memset(pi, 0, sizeof(*pi));
}

/* ---- STAT ---------------------------------------------------------------------------------- */

void wr_stat_encode(struct wr_buf *b, uint32_t id, const struct wr_stat *st)
{
    size_t start = wr_msg_begin(b, WR_MSG_STAT, 0, id);

    if (st->name != NULL)
        wr_msg_put_str(b, WR_TAG_NAME, st->name);
    wr_msg_put_u64(b, WR_TAG_TYPE, (uint64_t)st->type);
    wr_msg_put_u64(b, WR_TAG_MODE, st->mode);
    wr_msg_put_u64(b, WR_TAG_SIZE, st->size);
    wr_msg_put_i64(b, WR_TAG_MTIME_NS, st->mtime_ns);
    wr_msg_put_i64(b, WR_TAG_UID, st->uid);
    wr_msg_put_i64(b, WR_TAG_GID, st->gid);
    if (st->link != NULL)
        wr_msg_put_str(b, WR_TAG_LINK, st->link);
    (void)wr_msg_end(b, start);
}

/* A FILE_LIST name is relative to the listed directory. The host side may join it onto a local
 * path (a recursive download), so a name that could climb out is refused here: no leading '/',
 * no "." or ".." component, no empty component. */
static bool name_ok(const char *name)
{
    const char *c = name;

    if (*name == '\0' || *name == '/')
        return false;
    for (;;) {
        size_t len = strcspn(c, "/");
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        if (c[len] == '\0')
            return true;
        c += len + 1;
    }
}

static int stat_fields(const uint8_t *p, size_t n, struct wr_stat *st, struct wr_err *err)
{
    static const char msg[] = "stat";
    static const uint16_t required[] = {WR_TAG_TYPE,     WR_TAG_MODE, WR_TAG_SIZE,
                                        WR_TAG_MTIME_NS, WR_TAG_UID,  WR_TAG_GID};
    struct wr_tlv_iter it;
    struct wr_field f;
    struct seen seen = {0};
    uint64_t v;
    int rc;

    wr_tlv_iter_init(&it, p, n);
    while ((rc = wr_tlv_next(&it, &f)) == 1) {
        switch (f.tag) {
        case WR_TAG_NAME:
            if (once(&seen, msg, f.tag, err) < 0 ||
                field_str(&f, WR_MAX_PATH, msg, &st->name, err) < 0)
                return -1;
            if (!name_ok(st->name))
                return wr_err_set(err, WR_EPROTO, 0, "stat: name is not a relative path");
            break;
        case WR_TAG_TYPE:
            if (once(&seen, msg, f.tag, err) < 0 || field_u64(&f, WR_FT_OTHER, msg, &v, err) < 0)
                return -1;
            if (v < WR_FT_FILE)
                return wr_err_set(err, WR_EPROTO, 0, "stat: type out of range");
            st->type = (enum wr_file_type)v;
            break;
        case WR_TAG_MODE:
            if (once(&seen, msg, f.tag, err) < 0 || field_u64(&f, 07777, msg, &v, err) < 0)
                return -1;
            st->mode = (uint32_t)v;
            break;
        case WR_TAG_SIZE:
            if (once(&seen, msg, f.tag, err) < 0 ||
                field_u64(&f, UINT64_MAX, msg, &st->size, err) < 0)
                return -1;
            break;
        case WR_TAG_MTIME_NS:
            if (once(&seen, msg, f.tag, err) < 0 || field_i64(&f, msg, &st->mtime_ns, err) < 0)
                return -1;
            break;
        case WR_TAG_UID:
            if (once(&seen, msg, f.tag, err) < 0 || field_id(&f, msg, &st->uid, err) < 0)
                return -1;
            break;
        case WR_TAG_GID:
            if (once(&seen, msg, f.tag, err) < 0 || field_id(&f, msg, &st->gid, err) < 0)
                return -1;
            break;
        case WR_TAG_LINK:
            if (once(&seen, msg, f.tag, err) < 0 ||
                field_str(&f, WR_MAX_PATH, msg, &st->link, err) < 0)
                return -1;
            break;
        default:
            break;
        }
    }
    if (rc < 0)
        return truncated(msg, err);
    for (size_t i = 0; i < WR_ARRAY_SIZE(required); i++)
        if (!has(&seen, required[i]))
            return wr_err_set(err, WR_EPROTO, 0, "stat: missing %s", tag_name(required[i]));
    return 0;
}

int wr_stat_decode(const uint8_t *p, size_t n, struct wr_stat *st, struct wr_err *err)
{
    memset(st, 0, sizeof(*st));
    if (stat_fields(p, n, st, err) < 0) {
        wr_stat_fini(st);
        return -1;
    }
    return 0;
}

void wr_stat_fini(struct wr_stat *st)
{
    free(st->name);
    free(st->link);
    memset(st, 0, sizeof(*st));
}

/* ---- EXIT ---------------------------------------------------------------------------------- */

void wr_exit_encode(struct wr_buf *b, uint32_t proc_id, const struct wr_exit *ex)
{
    size_t start = wr_msg_begin(b, WR_MSG_EXIT, 0, proc_id);

    if (ex->signal != 0)
        wr_msg_put_i64(b, WR_TAG_SIGNAL, ex->signal);
    else
        wr_msg_put_i64(b, WR_TAG_EXIT_CODE, ex->exit_code);
    if (ex->has_usage) {
        wr_msg_put_u64(b, WR_TAG_CPU_NS, ex->cpu_ns);
        wr_msg_put_u64(b, WR_TAG_MAXRSS_BYTES, ex->maxrss_bytes);
        wr_msg_put_u64(b, WR_TAG_WALL_NS, ex->wall_ns);
    }
    (void)wr_msg_end(b, start);
}

int wr_exit_decode(const uint8_t *p, size_t n, struct wr_exit *ex, struct wr_err *err)
{
    static const char msg[] = "exit";
    struct wr_tlv_iter it;
    struct wr_field f;
    struct seen seen = {0};
    struct wr_exit out = {0};
    int rc;

    wr_tlv_iter_init(&it, p, n);
    while ((rc = wr_tlv_next(&it, &f)) == 1) {
        if (f.tag == WR_TAG_EXIT_CODE || f.tag == WR_TAG_SIGNAL) {
            if (once(&seen, msg, f.tag, err) < 0 ||
                field_i64(&f, msg, f.tag == WR_TAG_SIGNAL ? &out.signal : &out.exit_code, err) < 0)
                return -1;
        } else if (f.tag == WR_TAG_CPU_NS || f.tag == WR_TAG_MAXRSS_BYTES ||
                   f.tag == WR_TAG_WALL_NS) {
            uint64_t *dst = f.tag == WR_TAG_CPU_NS         ? &out.cpu_ns
                            : f.tag == WR_TAG_MAXRSS_BYTES ? &out.maxrss_bytes
                                                           : &out.wall_ns;
            /* INT64_MAX: JSON integers are signed; no real count comes near it */
            if (once(&seen, msg, f.tag, err) < 0 || field_u64(&f, INT64_MAX, msg, dst, err) < 0)
                return -1;
        }
    }
    if (rc < 0)
        return truncated(msg, err);
    if (!has(&seen, WR_TAG_EXIT_CODE) && !has(&seen, WR_TAG_SIGNAL))
        return wr_err_set(err, WR_EPROTO, 0, "exit: neither exit_code nor signal");
    out.has_usage =
        has(&seen, WR_TAG_CPU_NS) && has(&seen, WR_TAG_MAXRSS_BYTES) && has(&seen, WR_TAG_WALL_NS);
    *ex = out;
    return 0;
}

/* ---- WATCH_EVENT --------------------------------------------------------------------------- */

void wr_watch_event_encode(struct wr_buf *b, uint32_t id, const struct wr_watch_event *ev)
{
    size_t start = wr_msg_begin(b, WR_MSG_WATCH_EVENT, 0, id);

    wr_msg_put_u64(b, WR_TAG_TYPE, (uint64_t)ev->op);
    wr_msg_put_str(b, WR_TAG_NAME, ev->name);
    (void)wr_msg_end(b, start);
}

/* NAME is checked like a FILE_LIST name: the host may join it onto a local directory (a synced
 * copy of the watched tree). */
static int watch_event_fields(const uint8_t *p, size_t n, struct wr_watch_event *ev,
                              struct wr_err *err)
{
    static const char msg[] = "watch event";
    struct wr_tlv_iter it;
    struct wr_field f;
    struct seen seen = {0};
    uint64_t v;
    int rc;

    wr_tlv_iter_init(&it, p, n);
    while ((rc = wr_tlv_next(&it, &f)) == 1) {
        switch (f.tag) {
        case WR_TAG_TYPE:
            if (once(&seen, msg, f.tag, err) < 0 || field_u64(&f, WR_WATCH_CHMOD, msg, &v, err) < 0)
                return -1;
            if (v < WR_WATCH_CREATE)
                return wr_err_set(err, WR_EPROTO, 0, "watch event: type out of range");
            ev->op = (enum wr_watch_op)v;
            break;
        case WR_TAG_NAME:
            if (once(&seen, msg, f.tag, err) < 0 ||
                field_str(&f, WR_MAX_PATH, msg, &ev->name, err) < 0)
                return -1;
            if (!name_ok(ev->name))
                return wr_err_set(err, WR_EPROTO, 0, "watch event: name is not a relative path");
            break;
        default:
            break;
        }
    }
    if (rc < 0)
        return truncated(msg, err);
    if (!has(&seen, WR_TAG_TYPE) || !has(&seen, WR_TAG_NAME))
        return wr_err_set(err, WR_EPROTO, 0, "watch event: missing type or name");
    return 0;
}

int wr_watch_event_decode(const uint8_t *p, size_t n, struct wr_watch_event *ev, struct wr_err *err)
{
    memset(ev, 0, sizeof(*ev));
    if (watch_event_fields(p, n, ev, err) < 0) {
        wr_watch_event_fini(ev);
        return -1;
    }
    return 0;
}

void wr_watch_event_fini(struct wr_watch_event *ev)
{
    free(ev->name);
    memset(ev, 0, sizeof(*ev));
}

/* ---- file requests ------------------------------------------------------------------------ */

void wr_file_req_init(struct wr_file_req *r)
{
    memset(r, 0, sizeof(*r));
    r->uid = r->gid = -1;
    r->length = UINT64_MAX;
}

void wr_file_req_encode(struct wr_buf *b, uint16_t type, uint32_t id, const struct wr_file_req *r)
{
    size_t start = wr_msg_begin(b, type, 0, id);

    wr_file_req_put(b, type, r);
    (void)wr_msg_end(b, start);
}

void wr_file_req_put(struct wr_buf *b, uint16_t type, const struct wr_file_req *r)
{
    wr_msg_put_str(b, WR_TAG_PATH, r->path);
    if (r->user != NULL)
        wr_msg_put_str(b, WR_TAG_USER, r->user);
    if (r->uid >= 0)
        wr_msg_put_i64(b, WR_TAG_UID, r->uid);
    if (r->gid >= 0)
        wr_msg_put_i64(b, WR_TAG_GID, r->gid);
    switch (type) {
    case WR_MSG_FILE_READ:
        if (r->offset > 0)
            wr_msg_put_u64(b, WR_TAG_OFFSET, r->offset);
        if (r->length != UINT64_MAX)
            wr_msg_put_u64(b, WR_TAG_LENGTH, r->length);
        break;
    case WR_MSG_FILE_WRITE:
        if (r->has_mode)
            wr_msg_put_u64(b, WR_TAG_MODE, r->mode);
        wr_msg_put_u64(b, WR_TAG_FLAGS, r->flags);
        break;
    case WR_MSG_FILE_STAT:
        if (r->nofollow)
            wr_msg_put_u64(b, WR_TAG_NOFOLLOW, 1);
        break;
    case WR_MSG_FILE_LIST:
        if (r->depth > 0)
            wr_msg_put_u64(b, WR_TAG_DEPTH, r->depth);
        break;
    case WR_MSG_FILE_MKDIR:
        wr_msg_put_u64(b, WR_TAG_PARENTS, r->parents);
        if (r->has_mode)
            wr_msg_put_u64(b, WR_TAG_MODE, r->mode);
        break;
    case WR_MSG_FILE_REMOVE:
    case WR_MSG_FILE_WATCH:
        wr_msg_put_u64(b, WR_TAG_RECURSIVE, r->recursive);
        break;
    case WR_MSG_FILE_RENAME:
        wr_msg_put_str(b, WR_TAG_DEST, r->dest);
        break;
    case WR_MSG_FILE_CHMOD:
        wr_msg_put_u64(b, WR_TAG_MODE, r->mode);
        break;
    default:
        break;
    }
}

/* The type-specific tags a file request of `type` carries (beside PATH, USER, UID, GID). */
static bool file_req_tag(uint16_t type, uint16_t tag)
{
    switch (tag) {
    case WR_TAG_OFFSET:
    case WR_TAG_LENGTH:
        return type == WR_MSG_FILE_READ;
    case WR_TAG_FLAGS:
        return type == WR_MSG_FILE_WRITE;
    case WR_TAG_MODE:
        return type == WR_MSG_FILE_WRITE || type == WR_MSG_FILE_MKDIR || type == WR_MSG_FILE_CHMOD;
    case WR_TAG_NOFOLLOW:
        return type == WR_MSG_FILE_STAT;
    case WR_TAG_DEPTH:
        return type == WR_MSG_FILE_LIST;
    case WR_TAG_PARENTS:
        return type == WR_MSG_FILE_MKDIR;
    case WR_TAG_RECURSIVE:
        return type == WR_MSG_FILE_REMOVE || type == WR_MSG_FILE_WATCH;
    case WR_TAG_DEST:
        return type == WR_MSG_FILE_RENAME;
    default:
        return true;
    }
}

static int file_req_field(const struct wr_field *f, struct seen *seen, struct wr_file_req *r,
                          struct wr_err *err)
{
    static const char msg[] = "file request";
    uint64_t v;

    switch (f->tag) {
    case WR_TAG_PATH:
        return once(seen, msg, f->tag, err) < 0 ? -1
                                                : field_str(f, WR_MAX_PATH, msg, &r->path, err);
    case WR_TAG_DEST:
        return once(seen, msg, f->tag, err) < 0 ? -1
                                                : field_str(f, WR_MAX_PATH, msg, &r->dest, err);
    case WR_TAG_USER:
        return once(seen, msg, f->tag, err) < 0 ? -1 : field_str(f, WR_MAX_STR, msg, &r->user, err);
    case WR_TAG_UID:
        return once(seen, msg, f->tag, err) < 0 ? -1 : field_id(f, msg, &r->uid, err);
    case WR_TAG_GID:
        return once(seen, msg, f->tag, err) < 0 ? -1 : field_id(f, msg, &r->gid, err);
    case WR_TAG_OFFSET:
        return once(seen, msg, f->tag, err) < 0 ? -1
                                                : field_u64(f, UINT64_MAX, msg, &r->offset, err);
    case WR_TAG_LENGTH:
        return once(seen, msg, f->tag, err) < 0 ? -1
                                                : field_u64(f, UINT64_MAX, msg, &r->length, err);
    case WR_TAG_FLAGS:
        return once(seen, msg, f->tag, err) < 0 ? -1
                                                : field_u64(f, UINT64_MAX, msg, &r->flags, err);
    case WR_TAG_DEPTH:
        return once(seen, msg, f->tag, err) < 0 ? -1
                                                : field_u64(f, UINT64_MAX, msg, &r->depth, err);
    case WR_TAG_MODE:
        if (once(seen, msg, f->tag, err) < 0 || field_u64(f, 07777, msg, &v, err) < 0)
            return -1;
        r->mode = (uint32_t)v;
        r->has_mode = true;
        return 0;
    case WR_TAG_NOFOLLOW:
        return once(seen, msg, f->tag, err) < 0 ? -1 : field_bool(f, msg, &r->nofollow, err);
    case WR_TAG_PARENTS:
        return once(seen, msg, f->tag, err) < 0 ? -1 : field_bool(f, msg, &r->parents, err);
    case WR_TAG_RECURSIVE:
        return once(seen, msg, f->tag, err) < 0 ? -1 : field_bool(f, msg, &r->recursive, err);
    default:
        return 0;
    }
}

static int file_req_fields(uint16_t type, const uint8_t *p, size_t n, struct wr_file_req *r,
                           struct wr_err *err)
{
    struct wr_tlv_iter it;
    struct wr_field f;
    struct seen seen = {0};
    int rc;

    wr_tlv_iter_init(&it, p, n);
    while ((rc = wr_tlv_next(&it, &f)) == 1)
        if (file_req_tag(type, f.tag) && file_req_field(&f, &seen, r, err) < 0)
            return -1;
    if (rc < 0)
        return truncated("file request", err);
    if (r->path == NULL || r->path[0] != '/')
        return wr_err_set(err, WR_EPROTO, 0, "PATH must be an absolute path");
    if (type == WR_MSG_FILE_RENAME && (r->dest == NULL || r->dest[0] != '/'))
        return wr_err_set(err, WR_EPROTO, 0, "rename `%s`: DEST must be an absolute path", r->path);
    if (type == WR_MSG_FILE_CHMOD && !r->has_mode)
        return wr_err_set(err, WR_EPROTO, 0, "chmod `%s`: missing MODE", r->path);
    return 0;
}

int wr_file_req_decode(uint16_t type, const uint8_t *p, size_t n, struct wr_file_req *r,
                       struct wr_err *err)
{
    wr_file_req_init(r);
    if (file_req_fields(type, p, n, r, err) < 0) {
        wr_file_req_fini(r);
        return -1;
    }
    return 0;
}

void wr_file_req_fini(struct wr_file_req *r)
{
    free(r->path);
    free(r->dest);
    free(r->user);
    wr_file_req_init(r);
}

/* ---- ERROR --------------------------------------------------------------------------------- */

int wr_error_decode(const uint8_t *p, size_t n, int *errnum, char *msg, size_t msgsz,
                    struct wr_err *err)
{
    static const char what[] = "error";
    struct wr_tlv_iter it;
    struct wr_field f;
    struct seen seen = {0};
    struct wr_field message = {0};
    bool has_message = false;
    int64_t e = 0;
    int rc;

    if (msgsz > 0)
        msg[0] = '\0';
    wr_tlv_iter_init(&it, p, n);
    while ((rc = wr_tlv_next(&it, &f)) == 1) {
        switch (f.tag) {
        case WR_TAG_ERRNO:
            if (once(&seen, what, f.tag, err) < 0 || field_i64(&f, what, &e, err) < 0)
                return -1;
            if (e < 0 || e > INT32_MAX)
                return wr_err_set(err, WR_EPROTO, 0, "error: errno out of range");
            break;
        case WR_TAG_MESSAGE:
            if (once(&seen, what, f.tag, err) < 0)
                return -1;
            if (f.len > WR_MAX_STR)
                return wr_err_set(err, WR_EPROTO, 0, "error: message longer than %u bytes",
                                  WR_MAX_STR);
            if (memchr(f.val, '\0', f.len) != NULL)
                return wr_err_set(err, WR_EPROTO, 0, "error: message contains a NUL byte");
            message = f;
            has_message = true;
            break;
        default:
            break;
        }
    }
    if (rc < 0)
        return truncated(what, err);
    if (!has(&seen, WR_TAG_ERRNO))
        return wr_err_set(err, WR_EPROTO, 0, "error: missing errno");
    if (has_message && msgsz > 0) {
        size_t len = message.len < msgsz - 1 ? message.len : msgsz - 1;
        memcpy(msg, message.val, len);
        msg[len] = '\0';
    }
    *errnum = (int)e;
    return 0;
}

/* ---- single fields ------------------------------------------------------------------------- */

/* Find the one field with `tag`, checking the whole payload's structure. Returns 1 with *out
 * filled, 0 if absent, -1 if malformed or the tag appears more than once. */
static int find_one(const uint8_t *p, size_t n, uint16_t tag, struct wr_field *out)
{
    struct wr_tlv_iter it;
    struct wr_field f;
    int rc, found = 0;

    wr_tlv_iter_init(&it, p, n);
    while ((rc = wr_tlv_next(&it, &f)) == 1) {
        if (f.tag != tag)
            continue;
        if (found)
            return -1;
        *out = f;
        found = 1;
    }
    return rc < 0 ? -1 : found;
}

int wr_msg_get_u64(const uint8_t *p, size_t n, uint16_t tag, uint64_t *out)
{
    struct wr_field f;

    if (find_one(p, n, tag, &f) != 1)
        return -1;
    return wr_field_u64(&f, out);
}

int wr_msg_get_str(const uint8_t *p, size_t n, uint16_t tag, size_t max, char **out)
{
    struct wr_field f;

    if (find_one(p, n, tag, &f) != 1)
        return -1;
    return wr_field_strdup(&f, max, out);
}

/* ---- PORT_LIST ----------------------------------------------------------------------------- */

void wr_port_list_encode(struct wr_buf *b, uint32_t id, const struct wr_port_listen *v, size_t n)
{
    size_t start = wr_msg_begin(b, WR_MSG_OK, 0, id);

    for (size_t i = 0; i < n && i < WR_PORT_LIST_MAX; i++) {
        wr_msg_put_str(b, WR_TAG_ADDR, v[i].addr);
        wr_msg_put_u64(b, WR_TAG_PORT, v[i].port);
    }
    (void)wr_msg_end(b, start);
}

/* A numeric IPv4 or IPv6 address, as inet_ntop writes them. */
static bool addr_ok(const uint8_t *p, size_t n)
{
    char s[sizeof(((struct wr_port_listen *)0)->addr)];
    unsigned char bin[16];

    if (n == 0 || n >= sizeof(s) || memchr(p, '\0', n) != NULL)
        return false;
    memcpy(s, p, n);
    s[n] = '\0';
    return inet_pton(AF_INET, s, bin) == 1 || inet_pton(AF_INET6, s, bin) == 1;
}

int wr_port_list_decode(const uint8_t *p, size_t n, struct wr_port_listen **out, size_t *count,
                        struct wr_err *err)
{
    static const char msg[] = "port list";
    struct wr_port_listen *v = NULL;
    struct wr_tlv_iter it;
    struct wr_field f;
    size_t k = 0, cap = 0;
    bool have_addr = false;
    int rc;

    wr_tlv_iter_init(&it, p, n);
    while ((rc = wr_tlv_next(&it, &f)) == 1) {
        if (f.tag == WR_TAG_ADDR) {
            if (have_addr || !addr_ok(f.val, f.len))
                goto bad;
            if (k == WR_PORT_LIST_MAX) {
                free(v);
                return wr_err_set(err, WR_EPROTO, 0, "%s: more than %d items", msg,
                                  WR_PORT_LIST_MAX);
            }
            if (k == cap) {
                cap = cap ? cap * 2 : 16;
                v = xrealloc(v, cap * sizeof(*v));
            }
            memcpy(v[k].addr, f.val, f.len);
            v[k].addr[f.len] = '\0';
            have_addr = true;
        } else if (f.tag == WR_TAG_PORT) {
            uint64_t port;
            if (!have_addr || wr_field_u64(&f, &port) < 0 || port == 0 || port > 65535)
                goto bad;
            v[k++].port = (uint16_t)port;
            have_addr = false;
        }
    }
    if (rc < 0) {
        free(v);
        return truncated(msg, err);
    }
    if (have_addr)
        goto bad;
    *out = k ? v : NULL;
    if (k == 0)
        free(v);
    *count = k;
    return 0;
bad:
    free(v);
    return wr_err_set(err, WR_EPROTO, 0, "%s: a malformed ADDR, PORT pair", msg);
}
