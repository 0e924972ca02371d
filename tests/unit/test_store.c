/* SPDX-License-Identifier: Apache-2.0 */
/* The SQLite store: schema and migrations, API keys, sandbox records, list filters and
 * pagination, and that committed rows survive the writer being SIGKILLed. Uses store_int.h to
 * read pragmas and run migrations directly. */
#include "../../src/store/store.h"
#include "../../src/store/store_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/util/xalloc.h"
#include "tap.h"

static char dir[] = "/tmp/test_store.XXXXXX";

/* strcmp that a failed call (NULL field) cannot crash. */
static bool streq(const char *a, const char *b)
{
    return a != NULL && b != NULL && strcmp(a, b) == 0;
}

static char *path_in(const char *name)
{
    return xasprintf("%s/%s", dir, name);
}

/* First column of the first row of `sql`, as a string ("" if no row or NULL). */
static char *q1(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    char *out;

    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return xstrdup("(prepare failed)");
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != NULL)
        out = xstrdup((const char *)sqlite3_column_text(st, 0));
    else
        out = xstrdup("");
    sqlite3_finalize(st);
    return out;
}

static bool q1_is(sqlite3 *db, const char *sql, const char *want)
{
    char *got = q1(db, sql);
    bool same = streq(got, want);
    if (!same)
        printf("#   %s: got \"%s\", want \"%s\"\n", sql, got, want);
    free(got);
    return same;
}

static struct wr_sandbox_rec rec(const char *id, const char *team, const char *idem,
                                 const char *meta, const char *state)
{
    struct wr_sandbox_rec r = {
        .id = (char *)id,
        .team = (char *)team,
        .template_name = (char *)"base",
        .state = WR_SB_ERROR,
        .cpu_millis = 500,
        .memory_bytes = 256u << 20,
        .created_ms = 1700000000000,
        .deadline_ms = 1700000300000,
        .metadata_json = (char *)meta,
        .env_json = (char *)"{\"A\":\"1\"}",
        .idem_key = (char *)idem,
    };
    if (wr_sb_state_parse(state, &r.state) < 0)
        abort();
    return r;
}

static int insert(struct wr_store *s, const char *id, const char *team, const char *idem,
                  const char *meta, const char *state, struct wr_err *err)
{
    struct wr_sandbox_rec r = rec(id, team, idem, meta, state);
    return wr_store_sandbox_insert(s, &r, err);
}

static void free_recs(struct wr_sandbox_rec *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        wr_sandbox_rec_fini(&v[i]);
    free(v);
}

/* Number of rows a filter returns (-1 on error). */
static long count_list(struct wr_store *s, const struct wr_sandbox_filter *f)
{
    struct wr_sandbox_rec *v = NULL;
    struct wr_err err;
    size_t n = 0;

    if (wr_store_sandbox_list(s, f, &v, &n, &err) < 0) {
        printf("#   list: %s\n", err.msg);
        return -1;
    }
    free_recs(v, n);
    return (long)n;
}

/* Ids a filter returns, comma-joined. */
static char *list_ids(struct wr_store *s, const struct wr_sandbox_filter *f)
{
    struct wr_sandbox_rec *v = NULL;
    struct wr_err err;
    size_t n = 0, len = 1;
    char *out;

    if (wr_store_sandbox_list(s, f, &v, &n, &err) < 0)
        return xasprintf("error: %s", err.msg);
    for (size_t i = 0; i < n; i++)
        len += strlen(v[i].id) + 1;
    out = xcalloc(1, len);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            strcat(out, ",");
        strcat(out, v[i].id);
    }
    free_recs(v, n);
    return out;
}

static bool ids_are(struct wr_store *s, const struct wr_sandbox_filter *f, const char *want)
{
    char *got = list_ids(s, f);
    bool same = streq(got, want);
    if (!same)
        printf("#   got \"%s\", want \"%s\"\n", got, want);
    free(got);
    return same;
}

static bool no_busy_statements(struct wr_store *s)
{
    for (sqlite3_stmt *st = sqlite3_next_stmt(s->db, NULL); st; st = sqlite3_next_stmt(s->db, st))
        if (sqlite3_stmt_busy(st)) {
            printf("#   busy: %s\n", sqlite3_sql(st));
            return false;
        }
    return true;
}

static void test_open(void)
{
    char *path = path_in("a.db"), *wal = path_in("a.db-wal");
    struct wr_store *s = NULL;
    struct wr_err err;
    struct stat sb;
    int version = -1;

    ok(wr_store_open(path, &s, &err) == 0, "open a fresh database");
    if (s == NULL) {
        printf("#   %s\n", err.msg);
        exit(1);
    }
    ok(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600, "database file is 0600");
    ok(q1_is(s->db, "PRAGMA journal_mode", "wal"), "journal_mode is WAL");
    ok(q1_is(s->db, "PRAGMA synchronous", "1"), "synchronous is NORMAL");
    ok(q1_is(s->db, "PRAGMA foreign_keys", "1"), "foreign keys are on");
    ok(wr__store_schema_version(s->db, &version, &err) == 0 && version == (int)wr__n_migrations,
       "schema at the last migration (%d)", version);
    ok(insert(s, "sb-open", "t", NULL, NULL, "running", &err) == 0, "a first write");
    ok(stat(wal, &sb) == 0 && sb.st_size > 0, "the write went to the WAL file");
    {
        /* warrend forks sandboxes: the database must not leak into them. */
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        int db_fds = 0, inheritable = 0;
        while (d != NULL && (de = readdir(d)) != NULL) {
            char link[300], target[512];
            ssize_t n;
            int fd = atoi(de->d_name);
            snprintf(link, sizeof(link), "/proc/self/fd/%s", de->d_name);
            n = readlink(link, target, sizeof(target) - 1);
            if (n <= 0 || fd == dirfd(d))
                continue;
            target[n] = '\0';
            if (strncmp(target, dir, strlen(dir)) != 0)
                continue;
            db_fds++;
            if (!(fcntl(fd, F_GETFD) & FD_CLOEXEC))
                inheritable++;
        }
        if (d != NULL)
            closedir(d);
        ok(db_fds >= 2 && inheritable == 0, "database fds (%d) are close-on-exec", db_fds);
    }
    wr_store_close(s);
    ok(stat(wal, &sb) != 0, "close checkpoints and removes the WAL");

    s = NULL;
    ok(wr_store_open(path, &s, &err) == 0, "reopen");
    {
        char *n = xasprintf("%zu", wr__n_migrations);
        ok(q1_is(s->db, "SELECT count(*) FROM schema_version", n),
           "migrations are not applied twice");
        free(n);
    }
    {
        struct wr_sandbox_rec r = {0};
        ok(wr_store_sandbox_get(s, NULL, "sb-open", &r, &err) == 0, "data kept across reopen");
        wr_sandbox_rec_fini(&r);
    }
    /* A database written by a newer warrend must not be opened by this one. */
    ok(sqlite3_exec(s->db, "INSERT INTO schema_version VALUES (999, 0)", NULL, NULL, NULL) ==
           SQLITE_OK,
       "pretend a newer build migrated");
    wr_store_close(s);
    s = NULL;
    ok(wr_store_open(path, &s, &err) < 0 && err.kind == WR_EUNSUPPORTED && s == NULL,
       "a newer schema is refused: %s", err.msg);
    free(path);
    free(wal);
}

static void test_migrate(void)
{
    char *path = path_in("m.db");
    sqlite3 *db = NULL;
    struct wr_err err;
    int version = -1;
    const struct wr__migration bad[] = {
        wr__migrations[0],
        {2, "CREATE TABLE half (x); SELECT no_such_function();"},
    };
    const struct wr__migration misnumbered[] = {{2, "SELECT 1"}};

    ok(sqlite3_open(path, &db) == SQLITE_OK, "raw open");
    ok(wr__store_migrate(db, bad, 2, &err) < 0 && err.kind == WR_ESYS,
       "a failing migration fails: %s", err.msg);
    ok(q1_is(db, "SELECT count(*) FROM sqlite_master WHERE name IN ('teams', 'half')", "0"),
       "and leaves nothing behind, including earlier pending migrations");
    ok(sqlite3_get_autocommit(db), "no transaction left open");
    ok(wr__store_migrate(db, misnumbered, 1, &err) < 0 && err.kind == WR_EINTERNAL,
       "a misnumbered list is a bug");
    ok(wr__store_migrate(db, wr__migrations, wr__n_migrations, &err) == 0 &&
           wr__store_schema_version(db, &version, &err) == 0 && version == (int)wr__n_migrations,
       "the real list applies");
    ok(wr__store_migrate(db, wr__migrations, wr__n_migrations, &err) == 0 &&
           wr__store_schema_version(db, &version, &err) == 0 && version == (int)wr__n_migrations &&
           q1_is(db, "SELECT count(*) = max(version) FROM schema_version", "1"),
       "and again is a no-op");
    sqlite3_close(db);
    free(path);
}

/* Migration 2 (pause, timeout policy) on a database written by version 1: the rows survive,
 * get the default policy and their timeout back from created/deadline, and are not paused. */
static void test_migrate_2(void)
{
    char *path = path_in("m2.db");
    struct wr_sandbox_rec got = {0};
    struct wr_store *s = NULL;
    sqlite3 *db = NULL;
    struct wr_err err;
    int version = -1;

    ok(sqlite3_open(path, &db) == SQLITE_OK && wr__store_migrate(db, wr__migrations, 1, &err) == 0,
       "a version 1 database");
    ok(sqlite3_exec(db,
                    "INSERT INTO sandboxes (id, seq, team, template_name, state, cpu_millis,"
                    " memory_bytes, created_ms, deadline_ms, init_pid, uid_base) VALUES"
                    " ('old-1', 1, 't', 'base', 'running', 1000, 1024, 1000, 301000, 77, 88),"
                    " ('old-2', 2, 't', 'base', 'stopped', 1000, 1024, 1000, 1500, 0, 0);"
                    "UPDATE sandbox_seq SET last = 2",
                    NULL, NULL, NULL) == SQLITE_OK,
       "with two sandboxes");
    sqlite3_close(db);
    ok(wr_store_open(path, &s, &err) == 0 && wr__store_schema_version(s->db, &version, &err) == 0 &&
           version == (int)wr__n_migrations,
       "open migrates it to the latest version");
    if (s == NULL) {
        free(path);
        return;
    }
    ok(wr_store_sandbox_get(s, NULL, "old-1", &got, &err) == 0 && got.state == WR_SB_RUNNING &&
           got.init_pid == 77 && got.uid_base == 88 && got.deadline_ms == 301000,
       "a running row survives");
    is_int(got.on_timeout, WR_SB_TIMEOUT_KILL, "old rows are killed at their deadline");
    is_int(got.timeout_s, 300, "timeout from created and deadline");
    ok(got.paused_mode == WR_SB_PAUSED_NONE && got.remaining_ms == -1, "not paused");
    is_str(got.runtime, "ns", "old rows ran on namespaces");
    wr_sandbox_rec_fini(&got);
    ok(wr_store_sandbox_get(s, NULL, "old-2", &got, &err) == 0 && got.timeout_s == 1,
       "a sub-second span rounds up to 1 s (got %u)", got.timeout_s);
    wr_sandbox_rec_fini(&got);
    ok(q1_is(s->db, "SELECT count(*) FROM sandboxes WHERE seq IN (1, 2)", "2"), "seqs kept");
    wr_store_close(s);
    free(path);
}

/* Migration 8 (template names per team) on a database written by version 7: the admin team's
 * templates become shared, every other team's its own; then two teams may each have a name. */
static void test_migrate_8(void)
{
    char *path = path_in("m8.db");
    struct wr_image_rec got = {0}, mine = {0};
    struct wr_store *s = NULL;
    sqlite3 *db = NULL;
    struct wr_err err;

    ok(sqlite3_open(path, &db) == SQLITE_OK && wr__store_migrate(db, wr__migrations, 7, &err) == 0,
       "a version 7 database");
    ok(sqlite3_exec(db,
                    "INSERT INTO images (id, kind, name, team, layers_json, created_ms) VALUES"
                    " ('tpl-pub', 'template', 'pub', 'admin', '[]', 1),"
                    " ('tpl-app', 'template', 'app', 'team-a', '[]', 2)",
                    NULL, NULL, NULL) == SQLITE_OK,
       "with an admin's template and a team's");
    sqlite3_close(db);
    ok(wr_store_open(path, &s, &err) == 0, "open migrates it");
    if (s == NULL) {
        free(path);
        return;
    }
    ok(wr_store_image_get_shared(s, "pub", &got, &err) == 0 && got.shared, "the admin's is shared");
    wr_image_rec_fini(&got);
    ok(wr_store_image_get_shared(s, "app", &got, &err) < 0 && err.kind == WR_ENOTFOUND,
       "the team's is not");
    ok(wr_store_image_get(s, "team-b", "app", &got, &err) < 0 && err.kind == WR_ENOTFOUND,
       "another team does not see it");
    ok(wr_store_image_get(s, "team-a", "app", &got, &err) == 0 && !got.shared &&
           streq(got.id, "tpl-app"),
       "its team does");
    wr_image_rec_fini(&got);
    mine = (struct wr_image_rec){.id = "tpl-b-app",
                                 .kind = "template",
                                 .name = "app",
                                 .team = "team-b",
                                 .layers_json = "[]"};
    ok(wr_store_image_insert(s, &mine, &err) == 0, "another team makes an `app` of its own");
    mine.id = "tpl-b-app2";
    ok(wr_store_image_insert(s, &mine, &err) < 0 && err.kind == WR_ECONFLICT, "but not two: %s",
       err.msg);
    mine = (struct wr_image_rec){.id = "tpl-pub2",
                                 .kind = "template",
                                 .name = "pub",
                                 .team = "team-c",
                                 .layers_json = "[]",
                                 .shared = true};
    ok(wr_store_image_insert(s, &mine, &err) < 0 && err.kind == WR_ECONFLICT,
       "nor a second shared `pub`");
    wr_store_close(s);
    free(path);
}

static void sha256_hex(const char *s, char out[65])
{
    unsigned char md[32];
    unsigned int n = 0;
    EVP_Digest(s, strlen(s), md, &n, EVP_sha256(), NULL);
    for (unsigned i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static void test_keys(struct wr_store *s)
{
    struct wr_key_info a1 = {0}, a2 = {0}, b1 = {0}, got = {0};
    char *sa1 = NULL, *sa2 = NULL, *sb1 = NULL, *sx = NULL;
    struct wr_key_info *list = NULL;
    struct wr_err err;
    size_t n = 0;
    int64_t count = -1;

    ok(wr_store_key_create(s, "team-a", "ci", true, &sa1, &a1, &err) == 0, "create admin key");
    ok(wr_store_key_create(s, "team-a", "laptop", false, &sa2, &a2, &err) == 0, "second key");
    ok(wr_store_key_create(s, "team-b", "b", false, &sb1, &b1, &err) == 0, "other team's key");
    ok(wr_store_key_create(s, "", "x", false, &sx, &got, &err) < 0 && err.kind == WR_EINVAL,
       "empty team refused");
    if (sa1 == NULL || sa2 == NULL || sb1 == NULL) {
        ok(0, "cannot test keys further: %s", err.msg);
        return;
    }
    ok(sa1 && strlen(sa1) == 67 && strncmp(sa1, "wr_", 3) == 0 &&
           strspn(sa1 + 3, "0123456789abcdef") == 64,
       "secret is wr_ + 64 hex");
    ok(a1.id && strlen(a1.id) == 18 && strncmp(a1.id, "k_", 2) == 0 &&
           strspn(a1.id + 2, "0123456789abcdef") == 16,
       "key id is k_ + 16 hex");
    ok(!streq(sa1, sa2) && !streq(a1.id, a2.id), "secrets and ids differ");
    is_str(a1.team, "team-a", "info team");
    is_str(a1.name, "ci", "info name");
    ok(a1.admin && !a2.admin && a1.created_ms > 1600000000000, "info admin and created_ms");
    {
        char want[65], *sql = xasprintf("SELECT hash FROM api_keys WHERE id = '%s'", a1.id);
        sha256_hex(sa1, want);
        ok(q1_is(s->db, sql, want), "only the SHA-256 of the secret is stored");
        free(sql);
    }

    ok(wr_store_key_lookup(s, sa1, &got, &err) == 0 && streq(got.id, a1.id) &&
           streq(got.team, "team-a") && got.admin && streq(got.name, "ci"),
       "lookup finds the key");
    wr_key_info_fini(&got);
    ok(wr_store_key_lookup(s, sb1, &got, &err) == 0 && streq(got.team, "team-b") && !got.admin,
       "lookup of the other team's key");
    wr_key_info_fini(&got);

    {
        char *wrong = xstrdup(sa1), *upper = xstrdup(sa1), *longer = xasprintf("%s0", sa1);
        char *prefix = xstrdup(sa1), *shorter = xstrndup(sa1, 66), *nonhex = xstrdup(sa1);
        const char *bad[] = {wrong, upper, longer, prefix, shorter, nonhex, "", "wr_", "wr_0"};
        bool all_notfound = true, same_msg = true;
        char first[sizeof(err.msg)] = "";

        wrong[66] = wrong[66] == '0' ? '1' : '0';
        for (char *p = upper + 3; *p; p++)
            if (*p >= 'a' && *p <= 'f')
                *p = (char)(*p - 'a' + 'A');
        prefix[0] = 'x';
        nonhex[10] = 'g';
        for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++) {
            memset(&err, 0, sizeof(err));
            if (wr_store_key_lookup(s, bad[i], &got, &err) == 0 || err.kind != WR_ENOTFOUND) {
                printf("#   secret %zu: kind %d\n", i, err.kind);
                all_notfound = false;
                wr_key_info_fini(&got);
            }
            if (i == 0)
                memcpy(first, err.msg, sizeof(first));
            else if (!streq(first, err.msg))
                same_msg = false;
        }
        ok(all_notfound, "wrong and malformed secrets are not found");
        ok(same_msg && sa1 && strstr(first, sa1 + 3) == NULL,
           "with one message that names no part of the secret (%s)", first);
        ok(wr_store_key_lookup(s, NULL, &got, &err) < 0 && err.kind == WR_ENOTFOUND,
           "NULL secret is not found");
        free(wrong);
        free(upper);
        free(longer);
        free(prefix);
        free(shorter);
        free(nonhex);
    }

    ok(wr_store_key_list(s, "team-a", &list, &n, &err) == 0 && n == 2, "team-a has 2 keys");
    if (n == 2)
        ok(streq(list[0].id, a1.id) && streq(list[1].id, a2.id) && streq(list[1].name, "laptop"),
           "listed in creation order");
    for (size_t i = 0; i < n; i++)
        wr_key_info_fini(&list[i]);
    free(list);
    ok(wr_store_key_list(s, NULL, &list, &n, &err) == 0 && n == 3, "3 keys in all");
    for (size_t i = 0; i < n; i++)
        wr_key_info_fini(&list[i]);
    free(list);
    ok(wr_store_key_list(s, "nobody", &list, &n, &err) == 0 && n == 0, "no keys for unknown team");
    free(list);
    ok(wr_store_key_count(s, &count, &err) == 0 && count == 3, "count is 3");

    ok(wr_store_key_delete(s, "team-b", a2.id, &err) < 0 && err.kind == WR_ENOTFOUND,
       "cannot delete another team's key");
    ok(wr_store_key_delete(s, "team-a", a2.id, &err) == 0, "delete own key");
    ok(wr_store_key_lookup(s, sa2, &got, &err) < 0 && err.kind == WR_ENOTFOUND,
       "deleted key no longer authenticates");
    ok(wr_store_key_delete(s, NULL, a2.id, &err) < 0 && err.kind == WR_ENOTFOUND,
       "deleting twice is not found");
    ok(wr_store_key_delete(s, NULL, b1.id, &err) == 0, "delete any team's key with team NULL");
    ok(wr_store_key_count(s, &count, &err) == 0 && count == 1, "count is 1");
    ok(q1_is(s->db, "SELECT count(*) FROM teams", "2"), "teams are kept, once each");
    {
        /* Fail the second statement of key_create's transaction: the team row of the first must
         * roll back with it. */
        char *sec = NULL;
        ok(sqlite3_exec(s->db,
                        "CREATE TEMP TRIGGER fail_key BEFORE INSERT ON api_keys"
                        " BEGIN SELECT RAISE(ABORT, 'injected'); END",
                        NULL, NULL, NULL) == SQLITE_OK &&
               wr_store_key_create(s, "ghost", "g", false, &sec, &got, &err) < 0 && sec == NULL,
           "key_create fails midway: %s", err.msg);
        ok(sqlite3_get_autocommit(s->db), "its transaction is closed");
        ok(q1_is(s->db, "SELECT count(*) FROM teams WHERE name = 'ghost'", "0"),
           "the team it created is rolled back");
        ok(sqlite3_exec(s->db, "DROP TRIGGER temp.fail_key", NULL, NULL, NULL) == SQLITE_OK,
           "remove the trigger");
    }
    ok(no_busy_statements(s), "no statement left running");

    free(sa1);
    free(sa2);
    free(sb1);
    wr_key_info_fini(&a1);
    wr_key_info_fini(&a2);
    wr_key_info_fini(&b1);
}

static void test_sandboxes(struct wr_store *s)
{
    struct wr_sandbox_rec r = rec("sb-1", "team-a", "idem-1", "{\"k\":\"v\"}", "creating"), got;
    struct wr_err err;

    r.reason = NULL;
    r.memory_bytes = (1ull << 63) + 5;
    r.uid_base = 100000;
    ok(wr_store_sandbox_insert(s, &r, &err) == 0 && r.seq > 0, "insert (seq %lld)",
       (long long)r.seq);

    memset(&got, 0, sizeof(got));
    ok(wr_store_sandbox_get(s, "team-a", "sb-1", &got, &err) == 0, "get by own team");
    is_str(got.id, "sb-1", "id");
    is_str(got.team, "team-a", "team");
    is_str(got.template_name, "base", "template");
    is_int(got.state, WR_SB_CREATING, "state");
    ok(got.reason == NULL, "reason NULL");
    ok(got.cpu_millis == 500 && got.memory_bytes == (1ull << 63) + 5, "cpu and memory round-trip");
    ok(got.created_ms == 1700000000000 && got.deadline_ms == 1700000300000, "times round-trip");
    is_str(got.metadata_json, "{\"k\":\"v\"}", "metadata");
    is_str(got.env_json, "{\"A\":\"1\"}", "env");
    is_str(got.idem_key, "idem-1", "idem key");
    ok(got.init_pid == 0 && got.uid_base == 100000 && got.seq == r.seq, "pid, uid base, seq");
    is_str(got.runtime, "ns", "runtime: ns when not given");
    wr_sandbox_rec_fini(&got);
    {
        struct wr_sandbox_rec g = rec("sb-g", "team-g", NULL, NULL, "running");
        g.runtime = (char *)"gvisor";
        ok(wr_store_sandbox_insert(s, &g, &err) == 0 &&
               wr_store_sandbox_get(s, NULL, "sb-g", &got, &err) == 0 &&
               streq(got.runtime, "gvisor"),
           "runtime round-trips");
        wr_sandbox_rec_fini(&got);
    }

    ok(wr_store_sandbox_get(s, "team-b", "sb-1", &got, &err) < 0 && err.kind == WR_ENOTFOUND,
       "another team's sandbox is not found");
    ok(wr_store_sandbox_get(s, NULL, "sb-1", &got, &err) == 0, "team NULL gets any");
    wr_sandbox_rec_fini(&got);
    ok(wr_store_sandbox_get(s, NULL, "sb-none", &got, &err) < 0 && err.kind == WR_ENOTFOUND,
       "unknown id is not found");

    ok(insert(s, "sb-1", "team-b", NULL, NULL, "running", &err) < 0 && err.kind == WR_ECONFLICT,
       "same id conflicts: %s", err.msg);
    ok(insert(s, "sb-2", "team-a", "idem-1", NULL, "running", &err) < 0 && err.kind == WR_ECONFLICT,
       "same (team, idem key) conflicts");
    ok(insert(s, "sb-3", "team-b", "idem-1", NULL, "running", &err) == 0,
       "same idem key in another team is fine");
    ok(insert(s, "sb-4", "team-a", NULL, NULL, "running", &err) == 0 &&
           insert(s, "sb-5", "team-a", NULL, NULL, "running", &err) == 0,
       "many sandboxes without an idem key");
    ok(insert(s, "sb-6", "team-a", NULL, "[1]", "running", &err) < 0 && err.kind == WR_EINVAL,
       "metadata that is not an object is invalid");
    ok(insert(s, "sb-6", "team-a", NULL, "{nope", "running", &err) < 0 && err.kind == WR_EINVAL,
       "malformed metadata is invalid");
    ok(insert(s, "sb-6", NULL, NULL, NULL, "running", &err) < 0 && err.kind == WR_EINVAL,
       "missing team is invalid");

    ok(wr_store_sandbox_get_idem(s, "team-a", "idem-1", &got, &err) == 0 && streq(got.id, "sb-1"),
       "get_idem finds team-a's");
    wr_sandbox_rec_fini(&got);
    ok(wr_store_sandbox_get_idem(s, "team-b", "idem-1", &got, &err) == 0 && streq(got.id, "sb-3"),
       "get_idem finds team-b's");
    wr_sandbox_rec_fini(&got);
    ok(wr_store_sandbox_get_idem(s, "team-c", "idem-1", &got, &err) < 0 && err.kind == WR_ENOTFOUND,
       "get_idem of another team is not found");
    ok(insert(s, "sb-r1", "team-r", "idem-r", NULL, "error", &err) == 0 &&
           wr_store_sandbox_release_idem(s, "sb-r1", &err) == 0 &&
           wr_store_sandbox_get_idem(s, "team-r", "idem-r", &got, &err) < 0 &&
           err.kind == WR_ENOTFOUND,
       "a released idem key names no sandbox");
    ok(insert(s, "sb-r2", "team-r", "idem-r", NULL, "running", &err) == 0 &&
           wr_store_sandbox_get_idem(s, "team-r", "idem-r", &got, &err) == 0 &&
           streq(got.id, "sb-r2"),
       "a new sandbox takes a released key");
    wr_sandbox_rec_fini(&got);
    ok(wr_store_sandbox_get(s, NULL, "sb-r1", &got, &err) == 0 && got.idem_key == NULL &&
           got.state == WR_SB_ERROR,
       "the old record stays, without its key");
    wr_sandbox_rec_fini(&got);
    ok(wr_store_sandbox_release_idem(s, "sb-none", &err) < 0 && err.kind == WR_ENOTFOUND,
       "release on an unknown id is not found");

    ok(wr_store_sandbox_set_state(s, "sb-1", WR_SB_ERROR, "oom", &err) == 0 &&
           wr_store_sandbox_set_deadline(s, "sb-1", 42, &err) == 0 &&
           wr_store_sandbox_set_runtime(s, "sb-1", 4242, 200000, &err) == 0,
       "set state, deadline, runtime");
    ok(wr_store_sandbox_get(s, NULL, "sb-1", &got, &err) == 0 && got.state == WR_SB_ERROR &&
           got.reason && streq(got.reason, "oom") && got.deadline_ms == 42 &&
           got.init_pid == 4242 && got.uid_base == 200000,
       "updates read back");
    wr_sandbox_rec_fini(&got);
    ok(wr_store_sandbox_set_state(s, "sb-1", WR_SB_RUNNING, NULL, &err) == 0 &&
           wr_store_sandbox_get(s, NULL, "sb-1", &got, &err) == 0 && got.reason == NULL,
       "reason cleared");
    wr_sandbox_rec_fini(&got);
    ok(wr_store_sandbox_set_state(s, "nope", WR_SB_RUNNING, NULL, &err) < 0 &&
           err.kind == WR_ENOTFOUND,
       "set_state of unknown id");
    ok(wr_store_sandbox_set_deadline(s, "nope", 1, &err) < 0 && err.kind == WR_ENOTFOUND,
       "set_deadline of unknown id");
    ok(wr_store_sandbox_set_runtime(s, "nope", 1, 1, &err) < 0 && err.kind == WR_ENOTFOUND,
       "set_runtime of unknown id");

    /* Pause and resume, and the timeout policy. */
    {
        struct wr_sandbox_rec p = rec("sb-p", "team-a", NULL, NULL, "running");
        p.on_timeout = WR_SB_TIMEOUT_PAUSE;
        p.timeout_s = 300;
        ok(wr_store_sandbox_insert(s, &p, &err) == 0, "insert with on_timeout pause");
    }
    ok(wr_store_sandbox_get(s, NULL, "sb-p", &got, &err) == 0 &&
           got.on_timeout == WR_SB_TIMEOUT_PAUSE && got.timeout_s == 300 &&
           got.paused_mode == WR_SB_PAUSED_NONE && got.remaining_ms == -1,
       "policy and timeout read back; not paused");
    wr_sandbox_rec_fini(&got);
    ok(wr_store_sandbox_get(s, NULL, "sb-5", &got, &err) == 0 &&
           got.on_timeout == WR_SB_TIMEOUT_KILL,
       "on_timeout defaults to kill");
    wr_sandbox_rec_fini(&got);
    ok(wr_store_sandbox_set_paused(s, "sb-p", WR_SB_PAUSED_MEMORY, "timeout", 12345, &err) == 0,
       "set paused");
    ok(wr_store_sandbox_get(s, NULL, "sb-p", &got, &err) == 0 && got.state == WR_SB_PAUSED &&
           got.paused_mode == WR_SB_PAUSED_MEMORY && streq(got.reason, "timeout") &&
           got.remaining_ms == 12345,
       "paused: mode, reason and time left read back");
    wr_sandbox_rec_fini(&got);
    {
        struct wr_sandbox_filter f = {.team = "team-a", .states = WR_SB_BIT(WR_SB_PAUSED)};
        ok(ids_are(s, &f, "sb-p"), "state filter finds the paused one");
        char *ids;
        f.states = 0;
        ids = list_ids(s, &f);
        ok(strstr(ids, "sb-p") != NULL, "paused is listed by default");
        free(ids);
    }
    ok(wr_store_sandbox_set_state(s, "sb-p", WR_SB_PAUSED, "again", &err) == 0 &&
           wr_store_sandbox_get(s, NULL, "sb-p", &got, &err) == 0 && got.remaining_ms == 12345 &&
           got.paused_mode == WR_SB_PAUSED_MEMORY,
       "set_state to paused keeps the time left");
    wr_sandbox_rec_fini(&got);
    ok(wr_store_sandbox_set_resumed(s, "sb-p", 99, &err) == 0 &&
           wr_store_sandbox_get(s, NULL, "sb-p", &got, &err) == 0 && got.state == WR_SB_RUNNING &&
           got.reason == NULL && got.paused_mode == WR_SB_PAUSED_NONE && got.remaining_ms == -1 &&
           got.deadline_ms == 99,
       "resumed: running, new deadline, pause fields cleared");
    wr_sandbox_rec_fini(&got);
    ok(wr_store_sandbox_set_paused(s, "sb-p", WR_SB_PAUSED_MEMORY, NULL, 0, &err) == 0 &&
           wr_store_sandbox_set_state(s, "sb-p", WR_SB_STOPPED, "deleted", &err) == 0 &&
           wr_store_sandbox_get(s, NULL, "sb-p", &got, &err) == 0 && got.remaining_ms == -1 &&
           got.paused_mode == WR_SB_PAUSED_NONE && got.reason != NULL,
       "stopping a paused sandbox clears its pause fields");
    wr_sandbox_rec_fini(&got);
    ok(wr_store_sandbox_set_paused(s, "sb-p", WR_SB_PAUSED_NONE, NULL, 1, &err) < 0 &&
           err.kind == WR_EINVAL,
       "pause needs a mode");
    ok(wr_store_sandbox_set_paused(s, "sb-p", WR_SB_PAUSED_MEMORY, NULL, -5, &err) < 0 &&
           err.kind == WR_EINVAL,
       "and a time left >= 0");
    ok(wr_store_sandbox_set_paused(s, "nope", WR_SB_PAUSED_MEMORY, NULL, 1, &err) < 0 &&
           err.kind == WR_ENOTFOUND,
       "pause of unknown id");
    ok(wr_store_sandbox_set_resumed(s, "nope", 1, &err) < 0 && err.kind == WR_ENOTFOUND,
       "resume of unknown id");
    ok(wr_store_sandbox_delete(s, "sb-p", &err) == 0, "delete the paused one");

    ok(wr_store_sandbox_delete(s, "sb-4", &err) == 0, "delete");
    ok(wr_store_sandbox_get(s, NULL, "sb-4", &got, &err) < 0 && err.kind == WR_ENOTFOUND,
       "deleted is gone");
    ok(wr_store_sandbox_delete(s, "sb-4", &err) < 0 && err.kind == WR_ENOTFOUND,
       "delete twice is not found");
    ok(no_busy_statements(s), "no statement left running");
}

static void test_list_filters(struct wr_store *s)
{
    struct wr_err err;
    const unsigned running = WR_SB_BIT(WR_SB_RUNNING), stopped = WR_SB_BIT(WR_SB_STOPPED);
    const unsigned live = WR_SB_BIT(WR_SB_RUNNING) | WR_SB_BIT(WR_SB_PAUSED);
    struct wr_sandbox_filter f = {.team = "lf"};
    int fails = 0;

    fails += insert(s, "l-run", "lf", NULL, "{\"a.b\":\"x\",\"env\":\"prod\"}", "running", &err);
    fails +=
        insert(s, "l-pause", "lf", NULL, "{\"a\":{\"b\":\"x\"},\"env\":\"prod\"}", "paused", &err);
    fails += insert(s, "l-stop", "lf", NULL, "{\"q\\\"k\":\"v\\\"al\"}", "stopped", &err);
    fails += insert(s, "l-err", "lf", NULL, "{\"ключ\":\"日本\",\"env\":\"dev\"}", "error", &err);
    fails += insert(s, "l-odd", "lf", NULL, "{\"$.x[0]\":\"y\",\"n\":\"1\",\"nl\\nk\":\"\\\\\"}",
                    "creating", &err);
    fails += insert(s, "l-num", "lf", NULL, "{\"n\":1}", "running", &err);
    fails += insert(s, "l-other", "lf2", NULL, "{\"env\":\"prod\"}", "running", &err);
    ok(fails == 0, "insert filter rows");

    ok(ids_are(s, &f, "l-run,l-pause,l-odd,l-num"),
       "default: all but stopped and error, seq order");
    f.states = running;
    ok(ids_are(s, &f, "l-run,l-num"), "state running");
    f.states = stopped;
    ok(ids_are(s, &f, "l-stop"), "explicit stopped");
    f.states = WR_SB_BIT(WR_SB_ERROR);
    ok(ids_are(s, &f, "l-err"), "explicit error");
    f.states = live;
    ok(ids_are(s, &f, "l-run,l-pause,l-num"), "two states");
    f.states = WR_SB_BIT(WR_SB_CREATING);
    ok(ids_are(s, &f, "l-odd"), "explicit creating");
    {
        const char *ks[] = {"env"}, *vs[] = {"prod"};
        struct wr_sandbox_filter g = {
            .states = running, .meta_keys = ks, .meta_values = vs, .n_meta = 1};
        ok(ids_are(s, &g, "l-run,l-other"), "team NULL lists every team");
    }
    f.states = 0;

#define META(k, v, want, name)                                                                     \
    do {                                                                                           \
        const char *ks_[] = {k}, *vs_[] = {v};                                                     \
        struct wr_sandbox_filter g_ = {.team = "lf",                                               \
                                       .states = WR_SB_LIVE | WR_SB_BIT(WR_SB_STOPPED) |           \
                                                 WR_SB_BIT(WR_SB_ERROR),                           \
                                       .meta_keys = ks_,                                           \
                                       .meta_values = vs_,                                         \
                                       .n_meta = 1};                                               \
        ok(ids_are(s, &g_, want), "metadata filter: %s", name);                                    \
    } while (0)
    META("a.b", "x", "l-run", "a dotted key is one key");
    META("a", "x", "", "a nested object is not a string");
    META("env", "prod", "l-run,l-pause", "plain key");
    META("q\"k", "v\"al", "l-stop", "quotes in key and value");
    META("ключ", "日本", "l-err", "unicode key and value");
    META("ключ", "日", "", "a prefix of the value does not match");
    META("$.x[0]", "y", "l-odd", "a key that looks like a JSON path");
    META("nl\nk", "\\", "l-odd", "newline in key, backslash value");
    META("n", "1", "l-odd", "\"1\" matches the string, not the number");
    META("missing", "x", "", "missing key");
    META("a", "{\"b\":\"x\"}", "", "an object value is not its JSON text");
    META("env", "prod' OR '1'='1", "", "SQL in a value is data");
#undef META
    {
        const char *ks[] = {"env", "a.b"}, *vs[] = {"prod", "x"};
        struct wr_sandbox_filter g = {
            .team = "lf", .meta_keys = ks, .meta_values = vs, .n_meta = 2};
        ok(ids_are(s, &g, "l-run"), "two metadata pairs are ANDed");
        vs[1] = "y";
        ok(ids_are(s, &g, ""), "second pair must match too");
    }
    {
        const char *ks[] = {NULL}, *vs[] = {"x"};
        struct wr_sandbox_filter g = {
            .team = "lf", .meta_keys = ks, .meta_values = vs, .n_meta = 1};
        struct wr_sandbox_rec *v = NULL;
        size_t n = 0;
        ok(wr_store_sandbox_list(s, &g, &v, &n, &err) < 0 && err.kind == WR_EINVAL,
           "NULL metadata key is invalid");
    }
    ok(no_busy_statements(s), "no statement left running");
}

static void test_pagination(struct wr_store *s)
{
    struct wr_sandbox_filter f = {.team = "pg", .limit = 100};
    struct wr_sandbox_rec *v = NULL;
    struct wr_err err;
    size_t n = 0, total = 0, pages = 0;
    int fails = 0, out_of_order = 0;
    int64_t last = 0, max_seq = 0;

    for (int i = 0; i < 250; i++) {
        char id[32];
        snprintf(id, sizeof(id), "pg-%03d", i);
        fails += insert(s, id, "pg", NULL, NULL, i % 2 ? "running" : "paused", &err) < 0;
        /* Interleave another team's rows: pages must skip them. */
        snprintf(id, sizeof(id), "px-%03d", i);
        fails += insert(s, id, "px", NULL, NULL, "running", &err) < 0;
    }
    ok(fails == 0, "insert 250 rows");
    for (;;) {
        if (wr_store_sandbox_list(s, &f, &v, &n, &err) < 0)
            break;
        if (n == 0) {
            free(v);
            break;
        }
        pages++;
        for (size_t i = 0; i < n; i++) {
            char want[32];
            snprintf(want, sizeof(want), "pg-%03zu", total + i);
            if (!streq(v[i].id, want) || v[i].seq <= last)
                out_of_order++;
            last = v[i].seq;
        }
        if (pages == 1)
            ok(n == 100, "first page has 100");
        total += n;
        f.after_seq = last;
        free_recs(v, n);
    }
    ok(pages == 3 && total == 250, "250 rows in 3 pages (%zu, %zu)", pages, total);
    ok(out_of_order == 0, "in insertion order, each row once");
    f.after_seq = 0;
    f.limit = 0;
    ok(count_list(s, &f) == 250, "limit 0 is no limit");

    /* Deleting the newest row must not let its seq be reused. */
    {
        struct wr_sandbox_rec r = rec("pg-new", "pg", NULL, NULL, "running");
        max_seq = last;
        ok(wr_store_sandbox_delete(s, "px-249", &err) == 0 &&
               wr_store_sandbox_insert(s, &r, &err) == 0 && r.seq > max_seq + 1,
           "a seq is never reused (%lld > %lld)", (long long)r.seq, (long long)max_seq + 1);
    }
}

/* Writes sandboxes (and keys, a two-statement transaction) until killed, reporting the number
 * of each committed row on the pipe after its commit returned. */
static void durability_child(const char *path, int wfd)
{
    struct wr_store *s = NULL;
    struct wr_err err;

    if (wr_store_open(path, &s, &err) < 0)
        _exit(2);
    for (int i = 0;; i++) {
        char id[32];
        snprintf(id, sizeof(id), "dur-%d", i);
        if (insert(s, id, "dur", NULL, "{\"i\":\"x\"}", "running", &err) < 0)
            _exit(3);
        if (i % 7 == 0) {
            struct wr_key_info k = {0};
            char *secret = NULL;
            if (wr_store_key_create(s, "dur", id, false, &secret, &k, &err) < 0)
                _exit(4);
            free(secret);
            wr_key_info_fini(&k);
        }
        if (write(wfd, &i, sizeof(i)) != sizeof(i))
            _exit(5);
    }
}

static void test_durability(void)
{
    char *path = path_in("dur.db"), *wal = path_in("dur.db-wal");
    struct wr_store *s = NULL;
    struct wr_err err;
    int p[2], last = -1, v, status = 0, missing = 0;
    struct stat sb;
    pid_t pid;
    long extra;

    ok(wr_store_open(path, &s, &err) == 0, "open durability db");
    for (int i = 0; i < 50; i++) {
        char id[32];
        snprintf(id, sizeof(id), "pre-%d", i);
        missing += insert(s, id, "pre", NULL, NULL, "running", &err) < 0;
    }
    ok(missing == 0, "50 rows before the crash");
    /* SQLite connections must not cross fork(): close first, the child opens its own. */
    wr_store_close(s);
    s = NULL;

    if (pipe2(p, O_CLOEXEC) < 0)
        exit(1);
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        close(p[0]);
        durability_child(path, p[1]);
    }
    close(p[1]);
    while (read(p[0], &v, sizeof(v)) == sizeof(v)) {
        last = v;
        if (last >= 400) {
            kill(pid, SIGKILL);
            break;
        }
    }
    /* Drain: everything written before the kill was committed. */
    while (read(p[0], &v, sizeof(v)) == sizeof(v))
        last = v;
    close(p[0]);
    waitpid(pid, &status, 0);
    ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "writer was SIGKILLed (status %d)",
       status);
    ok(stat(wal, &sb) == 0 && sb.st_size > 0, "it left a WAL to recover (%lld bytes)",
       (long long)sb.st_size);

    ok(wr_store_open(path, &s, &err) == 0, "reopen after the crash");
    if (s == NULL) {
        printf("#   %s\n", err.msg);
        free(path);
        free(wal);
        return;
    }
    ok(q1_is(s->db, "PRAGMA integrity_check", "ok"), "integrity_check is ok");
    ok(q1_is(s->db, "PRAGMA foreign_key_check", ""), "no dangling foreign keys");
    missing = 0;
    for (int i = 0; i <= last; i++) {
        struct wr_sandbox_rec r = {0};
        char id[32];
        snprintf(id, sizeof(id), "dur-%d", i);
        if (wr_store_sandbox_get(s, "dur", id, &r, &err) < 0)
            missing++;
        wr_sandbox_rec_fini(&r);
    }
    ok(last >= 400 && missing == 0, "all %d reported commits are there", last + 1);
    {
        char *c = q1(s->db, "SELECT count(*) FROM sandboxes WHERE team = 'dur'");
        extra = atol(c) - (last + 1);
        free(c);
    }
    /* At most the row being written when the kill came can be there without a report. */
    ok(extra == 0 || extra == 1, "nothing else (%ld unreported)", extra);
    ok(q1_is(s->db, "SELECT count(*) FROM sandboxes WHERE team = 'pre'", "50"),
       "rows from before the crash are there");
    ok(insert(s, "after", "dur", NULL, NULL, "running", &err) == 0, "writable after recovery");
    wr_store_close(s);
    free(path);
    free(wal);
}

/* A writer killed inside an open transaction: none of that transaction may survive. */
static void test_uncommitted(void)
{
    char *path = path_in("unc.db"), *wal = path_in("unc.db-wal");
    struct wr_store *s = NULL;
    struct stat sb;
    struct wr_err err;
    int p[2], v = 0, status = 0;
    pid_t pid;

    if (pipe2(p, O_CLOEXEC) < 0)
        exit(1);
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        int fails = 0;
        close(p[0]);
        if (wr_store_open(path, &s, &err) < 0)
            _exit(2);
        fails += insert(s, "committed", "unc", NULL, NULL, "running", &err) < 0;
        /* A tiny cache makes SQLite spill uncommitted pages into the WAL, so recovery has to
         * skip frames that no commit frame covers. */
        fails += sqlite3_exec(s->db, "PRAGMA cache_size = 4", NULL, NULL, NULL) != SQLITE_OK;
        fails += sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK;
        for (int i = 0; i < 2000; i++) {
            char id[32];
            snprintf(id, sizeof(id), "open-%d", i);
            fails += insert(s, id, "unc", NULL, NULL, "running", &err) < 0;
        }
        v = fails;
        if (write(p[1], &v, sizeof(v)) != sizeof(v))
            _exit(5);
        pause();
        _exit(0);
    }
    close(p[1]);
    v = -1;
    if (read(p[0], &v, sizeof(v)) == sizeof(v))
        kill(pid, SIGKILL);
    close(p[0]);
    waitpid(pid, &status, 0);
    ok(v == 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
       "writer killed with a transaction open (%d failures)", v);
    ok(stat(wal, &sb) == 0 && sb.st_size > 128 * 1024,
       "uncommitted pages reached the WAL (%lld bytes)", (long long)sb.st_size);
    ok(wr_store_open(path, &s, &err) == 0, "reopen");
    if (s != NULL) {
        ok(q1_is(s->db, "PRAGMA integrity_check", "ok"), "integrity_check is ok");
        ok(q1_is(s->db, "SELECT group_concat(id) FROM sandboxes", "committed"),
           "the committed row is there, the open transaction's are not");
        wr_store_close(s);
    }
    free(path);
    free(wal);
}

/* Volumes: names per team, and a delete refused while a live sandbox mounts the volume. */
static void test_volumes(struct wr_store *s)
{
    struct wr_volume_rec v = {
        .id = "vol00000000000000001", .team = "team-a", .name = "data", .created_ms = 5};
    struct wr_volume_rec got = {0}, *list = NULL;
    struct wr_sandbox_rec sb = {.id = "vol-user",
                                .team = "team-a",
                                .template_name = "base",
                                .state = WR_SB_RUNNING,
                                .volumes_json = "[{\"id\":\"vol00000000000000001\",\"name\":"
                                                "\"data\",\"path\":\"/d\",\"readonly\":false}]"};
    struct wr_err err;
    size_t n = 0;

    ok(wr_store_volume_insert(s, &v, &err) == 0, "insert a volume");
    v.id = "vol00000000000000002";
    ok(wr_store_volume_insert(s, &v, &err) < 0 && err.kind == WR_ECONFLICT,
       "the same name in the same team conflicts");
    v.team = "team-b";
    ok(wr_store_volume_insert(s, &v, &err) == 0, "the same name in another team is another");
    ok(wr_store_volume_get(s, "team-c", "data", &got, &err) < 0 && err.kind == WR_ENOTFOUND,
       "another team's volume is not found");
    ok(wr_store_volume_get(s, "team-a", "data", &got, &err) == 0 &&
           strcmp(got.id, "vol00000000000000001") == 0 && got.created_ms == 5,
       "get by team and name");
    wr_volume_rec_fini(&got);
    ok(wr_store_volume_list(s, "team-b", &list, &n, &err) == 0 && n == 1, "list one team's");
    for (size_t i = 0; i < n; i++)
        wr_volume_rec_fini(&list[i]);
    free(list);
    ok(wr_store_sandbox_insert(s, &sb, &err) == 0, "a running sandbox mounts it");
    ok(wr_store_volume_delete(s, "team-a", "data", &got, &err) < 0 && err.kind == WR_ECONFLICT &&
           strstr(err.msg, "vol-user") != NULL,
       "delete in use is refused, naming the sandbox: %s", err.msg);
    ok(wr_store_sandbox_set_paused(s, "vol-user", WR_SB_PAUSED_MEMORY, NULL, 10, &err) == 0 &&
           wr_store_volume_delete(s, "team-a", "data", &got, &err) < 0 && err.kind == WR_ECONFLICT,
       "and while it is paused");
    ok(wr_store_sandbox_set_state(s, "vol-user", WR_SB_STOPPED, "x", &err) == 0 &&
           wr_store_volume_delete(s, "team-a", "data", &got, &err) == 0 &&
           strcmp(got.id, "vol00000000000000001") == 0,
       "a stopped sandbox does not hold it");
    wr_volume_rec_fini(&got);
    ok(wr_store_volume_delete(s, "team-a", "data", &got, &err) < 0 && err.kind == WR_ENOTFOUND,
       "deleted once");
    ok(wr_store_volume_delete(s, "team-b", "data", &got, &err) == 0, "the other team's goes too");
    wr_volume_rec_fini(&got);
    ok(wr_store_sandbox_delete(s, "vol-user", &err) == 0, "clean up");
}

/* The enums' names are the SQL column's and the API's: each parses back to itself. */
static void test_state_names(void)
{
    enum wr_sb_state st;
    enum wr_sb_on_timeout t;
    enum wr_sb_paused_mode pm;
    bool round = true;

    for (unsigned i = 0; i < WR_SB_NSTATES; i++)
        round &= wr_sb_state_parse(wr_sb_state_name((enum wr_sb_state)i), &st) == 0 && st == i;
    ok(round && streq(wr_sb_state_name(WR_SB_PAUSED), "paused"), "state names round-trip");
    ok(wr_sb_state_parse("it's", &st) < 0 && wr_sb_state_parse(NULL, &st) < 0 &&
           wr_sb_state_name((enum wr_sb_state)WR_SB_NSTATES) == NULL,
       "an unknown state is none");
    ok(wr_sb_on_timeout_parse("pause", &t) == 0 && t == WR_SB_TIMEOUT_PAUSE &&
           streq(wr_sb_on_timeout_name(WR_SB_TIMEOUT_KILL), "kill") &&
           wr_sb_on_timeout_parse("explode", &t) < 0,
       "timeout policies: kill, pause");
    ok(wr_sb_paused_mode_parse("disk", &pm) == 0 && pm == WR_SB_PAUSED_DISK &&
           streq(wr_sb_paused_mode_name(WR_SB_PAUSED_MEMORY), "memory") &&
           wr_sb_paused_mode_name(WR_SB_PAUSED_NONE) == NULL &&
           wr_sb_paused_mode_parse("", &pm) < 0,
       "paused modes: memory, disk; none has no name");
}

int main(void)
{
    struct wr_store *s = NULL;
    struct wr_err err;
    char *path;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    umask(022);
    test_state_names();
    test_open();
    test_migrate();
    test_migrate_2();
    test_migrate_8();

    path = path_in("main.db");
    ok(wr_store_open(path, &s, &err) == 0, "open main db");
    if (s == NULL)
        return done();
    test_keys(s);
    test_sandboxes(s);
    test_list_filters(s);
    test_pagination(s);
    test_volumes(s);
    ok(no_busy_statements(s), "every cached statement is reset");
    wr_store_close(s);
    free(path);

    test_durability();
    test_uncommitted();

    {
        char *cmd = xasprintf("rm -rf '%s'", dir);
        if (system(cmd) != 0)
            printf("# could not remove %s\n", dir);
        free(cmd);
    }
    return done();
}
