/* SPDX-License-Identifier: Apache-2.0 */
/* Sandboxes, snapshots and forks (include/warren.h): requests built from the option structs,
 * answers kept as the daemon's JSON behind accessors. */
#include <stdlib.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "lib.h"

struct warren_sandbox {
    json_t *j;  /* the description */
    char *text; /* j as JSON text */
};

struct warren_snapshot {
    json_t *j;
    char *text;
};

struct warren_sandbox_list {
    warren_sandbox **v;
    size_t n;
    warren_error *errors;
    size_t n_errors;
    char *text; /* the whole answer as JSON */
};

/* ---- descriptions --------------------------------------------------------------------------- */

/* Take j (a reference) as a sandbox; NULL with out unless it is an object with an id. */
static warren_sandbox *sandbox_of(json_t *j, warren_error *out)
{
    warren_sandbox *sb;

    if (!json_is_object(j) || !json_is_string(json_object_get(j, "id"))) {
        json_decref(j);
        wl_failf(out, WR_EPROTO, 0, "bad answer from warrend: not a sandbox");
        return NULL;
    }
    sb = xcalloc(1, sizeof(*sb));
    sb->j = j;
    return sb;
}

static const char *str(const json_t *j, const char *key)
{
    return json_string_value(json_object_get(j, key));
}

const char *warren_sandbox_id(const warren_sandbox *sb)
{
    return str(sb->j, "id");
}

const char *warren_sandbox_template(const warren_sandbox *sb)
{
    return str(sb->j, "template");
}

const char *warren_sandbox_state(const warren_sandbox *sb)
{
    return str(sb->j, "state");
}

double warren_sandbox_cpus(const warren_sandbox *sb)
{
    return json_number_value(json_object_get(sb->j, "cpus"));
}

int64_t warren_sandbox_memory_mb(const warren_sandbox *sb)
{
    return (int64_t)json_integer_value(json_object_get(sb->j, "memory_mb"));
}

const char *warren_sandbox_created_at(const warren_sandbox *sb)
{
    return str(sb->j, "created_at");
}

const char *warren_sandbox_expires_at(const warren_sandbox *sb)
{
    return str(sb->j, "expires_at");
}

const char *warren_sandbox_metadata(const warren_sandbox *sb, const char *key)
{
    return str(json_object_get(sb->j, "metadata"), key);
}

/* The text is made when the description is handed out (give_sandbox), so that a description
 * is never written after: any thread may read it. */
const char *warren_sandbox_json(const warren_sandbox *sb)
{
    return sb->text;
}

void warren_sandbox_free(warren_sandbox *sb)
{
    if (sb == NULL)
        return;
    json_decref(sb->j);
    free(sb->text);
    free(sb);
}

/* Hand sb out through *out (or free it when out is NULL); make its text first. */
static int give_sandbox(warren_sandbox *sb, warren_sandbox **out)
{
    sb->text = json_dumps(sb->j, JSON_COMPACT);
    if (out != NULL)
        *out = sb;
    else
        warren_sandbox_free(sb);
    return 0;
}

/* A round trip whose answer is a sandbox. */
static int sandbox_call(warren *w, const char *method, const char *target, json_t *body,
                        const char *const *extra, warren_sandbox **out, warren_error *err)
{
    json_t *j = NULL;
    warren_sandbox *sb;

    if (wl_api(w, method, target, body, extra, &j, err) < 0)
        return -1;
    if ((sb = sandbox_of(j, err)) == NULL)
        return -1;
    return give_sandbox(sb, out);
}

/* ---- create, get, delete, timeout, pause, resume -------------------------------------------- */

/* The POST /v1/sandboxes body of opts. Returns 0 with *body, or -1 with err. */
int wl_create_body(const warren_create_opts *o, json_t **body, warren_error *err)
{
    json_t *b = json_object(), *env = json_object(), *meta = json_object();

    *body = b;
    if (o->template_name != NULL)
        json_object_set_new(b, "template", json_string(o->template_name));
    if (o->cpus > 0)
        json_object_set_new(b, "cpus", json_real(o->cpus));
    if (o->memory_mb > 0)
        json_object_set_new(b, "memory_mb", json_integer((json_int_t)o->memory_mb));
    if (o->disk_mb > 0)
        json_object_set_new(b, "disk_mb", json_integer((json_int_t)o->disk_mb));
    if (o->timeout_s > 0)
        json_object_set_new(b, "timeout", json_integer((json_int_t)o->timeout_s));
    if (o->on_timeout != NULL)
        json_object_set_new(b, "on_timeout", json_string(o->on_timeout));
    if (wl_kv_object("env", o->env, env, err) < 0 ||
        wl_kv_object("metadata", o->metadata, meta, err) < 0) {
        json_decref(env);
        json_decref(meta);
        return -1;
    }
    if (json_object_size(env))
        json_object_set(b, "env", env);
    if (json_object_size(meta))
        json_object_set(b, "metadata", meta);
    json_decref(env);
    json_decref(meta);
    if (o->extra_json != NULL) {
        json_error_t je;
        json_t *x = json_loads(o->extra_json, 0, &je);
        if (!json_is_object(x)) {
            json_decref(x);
            return wl_failf(err, WR_EINVAL, 0, "extra_json: %s", x ? "not a JSON object" : je.text);
        }
        json_object_update(b, x);
        json_decref(x);
    }
    return 0;
}

int warren_create(warren *w, const warren_create_opts *opts, warren_sandbox **out,
                  warren_error *err)
{
    static const warren_create_opts none;
    _cleanup_free_ char *idem = NULL;
    json_t *body = NULL;
    int r;

    if (wl_create_body(opts ? opts : &none, &body, err) < 0) {
        json_decref(body);
        return -1;
    }
    if (opts != NULL && opts->idempotency_key != NULL)
        idem = xasprintf("Idempotency-Key: %s", opts->idempotency_key);
    const char *extra[] = {idem, NULL};
    r = sandbox_call(w, "POST", "/v1/sandboxes", body, idem ? extra : NULL, out, err);
    json_decref(body);
    return r;
}

int warren_get(warren *w, const char *id, warren_sandbox **out, warren_error *err)
{
    _cleanup_free_ char *t = NULL;

    if (wl_check_id(id, err) < 0)
        return -1;
    t = xasprintf("/v1/sandboxes/%s", id);
    return sandbox_call(w, "GET", t, NULL, NULL, out, err);
}

int warren_delete(warren *w, const char *id, warren_error *err)
{
    _cleanup_free_ char *t = NULL;

    if (wl_check_id(id, err) < 0)
        return -1;
    t = xasprintf("/v1/sandboxes/%s", id);
    return wl_api(w, "DELETE", t, NULL, NULL, NULL, err) < 0 ? -1 : 0;
}

/* POST /v1/sandboxes/ID/<verb> with body (taken), answered by a sandbox. */
static int sandbox_post(warren *w, const char *id, const char *verb, json_t *body,
                        warren_sandbox **out, warren_error *err)
{
    _cleanup_free_ char *t = NULL;
    int r;

    if (wl_check_id(id, err) < 0) {
        json_decref(body);
        return -1;
    }
    t = xasprintf("/v1/sandboxes/%s/%s", id, verb);
    r = sandbox_call(w, "POST", t, body, NULL, out, err);
    json_decref(body);
    return r;
}

int warren_set_timeout(warren *w, const char *id, int64_t timeout_s, warren_sandbox **out,
                       warren_error *err)
{
    if (timeout_s <= 0)
        return wl_failf(err, WR_EINVAL, 0, "timeout must be at least 1 second");
    return sandbox_post(w, id, "timeout", json_pack("{s:I}", "timeout", (json_int_t)timeout_s), out,
                        err);
}

int warren_pause(warren *w, const char *id, warren_pause_mode mode, warren_sandbox **out,
                 warren_error *err)
{
    if (mode != WARREN_PAUSE_MEMORY && mode != WARREN_PAUSE_DISK)
        return wl_failf(err, WR_EINVAL, 0, "pause mode %d: want memory or disk", (int)mode);
    return sandbox_post(w, id, "pause",
                        json_pack("{s:s}", "mode", mode == WARREN_PAUSE_DISK ? "disk" : "memory"),
                        out, err);
}

int warren_resume(warren *w, const char *id, int64_t timeout_s, warren_sandbox **out,
                  warren_error *err)
{
    json_t *body = json_object();

    if (timeout_s > 0)
        json_object_set_new(body, "timeout", json_integer((json_int_t)timeout_s));
    return sandbox_post(w, id, "resume", body, out, err);
}

/* ---- lists ---------------------------------------------------------------------------------- */

size_t warren_sandbox_list_len(const warren_sandbox_list *l)
{
    return l->n;
}

const warren_sandbox *warren_sandbox_list_at(const warren_sandbox_list *l, size_t i)
{
    return i < l->n ? l->v[i] : NULL;
}

const char *warren_sandbox_list_json(const warren_sandbox_list *l)
{
    return l->text;
}

size_t warren_sandbox_list_nerrors(const warren_sandbox_list *l)
{
    return l->n_errors;
}

const warren_error *warren_sandbox_list_error(const warren_sandbox_list *l, size_t i)
{
    return i < l->n_errors ? &l->errors[i] : NULL;
}

void warren_sandbox_list_free(warren_sandbox_list *l)
{
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->n; i++)
        warren_sandbox_free(l->v[i]);
    free(l->v);
    free(l->errors);
    free(l->text);
    free(l);
}

/* Append the sandboxes of JSON array a to l. Returns 0, or -1 with err. */
static int list_add(warren_sandbox_list *l, json_t *a, warren_error *err)
{
    size_t i;
    json_t *s;

    if (!json_is_array(a))
        return wl_failf(err, WR_EPROTO, 0, "bad answer from warrend: no `sandboxes` array");
    l->v = xrealloc(l->v, (l->n + json_array_size(a)) * sizeof(*l->v) + 1);
    json_array_foreach(a, i, s)
    {
        warren_sandbox *sb = sandbox_of(json_incref(s), err);
        if (sb == NULL)
            return -1;
        give_sandbox(sb, &l->v[l->n++]);
    }
    return 0;
}

int warren_list(warren *w, const warren_list_opts *opts, warren_sandbox_list **out,
                warren_error *err)
{
    struct wr_buf query = {0};
    _cleanup_free_ char *cursor = NULL;
    warren_sandbox_list *l = xcalloc(1, sizeof(*l));

    if (opts != NULL && opts->state != NULL) {
        wr_buf_puts(&query, "&state=");
        wl_buf_add_escaped(&query, opts->state);
    }
    for (const char *const *m = opts ? opts->metadata : NULL; m != NULL && *m != NULL; m++) {
        if (strchr(*m, '=') == NULL || (*m)[0] == '=') {
            wl_failf(err, WR_EINVAL, 0, "metadata `%s` must be KEY=VALUE", *m);
            goto fail;
        }
        wr_buf_puts(&query, "&metadata=");
        wl_buf_add_escaped(&query, *m);
    }
    for (;;) {
        struct wr_buf target = {0};
        json_t *page = NULL;
        const char *next;
        bool empty;
        int r;

        wr_buf_printf(&target, "/v1/sandboxes?limit=1000%s", query.len ? wr_buf_str(&query) : "");
        if (cursor) {
            wr_buf_puts(&target, "&cursor=");
            wl_buf_add_escaped(&target, cursor);
        }
        r = wl_api(w, "GET", wr_buf_str(&target), NULL, NULL, &page, err);
        wr_buf_fini(&target);
        if (r < 0 || list_add(l, json_object_get(page, "sandboxes"), err) < 0) {
            json_decref(page);
            goto fail;
        }
        empty = json_array_size(json_object_get(page, "sandboxes")) == 0;
        next = json_string_value(json_object_get(page, "next_cursor"));
        free(cursor);
        cursor = next != NULL && next[0] != '\0' ? xstrdup(next) : NULL;
        json_decref(page);
        if (cursor == NULL || empty)
            break;
    }
    wr_buf_fini(&query);
    {
        json_t *all = json_array(), *doc;
        for (size_t i = 0; i < l->n; i++)
            json_array_append(all, l->v[i]->j);
        doc = json_pack("{s:o}", "sandboxes", all);
        l->text = json_dumps(doc, JSON_COMPACT);
        json_decref(doc);
    }
    wl_ok(err);
    *out = l;
    return 0;
fail:
    wr_buf_fini(&query);
    warren_sandbox_list_free(l);
    return -1;
}

/* ---- snapshots and forks -------------------------------------------------------------------- */

int warren_snapshot_create(warren *w, const char *id, const char *name, warren_snapshot **out,
                           warren_error *err)
{
    _cleanup_free_ char *t = NULL;
    json_t *body = json_object(), *j = NULL;
    warren_snapshot *s;
    int r;

    if (wl_check_id(id, err) < 0) { /* the name is the daemon's to check: it rides in the body */
        json_decref(body);
        return -1;
    }
    if (name != NULL)
        json_object_set_new(body, "name", json_string(name));
    t = xasprintf("/v1/sandboxes/%s/snapshots", id);
    r = wl_api(w, "POST", t, body, NULL, &j, err);
    json_decref(body);
    if (r < 0)
        return -1;
    if (!json_is_string(json_object_get(j, "id"))) {
        json_decref(j);
        return wl_failf(err, WR_EPROTO, 0, "bad answer from warrend: not a snapshot");
    }
    s = xcalloc(1, sizeof(*s));
    s->j = j;
    s->text = json_dumps(j, JSON_COMPACT);
    if (out != NULL)
        *out = s;
    else
        warren_snapshot_free(s);
    return 0;
}

int warren_snapshot_delete(warren *w, const char *snapshot, warren_error *err)
{
    _cleanup_free_ char *t = NULL;

    if (wl_check_name("snapshot id or name", snapshot, err) < 0)
        return -1;
    t = xasprintf("/v1/snapshots/%s", snapshot);
    return wl_api(w, "DELETE", t, NULL, NULL, NULL, err) < 0 ? -1 : 0;
}

const char *warren_snapshot_id(const warren_snapshot *s)
{
    return str(s->j, "id");
}

const char *warren_snapshot_name(const warren_snapshot *s)
{
    return str(s->j, "name");
}

const char *warren_snapshot_json(const warren_snapshot *s)
{
    return s->text;
}

void warren_snapshot_free(warren_snapshot *s)
{
    if (s == NULL)
        return;
    json_decref(s->j);
    free(s->text);
    free(s);
}

int warren_fork(warren *w, const char *id, const warren_fork_opts *opts, warren_sandbox_list **out,
                warren_error *err)
{
    _cleanup_free_ char *t = NULL;
    json_t *body = json_object(), *meta = json_object(), *res = NULL, *e;
    warren_sandbox_list *l = NULL;
    size_t i;
    int r = -1;

    if (wl_check_id(id, err) < 0)
        goto out;
    if (opts != NULL && opts->count != 0) {
        if (opts->count < 1)
            goto bad_count;
        json_object_set_new(body, "count", json_integer(opts->count));
    }
    if (opts != NULL && opts->timeout_s > 0)
        json_object_set_new(body, "timeout", json_integer((json_int_t)opts->timeout_s));
    if (opts != NULL && wl_kv_object("metadata", opts->metadata, meta, err) < 0)
        goto out;
    if (json_object_size(meta))
        json_object_set(body, "metadata", meta);
    t = xasprintf("/v1/sandboxes/%s/fork", id);
    if (wl_api(w, "POST", t, body, NULL, &res, err) < 0)
        goto out;
    l = xcalloc(1, sizeof(*l));
    if (list_add(l, json_object_get(res, "sandboxes"), err) < 0)
        goto out;
    l->errors = xcalloc(json_array_size(json_object_get(res, "errors")) + 1, sizeof(*l->errors));
    json_array_foreach(json_object_get(res, "errors"), i, e)
    {
        warren_error *x = &l->errors[l->n_errors++];
        const char *code = str(e, "code"), *msg = str(e, "message");
        x->code = (warren_code)wl_http_kind_of(code, 0);
        snprintf(x->api_code, sizeof(x->api_code), "%s", code ? code : "");
        snprintf(x->message, sizeof(x->message), "%s", msg ? msg : "a copy failed");
    }
    l->text = json_dumps(res, JSON_COMPACT);
    *out = steal_pointer(&l);
    wl_ok(err);
    r = 0;
    goto out;
bad_count:
    wl_failf(err, WR_EINVAL, 0, "fork count %d: want 1 to 100", opts->count);
out:
    warren_sandbox_list_free(l);
    json_decref(body);
    json_decref(meta);
    json_decref(res);
    return r;
}
