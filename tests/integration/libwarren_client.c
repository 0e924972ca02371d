/* SPDX-License-Identifier: Apache-2.0 */
/* A program written against libwarren's public header only (built by test_libwarren.py with
 * pkg-config): `libwarren_client SCENARIO URL KEY` runs the scenario against a real warrend and
 * prints one "name value" line per fact, which the test checks. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <warren.h>

static void fact(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One line: a newline in the value is written as the two characters \n. */
static void fact(const char *name, const char *fmt, ...)
{
    char buf[16384];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    printf("%s ", name);
    for (const char *p = buf; *p; p++)
        fputs(*p == '\n' ? "\\n" : (char[]){*p, 0}, stdout);
    printf("\n");
    fflush(stdout);
}

static void fact_err(const char *name, const warren_error *e)
{
    fact(name, "code=%s api_code=%s status=%d errno=%d message=%s", warren_strcode(e->code),
         e->api_code[0] ? e->api_code : "-", e->status, e->sys_errno, e->message);
}

#define CHECK(what, call)                                                                          \
    do {                                                                                           \
        if ((call) < 0) {                                                                          \
            fact_err("FAILED " what, &err);                                                        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Output events in order, as one string: "o:<bytes>" and "e:<bytes>" pieces joined by '|'. */
struct events {
    char log[8192];
    long long pid;
    int exits;
    const char *input; /* for on_stdin: given in pieces of 3 bytes */
    size_t input_off;
};

static void add(struct events *ev, char tag, const void *data, size_t len)
{
    size_t n = strlen(ev->log);
    snprintf(ev->log + n, sizeof(ev->log) - n, "%s%c:%.*s", n ? "|" : "", tag, (int)len,
             (const char *)data);
}

static int on_out(const void *data, size_t len, void *ctx)
{
    add(ctx, 'o', data, len);
    return 0;
}

static int on_err(const void *data, size_t len, void *ctx)
{
    add(ctx, 'e', data, len);
    return 0;
}

static void on_start(long long pid, void *ctx)
{
    ((struct events *)ctx)->pid = pid;
}

static void on_exit_cb(const warren_exit *how, void *ctx)
{
    ((struct events *)ctx)->exits++;
}

static long feed(void *buf, size_t cap, int stop_fd, void *ctx)
{
    struct events *ev = ctx;
    size_t left = strlen(ev->input) - ev->input_off, n = left < 3 ? left : 3;

    (void)stop_fd;
    if (n > cap)
        n = cap;
    memcpy(buf, ev->input + ev->input_off, n);
    ev->input_off += n;
    return (long)n;
}

static int stop_early(const void *data, size_t len, void *ctx)
{
    return -1;
}

/* A file's content, gathered by the streaming read. */
static int gather(const void *data, size_t len, void *ctx)
{
    char *s = ctx;
    size_t n = strlen(s);
    snprintf(s + n, 4096 - n, "%.*s", (int)len, (const char *)data);
    return 0;
}

struct chunks {
    int left;
};

static long numbers(void *buf, size_t cap, int stop_fd, void *ctx)
{
    struct chunks *c = ctx;
    if (c->left == 0)
        return 0;
    c->left--;
    return snprintf(buf, cap, "line %d\n", 3 - c->left);
}

static void exec_scenarios(warren *w, const char *id)
{
    warren_error err;
    warren_exit how;

    /* stdout and stderr streamed in order, the exit status. */
    {
        const char *cmd[] = {
            "sh", "-c", "echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three; exit 3", NULL};
        struct events ev = {{0}};
        warren_exec_opts o = {.argv = cmd,
                              .on_stdout = on_out,
                              .on_stderr = on_err,
                              .on_start = on_start,
                              .on_exit = on_exit_cb,
                              .ctx = &ev};
        CHECK("exec", warren_exec(w, id, &o, &how, &err));
        fact("exec_log", "%s", ev.log);
        fact("exec_exit", "%d signal=%d timed_out=%d", how.exit_code, how.signal, how.timed_out);
        fact("exec_pid", "%d", ev.pid > 0);
        fact("exec_on_exit", "%d", ev.exits);
    }
    /* Input all at once, and input streamed from a callback on the library's thread. */
    {
        struct events ev = {{0}};
        warren_exec_opts o = {.shell = "tr a-z A-Z",
                              .stdin_data = "abc\n",
                              .stdin_len = 4,
                              .on_stdout = on_out,
                              .ctx = &ev};
        CHECK("exec stdin_data", warren_exec(w, id, &o, &how, &err));
        fact("stdin_data", "%s exit=%d", ev.log, how.exit_code);
    }
    {
        struct events ev = {.input = "streamed input\n"};
        const char *cmd[] = {"cat", NULL};
        warren_exec_opts o = {.argv = cmd, .on_stdin = feed, .on_stdout = on_out, .ctx = &ev};
        CHECK("exec on_stdin", warren_exec(w, id, &o, &how, &err));
        /* The pieces may be joined on the way; keep the bytes only. */
        char bytes[256] = "";
        for (char *p = ev.log; *p;) {
            char *next = strchr(p, '|');
            size_t n = next ? (size_t)(next - p) : strlen(p);
            strncat(bytes, p + 2, n - 2);
            p = next ? next + 1 : p + n;
        }
        fact("stdin_stream", "%s", bytes);
        fact("stdin_exit", "%d", how.exit_code);
    }
    /* A signal, a timeout, the environment and cwd. */
    {
        const char *cmd[] = {"sh", "-c", "kill -TERM $$", NULL};
        warren_exec_opts o = {.argv = cmd};
        CHECK("exec signal", warren_exec(w, id, &o, &how, &err));
        fact("killed", "exit=%d signal=%d", how.exit_code, how.signal);
        const char *slow[] = {"sleep", "30", NULL};
        warren_exec_opts t = {.argv = slow, .timeout_s = 1};
        CHECK("exec timeout", warren_exec(w, id, &t, &how, &err));
        fact("timeout", "timed_out=%d", how.timed_out);
        const char *env[] = {"FOO=bar baz", NULL};
        struct events ev = {{0}};
        warren_exec_opts e = {.shell = "echo \"$FOO\" $(pwd)",
                              .env = env,
                              .cwd = "/tmp",
                              .on_stdout = on_out,
                              .ctx = &ev};
        CHECK("exec env", warren_exec(w, id, &e, &how, &err));
        fact("env_cwd", "%s", ev.log);
    }
    /* A callback that stops waiting. */
    {
        const char *cmd[] = {"echo", "x", NULL};
        warren_exec_opts o = {.argv = cmd, .on_stdout = stop_early};
        int r = warren_exec(w, id, &o, &how, &err);
        fact("stopped", "r=%d code=%s", r, warren_strcode(err.code));
    }
}

/* One piece, then an error: the write is abandoned. */
static long half_then_fail(void *buf, size_t cap, int stop_fd, void *ctx)
{
    int *calls = ctx;
    if ((*calls)++ > 0)
        return -1;
    memcpy(buf, "partial", 7);
    return 7;
}

static void file_scenarios(warren *w, const char *id)
{
    warren_error err;
    warren_file_info st, *ents = NULL;
    char got[4096] = "";
    void *data;
    size_t len;
    long n;

    CHECK("mkdir", warren_file_mkdir(w, id, "/tmp/lw/sub", 0, &err));
    CHECK("write_buf",
          warren_file_write_buf(w, id, "/tmp/lw/a.txt", 0600, "hello file\n", 11, &err));
    struct chunks c = {3};
    CHECK("write stream", warren_file_write(w, id, "/tmp/lw/sub/b.txt", 0, numbers, &c, &err));
    CHECK("read stream", warren_file_read(w, id, "/tmp/lw/sub/b.txt", gather, got, &err));
    fact("read_stream", "%s", got);
    CHECK("read_buf", warren_file_read_buf(w, id, "/tmp/lw/a.txt", &data, &len, &err));
    fact("read_buf", "%zu %s", len, (char *)data);
    warren_free(data);
    CHECK("stat", warren_file_stat(w, id, "/tmp/lw/a.txt", &st, &err));
    fact("stat", "name=%s path=%s type=%d size=%lld mode=%o", st.name, st.path, (int)st.type,
         (long long)st.size, st.mode);
    warren_file_info_fini(&st);
    n = warren_file_list(w, id, "/tmp/lw", 2, &ents, &err);
    CHECK("list", n);
    for (long i = 0; i < n; i++)
        fact("list", "%s type=%d", ents[i].path, (int)ents[i].type);
    warren_file_list_free(ents, (size_t)n);
    {
        int calls = 0;
        int r = warren_file_write(w, id, "/tmp/lw/a.txt", 0, half_then_fail, &calls, &err);
        fact("abandoned", "r=%d code=%s", r, warren_strcode(err.code));
        CHECK("read after abandon",
              warren_file_read_buf(w, id, "/tmp/lw/a.txt", &data, &len, &err));
        fact("after_abandon", "%s", (char *)data);
        warren_free(data);
    }
    CHECK("remove", warren_file_remove(w, id, "/tmp/lw/a.txt", 0, &err));
    if (warren_file_stat(w, id, "/tmp/lw/a.txt", &st, &err) < 0)
        fact_err("stat_removed", &err);
    if (warren_file_remove(w, id, "/tmp/lw", 0, &err) < 0)
        fact_err("remove_nonempty", &err);
    CHECK("remove recursive", warren_file_remove(w, id, "/tmp/lw", 1, &err));
    if (warren_file_read_buf(w, id, "relative", &data, &len, &err) < 0)
        fact_err("relative_path", &err);
}

static int lifecycle(warren *w)
{
    const char *meta[] = {"suite=libwarren", NULL}, *env[] = {"LW=1", NULL};
    warren_create_opts co = {
        .template_name = "base", .timeout_s = 300, .metadata = meta, .env = env, .memory_mb = 256};
    warren_list_opts lo = {.metadata = meta};
    warren_sandbox *sb, *got, *st;
    warren_sandbox_list *l;
    warren_snapshot *snap;
    warren_error err;
    warren_exit how;
    char id[80];

    CHECK("create", warren_create(w, &co, &sb, &err));
    snprintf(id, sizeof(id), "%s", warren_sandbox_id(sb));
    fact("created", "%s state=%s template=%s memory=%lld meta=%s", id, warren_sandbox_state(sb),
         warren_sandbox_template(sb), (long long)warren_sandbox_memory_mb(sb),
         warren_sandbox_metadata(sb, "suite"));
    fact("json_has_id", "%d", strstr(warren_sandbox_json(sb), id) != NULL);
    CHECK("get", warren_get(w, id, &got, &err));
    fact("got", "%s %s", warren_sandbox_id(got), warren_sandbox_state(got));
    warren_sandbox_free(got);
    CHECK("list", warren_list(w, &lo, &l, &err));
    fact("listed", "%zu first=%s", warren_sandbox_list_len(l),
         warren_sandbox_list_len(l) ? warren_sandbox_id(warren_sandbox_list_at(l, 0)) : "-");
    warren_sandbox_list_free(l);

    exec_scenarios(w, id);
    file_scenarios(w, id);

    /* Pause in memory keeps a process; resume goes on. */
    {
        const char *bg[] = {"sh", "-c", "echo kept > /tmp/state", NULL};
        warren_exec_opts o = {.argv = bg};
        CHECK("exec before pause", warren_exec(w, id, &o, &how, &err));
    }
    CHECK("pause", warren_pause(w, id, WARREN_PAUSE_MEMORY, &st, &err));
    fact("paused", "%s", warren_sandbox_state(st));
    warren_sandbox_free(st);
    {
        const char *cmd[] = {"true", NULL};
        warren_exec_opts o = {.argv = cmd};
        if (warren_exec(w, id, &o, &how, &err) < 0)
            fact_err("exec_paused", &err);
    }
    CHECK("resume", warren_resume(w, id, 0, &st, &err));
    fact("resumed", "%s", warren_sandbox_state(st));
    warren_sandbox_free(st);

    /* Snapshot, a sandbox from it, a fork. */
    CHECK("snapshot", warren_snapshot_create(w, id, "lw-snap", &snap, &err));
    fact("snapshot", "%s name=%s", warren_snapshot_id(snap) ? "id" : "-",
         warren_snapshot_name(snap));
    {
        warren_create_opts from = {.template_name = "lw-snap"};
        warren_sandbox *child;
        void *data;
        size_t len;
        CHECK("create from snapshot", warren_create(w, &from, &child, &err));
        CHECK("read in child",
              warren_file_read_buf(w, warren_sandbox_id(child), "/tmp/state", &data, &len, &err));
        fact("from_snapshot", "%s", (char *)data);
        warren_free(data);
        CHECK("delete child", warren_delete(w, warren_sandbox_id(child), &err));
        warren_sandbox_free(child);
    }
    CHECK("snapshot delete", warren_snapshot_delete(w, "lw-snap", &err));
    warren_snapshot_free(snap);
    {
        warren_fork_opts fo = {.count = 2};
        CHECK("fork", warren_fork(w, id, &fo, &l, &err));
        fact("forked", "%zu errors=%zu", warren_sandbox_list_len(l),
             warren_sandbox_list_nerrors(l));
        for (size_t i = 0; i < warren_sandbox_list_len(l); i++) {
            const char *cid = warren_sandbox_id(warren_sandbox_list_at(l, i));
            void *data;
            size_t len;
            CHECK("read in fork", warren_file_read_buf(w, cid, "/tmp/state", &data, &len, &err));
            fact("fork_file", "%s", (char *)data);
            warren_free(data);
            CHECK("delete fork", warren_delete(w, cid, &err));
        }
        warren_sandbox_list_free(l);
    }

    CHECK("delete", warren_delete(w, id, &err));
    fact("deleted", "%s", id);
    if (warren_get(w, id, &got, &err) < 0)
        fact_err("get_deleted", &err);
    if (warren_delete(w, "no-such-sandbox", &err) < 0)
        fact_err("delete_unknown", &err);
    {
        const char *cmd[] = {"true", NULL};
        warren_exec_opts o = {.argv = cmd};
        if (warren_exec(w, "no-such-sandbox", &o, &how, &err) < 0)
            fact_err("exec_unknown", &err);
    }
    {
        warren_create_opts bad = {.template_name = "no-such-template"};
        if (warren_create(w, &bad, &got, &err) < 0)
            fact_err("create_unknown_template", &err);
    }
    warren_sandbox_free(sb);
    return 0;
}

int main(int argc, char **argv)
{
    warren *w;
    warren_error err;
    warren_sandbox_list *l;

    if (argc != 4) {
        fprintf(stderr, "usage: libwarren_client lifecycle|auth URL KEY\n");
        return 2;
    }
    signal(SIGPIPE, SIG_DFL); /* the library must never need SIGPIPE ignored */
    fact("version", "%s", warren_version());
    if (warren_connect(argv[2], argv[3], &w, &err) < 0) {
        fact_err("connect", &err);
        return 1;
    }
    fact("endpoint", "%s", warren_endpoint(w));
    if (strcmp(argv[1], "lifecycle") == 0) {
        lifecycle(w);
    } else if (strcmp(argv[1], "auth") == 0) {
        if (warren_list(w, NULL, &l, &err) < 0) {
            fact_err("list", &err);
        } else {
            fact("list", "%zu", warren_sandbox_list_len(l));
            warren_sandbox_list_free(l);
        }
    }
    warren_close(w);
    return 0;
}
