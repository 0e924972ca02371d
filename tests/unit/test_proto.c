/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/proto: byte layout, round trips of every typed message, the reader's
 * reassembly, and the hostile inputs a compromised warren-init could send. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/proto/proto.h"
#include "../../src/util/xalloc.h"
#include "tap.h"

/* Append a field with `n` raw bytes (lets a test build payloads the encoders would not). */
static void field(struct wr_buf *b, uint16_t tag, const void *p, size_t n)
{
    wr_msg_put_bytes(b, tag, p, n);
}

static void test_layout(void)
{
    struct wr_buf b;
    struct wr_frame_hdr h;
    struct wr_err err = {0};
    size_t start;
    static const uint8_t want[] = {
        24,   0,    0,    0,                            /* len */
        10,   0,                                        /* type SPAWN */
        0x34, 0x12,                                     /* flags */
        0x78, 0x56, 0x34, 0x12,                         /* id */
        5,    0,    8,    0,    0,    0,                /* tag PROC_ID, len 8 */
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* value */
        10,   0,    4,    0,    0,    0,                /* tag ARGV, len 4 */
    };

    wr_buf_init(&b);
    start = wr_msg_begin(&b, WR_MSG_SPAWN, 0x1234, 0x12345678);
    wr_msg_put_u64(&b, WR_TAG_PROC_ID, 0x0102030405060708ull);
    wr_msg_put_str(&b, WR_TAG_ARGV, "true");
    is_int(wr_msg_end(&b, start), 0, "layout: msg_end ok");
    is_int(b.len, sizeof(want) + 4, "layout: frame length");
    ok(b.len >= sizeof(want) && memcmp(b.data, want, sizeof(want)) == 0,
       "layout: header and fields are little-endian");
    ok(memcmp(b.data + sizeof(want), "true", 4) == 0, "layout: string without NUL");

    is_int(wr_frame_hdr_parse(b.data, &h, &err), 0, "layout: header parses");
    is_int(h.len, 14 + 6 + 4, "layout: parsed len");
    is_int(h.type, WR_MSG_SPAWN, "layout: parsed type");
    is_int(h.flags, 0x1234, "layout: parsed flags");
    is_int(h.id, 0x12345678, "layout: parsed id");

    /* i64 is two's complement */
    wr_buf_fini(&b);
    wr_msg_put_i64(&b, WR_TAG_PID, -2);
    ok(b.len == 14 && b.data[6] == 0xfe && b.data[13] == 0xff, "layout: i64 -2 encodes as fe ff..");
    wr_buf_fini(&b);
}

static void test_buf(void)
{
    struct wr_buf b;

    wr_buf_init(&b);
    wr_buf_append(&b, "hello world", 11);
    wr_buf_consume(&b, 6);
    ok(b.len == 5 && memcmp(b.data, "world", 5) == 0, "buf: consume drops the front");
    wr_buf_consume(&b, 100);
    is_int(b.len, 0, "buf: consume past the end empties");
    wr_buf_reserve(&b, 5000);
    ok(b.cap >= 5000, "buf: reserve grows capacity");
    wr_buf_fini(&b);
    ok(b.data == NULL && b.len == 0 && b.cap == 0, "buf: fini resets");
}

static void test_raw_and_ok(void)
{
    struct wr_buf b;
    struct wr_frame_hdr h;
    struct wr_err err = {0};
    uint64_t v = 0;
    char *s = NULL;
    size_t start;

    wr_buf_init(&b);
    wr_frame_raw(&b, WR_MSG_OUTPUT, WR_FLAG_STDERR, 7, "abc\0def", 7);
    is_int(b.len, WR_FRAME_HDR_SIZE + 7, "raw: size");
    is_int(wr_frame_hdr_parse(b.data, &h, &err), 0, "raw: header parses");
    ok(h.len == 7 && h.type == WR_MSG_OUTPUT && h.flags == WR_FLAG_STDERR && h.id == 7,
       "raw: header fields");
    ok(memcmp(b.data + WR_FRAME_HDR_SIZE, "abc\0def", 7) == 0, "raw: payload bytes kept");
    wr_buf_fini(&b);

    wr_frame_raw(&b, WR_MSG_DATA_END, 0, 9, NULL, 0);
    ok(b.len == WR_FRAME_HDR_SIZE && b.data[0] == 0, "raw: empty payload");
    wr_buf_fini(&b);

    wr_msg_ok(&b, 42);
    is_int(wr_frame_hdr_parse(b.data, &h, &err), 0, "ok: header parses");
    ok(h.type == WR_MSG_OK && h.id == 42 && h.len == 0, "ok: empty OK frame");
    wr_buf_fini(&b);

    start = wr_msg_begin(&b, WR_MSG_OK, 0, 3);
    wr_msg_put_u64(&b, WR_TAG_PROC_ID, 77);
    wr_msg_put_str(&b, WR_TAG_PATH, "/tmp/x");
    (void)wr_msg_end(&b, start);
    is_int(wr_msg_get_u64(b.data + 12, b.len - 12, WR_TAG_PROC_ID, &v), 0, "get_u64: found");
    is_int(v, 77, "get_u64: value");
    is_int(wr_msg_get_u64(b.data + 12, b.len - 12, WR_TAG_PID, &v), -1, "get_u64: absent");
    is_int(wr_msg_get_u64(b.data + 12, b.len - 12, WR_TAG_PATH, &v), -1, "get_u64: not 8 bytes");
    is_int(wr_msg_get_str(b.data + 12, b.len - 12, WR_TAG_PATH, WR_MAX_PATH, &s), 0,
           "get_str: found");
    is_str(s, "/tmp/x", "get_str: value");
    free(s);
    s = NULL;
    is_int(wr_msg_get_str(b.data + 12, b.len - 12, WR_TAG_PATH, 3, &s), -1, "get_str: too long");
    ok(s == NULL, "get_str: nothing returned on failure");
    wr_buf_fini(&b);

    /* a payload that grows past the limit is removed whole */
    wr_buf_append(&b, "keep", 4);
    start = wr_msg_begin(&b, WR_MSG_OK, 0, 1);
    {
        char *big = xcalloc(1, WR_FRAME_MAX_PAYLOAD);
        wr_msg_put_bytes(&b, WR_TAG_MESSAGE, big, WR_FRAME_MAX_PAYLOAD);
        free(big);
    }
    is_int(wr_msg_end(&b, start), -1, "msg_end: oversized payload rejected");
    is_int(b.len, 4, "msg_end: oversized frame removed, earlier bytes kept");
    wr_buf_fini(&b);
}

static char *env_a[] = {"PATH=/usr/bin:/bin", "EMPTY=", NULL};
static char *argv_a[] = {"/bin/sh", "-c", "echo 'hi there'", "", NULL};

static void test_spawn(void)
{
    struct wr_buf b;
    struct wr_spawn in = {.argv = argv_a,
                          .env = env_a,
                          .cwd = "/home/agent",
                          .user = "agent",
                          .uid = 1000,
                          .gid = 1001,
                          .pty = true,
                          .rows = 50,
                          .cols = 132,
                          .nfds = 3,
                          .cgroup = "cmd-1a-2"};
    struct wr_spawn out;
    struct wr_frame_hdr h;
    struct wr_err err = {0};
    int rc;

    wr_buf_init(&b);
    wr_spawn_encode(&b, 5, &in);
    is_int(wr_frame_hdr_parse(b.data, &h, &err), 0, "spawn: header parses");
    ok(h.type == WR_MSG_SPAWN && h.id == 5 && h.len == b.len - 12, "spawn: header fields");
    rc = wr_spawn_decode(b.data + 12, h.len, &out, &err);
    is_int(rc, 0, "spawn: decodes");
    if (rc == 0) {
        is_str(out.argv[0], "/bin/sh", "spawn: argv[0]");
        is_str(out.argv[2], "echo 'hi there'", "spawn: argv[2]");
        is_str(out.argv[3], "", "spawn: empty argv entry kept");
        ok(out.argv[4] == NULL, "spawn: argv NULL-terminated");
        is_str(out.env[0], "PATH=/usr/bin:/bin", "spawn: env[0]");
        is_str(out.env[1], "EMPTY=", "spawn: env[1]");
        ok(out.env[2] == NULL, "spawn: env NULL-terminated");
        is_str(out.cwd, "/home/agent", "spawn: cwd");
        is_str(out.user, "agent", "spawn: user");
        is_int(out.uid, 1000, "spawn: uid");
        is_int(out.gid, 1001, "spawn: gid");
        ok(out.pty, "spawn: pty");
        is_int(out.rows, 50, "spawn: rows");
        is_int(out.cols, 132, "spawn: cols");
        is_int(out.nfds, 3, "spawn: fds");
        is_str(out.cgroup, "cmd-1a-2", "spawn: cgroup");
        wr_spawn_fini(&out);
        ok(out.argv == NULL && out.env == NULL && out.cwd == NULL, "spawn: fini clears");
    }
    wr_buf_fini(&b);

    /* minimal: argv only; everything else takes its default */
    {
        char *argv_min[] = {"true", NULL};
        struct wr_spawn min = {.argv = argv_min, .uid = -1, .gid = -1};
        wr_spawn_encode(&b, 6, &min);
        rc = wr_spawn_decode(b.data + 12, b.len - 12, &out, &err);
        is_int(rc, 0, "spawn minimal: decodes");
        if (rc == 0) {
            ok(out.argv[0] && strcmp(out.argv[0], "true") == 0 && out.argv[1] == NULL,
               "spawn minimal: argv");
            ok(out.env != NULL && out.env[0] == NULL, "spawn minimal: empty env array");
            ok(out.cwd == NULL && out.user == NULL, "spawn minimal: no cwd, no user");
            ok(out.uid == -1 && out.gid == -1, "spawn minimal: uid/gid -1");
            ok(!out.pty && out.rows == 0 && out.cols == 0, "spawn minimal: no pty");
            wr_spawn_fini(&out);
        }
        wr_buf_fini(&b);
    }

    /* too large to encode: nothing is appended */
    {
        char *big = xmalloc(WR_MAX_STR + 1);
        char *argv_big[40];
        struct wr_spawn huge = {.argv = argv_big, .uid = -1, .gid = -1};
        memset(big, 'x', WR_MAX_STR);
        big[WR_MAX_STR] = '\0';
        for (size_t i = 0; i < 39; i++)
            argv_big[i] = big;
        argv_big[39] = NULL;
        wr_buf_append(&b, "q", 1);
        wr_spawn_encode(&b, 1, &huge);
        is_int(b.len, 1, "spawn: oversized frame not appended");
        free(big);
        wr_buf_fini(&b);
    }
}

static void test_proc_info(void)
{
    struct wr_buf b;
    struct wr_proc_info in = {.proc_id = 0xfffffffe,
                              .pid = 4242,
                              .argv = argv_a,
                              .pty = true,
                              .running = false,
                              .signal = 9};
    struct wr_proc_info out;
    struct wr_err err = {0};
    int rc;

    wr_buf_init(&b);
    wr_proc_info_encode(&b, 11, &in);
    ok(b.data[4] == WR_MSG_PROC && b.data[8] == 11, "proc: type and id");
    rc = wr_proc_info_decode(b.data + 12, b.len - 12, &out, &err);
    is_int(rc, 0, "proc: decodes");
    if (rc == 0) {
        is_int(out.proc_id, 0xfffffffe, "proc: proc_id");
        is_int(out.pid, 4242, "proc: pid");
        ok(out.pty && !out.running, "proc: flags");
        is_int(out.signal, 9, "proc: signal");
        is_int(out.exit_code, 0, "proc: exit_code");
        is_str(out.argv[1], "-c", "proc: argv[1]");
        ok(out.argv[4] == NULL, "proc: argv terminated");
        wr_proc_info_fini(&out);
    }
    wr_buf_fini(&b);

    in.signal = 0;
    in.exit_code = 3;
    in.running = false;
    in.argv = NULL;
    wr_proc_info_encode(&b, 12, &in);
    rc = wr_proc_info_decode(b.data + 12, b.len - 12, &out, &err);
    is_int(rc, 0, "proc exited: decodes");
    if (rc == 0) {
        is_int(out.exit_code, 3, "proc exited: exit_code");
        ok(out.argv != NULL && out.argv[0] == NULL, "proc exited: empty argv array");
        wr_proc_info_fini(&out);
    }
    wr_buf_fini(&b);

    /* argv near the frame limit is cut short rather than losing the item */
    {
        char *big = xmalloc(WR_MAX_STR + 1);
        char *argv_big[21];
        memset(big, 'y', WR_MAX_STR);
        big[WR_MAX_STR] = '\0';
        for (size_t i = 0; i < 20; i++)
            argv_big[i] = big;
        argv_big[20] = NULL;
        in.argv = argv_big;
        in.running = true;
        wr_proc_info_encode(&b, 13, &in);
        ok(b.len > 12 && b.len - 12 <= WR_FRAME_MAX_PAYLOAD, "proc big argv: frame within limit");
        rc = wr_proc_info_decode(b.data + 12, b.len - 12, &out, &err);
        is_int(rc, 0, "proc big argv: decodes");
        if (rc == 0) {
            size_t n = 0;
            while (out.argv[n] != NULL)
                n++;
            ok(n > 0 && n < 20, "proc big argv: argv trimmed (%zu entries)", n);
            ok(out.running, "proc big argv: running");
            wr_proc_info_fini(&out);
        }
        free(big);
        wr_buf_fini(&b);
    }

    /* missing proc id */
    wr_msg_put_i64(&b, WR_TAG_PID, 1);
    is_int(wr_proc_info_decode(b.data, b.len, &out, &err), -1, "proc: missing proc_id rejected");
    wr_buf_fini(&b);
    /* proc id wider than 32 bits */
    wr_msg_put_u64(&b, WR_TAG_PROC_ID, 1ull << 32);
    wr_msg_put_i64(&b, WR_TAG_PID, 1);
    is_int(wr_proc_info_decode(b.data, b.len, &out, &err), -1, "proc: 33-bit proc_id rejected");
    wr_buf_fini(&b);
}

static void test_stat(void)
{
    struct wr_buf b;
    struct wr_stat in = {.name = "sub/dir/link",
                         .type = WR_FT_SYMLINK,
                         .mode = 0777,
                         .size = 0x123456789abull,
                         .mtime_ns = -5,
                         .uid = 0,
                         .gid = 65534,
                         .link = "../../target"};
    struct wr_stat out;
    struct wr_err err = {0};
    int rc;

    wr_buf_init(&b);
    wr_stat_encode(&b, 21, &in);
    ok(b.data[4] == WR_MSG_STAT && b.data[8] == 21, "stat: type and id");
    rc = wr_stat_decode(b.data + 12, b.len - 12, &out, &err);
    is_int(rc, 0, "stat: decodes");
    if (rc == 0) {
        is_str(out.name, "sub/dir/link", "stat: name");
        is_int(out.type, WR_FT_SYMLINK, "stat: type");
        is_int(out.mode, 0777, "stat: mode");
        ok(out.size == 0x123456789abull, "stat: size");
        is_int(out.mtime_ns, -5, "stat: mtime_ns");
        is_int(out.uid, 0, "stat: uid");
        is_int(out.gid, 65534, "stat: gid");
        is_str(out.link, "../../target", "stat: link");
        wr_stat_fini(&out);
    }
    wr_buf_fini(&b);

    in.name = NULL;
    in.link = NULL;
    in.type = WR_FT_FILE;
    in.mode = 04755;
    wr_stat_encode(&b, 22, &in);
    rc = wr_stat_decode(b.data + 12, b.len - 12, &out, &err);
    is_int(rc, 0, "stat plain: decodes");
    if (rc == 0) {
        ok(out.name == NULL && out.link == NULL, "stat plain: no name, no link");
        is_int(out.mode, 04755, "stat plain: mode");
        wr_stat_fini(&out);
    }
    wr_buf_fini(&b);

    static const char *bad_names[] = {
        "../etc/passwd", "/etc/passwd", "a/../../b", "a//b", ".", "a/.", ""};
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
        in.name = (char *)bad_names[i];
        wr_stat_encode(&b, 23, &in);
        is_int(wr_stat_decode(b.data + 12, b.len - 12, &out, &err), -1, "stat: name rejected");
        if (err.kind != WR_EPROTO)
            printf("#   for name \"%s\"\n", bad_names[i]);
        wr_buf_fini(&b);
    }
    in.name = "..hidden/x..";
    wr_stat_encode(&b, 23, &in);
    rc = wr_stat_decode(b.data + 12, b.len - 12, &out, &err);
    is_int(rc, 0, "stat: dotted but safe name accepted");
    if (rc == 0)
        wr_stat_fini(&out);
    wr_buf_fini(&b);
    in.name = NULL;

    in.mode = 010000;
    wr_stat_encode(&b, 24, &in);
    is_int(wr_stat_decode(b.data + 12, b.len - 12, &out, &err), -1, "stat: mode > 07777 rejected");
    wr_buf_fini(&b);
    in.mode = 0644;
    in.type = 9;
    wr_stat_encode(&b, 24, &in);
    is_int(wr_stat_decode(b.data + 12, b.len - 12, &out, &err), -1, "stat: bad type rejected");
    wr_buf_fini(&b);

    wr_msg_put_u64(&b, WR_TAG_TYPE, WR_FT_FILE);
    is_int(wr_stat_decode(b.data, b.len, &out, &err), -1, "stat: missing fields rejected");
    wr_buf_fini(&b);
}

/* Every FILE_* request round-trips with the fields of its type, and a cut anywhere fails. */
static void test_file_req(void)
{
    static const uint16_t types[] = {WR_MSG_FILE_READ,   WR_MSG_FILE_WRITE, WR_MSG_FILE_STAT,
                                     WR_MSG_FILE_LIST,   WR_MSG_FILE_MKDIR, WR_MSG_FILE_REMOVE,
                                     WR_MSG_FILE_RENAME, WR_MSG_FILE_CHMOD, WR_MSG_FILE_WATCH};
    struct wr_file_req in, out;
    struct wr_err err = {0};
    struct wr_buf b;
    int rc;

    wr_file_req_init(&in);
    in.path = "/home/user/a b";
    in.user = "user";
    in.uid = 1000;
    in.dest = "/tmp/x";
    in.offset = 5;
    in.length = 7;
    in.flags = WR_WRITE_ATOMIC | WR_WRITE_MKDIRS;
    in.depth = 3;
    in.mode = 0750;
    in.has_mode = true;
    in.nofollow = in.parents = in.recursive = true;
    wr_buf_init(&b);
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        uint16_t t = types[i];
        wr_file_req_encode(&b, t, 40 + (uint32_t)i, &in);
        ok(b.data[4] == t && b.data[8] == 40 + i, "file req: type and id");
        rc = wr_file_req_decode(t, b.data + 12, b.len - 12, &out, &err);
        is_int(rc, 0, "file req: decodes");
        if (rc == 0) {
            is_str(out.path, in.path, "file req: path");
            is_str(out.user, "user", "file req: user");
            ok(out.uid == 1000 && out.gid == -1, "file req: uid, no gid");
            ok((out.dest != NULL) == (t == WR_MSG_FILE_RENAME), "file req: dest only for RENAME");
            ok(t == WR_MSG_FILE_READ ? out.offset == 5 && out.length == 7
                                     : out.offset == 0 && out.length == UINT64_MAX,
               "file req: range only for READ");
            ok(out.has_mode == (t == WR_MSG_FILE_WRITE || t == WR_MSG_FILE_MKDIR ||
                                t == WR_MSG_FILE_CHMOD) &&
                   (!out.has_mode || out.mode == 0750),
               "file req: mode for WRITE, MKDIR, CHMOD");
            ok(out.flags == (t == WR_MSG_FILE_WRITE ? in.flags : 0), "file req: flags");
            ok(out.depth == (t == WR_MSG_FILE_LIST ? 3 : 0), "file req: depth");
            ok(out.nofollow == (t == WR_MSG_FILE_STAT) && out.parents == (t == WR_MSG_FILE_MKDIR) &&
                   out.recursive == (t == WR_MSG_FILE_REMOVE || t == WR_MSG_FILE_WATCH),
               "file req: booleans");
            wr_file_req_fini(&out);
            ok(out.path == NULL && out.uid == -1, "file req: fini resets");
        }
        for (size_t cut = 12; cut < b.len; cut++)
            if (wr_file_req_decode(t, b.data + 12, cut - 12, &out, &err) == 0) {
                /* a cut between fields leaves a shorter, valid request only if PATH is in */
                ok(out.path != NULL, "file req: a cut decodes only with its path");
                wr_file_req_fini(&out);
            } else if (err.kind != WR_EPROTO || out.path != NULL) {
                ok(0, "file req: a cut fails as EPROTO with nothing left");
            }
        wr_buf_fini(&b);
    }

    /* required fields and bounds */
    wr_file_req_init(&in);
    in.path = "relative";
    wr_file_req_encode(&b, WR_MSG_FILE_STAT, 1, &in);
    is_int(wr_file_req_decode(WR_MSG_FILE_STAT, b.data + 12, b.len - 12, &out, &err), -1,
           "file req: relative path rejected");
    wr_buf_fini(&b);
    in.path = "/a";
    wr_file_req_encode(&b, WR_MSG_FILE_CHMOD, 1, &in);
    b.len -= 14; /* the MODE field */
    is_int(wr_file_req_decode(WR_MSG_FILE_CHMOD, b.data + 12, b.len - 12, &out, &err), -1,
           "file req: CHMOD without MODE rejected");
    wr_buf_fini(&b);
    wr_msg_put_str(&b, WR_TAG_PATH, "/a");
    wr_msg_put_str(&b, WR_TAG_DEST, "b");
    is_int(wr_file_req_decode(WR_MSG_FILE_RENAME, b.data, b.len, &out, &err), -1,
           "file req: relative DEST rejected");
    wr_buf_fini(&b);
    wr_msg_put_str(&b, WR_TAG_PATH, "/a");
    wr_msg_put_str(&b, WR_TAG_PATH, "/b");
    is_int(wr_file_req_decode(WR_MSG_FILE_STAT, b.data, b.len, &out, &err), -1,
           "file req: duplicate PATH rejected");
    wr_buf_fini(&b);
    wr_msg_put_str(&b, WR_TAG_PATH, "/a");
    wr_msg_put_u64(&b, WR_TAG_MODE, 010000);
    is_int(wr_file_req_decode(WR_MSG_FILE_MKDIR, b.data, b.len, &out, &err), -1,
           "file req: mode > 07777 rejected");
    rc = wr_file_req_decode(WR_MSG_FILE_STAT, b.data, b.len, &out, &err);
    ok(rc == 0 && !out.has_mode, "file req: a field of another type is skipped");
    if (rc == 0)
        wr_file_req_fini(&out);
    wr_buf_fini(&b);
    wr_msg_put_str(&b, WR_TAG_PATH, "/a");
    wr_msg_put_i64(&b, WR_TAG_UID, 1ll << 32);
    is_int(wr_file_req_decode(WR_MSG_FILE_LIST, b.data, b.len, &out, &err), -1,
           "file req: 33-bit uid rejected");
    wr_buf_fini(&b);
    wr_msg_put_bytes(&b, WR_TAG_PATH, "/a\0b", 4);
    is_int(wr_file_req_decode(WR_MSG_FILE_READ, b.data, b.len, &out, &err), -1,
           "file req: NUL in path rejected");
    wr_buf_fini(&b);
}

static void test_exit_error(void)
{
    struct wr_buf b;
    struct wr_exit ex = {.exit_code = 2}, out = {0};
    struct wr_err err = {0};
    char msg[16];
    int errnum = 0;

    wr_buf_init(&b);
    wr_exit_encode(&b, 3, &ex);
    ok(b.data[4] == WR_MSG_EXIT && b.data[8] == 3, "exit: type and proc id");
    is_int(wr_exit_decode(b.data + 12, b.len - 12, &out, &err), 0, "exit: decodes");
    ok(out.exit_code == 2 && out.signal == 0, "exit: code");
    wr_buf_fini(&b);

    ex.signal = 15;
    wr_exit_encode(&b, 3, &ex);
    is_int(wr_exit_decode(b.data + 12, b.len - 12, &out, &err), 0, "exit signal: decodes");
    is_int(out.signal, 15, "exit signal: signal");
    ok(!out.has_usage, "exit: no usage unless all of it came");
    wr_buf_fini(&b);

    ex = (struct wr_exit){.exit_code = 0,
                          .has_usage = true,
                          .cpu_ns = 1500000000ull,
                          .maxrss_bytes = 64ull << 20,
                          .wall_ns = 2000000001ull};
    wr_exit_encode(&b, 3, &ex);
    is_int(wr_exit_decode(b.data + 12, b.len - 12, &out, &err), 0, "exit usage: decodes");
    ok(out.has_usage && out.cpu_ns == ex.cpu_ns && out.maxrss_bytes == ex.maxrss_bytes &&
           out.wall_ns == ex.wall_ns,
       "exit usage: round trip");
    wr_buf_fini(&b);

    wr_msg_put_i64(&b, WR_TAG_EXIT_CODE, 0);
    wr_msg_put_u64(&b, WR_TAG_CPU_NS, 1);
    wr_msg_put_u64(&b, WR_TAG_CPU_NS, 2);
    is_int(wr_exit_decode(b.data, b.len, &out, &err), -1, "exit usage: duplicate cpu_ns");
    wr_buf_fini(&b);

    wr_msg_put_i64(&b, WR_TAG_EXIT_CODE, 0);
    wr_msg_put_u64(&b, WR_TAG_WALL_NS, UINT64_MAX);
    is_int(wr_exit_decode(b.data, b.len, &out, &err), -1, "exit usage: wall_ns out of range");
    wr_buf_fini(&b);

    wr_msg_put_u64(&b, WR_TAG_PID, 1);
    is_int(wr_exit_decode(b.data, b.len, &out, &err), -1, "exit: neither code nor signal");
    wr_buf_fini(&b);

    wr_msg_error(&b, 8, 2, "open `/nope`: No such file or directory");
    ok(b.data[4] == WR_MSG_ERROR && b.data[8] == 8, "error: type and id");
    is_int(wr_error_decode(b.data + 12, b.len - 12, &errnum, msg, sizeof(msg), &err), 0,
           "error: decodes");
    is_int(errnum, 2, "error: errno");
    is_str(msg, "open `/nope`: N", "error: message truncated to the buffer");
    wr_buf_fini(&b);

    wr_msg_error(&b, 8, 13, NULL);
    is_int(wr_error_decode(b.data + 12, b.len - 12, &errnum, msg, sizeof(msg), &err), 0,
           "error without message: decodes");
    ok(errnum == 13 && msg[0] == '\0', "error without message: empty message");
    wr_buf_fini(&b);

    wr_msg_put_i64(&b, WR_TAG_ERRNO, 1);
    field(&b, WR_TAG_MESSAGE, "bad\0msg", 7);
    is_int(wr_error_decode(b.data, b.len, &errnum, msg, sizeof(msg), &err), -1,
           "error: message with NUL rejected");
    wr_buf_fini(&b);

    wr_msg_put_i64(&b, WR_TAG_ERRNO, -1);
    is_int(wr_error_decode(b.data, b.len, &errnum, msg, sizeof(msg), &err), -1,
           "error: negative errno rejected");
    wr_buf_fini(&b);
}

/* Build a stream of assorted frames. */
static void make_stream(struct wr_buf *b, size_t big)
{
    char *data = xmalloc(big ? big : 1);
    struct wr_exit ex = {.exit_code = 1};

    for (size_t i = 0; i < big; i++)
        data[i] = (char)(i * 7);
    wr_msg_ok(b, 1);
    wr_msg_error(b, 2, 5, "io");
    wr_frame_raw(b, WR_MSG_OUTPUT, WR_FLAG_STDOUT, 3, data, big);
    wr_frame_raw(b, WR_MSG_DATA_END, 0, 4, NULL, 0);
    wr_exit_encode(b, 5, &ex);
    free(data);
}

/* Feed `s` to a reader in pieces of `step` bytes, draining after each feed; check the frames come
 * out in order with the right ids and payload sizes, and the buffer stays bounded. */
static void reassemble(const struct wr_buf *s, size_t step, size_t big, const char *name)
{
    struct wr_reader r;
    struct wr_frame_hdr h;
    struct wr_err err = {0};
    const uint8_t *payload;
    uint32_t ids = 0;
    size_t count = 0, max_len = 0;
    int rc, bad = 0;

    wr_reader_init(&r);
    for (size_t off = 0; off < s->len; off += step) {
        size_t n = s->len - off < step ? s->len - off : step;
        wr_reader_feed(&r, s->data + off, n);
        if (r.in.len > max_len)
            max_len = r.in.len;
        while ((rc = wr_reader_next(&r, &h, &payload, &err)) == 1) {
            count++;
            ids = ids * 10 + h.id;
            if (h.id == 3 && (h.len != big || (big > 1 && payload[1] != 7)))
                bad = 1;
        }
        if (rc < 0)
            bad = 1;
    }
    ok(count == 5 && ids == 12345 && !bad, "reader %s: 5 frames in order", name);
    /* one frame plus one feed, plus the reader's small private prefix */
    ok(max_len <= WR_FRAME_HDR_SIZE + big + step + 64, "reader %s: bounded (%zu bytes)", name,
       max_len);
    ok(wr_reader_next(&r, &h, &payload, &err) == 0, "reader %s: then empty", name);
    wr_reader_fini(&r);
}

static void test_reader(void)
{
    struct wr_buf s;
    struct wr_reader r;
    struct wr_frame_hdr h;
    struct wr_err err = {0};
    const uint8_t *payload;
    uint8_t hdr[WR_FRAME_HDR_SIZE] = {0};
    size_t len;

    wr_buf_init(&s);
    make_stream(&s, 100);
    reassemble(&s, 1, 100, "byte by byte");
    reassemble(&s, 5, 100, "in 5s");
    reassemble(&s, s.len, 100, "all at once");
    wr_buf_fini(&s);

    make_stream(&s, WR_FRAME_MAX_PAYLOAD);
    reassemble(&s, 65536, WR_FRAME_MAX_PAYLOAD, "max frame in 64 KiB reads");
    reassemble(&s, s.len, WR_FRAME_MAX_PAYLOAD, "max frame in one read");
    wr_buf_fini(&s);

    /* draining 10000 small frames from one read must not be quadratic: just check it works */
    for (int i = 0; i < 10000; i++)
        wr_frame_raw(&s, WR_MSG_ACK, 0, (uint32_t)i, "x", 1);
    wr_reader_init(&r);
    wr_reader_feed(&r, s.data, s.len);
    {
        int n = 0, order = 1;
        while (wr_reader_next(&r, &h, &payload, &err) == 1) {
            if (h.id != (uint32_t)n || payload[0] != 'x')
                order = 0;
            n++;
        }
        ok(n == 10000 && order, "reader: 10000 frames from one feed");
    }
    wr_reader_fini(&r);
    wr_buf_fini(&s);

    /* a header announcing more than the maximum is an error, and stays one */
    hdr[0] = 0x01;
    hdr[2] = 0x10; /* len = 0x100001 = WR_FRAME_MAX_PAYLOAD + 1 */
    hdr[4] = WR_MSG_DATA;
    wr_reader_init(&r);
    wr_reader_feed(&r, hdr, sizeof(hdr));
    err.kind = WR_EOK;
    is_int(wr_reader_next(&r, &h, &payload, &err), -1, "reader: oversized header rejected");
    is_int(err.kind, WR_EPROTO, "reader: oversized header is a protocol error");
    len = r.in.len;
    {
        static uint8_t junk[4096];
        for (int i = 0; i < 16; i++)
            wr_reader_feed(&r, junk, sizeof(junk));
    }
    is_int(r.in.len, len, "reader: feeding after a bad header does not grow the buffer");
    is_int(wr_reader_next(&r, &h, &payload, &err), -1, "reader: still an error");
    wr_reader_fini(&r);

    is_int(wr_frame_hdr_parse(hdr, &h, &err), -1, "hdr_parse: max + 1 rejected");
    hdr[0] = 0;
    is_int(wr_frame_hdr_parse(hdr, &h, &err), 0, "hdr_parse: exactly max accepted");
    hdr[3] = 0x80;
    is_int(wr_frame_hdr_parse(hdr, &h, &err), -1, "hdr_parse: huge len rejected");

    /* a header of exactly the maximum just waits for its bytes */
    hdr[3] = 0;
    wr_reader_init(&r);
    wr_reader_feed(&r, hdr, sizeof(hdr));
    is_int(wr_reader_next(&r, &h, &payload, &err), 0, "reader: max header waits for payload");
    ok(r.in.cap < 4096, "reader: nothing allocated for the announced length");
    wr_reader_fini(&r);

    /* partial header */
    wr_reader_init(&r);
    wr_reader_feed(&r, hdr, 11);
    is_int(wr_reader_next(&r, &h, &payload, &err), 0, "reader: 11 header bytes need more");
    wr_reader_fini(&r);
}

static void test_tlv(void)
{
    struct wr_buf b;
    struct wr_tlv_iter it;
    struct wr_field f;
    uint64_t u;
    int64_t i;
    char *s = NULL;
    uint8_t trunc[] = {10, 0, 5, 0, 0, 0, 'a', 'b'}; /* ARGV claims 5 bytes, has 2 */
    uint8_t short_hdr[] = {10, 0, 0};
    uint8_t huge_len[] = {10, 0, 0xff, 0xff, 0xff, 0xff, 'a'};
    uint8_t nine[9] = {1};
    struct wr_spawn sp;
    struct wr_err err = {0};

    wr_tlv_iter_init(&it, trunc, sizeof(trunc));
    is_int(wr_tlv_next(&it, &f), -1, "tlv: field length past payload");
    wr_tlv_iter_init(&it, short_hdr, sizeof(short_hdr));
    is_int(wr_tlv_next(&it, &f), -1, "tlv: truncated field header");
    wr_tlv_iter_init(&it, huge_len, sizeof(huge_len));
    is_int(wr_tlv_next(&it, &f), -1, "tlv: 4 GiB field length");
    wr_tlv_iter_init(&it, NULL, 0);
    is_int(wr_tlv_next(&it, &f), 0, "tlv: empty payload ends");
    is_int(wr_spawn_decode(trunc, sizeof(trunc), &sp, &err), -1, "spawn: truncated field");
    ok(sp.argv == NULL, "spawn: nothing left allocated after failure");

    /* a good field followed by a truncated one still fails the whole message */
    wr_buf_init(&b);
    wr_msg_put_str(&b, WR_TAG_ARGV, "ls");
    wr_buf_append(&b, short_hdr, sizeof(short_hdr));
    is_int(wr_spawn_decode(b.data, b.len, &sp, &err), -1, "spawn: trailing garbage rejected");
    wr_buf_fini(&b);

    f.tag = WR_TAG_PID;
    f.len = 4;
    f.val = nine;
    is_int(wr_field_u64(&f, &u), -1, "u64: 4 bytes rejected");
    is_int(wr_field_i64(&f, &i), -1, "i64: 4 bytes rejected");
    f.len = 9;
    is_int(wr_field_u64(&f, &u), -1, "u64: 9 bytes rejected");
    f.len = 8;
    is_int(wr_field_u64(&f, &u), 0, "u64: 8 bytes accepted");
    is_int(u, 1, "u64: value");

    f.tag = WR_TAG_ARGV;
    f.val = (const uint8_t *)"a\0b";
    f.len = 3;
    is_int(wr_field_strdup(&f, 100, &s), -1, "strdup: embedded NUL rejected");
    f.len = 1;
    is_int(wr_field_strdup(&f, 100, &s), 0, "strdup: plain string accepted");
    is_str(s, "a", "strdup: value");
    free(s);
    s = NULL;
    f.val = (const uint8_t *)"abcd";
    f.len = 4;
    is_int(wr_field_strdup(&f, 3, &s), -1, "strdup: longer than max rejected");
}

/* Decode `b` as a SPAWN payload and expect failure. */
static void spawn_rejects(struct wr_buf *b, const char *name)
{
    struct wr_spawn sp;
    struct wr_err err = {0};
    int rc = wr_spawn_decode(b->data, b->len, &sp, &err);

    ok(rc == -1 && err.kind == WR_EPROTO && sp.argv == NULL, "spawn rejects: %s", name);
    if (rc == 0)
        wr_spawn_fini(&sp);
    wr_buf_fini(b);
}

static void spawn_accepts(struct wr_buf *b, const char *name)
{
    struct wr_spawn sp;
    struct wr_err err = {0};
    int rc = wr_spawn_decode(b->data, b->len, &sp, &err);

    ok(rc == 0, "spawn accepts: %s", name);
    if (rc == 0)
        wr_spawn_fini(&sp);
    else
        printf("#   %s\n", err.msg);
    wr_buf_fini(b);
}

static void test_spawn_cgroup_hostile(void)
{
    static const char *const bad[] = {"", "../x", "a/b", "a.b", "x y"};
    struct wr_spawn out;
    struct wr_err err = {0};
    struct wr_buf b;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        wr_buf_init(&b);
        wr_msg_put_str(&b, WR_TAG_ARGV, "true");
        wr_msg_put_str(&b, WR_TAG_CGROUP, bad[i]);
        is_int(wr_spawn_decode(b.data, b.len, &out, &err), -1, "spawn: cgroup not a plain name");
        wr_buf_fini(&b);
    }
    wr_buf_init(&b);
    wr_msg_put_str(&b, WR_TAG_ARGV, "true");
    wr_msg_put_u64(&b, WR_TAG_FDS, WR_SPAWN_FDS_MAX + 1);
    is_int(wr_spawn_decode(b.data, b.len, &out, &err), -1, "spawn: too many fds");
    wr_buf_fini(&b);
}

static void test_spawn_hostile(void)
{
    struct wr_buf b;
    uint8_t four[4] = {1, 0, 0, 0};
    char *big = xmalloc(WR_MAX_STR + 2);

    wr_buf_init(&b);
    spawn_rejects(&b, "empty payload");

    wr_msg_put_str(&b, WR_TAG_ENV, "A=1");
    wr_msg_put_str(&b, WR_TAG_CWD, "/");
    spawn_rejects(&b, "no argv");

    field(&b, WR_TAG_ARGV, "sh\0-c", 5);
    spawn_rejects(&b, "argv with NUL");

    wr_msg_put_str(&b, WR_TAG_ARGV, "sh");
    field(&b, WR_TAG_ENV, "A=1\0B=2", 7);
    spawn_rejects(&b, "env with NUL");

    wr_msg_put_str(&b, WR_TAG_ARGV, "sh");
    field(&b, WR_TAG_CWD, "/tmp\0/etc", 9);
    spawn_rejects(&b, "cwd with NUL");

    wr_msg_put_str(&b, WR_TAG_ARGV, "sh");
    wr_msg_put_str(&b, WR_TAG_ENV, "NOEQUALS");
    spawn_rejects(&b, "env without =");

    wr_msg_put_str(&b, WR_TAG_ARGV, "sh");
    wr_msg_put_str(&b, WR_TAG_ENV, "=value");
    spawn_rejects(&b, "env with empty key");

    for (int i = 0; i <= WR_MAX_ARGS; i++)
        wr_msg_put_str(&b, WR_TAG_ARGV, "");
    spawn_rejects(&b, "too many argv entries");

    for (int i = 0; i < WR_MAX_ARGS; i++)
        wr_msg_put_str(&b, WR_TAG_ARGV, "a");
    spawn_accepts(&b, "exactly WR_MAX_ARGS argv entries");

    wr_msg_put_str(&b, WR_TAG_ARGV, "env");
    for (int i = 0; i <= WR_MAX_ARGS; i++)
        wr_msg_put_str(&b, WR_TAG_ENV, "A=");
    spawn_rejects(&b, "too many env entries");

    memset(big, 'a', WR_MAX_STR + 1);
    big[WR_MAX_STR + 1] = '\0';
    wr_msg_put_str(&b, WR_TAG_ARGV, big);
    spawn_rejects(&b, "argv entry longer than WR_MAX_STR");

    big[WR_MAX_STR] = '\0';
    wr_msg_put_str(&b, WR_TAG_ARGV, big);
    spawn_accepts(&b, "argv entry of exactly WR_MAX_STR");

    big[WR_MAX_PATH + 1] = '\0';
    wr_msg_put_str(&b, WR_TAG_ARGV, "pwd");
    wr_msg_put_str(&b, WR_TAG_CWD, big);
    spawn_rejects(&b, "cwd longer than WR_MAX_PATH");

    wr_msg_put_str(&b, WR_TAG_ARGV, "pwd");
    wr_msg_put_str(&b, WR_TAG_CWD, "/a");
    wr_msg_put_str(&b, WR_TAG_CWD, "/b");
    spawn_rejects(&b, "duplicate cwd");

    wr_msg_put_str(&b, WR_TAG_ARGV, "id");
    wr_msg_put_i64(&b, WR_TAG_UID, 1);
    wr_msg_put_i64(&b, WR_TAG_UID, 0);
    spawn_rejects(&b, "duplicate uid");

    wr_msg_put_str(&b, WR_TAG_ARGV, "id");
    field(&b, WR_TAG_UID, four, sizeof(four));
    spawn_rejects(&b, "uid of 4 bytes");

    wr_msg_put_str(&b, WR_TAG_ARGV, "id");
    wr_msg_put_i64(&b, WR_TAG_UID, 1ll << 32);
    spawn_rejects(&b, "uid 2^32 (would truncate to root)");

    wr_msg_put_str(&b, WR_TAG_ARGV, "id");
    wr_msg_put_i64(&b, WR_TAG_GID, -2);
    spawn_rejects(&b, "gid -2");

    wr_msg_put_str(&b, WR_TAG_ARGV, "id");
    wr_msg_put_u64(&b, WR_TAG_PTY, 2);
    spawn_rejects(&b, "pty 2");

    wr_msg_put_str(&b, WR_TAG_ARGV, "id");
    wr_msg_put_u64(&b, WR_TAG_ROWS, 65536);
    spawn_rejects(&b, "rows 65536");

    wr_msg_put_str(&b, WR_TAG_ARGV, "id");
    field(&b, 999, "whatever", 8);
    field(&b, 0, NULL, 0);
    wr_msg_put_str(&b, WR_TAG_ARGV, "-u");
    spawn_accepts(&b, "unknown tags skipped");

    free(big);
}

/* Decode `b` as a WATCH_EVENT payload and expect failure, with nothing left allocated. */
static void watch_rejects(struct wr_buf *b, const char *name)
{
    struct wr_watch_event ev;
    struct wr_err err = {0};
    int rc = wr_watch_event_decode(b->data, b->len, &ev, &err);

    ok(rc == -1 && err.kind == WR_EPROTO && ev.name == NULL && ev.op == 0,
       "watch event rejects: %s", name);
    if (rc == 0)
        wr_watch_event_fini(&ev);
    wr_buf_fini(b);
}

static void watch_accepts(struct wr_buf *b, const char *name)
{
    struct wr_watch_event ev;
    struct wr_err err = {0};
    int rc = wr_watch_event_decode(b->data, b->len, &ev, &err);

    ok(rc == 0, "watch event accepts: %s", name);
    if (rc == 0)
        wr_watch_event_fini(&ev);
    else
        printf("#   %s\n", err.msg);
    wr_buf_fini(b);
}

static void test_watch_event(void)
{
    static const char *bad_names[] = {"../etc/passwd", "/etc/passwd", "a/../../b", "a//b", ".",
                                      "a/.",           "a/",          ""};
    struct wr_watch_event in = {.op = WR_WATCH_RENAME, .name = "sub/dir/x"}, out;
    struct wr_err err = {0};
    struct wr_buf b;
    uint8_t four[4] = {1, 0, 0, 0};
    char *big = xmalloc(WR_MAX_PATH + 2);
    int rc;

    wr_buf_init(&b);
    wr_watch_event_encode(&b, 0x01020304, &in);
    ok(b.data[4] == WR_MSG_WATCH_EVENT && b.data[5] == 0, "watch event: type");
    ok(b.data[8] == 4 && b.data[11] == 1, "watch event: id is the watch's request id");
    rc = wr_watch_event_decode(b.data + 12, b.len - 12, &out, &err);
    is_int(rc, 0, "watch event: decodes");
    if (rc == 0) {
        is_int(out.op, WR_WATCH_RENAME, "watch event: op");
        is_str(out.name, "sub/dir/x", "watch event: name");
        wr_watch_event_fini(&out);
        ok(out.name == NULL, "watch event: fini clears");
    }
    wr_buf_fini(&b);

    for (int op = WR_WATCH_CREATE; op <= WR_WATCH_CHMOD; op++) {
        in.op = (enum wr_watch_op)op;
        in.name = "f";
        wr_watch_event_encode(&b, 1, &in);
        rc = wr_watch_event_decode(b.data + 12, b.len - 12, &out, &err);
        ok(rc == 0 && out.op == (enum wr_watch_op)op, "watch event: op %d round trip", op);
        if (rc == 0)
            wr_watch_event_fini(&out);
        wr_buf_fini(&b);
    }

    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
        wr_msg_put_u64(&b, WR_TAG_TYPE, WR_WATCH_CREATE);
        wr_msg_put_str(&b, WR_TAG_NAME, bad_names[i]);
        watch_rejects(&b, "name not a relative path");
    }
    wr_msg_put_u64(&b, WR_TAG_TYPE, WR_WATCH_CREATE);
    wr_msg_put_str(&b, WR_TAG_NAME, "..hidden/x../...");
    watch_accepts(&b, "dotted but safe name");

    wr_msg_put_u64(&b, WR_TAG_TYPE, WR_WATCH_WRITE);
    field(&b, WR_TAG_NAME, "a\0/../b", 7);
    watch_rejects(&b, "name with NUL");

    memset(big, 'a', WR_MAX_PATH + 1);
    big[WR_MAX_PATH + 1] = '\0';
    wr_msg_put_u64(&b, WR_TAG_TYPE, WR_WATCH_WRITE);
    wr_msg_put_str(&b, WR_TAG_NAME, big);
    watch_rejects(&b, "name longer than WR_MAX_PATH");
    big[WR_MAX_PATH] = '\0';
    wr_msg_put_u64(&b, WR_TAG_TYPE, WR_WATCH_WRITE);
    wr_msg_put_str(&b, WR_TAG_NAME, big);
    watch_accepts(&b, "name of exactly WR_MAX_PATH");

    wr_msg_put_u64(&b, WR_TAG_TYPE, 0);
    wr_msg_put_str(&b, WR_TAG_NAME, "f");
    watch_rejects(&b, "type 0");
    wr_msg_put_u64(&b, WR_TAG_TYPE, WR_WATCH_CHMOD + 1);
    wr_msg_put_str(&b, WR_TAG_NAME, "f");
    watch_rejects(&b, "type 6");
    wr_msg_put_u64(&b, WR_TAG_TYPE, 1ull << 32 | WR_WATCH_CREATE);
    wr_msg_put_str(&b, WR_TAG_NAME, "f");
    watch_rejects(&b, "type that truncates to CREATE");
    field(&b, WR_TAG_TYPE, four, sizeof(four));
    wr_msg_put_str(&b, WR_TAG_NAME, "f");
    watch_rejects(&b, "type of 4 bytes");

    wr_msg_put_str(&b, WR_TAG_NAME, "f");
    watch_rejects(&b, "missing type");
    wr_msg_put_u64(&b, WR_TAG_TYPE, WR_WATCH_REMOVE);
    watch_rejects(&b, "missing name");
    watch_rejects(&b, "empty payload");

    wr_msg_put_u64(&b, WR_TAG_TYPE, WR_WATCH_REMOVE);
    wr_msg_put_u64(&b, WR_TAG_TYPE, WR_WATCH_CREATE);
    wr_msg_put_str(&b, WR_TAG_NAME, "f");
    watch_rejects(&b, "duplicate type");
    wr_msg_put_u64(&b, WR_TAG_TYPE, WR_WATCH_REMOVE);
    wr_msg_put_str(&b, WR_TAG_NAME, "f");
    wr_msg_put_str(&b, WR_TAG_NAME, "../g");
    watch_rejects(&b, "duplicate name");

    wr_msg_put_u64(&b, WR_TAG_TYPE, WR_WATCH_REMOVE);
    wr_msg_put_str(&b, WR_TAG_NAME, "f");
    wr_buf_append(&b, four, 3);
    watch_rejects(&b, "trailing truncated field");

    field(&b, 999, "whatever", 8);
    wr_msg_put_u64(&b, WR_TAG_TYPE, WR_WATCH_REMOVE);
    field(&b, 0, NULL, 0);
    wr_msg_put_str(&b, WR_TAG_NAME, "f");
    watch_accepts(&b, "unknown tags skipped");

    free(big);
}

static void test_port_list(void)
{
    struct wr_port_listen in[3] = {{"0.0.0.0", 8000}, {"127.0.0.1", 22}, {"::", 65535}},
                          *out = NULL;
    struct wr_err err = {0};
    struct wr_buf b;
    size_t n = 99;
    int rc;

    wr_buf_init(&b);
    wr_port_list_encode(&b, 7, in, 3);
    ok(b.data[4] == WR_MSG_OK && b.data[8] == 7, "port list: an OK for the request");
    rc = wr_port_list_decode(b.data + 12, b.len - 12, &out, &n, &err);
    ok(rc == 0 && n == 3, "port list: three items");
    if (rc == 0 && n == 3)
        ok(strcmp(out[0].addr, "0.0.0.0") == 0 && out[0].port == 8000 &&
               strcmp(out[2].addr, "::") == 0 && out[2].port == 65535,
           "port list: items round trip");
    free(out);
    wr_buf_fini(&b);

    wr_port_list_encode(&b, 1, NULL, 0);
    out = (void *)1;
    rc = wr_port_list_decode(b.data + 12, b.len - 12, &out, &n, &err);
    ok(rc == 0 && n == 0 && out == NULL, "port list: empty");
    wr_buf_fini(&b);

    /* hostile answers */
    wr_msg_put_u64(&b, WR_TAG_PORT, 80);
    ok(wr_port_list_decode(b.data, b.len, &out, &n, &err) < 0, "port list: a PORT without ADDR");
    wr_buf_fini(&b);
    wr_msg_put_str(&b, WR_TAG_ADDR, "1.2.3.4");
    wr_msg_put_u64(&b, WR_TAG_PORT, 0);
    ok(wr_port_list_decode(b.data, b.len, &out, &n, &err) < 0, "port list: port 0");
    wr_buf_fini(&b);
    wr_msg_put_str(&b, WR_TAG_ADDR, "1.2.3.4");
    wr_msg_put_u64(&b, WR_TAG_PORT, 65536);
    ok(wr_port_list_decode(b.data, b.len, &out, &n, &err) < 0, "port list: port 65536");
    wr_buf_fini(&b);
    wr_msg_put_str(&b, WR_TAG_ADDR, "1.2.3.4\n<script>");
    wr_msg_put_u64(&b, WR_TAG_PORT, 80);
    ok(wr_port_list_decode(b.data, b.len, &out, &n, &err) < 0, "port list: not an address");
    wr_buf_fini(&b);
    wr_msg_put_str(&b, WR_TAG_ADDR, "1.2.3.4");
    ok(wr_port_list_decode(b.data, b.len, &out, &n, &err) < 0, "port list: ADDR without PORT");
    wr_buf_fini(&b);
    for (int i = 0; i <= WR_PORT_LIST_MAX; i++) {
        wr_msg_put_str(&b, WR_TAG_ADDR, "::1");
        wr_msg_put_u64(&b, WR_TAG_PORT, 1 + (uint64_t)(i % 65535));
    }
    ok(wr_port_list_decode(b.data, b.len, &out, &n, &err) < 0, "port list: too many items");
    wr_buf_fini(&b);
}

/* ---- services ------------------------------------------------------------------------------ */

static void test_service(void)
{
    static char *argv_s[] = {"/bin/sh", "-c", "echo up; sleep 1000", NULL};
    static char *env_s[] = {"PATH=/bin", "A=1", NULL};
    static char *deps[] = {"db=1", "init-1.x_y=2", "cache=0", NULL};
    static char *hc[] = {"test", "-e", "/tmp/ok", NULL};
    struct wr_service in = {.name = "web",
                            .root = "/.warren/services/web",
                            .sp = {.argv = argv_s,
                                   .env = env_s,
                                   .cwd = "/srv",
                                   .user = "www:www",
                                   .uid = -1,
                                   .gid = -1,
                                   .nfds = 2,
                                   .cgroup = "svc-web"},
                            .depends = deps,
                            .health_argv = hc,
                            .health_interval_ms = 100,
                            .health_timeout_ms = 2000,
                            .health_start_period_ms = 5000,
                            .health_retries = 7,
                            .restart = WR_RESTART_ON_FAILURE,
                            .restart_max = 2,
                            .stop_signal = 15};
    struct wr_service out;
    struct wr_frame_hdr h;
    struct wr_err err = {0};
    struct wr_buf b;
    int rc;

    wr_buf_init(&b);
    wr_service_encode(&b, 9, &in);
    is_int(wr_frame_hdr_parse(b.data, &h, &err), 0, "service: header parses");
    ok(h.type == WR_MSG_SERVICE && h.id == 9 && h.len == b.len - 12, "service: header fields");
    rc = wr_service_decode(b.data + 12, h.len, &out, &err);
    is_int(rc, 0, "service: decodes");
    if (rc == 0) {
        is_str(out.name, "web", "service: name");
        is_str(out.root, "/.warren/services/web", "service: root");
        ok(out.sp.service == NULL, "service: the name is not left in sp.service");
        is_str(out.sp.argv[2], "echo up; sleep 1000", "service: argv");
        ok(out.sp.argv[3] == NULL, "service: argv NULL-terminated");
        ok(out.sp.env[1] != NULL && strcmp(out.sp.env[1], "A=1") == 0 && out.sp.env[2] == NULL,
           "service: env");
        is_str(out.sp.cwd, "/srv", "service: cwd");
        is_str(out.sp.user, "www:www", "service: user");
        ok(out.sp.uid == -1 && out.sp.gid == -1 && !out.sp.pty, "service: uid, gid, pty");
        is_int(out.sp.nfds, 2, "service: fds");
        is_str(out.sp.cgroup, "svc-web", "service: cgroup");
        ok(out.depends != NULL && strcmp(out.depends[1], "init-1.x_y=2") == 0 &&
               out.depends[3] == NULL,
           "service: depends in order");
        ok(out.health_argv != NULL && strcmp(out.health_argv[2], "/tmp/ok") == 0 &&
               out.health_argv[3] == NULL,
           "service: health argv");
        ok(out.health_interval_ms == 100 && out.health_timeout_ms == 2000 &&
               out.health_start_period_ms == 5000 && out.health_retries == 7,
           "service: health timings");
        ok(out.restart == WR_RESTART_ON_FAILURE && out.restart_max == 2 && out.stop_signal == 15,
           "service: restart, restart_max, stop_signal");
        wr_service_fini(&out);
        ok(out.name == NULL && out.sp.argv == NULL && out.depends == NULL, "service: fini clears");
    }
    wr_buf_fini(&b);

    /* minimal: name and argv; everything else at its default */
    {
        char *argv_min[] = {"true", NULL};
        struct wr_service min = {.name = "a", .sp = {.argv = argv_min, .uid = -1, .gid = -1}};
        wr_service_encode(&b, 1, &min);
        rc = wr_service_decode(b.data + 12, b.len - 12, &out, &err);
        is_int(rc, 0, "service minimal: decodes");
        if (rc == 0) {
            ok(out.root == NULL && out.depends == NULL && out.health_argv == NULL,
               "service minimal: no root, depends, healthcheck");
            ok(out.health_interval_ms == 0 && out.health_retries == 0 &&
                   out.restart == WR_RESTART_NO && out.restart_max == 0 && out.stop_signal == 0,
               "service minimal: defaults are 0");
            wr_service_fini(&out);
        }
        wr_buf_fini(&b);
    }

    /* the helpers */
    {
        size_t len = 0;
        enum wr_depend cond = WR_DEPEND_STARTED;
        ok(wr_service_name_ok("db") && wr_service_name_ok("0a.b_c-d") && !wr_service_name_ok("") &&
               !wr_service_name_ok("Db") && !wr_service_name_ok(".db") &&
               !wr_service_name_ok("-db") && !wr_service_name_ok("d b") &&
               !wr_service_name_ok("a/b"),
           "service name: [a-z0-9._-], starting with a letter or digit");
        char n63[65];
        memset(n63, 'a', 64);
        n63[64] = '\0';
        ok(!wr_service_name_ok(n63), "service name: 64 bytes refused");
        n63[63] = '\0';
        ok(wr_service_name_ok(n63), "service name: 63 bytes accepted");
        ok(wr_service_depend_parse("db=1", &len, &cond) == 0 && len == 2 &&
               cond == WR_DEPEND_HEALTHY,
           "depend: db=1");
        ok(wr_service_depend_parse("db=3", &len, &cond) < 0 &&
               wr_service_depend_parse("db", &len, &cond) < 0 &&
               wr_service_depend_parse("=1", &len, &cond) < 0 &&
               wr_service_depend_parse("db=11", &len, &cond) < 0 &&
               wr_service_depend_parse("DB=1", &len, &cond) < 0 &&
               wr_service_depend_parse("db=", &len, &cond) < 0,
           "depend: malformed entries refused");
    }

    /* SPAWN's SERVICE */
    {
        char *argv_min[] = {"true", NULL};
        struct wr_spawn sp = {.argv = argv_min, .uid = -1, .gid = -1, .service = "db"};
        struct wr_spawn sout;
        wr_spawn_encode(&b, 2, &sp);
        rc = wr_spawn_decode(b.data + 12, b.len - 12, &sout, &err);
        ok(rc == 0 && sout.service != NULL && strcmp(sout.service, "db") == 0,
           "spawn: service round trip");
        if (rc == 0)
            wr_spawn_fini(&sout);
        wr_buf_fini(&b);
    }
}

/* Decode `b` as a SERVICE payload and expect failure. */
static void service_rejects(struct wr_buf *b, const char *name)
{
    struct wr_service s;
    struct wr_err err = {0};
    int rc = wr_service_decode(b->data, b->len, &s, &err);

    ok(rc == -1 && err.kind == WR_EPROTO && s.name == NULL && s.sp.argv == NULL,
       "service rejects: %s", name);
    if (rc == 0)
        wr_service_fini(&s);
    wr_buf_fini(b);
}

/* A valid service payload to spoil: name a, argv true. */
static void svc_base(struct wr_buf *b, const char *name)
{
    wr_buf_init(b);
    if (name != NULL)
        wr_msg_put_str(b, WR_TAG_SERVICE, name);
    wr_msg_put_str(b, WR_TAG_ARGV, "true");
}

static void test_service_hostile(void)
{
    struct wr_buf b;
    struct wr_service s;
    struct wr_err err = {0};
    char dep[16];

    svc_base(&b, "a");
    ok(wr_service_decode(b.data, b.len, &s, &err) == 0, "service: the base decodes");
    wr_service_fini(&s);
    wr_buf_fini(&b);

    svc_base(&b, NULL);
    service_rejects(&b, "no name");
    svc_base(&b, "Web");
    service_rejects(&b, "uppercase name");
    svc_base(&b, "_web");
    service_rejects(&b, "name starting with _");
    svc_base(&b, "a");
    wr_msg_put_str(&b, WR_TAG_SERVICE, "b");
    service_rejects(&b, "two names");
    wr_buf_init(&b);
    wr_msg_put_str(&b, WR_TAG_SERVICE, "a");
    service_rejects(&b, "no argv");
    svc_base(&b, "a");
    wr_msg_put_u64(&b, WR_TAG_PTY, 1);
    service_rejects(&b, "a pty");
    svc_base(&b, "a");
    wr_msg_put_str(&b, WR_TAG_ROOT, "srv/a");
    service_rejects(&b, "a relative root");
    svc_base(&b, "a");
    wr_msg_put_str(&b, WR_TAG_ROOT, "/a");
    wr_msg_put_str(&b, WR_TAG_ROOT, "/b");
    service_rejects(&b, "two roots");
    svc_base(&b, "a");
    wr_msg_put_str(&b, WR_TAG_DEPEND, "db=3");
    service_rejects(&b, "a depend condition out of range");
    svc_base(&b, "a");
    wr_msg_put_str(&b, WR_TAG_DEPEND, "db");
    service_rejects(&b, "a depend without a condition");
    svc_base(&b, "a");
    for (int i = 0; i <= WR_SERVICE_DEPENDS_MAX; i++) {
        snprintf(dep, sizeof(dep), "s%d=0", i);
        wr_msg_put_str(&b, WR_TAG_DEPEND, dep);
    }
    service_rejects(&b, "more than 64 depends");
    svc_base(&b, "a");
    wr_msg_put_u64(&b, WR_TAG_RESTART, WR_RESTART_UNLESS_STOPPED + 1);
    service_rejects(&b, "restart out of range");
    svc_base(&b, "a");
    wr_msg_put_u64(&b, WR_TAG_STOP_SIGNAL, 0);
    service_rejects(&b, "stop signal 0");
    svc_base(&b, "a");
    wr_msg_put_u64(&b, WR_TAG_STOP_SIGNAL, 65);
    service_rejects(&b, "stop signal 65");
    svc_base(&b, "a");
    wr_msg_put_u64(&b, WR_TAG_HEALTH_INTERVAL_MS, (uint64_t)WR_SERVICE_MS_MAX + 1);
    service_rejects(&b, "an interval past WR_SERVICE_MS_MAX");
    svc_base(&b, "a");
    wr_msg_put_u64(&b, WR_TAG_HEALTH_RETRIES, 1);
    wr_msg_put_u64(&b, WR_TAG_HEALTH_RETRIES, 2);
    service_rejects(&b, "two retries");
    svc_base(&b, "a");
    wr_msg_put_str(&b, WR_TAG_HEALTH_RETRIES, "3");
    service_rejects(&b, "retries not 8 bytes");
    svc_base(&b, "a");
    wr_msg_put_bytes(&b, WR_TAG_HEALTH_ARGV, "t\0x", 3);
    service_rejects(&b, "a NUL in the health argv");
    svc_base(&b, "a");
    {
        uint8_t trunc[6] = {WR_TAG_DEPEND, 0, 9, 0, 0, 0};
        wr_buf_append(&b, trunc, sizeof(trunc));
    }
    service_rejects(&b, "a field running past the payload");

    /* SPAWN's SERVICE is a service name too */
    wr_buf_init(&b);
    wr_msg_put_str(&b, WR_TAG_ARGV, "true");
    wr_msg_put_str(&b, WR_TAG_SERVICE, "../x");
    spawn_rejects(&b, "a service that is not a name");
}

static void test_service_info(void)
{
    struct wr_service_info in = {.name = "db",
                                 .state = "restarting",
                                 .pid = 0,
                                 .restarts = 3,
                                 .has_exit = true,
                                 .exit_code = 1,
                                 .message = "exec `x`: No such file or directory"};
    struct wr_service_info out;
    struct wr_frame_hdr h;
    struct wr_err err = {0};
    struct wr_buf b;
    int rc;

    wr_buf_init(&b);
    wr_service_info_encode(&b, 4, &in);
    is_int(wr_frame_hdr_parse(b.data, &h, &err), 0, "service info: header parses");
    ok(h.type == WR_MSG_SERVICE_INFO && h.id == 4, "service info: header fields");
    rc = wr_service_info_decode(b.data + 12, h.len, &out, &err);
    is_int(rc, 0, "service info: decodes");
    if (rc == 0) {
        is_str(out.name, "db", "service info: name");
        is_str(out.state, "restarting", "service info: state");
        ok(out.pid == 0 && out.restarts == 3, "service info: pid, restarts");
        ok(out.has_exit && out.exit_code == 1 && out.signal == 0, "service info: exit code");
        is_str(out.message, "exec `x`: No such file or directory", "service info: message");
        wr_service_info_fini(&out);
    }
    wr_buf_fini(&b);

    in.signal = 9;
    in.pid = 42;
    in.message = NULL;
    wr_service_info_encode(&b, 4, &in);
    rc = wr_service_info_decode(b.data + 12, b.len - 12, &out, &err);
    ok(rc == 0 && out.has_exit && out.signal == 9 && out.pid == 42 && out.message == NULL,
       "service info: signal, no message");
    if (rc == 0)
        wr_service_info_fini(&out);
    wr_buf_fini(&b);

    in.has_exit = false;
    wr_service_info_encode(&b, 4, &in);
    rc = wr_service_info_decode(b.data + 12, b.len - 12, &out, &err);
    ok(rc == 0 && !out.has_exit, "service info: no exit yet");
    if (rc == 0)
        wr_service_info_fini(&out);
    wr_buf_fini(&b);

    /* hostile items */
    {
        static const struct {
            const char *what;
            const char *name, *state;
            int64_t pid, code, sig;
        } bad[] = {
            {"no name", NULL, "running", 1, -1, -1},
            {"no state", "db", NULL, 1, -1, -1},
            {"a state that is not a word", "db", "run ning", 1, -1, -1},
            {"an uppercase state", "db", "Running", 1, -1, -1},
            {"a name that is not a name", "../db", "running", 1, -1, -1},
            {"a negative pid", "db", "running", -1, -1, -1},
            {"a pid past INT32_MAX", "db", "running", (int64_t)INT32_MAX + 1, -1, -1},
            {"an exit code of 256", "db", "failed", 0, 256, -1},
            {"signal 0", "db", "failed", 0, -1, 0},
            {"both exit code and signal", "db", "failed", 0, 1, 9},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            wr_buf_init(&b);
            if (bad[i].name != NULL)
                wr_msg_put_str(&b, WR_TAG_SERVICE, bad[i].name);
            if (bad[i].state != NULL)
                wr_msg_put_str(&b, WR_TAG_STATE, bad[i].state);
            wr_msg_put_i64(&b, WR_TAG_PID, bad[i].pid);
            if (bad[i].code >= 0)
                wr_msg_put_i64(&b, WR_TAG_EXIT_CODE, bad[i].code);
            if (bad[i].sig >= 0)
                wr_msg_put_i64(&b, WR_TAG_SIGNAL, bad[i].sig);
            rc = wr_service_info_decode(b.data, b.len, &out, &err);
            ok(rc == -1 && err.kind == WR_EPROTO && out.name == NULL && out.state == NULL,
               "service info rejects: %s", bad[i].what);
            if (rc == 0)
                wr_service_info_fini(&out);
            wr_buf_fini(&b);
        }
    }
}

int main(void)
{
    test_layout();
    test_buf();
    test_raw_and_ok();
    test_spawn();
    test_proc_info();
    test_stat();
    test_file_req();
    test_exit_error();
    test_reader();
    test_tlv();
    test_spawn_hostile();
    test_spawn_cgroup_hostile();
    test_watch_event();
    test_port_list();
    test_service();
    test_service_hostile();
    test_service_info();
    return done();
}
