/* SPDX-License-Identifier: Apache-2.0 */
/* The Dockerfile subset (see dockerfile.h). */
#include "dockerfile.h"

#include <ctype.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"

static void push(char ***v, size_t *n, char *s)
{
    *v = xrealloc(*v, (*n + 2) * sizeof(char *));
    (*v)[(*n)++] = s;
    (*v)[*n] = NULL;
}

static void free_v(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void step_fini(struct wr_df_step *s)
{
    free(s->text);
    free_v(s->argv, s->argc);
    free(s->shell);
    free(s->chown);
}

void wr_dockerfile_fini(struct wr_dockerfile *df)
{
    for (size_t i = 0; i < df->n; i++)
        step_fini(&df->steps[i]);
    free(df->steps);
    df->steps = NULL;
    df->n = 0;
}

/* A JSON array of strings (the exec form), or -1. */
static int json_form(const char *s, char ***argv, size_t *argc)
{
    json_t *j = json_loads(s, 0, NULL);
    size_t i;
    json_t *v;

    if (!json_is_array(j) || json_array_size(j) == 0) {
        json_decref(j);
        return -1;
    }
    json_array_foreach(j, i, v)
    {
        if (!json_is_string(v)) {
            json_decref(j);
            free_v(*argv, *argc);
            *argv = NULL;
            *argc = 0;
            return -1;
        }
        push(argv, argc, xstrdup(json_string_value(v)));
    }
    json_decref(j);
    return 0;
}

/* Split on blanks; "double quotes" group (with \" and \\ inside). -1 on an open quote. */
static int words(const char *s, char ***argv, size_t *argc)
{
    while (*s) {
        char *w;
        size_t n = 0;
        while (isspace((unsigned char)*s))
            s++;
        if (*s == '\0')
            break;
        w = xmalloc(strlen(s) + 1);
        while (*s && !isspace((unsigned char)*s)) {
            if (*s == '"') {
                for (s++; *s && *s != '"'; s++) {
                    if (*s == '\\' && (s[1] == '"' || s[1] == '\\'))
                        s++;
                    w[n++] = *s;
                }
                if (*s != '"') {
                    free(w);
                    return -1;
                }
                s++;
            } else {
                w[n++] = *s++;
            }
        }
        w[n] = '\0';
        push(argv, argc, w);
    }
    return 0;
}

static int fail(struct wr_err *err, unsigned *bad_line, unsigned line, const char *fmt,
                const char *arg)
{
    *bad_line = line;
    return wr_err_set(err, WR_EINVAL, 0, "line %u: %s%s", line, fmt, arg ? arg : "");
}

static int parse_env(struct wr_df_step *st, const char *args)
{
    char **w = NULL;
    size_t n = 0;

    if (words(args, &w, &n) < 0 || n == 0) {
        free_v(w, n);
        return -1;
    }
    if (strchr(w[0], '=') == NULL) {
        /* ENV KEY VALUE...: the value is the rest of the line. */
        const char *rest = args;
        while (isspace((unsigned char)*rest))
            rest++;
        rest += strlen(w[0]);
        while (isspace((unsigned char)*rest))
            rest++;
        push(&st->argv, &st->argc, xstrdup(w[0]));
        push(&st->argv, &st->argc, xstrdup(rest));
        free_v(w, n);
        return *rest ? 0 : -1;
    }
    for (size_t i = 0; i < n; i++) {
        char *eq = strchr(w[i], '=');
        if (eq == NULL || eq == w[i]) {
            free_v(w, n);
            return -1;
        }
        *eq = '\0';
        push(&st->argv, &st->argc, xstrdup(w[i]));
        push(&st->argv, &st->argc, xstrdup(eq + 1));
    }
    free_v(w, n);
    return 0;
}

static bool valid_env_key(const char *k)
{
    if (!(isalpha((unsigned char)*k) || *k == '_'))
        return false;
    for (; *k; k++)
        if (!(isalnum((unsigned char)*k) || *k == '_'))
            return false;
    return true;
}

static int parse_line(struct wr_df_step *st, const char *ins, const char *args, bool have_from,
                      unsigned *bad_line, struct wr_err *err)
{
    unsigned line = st->line;
    char **w = NULL;
    size_t n = 0;

    if (strcasecmp(ins, "FROM") == 0) {
        st->kind = WR_DF_FROM;
        if (have_from)
            return fail(err, bad_line, line, "a second FROM: multi-stage builds are not supported",
                        NULL);
        if (words(args, &st->argv, &st->argc) < 0 || st->argc != 1)
            return fail(err, bad_line, line,
                        "FROM takes one image (a template or snapshot; `AS` is not supported)",
                        NULL);
        return 0;
    }
    if (!have_from)
        return fail(err, bad_line, line, "the first instruction must be FROM, not ", ins);
    if (strcasecmp(ins, "RUN") == 0) {
        st->kind = WR_DF_RUN;
        if (args[0] == '[') {
            if (json_form(args, &st->argv, &st->argc) < 0)
                return fail(err, bad_line, line, "RUN [...] must be a JSON array of strings", NULL);
        } else if (args[0] == '\0') {
            return fail(err, bad_line, line, "RUN needs a command", NULL);
        } else {
            st->shell = xstrdup(args);
        }
        return 0;
    }
    if (strcasecmp(ins, "ENV") == 0) {
        st->kind = WR_DF_ENV;
        if (parse_env(st, args) < 0)
            return fail(err, bad_line, line, "ENV takes KEY=VALUE pairs (or KEY VALUE)", NULL);
        for (size_t i = 0; i < st->argc; i += 2)
            if (!valid_env_key(st->argv[i]))
                return fail(err, bad_line, line, "not a variable name: ", st->argv[i]);
        return 0;
    }
    if (strcasecmp(ins, "WORKDIR") == 0 || strcasecmp(ins, "USER") == 0) {
        st->kind = toupper((unsigned char)ins[0]) == 'W' ? WR_DF_WORKDIR : WR_DF_USER;
        if (words(args, &st->argv, &st->argc) < 0 || st->argc != 1)
            return fail(err, bad_line, line,
                        st->kind == WR_DF_USER ? "USER takes one user" : "WORKDIR takes one path",
                        NULL);
        return 0;
    }
    if (strcasecmp(ins, "COPY") == 0) {
        st->kind = WR_DF_COPY;
        while (strncmp(args, "--", 2) == 0) {
            size_t len = strcspn(args, " \t");
            if (strncmp(args, "--chown=", 8) == 0 && len > 8) {
                free(st->chown);
                st->chown = xstrndup(args + 8, len - 8);
            } else {
                _cleanup_free_ char *opt = xstrndup(args, len);
                return fail(err, bad_line, line, "COPY option not supported: ", opt);
            }
            args += len;
            while (isspace((unsigned char)*args))
                args++;
        }
        if (args[0] == '[' ? json_form(args, &w, &n) < 0 : words(args, &w, &n) < 0) {
            free_v(w, n);
            return fail(err, bad_line, line, "COPY: cannot read its arguments", NULL);
        }
        st->argv = w;
        st->argc = n;
        if (n < 2)
            return fail(err, bad_line, line, "COPY needs a source and a destination", NULL);
        for (size_t i = 0; i + 1 < n; i++) {
            const char *s = w[i];
            if (strpbrk(s, "*?[") != NULL)
                return fail(err, bad_line, line, "COPY wildcards are not supported: ", s);
            if (s[0] == '/' || strcmp(s, "..") == 0 || strncmp(s, "../", 3) == 0 ||
                strstr(s, "/../") != NULL ||
                (strlen(s) >= 3 && strcmp(s + strlen(s) - 3, "/..") == 0))
                return fail(err, bad_line, line, "COPY source outside the build context: ", s);
        }
        if (n > 2 && (w[n - 1][0] == '\0' || w[n - 1][strlen(w[n - 1]) - 1] != '/'))
            return fail(err, bad_line, line,
                        "COPY with several sources needs a destination ending in /", NULL);
        return 0;
    }
    return fail(err, bad_line, line, "unsupported instruction ", ins);
}

int wr_dockerfile_parse(const char *text, struct wr_dockerfile *out, unsigned *bad_line,
                        struct wr_err *err)
{
    const char *p = text;
    unsigned lineno = 0;
    bool have_from = false;

    memset(out, 0, sizeof(*out));
    *bad_line = 0;
    while (*p) {
        /* One logical line: physical lines joined where they end in a backslash; comment and
         * blank lines are skipped, also inside a continuation (as Docker does). */
        size_t cap = 256, len = 0;
        char *buf = xmalloc(cap);
        unsigned first = 0;
        while (*p) {
            const char *eol = strchr(p, '\n'), *s = p, *t;
            size_t n = eol ? (size_t)(eol - p) : strlen(p);
            bool cont;
            lineno++;
            p = eol ? eol + 1 : p + n;
            while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
                n--;
            for (t = s; t < s + n && isspace((unsigned char)*t);)
                t++;
            if (t == s + n || *t == '#')
                continue;
            cont = s[n - 1] == '\\';
            if (cont)
                n--;
            if (first == 0)
                first = lineno;
            if (len + n + 2 > cap) {
                cap = 2 * (len + n + 2);
                buf = xrealloc(buf, cap);
            }
            if (len > 0)
                buf[len++] = ' ';
            memcpy(buf + len, s, n);
            len += n;
            if (!cont)
                break;
        }
        buf[len] = '\0';
        {
            char *s = buf, *args;
            while (isspace((unsigned char)*s))
                s++;
            if (*s == '\0') {
                free(buf);
                continue;
            }
            args = s + strcspn(s, " \t");
            if (*args)
                *args++ = '\0';
            while (isspace((unsigned char)*args))
                args++;
            out->steps = xrealloc(out->steps, (out->n + 1) * sizeof(*out->steps));
            struct wr_df_step *st = &out->steps[out->n++];
            memset(st, 0, sizeof(*st));
            st->line = first;
            st->text = *args ? xasprintf("%s %s", s, args) : xstrdup(s);
            for (char *c = st->text; *c && !isspace((unsigned char)*c); c++)
                *c = (char)toupper((unsigned char)*c);
            if (parse_line(st, s, args, have_from, bad_line, err) < 0) {
                free(buf);
                wr_dockerfile_fini(out);
                return -1;
            }
            have_from = true;
        }
        free(buf);
    }
    if (!have_from) {
        *bad_line = lineno ? lineno : 1;
        return wr_err_set(err, WR_EINVAL, 0, "the Dockerfile has no FROM");
    }
    return 0;
}
