/* SPDX-License-Identifier: Apache-2.0 */
/* YAML into jansson values (yaml.h): a recursive descent over libyaml's events. */
#include "yaml.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"

#define PATH_MAX_LEN 1024

struct anchor {
    char *name;
    json_t *value;
};

struct loader {
    yaml_parser_t p;
    struct wr_yaml_limits lim;
    struct anchor *anchors;
    size_t n_anchors, cap_anchors;
    unsigned aliases;
    size_t values, bytes; /* after expansion */
    json_t *lines;        /* or NULL */
    char path[PATH_MAX_LEN];
    size_t path_len; /* PATH_MAX_LEN: too long, nothing recorded below */
    struct wr_err *err;
};

static unsigned long line_of(const yaml_event_t *ev)
{
    return (unsigned long)ev->start_mark.line + 1;
}

/* The next event, or -1 with err. */
static int next(struct loader *y, yaml_event_t *ev)
{
    if (yaml_parser_parse(&y->p, ev))
        return 0;
    return wr_err_set(y->err, WR_EINVAL, 0, "YAML line %lu: %s",
                      (unsigned long)y->p.problem_mark.line + 1,
                      y->p.problem ? y->p.problem : "cannot be parsed");
}

/* The values in v, and the bytes of its strings and keys. */
static size_t count_values(const json_t *v, size_t *bytes)
{
    size_t n = 1;
    const char *k;
    json_t *e;
    size_t i;

    if (json_is_object(v))
        json_object_foreach((json_t *)v, k, e)
        {
            *bytes += strlen(k);
            n += count_values(e, bytes);
        }
    else if (json_is_array(v))
        json_array_foreach(v, i, e) n += count_values(e, bytes);
    else if (json_is_string(v))
        *bytes += json_string_length(v);
    return n;
}

static int add_values(struct loader *y, size_t n, size_t bytes, const yaml_event_t *ev)
{
    y->values += n;
    y->bytes += bytes;
    if (y->values > y->lim.max_values)
        return wr_err_set(y->err, WR_EINVAL, 0, "YAML line %lu: more than %zu values", line_of(ev),
                          y->lim.max_values);
    if (y->bytes > y->lim.max_bytes)
        return wr_err_set(y->err, WR_EINVAL, 0, "YAML line %lu: more than %zu bytes of strings",
                          line_of(ev), y->lim.max_bytes);
    return 0;
}

static void remember(struct loader *y, const yaml_char_t *name, json_t *v)
{
    if (name == NULL)
        return;
    if (y->n_anchors == y->cap_anchors) {
        y->cap_anchors = y->cap_anchors ? y->cap_anchors * 2 : 8;
        y->anchors = xrealloc(y->anchors, y->cap_anchors * sizeof(*y->anchors));
    }
    y->anchors[y->n_anchors++] = (struct anchor){xstrdup((const char *)name), json_incref(v)};
}

/* Whether s is one or more characters of set after prefix (and an optional sign). */
static bool all_of(const char *s, const char *prefix, bool sign, const char *set)
{
    if (sign && (*s == '-' || *s == '+'))
        s++;
    if (strncmp(s, prefix, strlen(prefix)) != 0)
        return false;
    s += strlen(prefix);
    return *s != '\0' && strspn(s, set) == strlen(s);
}

/* A plain scalar by YAML 1.2's core schema. */
static json_t *typed(const char *s)
{
    static const char dec[] = "0123456789";
    char *end;
    int base = all_of(s, "", true, dec)                           ? 10
               : all_of(s, "0o", false, "01234567")               ? 8
               : all_of(s, "0x", false, "0123456789abcdefABCDEF") ? 16
                                                                  : 0;

    if (!*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
        strcmp(s, "NULL") == 0)
        return json_null();
    if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0)
        return json_true();
    if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 || strcmp(s, "FALSE") == 0)
        return json_false();
    if (base != 0) {
        long long v;
        errno = 0;
        v = strtoll(base == 10 ? s : s + 2, &end, base);
        if (errno == 0 && *end == '\0')
            return json_integer(v);
        return json_string(s); /* out of range: kept as written */
    }
    /* [-+]?(.d+|d+(.d*)?)([eE][-+]?d+)?: strtod's decimal form, without its hex, inf and nan */
    if (strspn(s, "0123456789.eE+-") == strlen(s) && strpbrk(s, dec) != NULL &&
        strchr("+-.0123456789", s[0]) != NULL) {
        double d = strtod(s, &end);
        if (*end == '\0' && isfinite(d))
            return json_real(d);
    }
    return json_string(s);
}

/* Append "/" and key, escaped as a JSON pointer; returns the old length to restore. */
static size_t path_push(struct loader *y, const char *key)
{
    size_t old = y->path_len;

    if (y->path_len >= PATH_MAX_LEN - 1)
        return old;
    y->path[y->path_len++] = '/';
    for (const char *c = key; *c && y->path_len < PATH_MAX_LEN - 2; c++) {
        if (*c == '~' || *c == '/') {
            y->path[y->path_len++] = '~';
            y->path[y->path_len++] = *c == '~' ? '0' : '1';
        } else {
            y->path[y->path_len++] = *c;
        }
    }
    if (y->path_len >= PATH_MAX_LEN - 2)
        y->path_len = PATH_MAX_LEN; /* too long: nothing recorded below */
    else
        y->path[y->path_len] = '\0';
    return old;
}

static void path_pop(struct loader *y, size_t old)
{
    y->path_len = old;
    y->path[old < PATH_MAX_LEN ? old : PATH_MAX_LEN - 1] = '\0';
}

static json_t *node(struct loader *y, yaml_event_t *ev, unsigned depth);

/* A mapping's merge value (`<<: *a` or `<<: [*a, *b]`) into obj, keys obj has already winning. */
static int merge(struct loader *y, json_t *obj, json_t *from, const yaml_event_t *ev)
{
    size_t i;
    json_t *m;

    if (json_is_object(from))
        return json_object_update_missing(obj, from) == 0 ? 0 : -1;
    if (!json_is_array(from))
        return wr_err_set(y->err, WR_EINVAL, 0,
                          "YAML line %lu: `<<` takes a mapping or a list of mappings", line_of(ev));
    json_array_foreach(
        from, i,
        m) if (!json_is_object(m) ||
               json_object_update_missing(obj, m) !=
                   0) return wr_err_set(y->err, WR_EINVAL, 0,
                                        "YAML line %lu: `<<` takes a mapping or a list of mappings",
                                        line_of(ev));
    return 0;
}

static json_t *mapping(struct loader *y, yaml_event_t *start, unsigned depth)
{
    json_t *obj = json_object(), *merges = json_array();
    yaml_event_t ev;

    for (;;) {
        char *key;
        bool is_merge;
        json_t *v;
        size_t old;

        if (next(y, &ev) < 0)
            goto fail;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (ev.type != YAML_SCALAR_EVENT) {
            wr_err_set(y->err, WR_EINVAL, 0, "YAML line %lu: a mapping's key must be a scalar",
                       line_of(&ev));
            yaml_event_delete(&ev);
            goto fail;
        }
        key = xstrndup((const char *)ev.data.scalar.value, ev.data.scalar.length);
        is_merge = strcmp(key, "<<") == 0 && ev.data.scalar.plain_implicit;
        if (!is_merge && json_object_get(obj, key) != NULL) {
            wr_err_set(y->err, WR_EINVAL, 0, "YAML line %lu: duplicate key `%s`", line_of(&ev),
                       key);
            free(key);
            yaml_event_delete(&ev);
            goto fail;
        }
        old = path_push(y, key);
        if (y->lines != NULL && y->path_len < PATH_MAX_LEN && !is_merge)
            json_object_set_new(y->lines, y->path, json_integer((json_int_t)line_of(&ev)));
        yaml_event_delete(&ev);
        if (next(y, &ev) < 0) {
            free(key);
            goto fail;
        }
        v = node(y, &ev, depth + 1);
        path_pop(y, old);
        if (v == NULL) {
            free(key);
            yaml_event_delete(&ev);
            goto fail;
        }
        if (is_merge) {
            json_array_append_new(merges, v);
        } else {
            json_object_set_new(obj, key, v);
        }
        free(key);
        yaml_event_delete(&ev);
    }
    {
        size_t i;
        json_t *m;
        json_array_foreach(merges, i, m) if (merge(y, obj, m, start) < 0) goto fail;
    }
    json_decref(merges);
    return obj;
fail:
    json_decref(merges);
    json_decref(obj);
    return NULL;
}

static json_t *sequence(struct loader *y, unsigned depth)
{
    json_t *arr = json_array();
    yaml_event_t ev;

    for (;;) {
        json_t *v;
        char idx[24];
        size_t old;

        if (next(y, &ev) < 0)
            goto fail;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return arr;
        }
        snprintf(idx, sizeof(idx), "%zu", json_array_size(arr));
        old = path_push(y, idx);
        v = node(y, &ev, depth + 1);
        path_pop(y, old);
        yaml_event_delete(&ev);
        if (v == NULL)
            goto fail;
        json_array_append_new(arr, v);
    }
fail:
    json_decref(arr);
    return NULL;
}

/* The value that begins with ev (the caller deletes ev), or NULL with err. */
static json_t *node(struct loader *y, yaml_event_t *ev, unsigned depth)
{
    json_t *v = NULL;

    if (depth > y->lim.max_depth) {
        wr_err_set(y->err, WR_EINVAL, 0, "YAML line %lu: nested more than %u deep", line_of(ev),
                   y->lim.max_depth);
        return NULL;
    }
    switch (ev->type) {
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        for (size_t i = y->n_anchors; i-- > 0;)
            if (strcmp(y->anchors[i].name, name) == 0) {
                v = y->anchors[i].value;
                break;
            }
        if (v == NULL) {
            wr_err_set(y->err, WR_EINVAL, 0, "YAML line %lu: unknown alias `*%s`", line_of(ev),
                       name);
            return NULL;
        }
        if (++y->aliases > y->lim.max_aliases) {
            wr_err_set(y->err, WR_EINVAL, 0, "YAML line %lu: more than %u aliases", line_of(ev),
                       y->lim.max_aliases);
            return NULL;
        }
        {
            size_t bytes = 0, n = count_values(v, &bytes);
            if (add_values(y, n, bytes, ev) < 0)
                return NULL;
        }
        return json_deep_copy(v);
    }
    case YAML_SCALAR_EVENT: {
        _cleanup_free_ char *s =
            xstrndup((const char *)ev->data.scalar.value, ev->data.scalar.length);
        const char *tag = (const char *)ev->data.scalar.tag;
        if (strlen(s) != ev->data.scalar.length) {
            wr_err_set(y->err, WR_EINVAL, 0, "YAML line %lu: a NUL byte in a scalar", line_of(ev));
            return NULL;
        }
        if (add_values(y, 1, ev->data.scalar.length, ev) < 0)
            return NULL;
        if (ev->data.scalar.plain_implicit && (tag == NULL || strcmp(tag, "!") != 0) &&
            (tag == NULL || strcmp(tag, YAML_STR_TAG) != 0))
            v = typed(s);
        else
            v = json_string(s);
        if (v == NULL) {
            wr_err_set(y->err, WR_EINVAL, 0, "YAML line %lu: a scalar is not valid UTF-8",
                       line_of(ev));
            return NULL;
        }
        remember(y, ev->data.scalar.anchor, v);
        return v;
    }
    case YAML_SEQUENCE_START_EVENT:
        if (add_values(y, 1, 0, ev) < 0 || (v = sequence(y, depth)) == NULL)
            return NULL;
        remember(y, ev->data.sequence_start.anchor, v);
        return v;
    case YAML_MAPPING_START_EVENT:
        if (add_values(y, 1, 0, ev) < 0 || (v = mapping(y, ev, depth)) == NULL)
            return NULL;
        remember(y, ev->data.mapping_start.anchor, v);
        return v;
    default:
        wr_err_set(y->err, WR_EINVAL, 0, "YAML line %lu: unexpected event", line_of(ev));
        return NULL;
    }
}

json_t *wr_yaml_load(const char *text, size_t len, const struct wr_yaml_limits *lim, json_t **lines,
                     struct wr_err *err)
{
    struct loader y = {.err = err};
    yaml_event_t ev;
    json_t *root = NULL;
    int stage = 0; /* 0: stream start, 1: document start, 2: root, 3: document end, 4: end */

    y.lim.max_depth = lim && lim->max_depth ? lim->max_depth : 64;
    y.lim.max_aliases = lim && lim->max_aliases ? lim->max_aliases : 1000;
    y.lim.max_values = lim && lim->max_values ? lim->max_values : 1000000;
    y.lim.max_bytes = lim && lim->max_bytes ? lim->max_bytes : 16 << 20;
    if (lines != NULL)
        y.lines = json_object();
    if (!yaml_parser_initialize(&y.p)) {
        wr_err_set(err, WR_ESYS, ENOMEM, "YAML parser");
        goto out;
    }
    yaml_parser_set_input_string(&y.p, (const unsigned char *)text, len);
    for (; stage < 5; stage++) {
        if (next(&y, &ev) < 0)
            goto fail;
        if (stage == 1 && ev.type == YAML_STREAM_END_EVENT) {
            wr_err_set(err, WR_EINVAL, 0, "YAML: the document is empty");
            yaml_event_delete(&ev);
            goto fail;
        }
        if (stage == 2) {
            root = node(&y, &ev, 1);
            yaml_event_delete(&ev);
            if (root == NULL)
                goto fail;
            continue;
        }
        if ((stage == 0 && ev.type != YAML_STREAM_START_EVENT) ||
            (stage == 1 && ev.type != YAML_DOCUMENT_START_EVENT) ||
            (stage == 3 && ev.type != YAML_DOCUMENT_END_EVENT) ||
            (stage == 4 && ev.type != YAML_STREAM_END_EVENT)) {
            wr_err_set(err, WR_EINVAL, 0, "YAML line %lu: %s", line_of(&ev),
                       stage == 4 ? "one document only" : "unexpected content");
            yaml_event_delete(&ev);
            goto fail;
        }
        yaml_event_delete(&ev);
    }
    goto out;
fail:
    json_decref(root);
    root = NULL;
out:
    yaml_parser_delete(&y.p);
    for (size_t i = 0; i < y.n_anchors; i++) {
        free(y.anchors[i].name);
        json_decref(y.anchors[i].value);
    }
    free(y.anchors);
    if (lines != NULL) {
        if (root != NULL)
            *lines = y.lines;
        else
            json_decref(y.lines);
    }
    return root;
}
