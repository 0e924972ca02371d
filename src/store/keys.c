/* SPDX-License-Identifier: Apache-2.0 */
/* Teams and API keys. A secret is "wr_" + 64 hex digits of getrandom(); only its SHA-256 is
 * stored, so a copy of the database does not let anyone call the API. */
#include "store_int.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "../util/xalloc.h"

#define SECRET_PREFIX     "wr_"
#define SECRET_PREFIX_LEN (sizeof(SECRET_PREFIX) - 1)
#define SECRET_BYTES      32
#define SECRET_LEN        (SECRET_PREFIX_LEN + 2 * SECRET_BYTES)
#define KEY_ID_BYTES      8
#define HASH_HEX_LEN      64

/* One message for every way a presented secret can fail, so a caller learns nothing about
 * which part was wrong. */
#define NO_SUCH_KEY "no such api key"

void wr_key_info_fini(struct wr_key_info *k)
{
    if (k == NULL)
        return;
    free(k->id);
    free(k->team);
    free(k->name);
    memset(k, 0, sizeof(*k));
}

static int random_bytes(void *buf, size_t n, struct wr_err *err)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = getrandom((char *)buf + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return wr_err_sys(err, "getrandom");
        }
        got += (size_t)r;
    }
    return 0;
}

static void hex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 0xf];
    }
    out[2 * n] = '\0';
}

/* SHA-256 of the secret as lowercase hex into out[HASH_HEX_LEN + 1]. */
static int hash_secret(const char *secret, char *out, struct wr_err *err)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    if (EVP_Digest(secret, strlen(secret), md, &mdlen, EVP_sha256(), NULL) != 1 ||
        mdlen * 2 != HASH_HEX_LEN)
        return wr_err_set(err, WR_EINTERNAL, 0, "sha-256 failed");
    hex(md, mdlen, out);
    return 0;
}

/* "wr_" and exactly 64 lowercase hex digits: the only shape wr_store_key_create makes. */
static bool secret_well_formed(const char *secret)
{
    if (secret == NULL || strlen(secret) != SECRET_LEN ||
        memcmp(secret, SECRET_PREFIX, SECRET_PREFIX_LEN) != 0)
        return false;
    for (size_t i = SECRET_PREFIX_LEN; i < SECRET_LEN; i++) {
        char c = secret[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return true;
}

static void read_key_row(sqlite3_stmt *st, struct wr_key_info *k)
{
    k->id = wr__col_text(st, 0);
    k->team = wr__col_text(st, 1);
    k->name = wr__col_text(st, 2);
    k->admin = sqlite3_column_int(st, 3) != 0;
    k->created_ms = sqlite3_column_int64(st, 4);
}

static int ensure_team(struct wr_store *s, const char *team, int64_t now, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_TEAM_ENSURE,
        "INSERT INTO teams (name, created_ms) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, team);
    wr__bind_int64(st, 2, now);
    return wr__step_done(s->db, st, "create team", err);
}

int wr_store_key_create(struct wr_store *s, const char *team, const char *name, bool admin,
                        char **secret, struct wr_key_info *info, struct wr_err *err)
{
    _cleanup_txn_ struct wr__txn tx = {s};
    _cleanup_free_ char *sec = NULL;
    unsigned char raw[SECRET_BYTES], idraw[KEY_ID_BYTES];
    char hash[HASH_HEX_LEN + 1], id[2 + 2 * KEY_ID_BYTES + 1];
    int64_t now = wr__now_ms();

    if (team == NULL || team[0] == '\0')
        return wr_err_set(err, WR_EINVAL, 0, "create key: empty team name");
    if (random_bytes(raw, sizeof(raw), err) < 0 || random_bytes(idraw, sizeof(idraw), err) < 0)
        return wr_err_wrap(err, "create key");
    sec = xmalloc(SECRET_LEN + 1);
    memcpy(sec, SECRET_PREFIX, SECRET_PREFIX_LEN);
    hex(raw, sizeof(raw), sec + SECRET_PREFIX_LEN);
    OPENSSL_cleanse(raw, sizeof(raw));
    memcpy(id, "k_", 2);
    hex(idraw, sizeof(idraw), id + 2);
    if (hash_secret(sec, hash, err) < 0)
        return -1;

    if (wr__txn_begin(&tx, err) < 0 || ensure_team(s, team, now, err) < 0)
        return wr_err_wrap(err, "create key for team %s", team);
    {
        _cleanup_stmt_ sqlite3_stmt *st =
            wr__stmt(s, WR_ST_KEY_INSERT,
                     "INSERT INTO api_keys (id, team, name, admin, hash, created_ms)"
                     " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                     err);
        if (st == NULL)
            return -1;
        wr__bind_text(st, 1, id);
        wr__bind_text(st, 2, team);
        wr__bind_text(st, 3, name ? name : "");
        (void)sqlite3_bind_int(st, 4, admin ? 1 : 0);
        wr__bind_text(st, 5, hash);
        wr__bind_int64(st, 6, now);
        if (wr__step_done(s->db, st, "insert", err) < 0)
            return wr_err_wrap(err, "create key for team %s", team);
    }
    if (wr__txn_commit(&tx, err) < 0)
        return wr_err_wrap(err, "create key for team %s", team);

    info->id = xstrdup(id);
    info->team = xstrdup(team);
    info->name = xstrdup(name ? name : "");
    info->admin = admin;
    info->created_ms = now;
    *secret = steal_pointer(&sec);
    return 0;
}

int wr_store_key_lookup(struct wr_store *s, const char *secret, struct wr_key_info *info,
                        struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    char hash[HASH_HEX_LEN + 1];
    const unsigned char *stored;
    int rc;

    if (!secret_well_formed(secret))
        return wr_err_set(err, WR_ENOTFOUND, 0, NO_SUCH_KEY);
    if (hash_secret(secret, hash, err) < 0)
        return -1;
    st = wr__stmt(s, WR_ST_KEY_BY_HASH,
                  "SELECT id, team, name, admin, created_ms, hash FROM api_keys WHERE hash = ?1",
                  err);
    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, hash);
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return wr_err_set(err, WR_ENOTFOUND, 0, NO_SUCH_KEY);
    if (rc != SQLITE_ROW)
        return wr__store_fail(s->db, err, "look up api key");
    /* The index lookup already matched; comparing again in constant time keeps the decision
     * itself free of a data-dependent early exit, whatever collation or index does above. */
    stored = sqlite3_column_text(st, 5);
    if (stored == NULL || sqlite3_column_bytes(st, 5) != HASH_HEX_LEN ||
        CRYPTO_memcmp(stored, hash, HASH_HEX_LEN) != 0)
        return wr_err_set(err, WR_ENOTFOUND, 0, NO_SUCH_KEY);
    read_key_row(st, info);
    return 0;
}

int wr_store_key_list(struct wr_store *s, const char *team, struct wr_key_info **out, size_t *n,
                      struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_KEY_LIST,
                 "SELECT id, team, name, admin, created_ms FROM api_keys"
                 " WHERE ?1 IS NULL OR team = ?1 ORDER BY created_ms, id",
                 err);
    struct wr_key_info *v = NULL;
    size_t len = 0, cap = 0;
    int rc;

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, team);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (len == cap) {
            cap = cap ? 2 * cap : 8;
            v = xrealloc(v, cap * sizeof(*v));
        }
        read_key_row(st, &v[len++]);
    }
    if (rc != SQLITE_DONE) {
        wr__store_fail(s->db, err, "list api keys");
        for (size_t i = 0; i < len; i++)
            wr_key_info_fini(&v[i]);
        free(v);
        return -1;
    }
    *out = v;
    *n = len;
    return 0;
}

int wr_store_key_delete(struct wr_store *s, const char *team, const char *key_id,
                        struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_KEY_DELETE,
                 "DELETE FROM api_keys WHERE id = ?1 AND (?2 IS NULL OR team = ?2)", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, key_id);
    wr__bind_text(st, 2, team);
    if (wr__step_done(s->db, st, "delete api key", err) < 0)
        return -1;
    if (sqlite3_changes(s->db) == 0)
        return wr_err_set(err, WR_ENOTFOUND, 0, "api key %s not found", key_id ? key_id : "");
    return 0;
}

int wr_store_key_count(struct wr_store *s, int64_t *n, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_KEY_COUNT, "SELECT count(*) FROM api_keys", err);

    if (st == NULL)
        return -1;
    if (sqlite3_step(st) != SQLITE_ROW)
        return wr__store_fail(s->db, err, "count api keys");
    *n = sqlite3_column_int64(st, 0);
    return 0;
}
