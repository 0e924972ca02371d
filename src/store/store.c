/* SPDX-License-Identifier: Apache-2.0 */
/* Opening and closing the database, the per-store statement cache, transactions and the
 * mapping from SQLite errors to wr_err. See docs/design/store.md. */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../util/log.h"
#include "../util/xalloc.h"

/* How long a statement waits for another connection's lock before SQLITE_BUSY. Only warrend
 * writes, but `sqlite3` in an operator's shell or a backup may hold a lock briefly. */
#define WR_STORE_BUSY_TIMEOUT_MS 5000

int64_t wr__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *wr__col_text(sqlite3_stmt *st, int i)
{
    const unsigned char *v = sqlite3_column_text(st, i);
    return v == NULL ? NULL : xstrdup((const char *)v);
}

int wr__store_fail(sqlite3 *db, struct wr_err *err, const char *fmt, ...)
{
    int code = sqlite3_extended_errcode(db);
    enum wr_err_kind kind = WR_ESYS;
    int errnum = 0;
    char ctx[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(ctx, sizeof(ctx), fmt, ap);
    va_end(ap);
    switch (code & 0xff) {
    case SQLITE_CONSTRAINT:
        /* A CHECK or NOT NULL failure is a malformed record, not a clash with another row. */
        if (code == SQLITE_CONSTRAINT_CHECK || code == SQLITE_CONSTRAINT_NOTNULL)
            kind = WR_EINVAL;
        else
            kind = WR_ECONFLICT;
        break;
    case SQLITE_FULL: /* the filesystem's space; answered 507, not 500 */
        errnum = ENOSPC;
        break;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
        errnum = sqlite3_system_errno(db);
        break;
    default:
        break;
    }
    return wr_err_set(err, kind, errnum, "%s: %s", ctx, sqlite3_errmsg(db));
}

int wr__step_done(sqlite3 *db, sqlite3_stmt *st, const char *what, struct wr_err *err)
{
    int rc;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        ;
    if (rc != SQLITE_DONE)
        return wr__store_fail(db, err, "%s", what);
    return 0;
}

sqlite3_stmt *wr__stmt(struct wr_store *s, enum wr__stmt_id id, const char *sql, struct wr_err *err)
{
    if (s->stmt[id] == NULL) {
        /* PERSISTENT: these live as long as the store, so SQLite keeps them out of its
         * lookaside pool. */
        if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->stmt[id], NULL) !=
            SQLITE_OK) {
            wr__store_fail(s->db, err, "prepare `%.60s`", sql);
            sqlite3_finalize(s->stmt[id]);
            s->stmt[id] = NULL;
            return NULL;
        }
    }
    return s->stmt[id];
}

int wr__txn_begin(struct wr__txn *t, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(t->s, WR_ST_BEGIN, "BEGIN IMMEDIATE", err);

    if (st == NULL || wr__step_done(t->s->db, st, "begin", err) < 0)
        return -1;
    t->active = true;
    return 0;
}

int wr__txn_commit(struct wr__txn *t, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(t->s, WR_ST_COMMIT, "COMMIT", err);

    /* On failure the transaction stays active and wr__txn_end rolls it back. */
    if (st == NULL || wr__step_done(t->s->db, st, "commit", err) < 0)
        return -1;
    t->active = false;
    return 0;
}

void wr__txn_end(struct wr__txn *t)
{
    if (!t->active)
        return;
    t->active = false;
    /* Some errors (SQLITE_FULL, IOERR, NOMEM) end the transaction by themselves; rolling back
     * then would fail with "no transaction is active". */
    if (sqlite3_get_autocommit(t->s->db))
        return;
    {
        _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(t->s, WR_ST_ROLLBACK, "ROLLBACK", NULL);
        if (st != NULL)
            (void)sqlite3_step(st);
    }
}

static void sqlite_closep(sqlite3 **db)
{
    if (*db != NULL)
        (void)sqlite3_close(*db);
}

/* Run one PRAGMA that answers a single value and check it is `want`: a PRAGMA the library does
 * not support is silently a no-op, and journal_mode can answer something other than asked. */
static int pragma_expect(sqlite3 *db, const char *sql, const char *want, struct wr_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc, ret = 0;

    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return wr__store_fail(db, err, "%s", sql);
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        ret = wr__store_fail(db, err, "%s", sql);
    } else {
        const char *got = (const char *)sqlite3_column_text(st, 0);
        if (got == NULL || strcasecmp(got, want) != 0)
            ret = wr_err_set(err, WR_EUNSUPPORTED, 0, "%s: got `%s`, want `%s`", sql,
                             got ? got : "(nothing)", want);
    }
    sqlite3_finalize(st);
    return ret;
}

/* A filesystem filled by tenants must not stop the daemon recording a deadline or a delete. So
 * the store keeps room of its own: at open it writes SPARE_BYTES into a scratch table and
 * deletes them again. The pages stay in the database file as its freelist (auto_vacuum is off),
 * their blocks allocated by that write, and the WAL file has grown as large, which SQLite
 * overwrites from its start after each checkpoint and never truncates while the daemon runs
 * (journal_size_limit -1). Later writes reuse both before the files need a new block. Best
 * effort: on a filesystem full already it keeps what fits. */
#define SPARE_BYTES (8 << 20)

static void keep_spare_room(sqlite3 *db, const char *path)
{
    char sql[160];

    snprintf(sql, sizeof(sql),
             "CREATE TABLE IF NOT EXISTS spare_room(b BLOB); "
             "INSERT INTO spare_room VALUES (zeroblob(%d))",
             SPARE_BYTES);
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
        log_warn("database `%s`: no spare room kept: %s", path, sqlite3_errmsg(db));
    (void)sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_RESTART, NULL, NULL);
    if (sqlite3_exec(db, "DROP TABLE IF EXISTS spare_room", NULL, NULL, NULL) != SQLITE_OK)
        log_warn("database `%s`: drop the spare room: %s", path, sqlite3_errmsg(db));
}

static int store_open(const char *path, bool first, struct wr_store **out, struct wr_err *err)
{
    __attribute__((cleanup(sqlite_closep))) sqlite3 *db = NULL;
    struct wr_store *s;
    int rc, fd;

    /* Create the file ourselves so it is 0600 whatever the umask: it holds key hashes and
     * sandbox environments. SQLite gives the -wal and -shm files the same mode. Only when it
     * does not exist: closing any fd of the file drops every POSIX lock this process holds on
     * it, and a second connection of the process (the audit prune's) would then let another
     * process's connection think it is the last one, checkpoint and delete the WAL file the
     * daemon still writes to, so that its commits were seen by no one else and lost. */
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST)
        return wr_err_sys(err, "open database `%s`", path);
    if (fd >= 0)
        close(fd);

    /* NOMUTEX: a store is used from one thread (store.h). */
    rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        if (db == NULL)
            return wr_err_set(err, WR_ESYS, 0, "open database `%s`: %s", path, sqlite3_errstr(rc));
        return wr__store_fail(db, err, "open database `%s`", path);
    }
    (void)sqlite3_extended_result_codes(db, 1);
    (void)sqlite3_busy_timeout(db, WR_STORE_BUSY_TIMEOUT_MS);

    /* WAL with synchronous=NORMAL: a commit is in the WAL file (written, not fsynced) when
     * sqlite3_step returns, so it survives the daemon being killed; only a power loss or kernel
     * crash can lose the last commits, never corrupt the file. See docs/design/store.md. */
    if (pragma_expect(db, "PRAGMA journal_mode = WAL", "wal", err) < 0)
        return wr_err_wrap(err, "open database `%s`", path);
    if (sqlite3_exec(db,
                     "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; "
                     "PRAGMA temp_store = MEMORY",
                     NULL, NULL, NULL) != SQLITE_OK)
        return wr__store_fail(db, err, "open database `%s`: pragmas", path);
    if (pragma_expect(db, "PRAGMA synchronous", "1", err) < 0 ||
        pragma_expect(db, "PRAGMA foreign_keys", "1", err) < 0)
        return wr_err_wrap(err, "open database `%s`", path);

    if (first) {
        if (wr__store_migrate(db, wr__migrations, wr__n_migrations, err) < 0)
            return wr_err_wrap(err, "open database `%s`", path);
        keep_spare_room(db, path);
    }

    s = xcalloc(1, sizeof(*s));
    s->db = steal_pointer(&db);
    *out = s;
    return 0;
}

int wr_store_open(const char *path, struct wr_store **out, struct wr_err *err)
{
    return store_open(path, true, out, err);
}

int wr_store_open_more(const char *path, struct wr_store **out, struct wr_err *err)
{
    return store_open(path, false, out, err);
}

void wr_store_close(struct wr_store *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < WR_ARRAY_SIZE(s->stmt); i++)
        sqlite3_finalize(s->stmt[i]);
    /* With every statement finalized this cannot be SQLITE_BUSY. The last connection to close
     * checkpoints the WAL into the database and removes it. */
    (void)sqlite3_close(s->db);
    free(s);
}
