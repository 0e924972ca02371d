/* SPDX-License-Identifier: Apache-2.0 */
/* Compose files into Warren's service list (compose.h). The file is loaded into jansson
 * (core/yaml.c), every string value interpolated from the caller's env, then each key read
 * against a closed list; errors carry the key's dotted path and, from the loader's map of JSON
 * pointers, its line. The Compose specification: compose-spec/compose-spec, spec.md. */
#include "compose.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/json_cleanup.h"
#include "../util/xalloc.h"
#include "yaml.h"

#define DEFAULT_MAX_BYTES    (256 * 1024)
#define DEFAULT_MAX_SERVICES 16
#define PTR_MAX              1024
#define DOT_MAX              400
#define INTERP_MAX_NESTING   8

/* Where the checker is: the JSON pointer of the value (the loader's key for its line) and the
 * same path for people ("services.web.ports[0]"). */
struct cx {
    const json_t *lines;
    const json_t *env;
    const json_t *context;
    const json_t *services; /* the file's services mapping (names for depends_on) */
    const json_t *declared; /* the top-level volumes mapping, or NULL */
    json_t *ports_taken;    /* "port" -> the service that declared it */
    size_t budget;          /* bytes interpolation may still produce */
    size_t max_bytes;
    char ptr[PTR_MAX];
    size_t plen; /* PTR_MAX: too long, no line looked up */
    char dot[DOT_MAX];
    size_t dlen;
    struct wr_err *err;
};

struct mark {
    size_t p, d;
};

/* ---- paths and messages ---------------------------------------------------------------------- */

static void dot_append(struct cx *c, const char *s)
{
    int n = snprintf(c->dot + c->dlen, sizeof(c->dot) - c->dlen, "%s", s);
    c->dlen =
        n < 0 || (size_t)n >= sizeof(c->dot) - c->dlen ? sizeof(c->dot) - 1 : c->dlen + (size_t)n;
}

static struct mark push_key(struct cx *c, const char *key)
{
    struct mark m = {c->plen, c->dlen};

    if (c->plen < PTR_MAX) {
        size_t n = c->plen;
        c->ptr[n++] = '/';
        for (const char *k = key; *k && n < PTR_MAX - 3; k++) {
            if (*k == '~' || *k == '/') {
                c->ptr[n++] = '~';
                c->ptr[n++] = *k == '~' ? '0' : '1';
            } else {
                c->ptr[n++] = *k;
            }
        }
        /* as the loader does: a pointer too long is recorded nowhere */
        c->plen = n >= PTR_MAX - 3 ? PTR_MAX : n;
        if (c->plen < PTR_MAX)
            c->ptr[c->plen] = '\0';
    }
    if (c->dlen > 0)
        dot_append(c, ".");
    dot_append(c, key);
    return m;
}

static struct mark push_idx(struct cx *c, size_t i)
{
    struct mark m = {c->plen, c->dlen};
    char s[32];

    if (c->plen < PTR_MAX) {
        int n = snprintf(c->ptr + c->plen, PTR_MAX - c->plen, "/%zu", i);
        c->plen = n < 0 || (size_t)n >= PTR_MAX - c->plen ? PTR_MAX : c->plen + (size_t)n;
    }
    snprintf(s, sizeof(s), "[%zu]", i);
    dot_append(c, s);
    return m;
}

static void pop(struct cx *c, struct mark m)
{
    c->plen = m.p;
    if (m.p < PTR_MAX)
        c->ptr[m.p] = '\0';
    c->dlen = m.d;
    c->dot[m.d] = '\0';
}

static void reset(struct cx *c)
{
    pop(c, (struct mark){0, 0});
}

/* The line of the innermost key at or above where c is, or 0. */
static long line_here(const struct cx *c)
{
    char p[PTR_MAX];

    if (c->lines == NULL || c->plen >= PTR_MAX)
        return 0;
    memcpy(p, c->ptr, c->plen + 1);
    for (;;) {
        json_t *l = json_object_get(c->lines, p);
        char *slash;
        if (json_is_integer(l))
            return (long)json_integer_value(l);
        if ((slash = strrchr(p, '/')) == NULL || slash == p)
            return 0;
        *slash = '\0';
    }
}

/* Set err to "<path> (line N): <message>" and return -1. */
__attribute__((format(printf, 3, 4))) static int fail(struct cx *c, enum wr_err_kind kind,
                                                      const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    long line = line_here(c);

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c->dlen == 0)
        return wr_err_set(c->err, kind, 0, "%s", msg);
    if (line > 0)
        return wr_err_set(c->err, kind, 0, "%s (line %ld): %s", c->dot, line, msg);
    return wr_err_set(c->err, kind, 0, "%s: %s", c->dot, msg);
}

static int unsupported(struct cx *c)
{
    return fail(c, WR_EUNSUPPORTED, "not supported");
}

/* A user's string for a message: at most 60 bytes, control characters as '?'. Thread-local
 * storage, two slots so that one message can show two. */
static const char *shown(const char *s)
{
    static __thread char out[2][72];
    static __thread int slot;
    char *o = out[slot ^= 1];
    size_t n = 0;

    for (; *s && n < 60; s++)
        o[n++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
    if (*s)
        o[n++] = '.', o[n++] = '.', o[n++] = '.';
    o[n] = '\0';
    return o;
}

static bool is_ext(const char *key)
{
    return strncmp(key, "x-", 2) == 0;
}

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return true;
    return false;
}

/* Every key of the mapping o is in allowed (NULL-terminated) or an `x-*` extension; another is
 * refused as unsupported, naming it. */
static int closed(struct cx *c, const json_t *o, const char *const *allowed)
{
    const char *k;
    json_t *v;

    json_object_foreach((json_t *)o, k, v)
    {
        if (is_ext(k) || in_list(k, allowed))
            continue;
        push_key(c, k);
        return unsupported(c);
    }
    return 0;
}

/* o's member key, NULL when absent or null (a key set to null is as if absent). */
static json_t *opt(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_null(v) ? NULL : v;
}

/* ---- scalars --------------------------------------------------------------------------------- */

/* A scalar as Compose writes it into a string (a number or a boolean as its text); NULL for
 * another value. */
static char *scalar_text(const json_t *v)
{
    if (json_is_string(v))
        return xstrdup(json_string_value(v));
    if (json_is_integer(v))
        return xasprintf("%lld", (long long)json_integer_value(v));
    if (json_is_boolean(v))
        return xstrdup(json_is_true(v) ? "true" : "false");
    if (json_is_real(v)) {
        double d = json_real_value(v);
        for (int prec = 15; prec <= 17; prec++) {
            char *s = xasprintf("%.*g", prec, d);
            if (strtod(s, NULL) == d || prec == 17)
                return s;
            free(s);
        }
    }
    return NULL;
}

/* An integer from min to max, as a number or as decimal text (an interpolated value). */
static int integer(struct cx *c, const json_t *v, long long min, long long max, long long *out)
{
    long long n;

    if (json_is_integer(v)) {
        n = json_integer_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        errno = 0;
        n = strtoll(s, &end, 10);
        if (!isdigit((unsigned char)s[s[0] == '-']) || *end != '\0' || errno != 0)
            return fail(c, WR_EINVAL, "`%s` is not a whole number", shown(s));
    } else {
        return fail(c, WR_EINVAL, "must be a whole number");
    }
    if (n < min || n > max)
        return fail(c, WR_EINVAL, "%lld is not from %lld to %lld", n, min, max);
    *out = n;
    return 0;
}

/* A boolean, or "true"/"false" in any case (an interpolated value). */
static int boolean(struct cx *c, const json_t *v, bool *out)
{
    const char *s = json_string_value(v);

    if (json_is_boolean(v))
        *out = json_is_true(v);
    else if (s != NULL && strcasecmp(s, "true") == 0)
        *out = true;
    else if (s != NULL && strcasecmp(s, "false") == 0)
        *out = false;
    else
        return fail(c, WR_EINVAL, "must be true or false");
    return 0;
}

static int string(struct cx *c, const json_t *v, const char **out)
{
    if (!json_is_string(v))
        return fail(c, WR_EINVAL, "must be a string");
    *out = json_string_value(v);
    return 0;
}

/* Decimal digits with an optional fraction at *s: the whole part and the fraction as
 * frac/scale (at most 18 digits kept). false if there are no digits. */
static bool decimal(const char **s, uint64_t *whole, uint64_t *frac, uint64_t *scale)
{
    const char *p = *s;
    bool any = false;

    *whole = 0, *frac = 0, *scale = 1;
    for (; isdigit((unsigned char)*p); p++, any = true) {
        if (*whole > (UINT64_MAX - 9) / 10)
            return false;
        *whole = *whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        for (p++; isdigit((unsigned char)*p); p++, any = true)
            if (*scale < 1000000000000000000ull) {
                *frac = *frac * 10 + (uint64_t)(*p - '0');
                *scale *= 10;
            }
    }
    *s = p;
    return any;
}

/* Go's duration syntax, as Compose takes it ("1m30s", "1.5s", "500ms", "10us"), into whole
 * milliseconds rounded up; a bare 0 is allowed. */
static int duration(struct cx *c, const json_t *v, long long *ms)
{
    static const struct {
        const char *unit;
        uint64_t ns;
    } units[] = {
        {"ns", 1},       {"us", 1000},         {"\xc2\xb5s", 1000},   {"\xce\xbcs", 1000},
        {"ms", 1000000}, {"s", 1000000000ull}, {"m", 60000000000ull}, {"h", 3600000000000ull}};
    const char *s = json_string_value(v), *p;
    unsigned __int128 total = 0;

    if (json_is_integer(v) && json_integer_value(v) == 0) {
        *ms = 0;
        return 0;
    }
    if (s == NULL)
        return fail(c, WR_EINVAL, "must be a duration such as 30s, 1m30s or 500ms");
    if (strcmp(s, "0") == 0) {
        *ms = 0;
        return 0;
    }
    p = s;
    if (*p == '\0')
        goto bad;
    while (*p) {
        uint64_t whole, frac, scale;
        size_t i;
        if (!decimal(&p, &whole, &frac, &scale))
            goto bad;
        for (i = 0; i < WR_ARRAY_SIZE(units); i++) {
            size_t n = strlen(units[i].unit);
            /* "m" must not take the "m" of "ms" */
            if (strncmp(p, units[i].unit, n) == 0 && !(n == 1 && p[0] == 'm' && p[1] == 's'))
                break;
        }
        if (i == WR_ARRAY_SIZE(units))
            goto bad;
        p += strlen(units[i].unit);
        total += (unsigned __int128)whole * units[i].ns +
                 ((unsigned __int128)frac * units[i].ns + scale - 1) / scale;
        if (total > (unsigned __int128)INT64_MAX)
            return fail(c, WR_EINVAL, "`%s` is too long", shown(s));
    }
    *ms = (long long)((total + 999999) / 1000000);
    return 0;
bad:
    return fail(c, WR_EINVAL, "`%s` is not a duration (examples: 30s, 1m30s, 500ms)", shown(s));
}

/* Compose's byte sizes: a number of bytes, or "256m", "1g", "512k", "1024b", "1.5gb": units b, k,
 * m, g (binary), optionally followed by b; 0 is none. */
static int size_bytes(struct cx *c, const json_t *v, long long *out)
{
    const char *s = json_string_value(v), *p;
    uint64_t whole, frac, scale, mult = 1;
    unsigned __int128 n;

    if (json_is_integer(v))
        return integer(c, v, 0, INT64_MAX / 2, out);
    if (s == NULL)
        return fail(c, WR_EINVAL, "must be a size such as 256m or 1g");
    p = s;
    if (!decimal(&p, &whole, &frac, &scale))
        goto bad;
    if (*p == ' ')
        p++;
    switch (tolower((unsigned char)*p)) {
    case 'b':
        mult = 1;
        break;
    case 'k':
        mult = 1ull << 10;
        break;
    case 'm':
        mult = 1ull << 20;
        break;
    case 'g':
        mult = 1ull << 30;
        break;
    case '\0':
        break;
    default:
        goto bad;
    }
    if (*p != '\0' && tolower((unsigned char)*p) != 'b' && tolower((unsigned char)p[1]) == 'b')
        p++;
    if (*p != '\0')
        p++;
    if (*p != '\0')
        goto bad;
    n = (unsigned __int128)whole * mult + (unsigned __int128)frac * mult / scale;
    if (n > (unsigned __int128)(INT64_MAX / 2))
        return fail(c, WR_EINVAL, "`%s` is too large", shown(s));
    *out = (long long)n;
    return 0;
bad:
    return fail(c, WR_EINVAL, "`%s` is not a size (examples: 256m, 1g, 512k, 1048576)", shown(s));
}

/* CPUs, a number or decimal text from 0 to 1024, into millicores (a nonzero one at least 1). */
static int millicores(struct cx *c, const json_t *v, long long *out)
{
    const char *s = json_string_value(v);
    double d;

    if (json_is_number(v)) {
        d = json_number_value(v);
    } else if (s != NULL) {
        const char *p = s;
        uint64_t whole, frac, scale;
        if (!decimal(&p, &whole, &frac, &scale) || *p != '\0')
            return fail(c, WR_EINVAL, "`%s` is not a number of CPUs (such as 0.5 or 2)", shown(s));
        d = strtod(s, NULL);
    } else {
        return fail(c, WR_EINVAL, "must be a number of CPUs (such as 0.5 or 2)");
    }
    if (!(d >= 0) || d > 1024)
        return fail(c, WR_EINVAL, "CPUs must be from 0 to 1024");
    *out = (long long)(d * 1000 + 0.5);
    if (*out == 0 && d > 0)
        *out = 1;
    return 0;
}

/* SIGTERM, TERM (any case) or a number from 1 to 64. */
static int signal_number(struct cx *c, const json_t *v, long long *out)
{
    static const struct {
        const char *name;
        int num;
    } sigs[] = {{"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},     {"ILL", SIGILL},
                {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"IOT", SIGIOT},       {"BUS", SIGBUS},
                {"FPE", SIGFPE},       {"KILL", SIGKILL}, {"USR1", SIGUSR1},     {"SEGV", SIGSEGV},
                {"USR2", SIGUSR2},     {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},     {"TERM", SIGTERM},
                {"STKFLT", SIGSTKFLT}, {"CHLD", SIGCHLD}, {"CONT", SIGCONT},     {"STOP", SIGSTOP},
                {"TSTP", SIGTSTP},     {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU},     {"URG", SIGURG},
                {"XCPU", SIGXCPU},     {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF},
                {"WINCH", SIGWINCH},   {"IO", SIGIO},     {"POLL", SIGPOLL},     {"PWR", SIGPWR},
                {"SYS", SIGSYS}};
    const char *s = json_string_value(v);

    if (json_is_integer(v) || (s != NULL && isdigit((unsigned char)*s)))
        return integer(c, v, 1, 64, out);
    if (s == NULL)
        return fail(c, WR_EINVAL, "must be a signal such as SIGTERM");
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < WR_ARRAY_SIZE(sigs); i++)
        if (strcasecmp(sigs[i].name, s) == 0) {
            *out = sigs[i].num;
            return 0;
        }
    return fail(c, WR_EINVAL, "`%s` is not a signal (such as SIGTERM, SIGINT or 9)",
                shown(json_string_value(v)));
}

/* ---- interpolation --------------------------------------------------------------------------- */

typedef const char *(*lookup_fn)(const void *ud, const char *name);

static const char *lookup_env(const void *ud, const char *name)
{
    return json_string_value(json_object_get((const json_t *)ud, name));
}

static bool name_start(char ch)
{
    return ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

static bool name_char(char ch)
{
    return name_start(ch) || (ch >= '0' && ch <= '9');
}

static void put(struct wr_buf *out, const char *s, size_t n, size_t max, bool *over)
{
    if (out->len + n > max)
        *over = true;
    else
        wr_buf_append(out, s, n);
}

/* s[0..n) with its variables replaced, appended to out (at most max bytes); -1 with *why, a
 * message (free it). */
static int interp(const char *s, size_t n, lookup_fn look, const void *ud, unsigned nesting,
                  size_t max, struct wr_buf *out, char **why)
{
    bool over = false;

    if (nesting > INTERP_MAX_NESTING) {
        *why = xasprintf("interpolation nested more than %d deep", INTERP_MAX_NESTING);
        return -1;
    }
    for (size_t i = 0; i < n && !over;) {
        const char *val;
        size_t j, k, open;

        if (s[i] != '$') {
            for (j = i; j < n && s[j] != '$'; j++)
                ;
            put(out, s + i, j - i, max, &over);
            i = j;
            continue;
        }
        if (i + 1 < n && s[i + 1] == '$') {
            put(out, "$", 1, max, &over);
            i += 2;
            continue;
        }
        if (i + 1 < n && name_start(s[i + 1])) {
            _cleanup_free_ char *name = NULL;
            for (j = i + 1; j < n && name_char(s[j]); j++)
                ;
            name = xstrndup(s + i + 1, j - i - 1);
            val = look(ud, name);
            if (val != NULL)
                put(out, val, strlen(val), max, &over);
            i = j;
            continue;
        }
        if (!(i + 1 < n && s[i + 1] == '{'))
            goto invalid;
        /* the matching brace, a nested ${ opening another */
        for (k = i + 2, open = 1; k < n; k++) {
            if (s[k] == '$' && k + 1 < n && s[k + 1] == '{') {
                open++;
                k++;
            } else if (s[k] == '}' && --open == 0) {
                break;
            }
        }
        if (k >= n || !name_start(s[i + 2]))
            goto invalid;
        {
            _cleanup_free_ char *name = NULL;
            const char *op;
            size_t oplen = 0;
            bool colon, set, use_word;
            for (j = i + 2; j < k && name_char(s[j]); j++)
                ;
            name = xstrndup(s + i + 2, j - i - 2);
            op = s + j;
            colon = op[0] == ':';
            if (j == k)
                oplen = 0;
            else if (k - j >= (colon ? 2u : 1u) && op[colon] != '\0' &&
                     strchr("-?+", op[colon]) != NULL)
                oplen = colon ? 2 : 1;
            else
                goto invalid;
            val = look(ud, name);
            set = val != NULL && (!colon || *val != '\0');
            if (oplen == 0) {
                if (val != NULL)
                    put(out, val, strlen(val), max, &over);
                i = k + 1;
                continue;
            }
            use_word = (op[colon] == '-' && !set) || (op[colon] == '+' && set);
            if (op[colon] == '?' && !set) {
                _cleanup_buf_ struct wr_buf msg = {0};
                if (interp(op + oplen, k - j - oplen, look, ud, nesting + 1, max, &msg, why) < 0)
                    return -1;
                *why = xasprintf("required variable %s is missing a value%s%s", name,
                                 msg.len ? ": " : "", wr_buf_str(&msg));
                return -1;
            }
            if (use_word) {
                if (interp(op + oplen, k - j - oplen, look, ud, nesting + 1, max, out, why) < 0)
                    return -1;
            } else if (op[colon] != '+' && val != NULL) {
                put(out, val, strlen(val), max, &over);
            }
            i = k + 1;
        }
    }
    if (over) {
        *why = xasprintf("interpolated, the file would be larger than %zu bytes", max);
        return -1;
    }
    return 0;
invalid:
    *why = xstrdup("invalid interpolation: `$` must start $VAR, ${VAR...} or $$ (a literal $)");
    return -1;
}

static int interp_value(struct cx *c, json_t *v, bool skip_ext)
{
    const char *k;
    json_t *e;
    size_t i;

    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        _cleanup_buf_ struct wr_buf out = {0};
        _cleanup_free_ char *why = NULL;
        if (strchr(s, '$') == NULL)
            return 0;
        if (interp(s, strlen(s), lookup_env, c->env, 0, c->budget, &out, &why) < 0)
            return fail(c, WR_EINVAL, "%s", why);
        c->budget -= out.len;
        json_string_set(v, wr_buf_str(&out));
    } else if (json_is_object(v)) {
        json_object_foreach(v, k, e)
        {
            struct mark m;
            if (skip_ext && is_ext(k))
                continue;
            m = push_key(c, k);
            if (interp_value(c, e, false) < 0)
                return -1;
            pop(c, m);
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, e)
        {
            struct mark m = push_idx(c, i);
            if (interp_value(c, e, false) < 0)
                return -1;
            pop(c, m);
        }
    }
    return 0;
}

/* Every string value of the file; `x-*` at the top and in a service are left (Warren ignores
 * them). */
static int interp_file(struct cx *c, json_t *root)
{
    const char *k, *name;
    json_t *v, *svc;

    json_object_foreach(root, k, v)
    {
        struct mark m;
        if (is_ext(k))
            continue;
        m = push_key(c, k);
        if (strcmp(k, "services") == 0 && json_is_object(v)) {
            json_object_foreach(v, name, svc)
            {
                struct mark m2 = push_key(c, name);
                if (interp_value(c, svc, true) < 0)
                    return -1;
                pop(c, m2);
            }
        } else if (interp_value(c, v, false) < 0) {
            return -1;
        }
        pop(c, m);
    }
    return 0;
}

/* ---- argv ------------------------------------------------------------------------------------ */

/* Words as a POSIX shell splits them: blanks separate, '...' is literal, "..." keeps its blanks
 * (\ escaping " \ $ ` and newline in it), \ escapes one character. Nothing is expanded and no
 * operator is special. NULL with *why for an unbalanced quote or a trailing backslash. */
static json_t *shell_split(const char *s, const char **why)
{
    _cleanup_json_ json_t *words = json_array();
    _cleanup_buf_ struct wr_buf w = {0};
    bool in_word = false;

    for (const char *p = s; *p; p++) {
        if (*p == '\\' && p[1] == '\n') {
            p++;
            continue;
        }
        if (strchr(" \t\n\r", *p) != NULL) {
            if (in_word)
                json_array_append_new(words, json_stringn(wr_buf_str(&w), w.len));
            w.len = 0;
            in_word = false;
            continue;
        }
        in_word = true;
        if (*p == '\\') {
            if (p[1] == '\0') {
                *why = "a trailing backslash";
                return NULL;
            }
            wr_buf_append(&w, ++p, 1);
        } else if (*p == '\'') {
            const char *q = strchr(p + 1, '\'');
            if (q == NULL) {
                *why = "an unbalanced `'`";
                return NULL;
            }
            wr_buf_append(&w, p + 1, (size_t)(q - p - 1));
            p = q;
        } else if (*p == '"') {
            const char *q = p + 1;
            for (; *q && *q != '"'; q++) {
                if (*q == '\\' && q[1] != '\0' && strchr("\"\\$`\n", q[1]) != NULL) {
                    if (q[1] != '\n')
                        wr_buf_append(&w, q + 1, 1);
                    q++;
                } else {
                    wr_buf_append(&w, q, 1);
                }
            }
            if (*q == '\0') {
                *why = "an unbalanced `\"`";
                return NULL;
            }
            p = q;
        } else {
            wr_buf_append(&w, p, 1);
        }
    }
    if (in_word)
        json_array_append_new(words, json_stringn(wr_buf_str(&w), w.len));
    return steal_pointer(&words);
}

/* command or entrypoint: a list of strings, or a string split as a shell would; NULL (json
 * null) when absent. */
static json_t *argv_of(struct cx *c, const json_t *v)
{
    const char *why = NULL;
    json_t *e, *words;
    size_t i;

    if (v == NULL)
        return json_null();
    if (json_is_string(v)) {
        words = shell_split(json_string_value(v), &why);
        if (words == NULL)
            fail(c, WR_EINVAL, "cannot be split into words: %s", why);
        return words;
    }
    if (!json_is_array(v)) {
        fail(c, WR_EINVAL, "must be a string or a list of strings");
        return NULL;
    }
    json_array_foreach(v, i, e)
    {
        if (!json_is_string(e)) {
            push_idx(c, i);
            fail(c, WR_EINVAL, "must be a string");
            return NULL;
        }
    }
    return json_deep_copy(v);
}

/* ---- paths ----------------------------------------------------------------------------------- */

/* A path of the context: "./app/", "app//x" and "app/./x" normalized ("app", "app/x"; the whole
 * context is "."); NULL with *why for an absolute path or one with "..". */
static char *context_path(const char *s, const char **why)
{
    _cleanup_buf_ struct wr_buf b = {0};

    if (s[0] == '/' || s[0] == '~') {
        *why = "a host path outside the context";
        return NULL;
    }
    for (const char *p = s; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && strncmp(p, "..", 2) == 0) {
            *why = "`..` is not allowed";
            return NULL;
        }
        if (n > 0 && !(n == 1 && p[0] == '.')) {
            if (b.len > 0)
                wr_buf_puts(&b, "/");
            wr_buf_append(&b, p, n);
        }
        p += n;
        if (*p == '/')
            p++;
    }
    if (b.len == 0)
        wr_buf_puts(&b, ".");
    return wr_buf_steal_str(&b);
}

/* Whether the context has rel (normalized) as a file, or as a directory above one. */
static bool context_has(const json_t *context, const char *rel)
{
    size_t n = strlen(rel);
    const char *k;
    json_t *v;

    json_object_foreach((json_t *)context, k, v)
    {
        if (strcmp(rel, ".") == 0 || strcmp(k, rel) == 0 ||
            (strncmp(k, rel, n) == 0 && k[n] == '/'))
            return true;
    }
    return false;
}

/* Whether a key of context names a path below `file` ("file/..."): a file cannot be a directory
 * too. */
static bool context_has_below(const json_t *context, const char *file)
{
    size_t n = strlen(file);
    const char *k;
    json_t *v;

    json_object_foreach((json_t *)context, k, v)
    {
        if (strncmp(k, file, n) == 0 && k[n] == '/')
            return true;
    }
    return false;
}

/* A key of context is a relative path in normal form ("a/b", or "a/b/" for an empty
 * directory). */
static bool normal_relative(const char *k)
{
    const char *p = k;

    if (*k == '\0' || *k == '/')
        return false;
    while (*p) {
        size_t n = strcspn(p, "/");
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && strncmp(p, "..", 2) == 0))
            return false;
        p += n;
        if (*p == '/' && *++p == '\0')
            return true; /* a directory */
    }
    return true;
}

/* A mount target: absolute, normalized ("/a//b/." is "/a/b"), not "/" and with no "..". */
static char *target_path(struct cx *c, const char *s)
{
    _cleanup_buf_ struct wr_buf b = {0};

    if (s[0] != '/') {
        fail(c, WR_EINVAL, "the target `%s` must be an absolute path", shown(s));
        return NULL;
    }
    for (const char *p = s; *p;) {
        size_t n;
        while (*p == '/')
            p++;
        n = strcspn(p, "/");
        if (n == 2 && strncmp(p, "..", 2) == 0) {
            fail(c, WR_EINVAL, "the target `%s` has `..`", shown(s));
            return NULL;
        }
        if (n > 0 && !(n == 1 && p[0] == '.')) {
            wr_buf_puts(&b, "/");
            wr_buf_append(&b, p, n);
        }
        p += n;
    }
    if (b.len == 0) {
        fail(c, WR_EINVAL, "cannot mount on /");
        return NULL;
    }
    return wr_buf_steal_str(&b);
}

/* ---- environment ----------------------------------------------------------------------------- */

struct dotenv_lookup {
    const json_t *vars; /* what the env files set so far */
    const json_t *env;
};

static const char *lookup_dotenv(const void *ud, const char *name)
{
    const struct dotenv_lookup *l = ud;
    const char *v = json_string_value(json_object_get(l->vars, name));
    return v != NULL ? v : json_string_value(json_object_get(l->env, name));
}

static bool env_key(const char *s, size_t n)
{
    if (n == 0 || !name_start(s[0]))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!name_char(s[i]) && s[i] != '.' && s[i] != '-')
            return false;
    return true;
}

/* The .env format, as Compose reads env_file: KEY=VALUE lines, `#` comments and blank lines, an
 * optional `export `; a value '...' literal, "..." with \n \r \t \" \\ escapes, or bare (a ` #`
 * starts a comment); "..." and bare values are interpolated from the lines above and env. A bare
 * KEY takes env's value, or is left out. Into vars; -1 with c's err naming file. */
static int dotenv(struct cx *c, const char *file, const char *text, json_t *vars)
{
    struct dotenv_lookup l = {vars, c->env};
    unsigned line = 0;

    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        _cleanup_free_ char *ln = xstrndup(p, n);
        _cleanup_buf_ struct wr_buf val = {0};
        _cleanup_free_ char *key = NULL, *why = NULL;
        char *s = ln, *e;
        bool interpolate = true;

        p += n + (p[n] == '\n');
        line++;
        if (n > 0 && ln[n - 1] == '\r')
            ln[n - 1] = '\0';
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '\0' || *s == '#')
            continue;
        if (strncmp(s, "export", 6) == 0 && (s[6] == ' ' || s[6] == '\t'))
            for (s += 6; *s == ' ' || *s == '\t'; s++)
                ;
        for (e = s; *e && *e != '=' && *e != ' ' && *e != '\t'; e++)
            ;
        if (!env_key(s, (size_t)(e - s)))
            return fail(c, WR_EINVAL, "`%s` line %u: `%s` is not a variable name", shown(file),
                        line, shown(s));
        key = xstrndup(s, (size_t)(e - s));
        while (*e == ' ' || *e == '\t')
            e++;
        if (*e == '\0') {
            const char *v = json_string_value(json_object_get(c->env, key));
            if (v != NULL)
                json_object_set_new(vars, key, json_string(v));
            continue;
        }
        if (*e != '=')
            return fail(c, WR_EINVAL, "`%s` line %u: expected KEY=VALUE", shown(file), line);
        for (e++; *e == ' ' || *e == '\t'; e++)
            ;
        if (*e == '\'' || *e == '"') {
            char q = *e++;
            for (; *e && *e != q; e++) {
                if (q == '"' && *e == '\\' && e[1] != '\0' && strchr("nrt\"\\", e[1]) != NULL) {
                    e++;
                    wr_buf_append(&val,
                                  *e == 'n'   ? "\n"
                                  : *e == 'r' ? "\r"
                                  : *e == 't' ? "\t"
                                              : e,
                                  1);
                } else {
                    wr_buf_append(&val, e, 1);
                }
            }
            if (*e != q)
                return fail(c, WR_EINVAL, "`%s` line %u: an unbalanced `%c`", shown(file), line, q);
            for (e++; *e == ' ' || *e == '\t'; e++)
                ;
            if (*e != '\0' && *e != '#')
                return fail(c, WR_EINVAL, "`%s` line %u: text after the closing quote", shown(file),
                            line);
            interpolate = q == '"';
        } else {
            char *end = e;
            for (char *h = e; *h; h++)
                if (*h == '#' && (h == e || h[-1] == ' ' || h[-1] == '\t'))
                    break;
                else
                    end = h + 1;
            while (end > e && (end[-1] == ' ' || end[-1] == '\t'))
                end--;
            wr_buf_append(&val, e, (size_t)(end - e));
        }
        if (interpolate && strchr(wr_buf_str(&val), '$') != NULL) {
            _cleanup_buf_ struct wr_buf out = {0};
            if (interp(wr_buf_str(&val), val.len, lookup_dotenv, &l, 0, c->max_bytes, &out, &why) <
                0)
                return fail(c, WR_EINVAL, "`%s` line %u: %s", shown(file), line, why);
            json_object_set_new(vars, key, json_stringn(wr_buf_str(&out), out.len));
        } else {
            json_object_set_new(vars, key, json_stringn(wr_buf_str(&val), val.len));
        }
    }
    return 0;
}

/* env_file: a path, a list of paths, or a list of {path, required}; into vars in order. */
static int env_files(struct cx *c, const json_t *v, json_t *vars)
{
    static const char *const keys[] = {"path", "required", NULL};
    json_t *e;
    size_t i;

    if (json_is_string(v))
        v = json_pack("[O]", v);
    else if (json_is_array(v))
        json_incref((json_t *)v);
    else
        return fail(c, WR_EINVAL, "must be a path or a list of paths");
    _cleanup_json_ json_t *list = (json_t *)v;
    json_array_foreach(list, i, e)
    {
        struct mark m = push_idx(c, i);
        _cleanup_free_ char *rel = NULL;
        const char *path = json_string_value(e), *why = NULL, *text;
        bool required = true;

        if (json_is_object(e)) {
            json_t *r;
            if (closed(c, e, keys) < 0)
                return -1;
            path = json_string_value(json_object_get(e, "path"));
            if ((r = opt(e, "required")) != NULL) {
                struct mark m2 = push_key(c, "required");
                if (boolean(c, r, &required) < 0)
                    return -1;
                pop(c, m2);
            }
        }
        if (path == NULL)
            return fail(c, WR_EINVAL, "must be a path, or {path, required}");
        if ((rel = context_path(path, &why)) == NULL)
            return fail(c, WR_EINVAL, "`%s`: %s; name a file of the context", shown(path), why);
        text = json_string_value(json_object_get(c->context, rel));
        if (text == NULL || rel[strlen(rel) - 1] == '/') {
            if (!required) {
                pop(c, m);
                continue;
            }
            return fail(c, WR_EINVAL, "`%s` is not a file of the context", shown(path));
        }
        if (dotenv(c, path, text, vars) < 0)
            return -1;
        pop(c, m);
    }
    return 0;
}

/* environment (a mapping, or a list of KEY=VALUE and bare KEY) over what env_file set. */
static int environment(struct cx *c, const json_t *v, json_t *vars)
{
    const char *k;
    json_t *e;
    size_t i;

    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, e)
        {
            struct mark m = push_key(c, k);
            _cleanup_free_ char *s = NULL;
            if (*k == '\0' || strchr(k, '=') != NULL)
                return fail(c, WR_EINVAL, "not a variable name");
            if (json_is_null(e)) {
                const char *from = json_string_value(json_object_get(c->env, k));
                if (from != NULL)
                    json_object_set_new(vars, k, json_string(from));
            } else if ((s = scalar_text(e)) == NULL) {
                return fail(c, WR_EINVAL, "must be a string, a number or a boolean");
            } else {
                json_object_set_new(vars, k, json_string(s));
            }
            pop(c, m);
        }
        return 0;
    }
    if (!json_is_array(v))
        return fail(c, WR_EINVAL, "must be a mapping or a list of KEY=VALUE");
    json_array_foreach(v, i, e)
    {
        struct mark m = push_idx(c, i);
        const char *s = json_string_value(e), *eq;
        _cleanup_free_ char *key = NULL;

        if (s == NULL)
            return fail(c, WR_EINVAL, "must be a string, KEY=VALUE or KEY");
        eq = strchr(s, '=');
        key = eq ? xstrndup(s, (size_t)(eq - s)) : xstrdup(s);
        if (*key == '\0')
            return fail(c, WR_EINVAL, "`%s` has no variable name", shown(s));
        if (eq != NULL) {
            json_object_set_new(vars, key, json_string(eq + 1));
        } else {
            const char *from = json_string_value(json_object_get(c->env, key));
            if (from != NULL)
                json_object_set_new(vars, key, json_string(from));
        }
        pop(c, m);
    }
    return 0;
}

/* ---- ports ----------------------------------------------------------------------------------- */

/* Add one container port to ports (once) and to the file's ports (once across services). */
static int add_port(struct cx *c, const char *service, long long port, json_t *ports)
{
    char key[16];
    json_t *e, *owner;
    size_t i;

    json_array_foreach(ports, i, e)
    {
        if (json_integer_value(e) == port)
            return 0;
    }
    snprintf(key, sizeof(key), "%lld", port);
    if ((owner = json_object_get(c->ports_taken, key)) != NULL)
        return fail(c, WR_EINVAL,
                    "port %lld is also declared by service `%s` (the services share one network "
                    "namespace)",
                    port, json_string_value(owner));
    json_object_set_new(c->ports_taken, key, json_string(service));
    json_array_append_new(ports, json_integer(port));
    return 0;
}

static int protocol(struct cx *c, const char *proto)
{
    if (strcasecmp(proto, "tcp") == 0)
        return 0;
    if (strcasecmp(proto, "udp") == 0)
        return fail(c, WR_EUNSUPPORTED, "udp ports are not supported");
    return fail(c, WR_EINVAL, "`%s` is not a protocol (tcp)", shown(proto));
}

/* One entry of ports or expose: 8080, "8080", "80:8080", "127.0.0.1:80:8080/tcp" or the long
 * form {target, published, host_ip, protocol, mode, name, app_protocol}. */
static int port_entry(struct cx *c, const char *service, const json_t *e, json_t *ports)
{
    static const char *const keys[] = {"target", "published", "host_ip",      "protocol",
                                       "mode",   "name",      "app_protocol", NULL};
    _cleanup_free_ char *s = NULL;
    _cleanup_json_ json_t *num = NULL;
    long long port;
    char *slash, *colon, *p;

    if (json_is_integer(e))
        return integer(c, e, 1, 65535, &port) < 0 ? -1 : add_port(c, service, port, ports);
    if (json_is_object(e)) {
        json_t *t = json_object_get(e, "target"), *pr = opt(e, "protocol");
        if (closed(c, e, keys) < 0)
            return -1;
        if (pr != NULL) {
            struct mark m = push_key(c, "protocol");
            if (!json_is_string(pr))
                return fail(c, WR_EINVAL, "must be a string");
            if (protocol(c, json_string_value(pr)) < 0)
                return -1;
            pop(c, m);
        }
        if (t == NULL)
            return fail(c, WR_EINVAL, "`target` (the container's port) is required");
        {
            struct mark m = push_key(c, "target");
            if (integer(c, t, 1, 65535, &port) < 0)
                return -1;
            pop(c, m);
        }
        return add_port(c, service, port, ports);
    }
    if (!json_is_string(e))
        return fail(c, WR_EINVAL, "must be a port, a string such as \"80:8080\" or a mapping");
    s = xstrdup(json_string_value(e));
    if ((slash = strrchr(s, '/')) != NULL) {
        *slash = '\0';
        if (protocol(c, slash + 1) < 0)
            return -1;
    }
    colon = strrchr(s, ':');
    p = colon ? colon + 1 : s;
    if (strchr(p, '-') != NULL)
        return fail(c, WR_EUNSUPPORTED, "port ranges are not supported");
    num = json_string(p);
    if (integer(c, num, 1, 65535, &port) < 0)
        return -1;
    return add_port(c, service, port, ports);
}

static int port_list(struct cx *c, const char *service, const json_t *v, json_t *ports)
{
    json_t *e;
    size_t i;

    if (!json_is_array(v))
        return fail(c, WR_EINVAL, "must be a list");
    json_array_foreach(v, i, e)
    {
        struct mark m = push_idx(c, i);
        if (port_entry(c, service, e, ports) < 0)
            return -1;
        pop(c, m);
    }
    return 0;
}

/* ---- volumes --------------------------------------------------------------------------------- */

static bool volume_name(const char *s)
{
    if (!isalnum((unsigned char)s[0]) || strlen(s) > 128)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && strchr("_.-", *s) == NULL)
            return false;
    return true;
}

/* A name `warrend` takes for a volume: 1-64 of [A-Za-z0-9_.-], not starting with `.` or `-`. */
static bool warren_volume_name(const char *s)
{
    return volume_name(s) && strlen(s) <= 64;
}

/* One mount into vols: type volume (declared at the top) or bind (of the context). keyed: the
 * long form, whose errors name `source` and `target`. */
static int add_mount(struct cx *c, const char *type, const char *source, const char *target,
                     bool ro, bool keyed, json_t *vols)
{
    _cleanup_free_ char *src = NULL, *dst = NULL;
    struct mark m = keyed ? push_key(c, "source") : (struct mark){c->plen, c->dlen};
    json_t *e;
    size_t i;

    if (strcmp(type, "volume") == 0) {
        if (!volume_name(source))
            return fail(c, WR_EINVAL, "`%s` is not a volume name", shown(source));
        if (json_object_get(c->declared, source) == NULL)
            return fail(c, WR_EINVAL, "volume `%s` is not declared in the top-level `volumes`",
                        shown(source));
        src = xstrdup(source);
    } else {
        const char *why = NULL;
        if (source[0] == '/' || source[0] == '~')
            return fail(c, WR_EUNSUPPORTED,
                        "a bind of the host path `%s` is not supported: bind a path of the "
                        "context, such as ./app",
                        shown(source));
        if ((src = context_path(source, &why)) == NULL)
            return fail(c, WR_EINVAL, "the source `%s`: %s", shown(source), why);
        if (!context_has(c->context, src))
            return fail(c, WR_EINVAL, "the source `%s` is not in the context", shown(source));
    }
    pop(c, m);
    if (keyed)
        push_key(c, "target");
    if ((dst = target_path(c, target)) == NULL)
        return -1;
    json_array_foreach(vols, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "target")), dst) == 0)
            return fail(c, WR_EINVAL, "the target `%s` is mounted twice", shown(dst));
    }
    pop(c, m);
    json_array_append_new(vols, json_pack("{s:s, s:s, s:s, s:b}", "type", type, "source", src,
                                          "target", dst, "read_only", ro));
    return 0;
}

/* "src:dst[:mode]": src a named volume, or a bind when it starts with . / or ~. */
static int volume_short(struct cx *c, const char *s, json_t *vols)
{
    _cleanup_free_ char *copy = xstrdup(s);
    char *parts[4] = {0};
    size_t n = 0;
    bool ro = false;

    for (char *p = copy; n < 4;) {
        parts[n++] = p;
        if ((p = strchr(p, ':')) == NULL)
            break;
        *p++ = '\0';
    }
    if (n == 1)
        return fail(c, WR_EUNSUPPORTED,
                    "an anonymous volume is not supported: name one, declared in the top-level "
                    "`volumes`");
    if (n == 4)
        return fail(c, WR_EINVAL, "`%s` is not SOURCE:TARGET[:MODE]", shown(s));
    if (n == 3) {
        for (char *o = parts[2], *next; o != NULL; o = next) {
            if ((next = strchr(o, ',')) != NULL)
                *next++ = '\0';
            if (strcmp(o, "ro") == 0)
                ro = true;
            else if (strcmp(o, "rw") == 0)
                ro = false;
            else if (strcmp(o, "cached") != 0 && strcmp(o, "delegated") != 0 &&
                     strcmp(o, "consistent") != 0)
                return fail(c, WR_EUNSUPPORTED, "the mode `%s` is not supported (ro or rw)",
                            shown(o));
        }
    }
    if (parts[0][0] == '\0')
        return fail(c, WR_EINVAL, "`%s` has no source", shown(s));
    return add_mount(c, strchr("./~", parts[0][0]) != NULL ? "bind" : "volume", parts[0], parts[1],
                     ro, false, vols);
}

/* {type, source, target, read_only, consistency}. */
static int volume_long(struct cx *c, const json_t *e, json_t *vols)
{
    static const char *const keys[] = {"type",      "source",      "target",
                                       "read_only", "consistency", NULL};
    const char *type = json_string_value(json_object_get(e, "type"));
    const char *source = json_string_value(opt(e, "source"));
    const char *target = json_string_value(json_object_get(e, "target"));
    json_t *ro = opt(e, "read_only");
    bool read_only = false;

    if (closed(c, e, keys) < 0)
        return -1;
    if (type == NULL)
        return fail(c, WR_EINVAL, "`type` (volume or bind) is required");
    if (strcmp(type, "volume") != 0 && strcmp(type, "bind") != 0) {
        push_key(c, "type");
        return fail(c, WR_EUNSUPPORTED, "type `%s` is not supported (volume or bind)", shown(type));
    }
    if (target == NULL)
        return fail(c, WR_EINVAL, "`target` is required");
    if (source == NULL) {
        if (strcmp(type, "volume") == 0)
            return fail(c, WR_EUNSUPPORTED,
                        "an anonymous volume is not supported: name one, declared in the "
                        "top-level `volumes`");
        return fail(c, WR_EINVAL, "a bind needs a `source`");
    }
    if (ro != NULL) {
        struct mark m = push_key(c, "read_only");
        if (boolean(c, ro, &read_only) < 0)
            return -1;
        pop(c, m);
    }
    return add_mount(c, type, source, target, read_only, true, vols);
}

static int volumes(struct cx *c, const json_t *v, json_t *vols)
{
    json_t *e;
    size_t i;

    if (!json_is_array(v))
        return fail(c, WR_EINVAL, "must be a list");
    json_array_foreach(v, i, e)
    {
        struct mark m = push_idx(c, i);
        if (json_is_string(e)) {
            if (volume_short(c, json_string_value(e), vols) < 0)
                return -1;
        } else if (json_is_object(e)) {
            if (volume_long(c, e, vols) < 0)
                return -1;
        } else {
            return fail(c, WR_EINVAL, "must be SOURCE:TARGET[:MODE] or a mapping");
        }
        pop(c, m);
    }
    return 0;
}

/* The top-level volumes: names, each null, an empty mapping (`x-*` aside), or `external: true`
 * with an optional `name` (the team's Warren volume, into *external: name -> volume). */
static json_t *declared_volumes(struct cx *c, const json_t *v, json_t *external)
{
    static const char *const keys[] = {"external", "name", NULL};
    _cleanup_json_ json_t *names = json_array();
    const char *k;
    json_t *e;

    if (v == NULL)
        return steal_pointer(&names);
    if (!json_is_object(v)) {
        fail(c, WR_EINVAL, "must be a mapping of volume names");
        return NULL;
    }
    json_object_foreach((json_t *)v, k, e)
    {
        struct mark m = push_key(c, k);
        if (!volume_name(k)) {
            fail(c, WR_EINVAL, "not a volume name (letters, digits, `_`, `.`, `-`)");
            return NULL;
        }
        if (!json_is_null(e) && !json_is_object(e)) {
            fail(c, WR_EINVAL, "must be empty or a mapping");
            return NULL;
        }
        if (json_is_object(e) && closed(c, e, keys) < 0)
            return NULL;
        if (json_is_object(e) && opt(e, "external") != NULL) {
            const json_t *x = opt(e, "external"), *n = opt(e, "name");
            struct mark m2 = push_key(c, "external");
            if (!json_is_boolean(x)) {
                fail(c, WR_EINVAL, "must be true or false");
                return NULL;
            }
            pop(c, m2);
            if (json_is_true(x)) {
                m2 = push_key(c, "name");
                if (n != NULL &&
                    (!json_is_string(n) || !warren_volume_name(json_string_value(n)))) {
                    fail(c, WR_EINVAL, "not a Warren volume's name");
                    return NULL;
                }
                pop(c, m2);
                json_object_set_new(external, k, json_string(n ? json_string_value(n) : k));
            }
        }
        if (json_is_object(e) && opt(e, "name") != NULL && json_object_get(external, k) == NULL) {
            (void)push_key(c, "name");
            fail(c, WR_EUNSUPPORTED, "not supported without `external: true`");
            return NULL;
        }
        if (json_object_get(external, k) != NULL &&
            !warren_volume_name(json_string_value(json_object_get(external, k)))) {
            fail(c, WR_EINVAL, "not a Warren volume's name");
            return NULL;
        }
        json_array_append_new(names, json_string(k));
        pop(c, m);
    }
    return steal_pointer(&names);
}

/* ---- depends_on, healthcheck, deploy --------------------------------------------------------- */

static int dependency(struct cx *c, const char *name, json_t *deps, const char *condition)
{
    json_t *e;
    size_t i;

    if (json_object_get(c->services, name) == NULL)
        return fail(c, WR_EINVAL, "unknown service `%s`", shown(name));
    json_array_foreach(deps, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "service")), name) == 0)
            return fail(c, WR_EINVAL, "`%s` is named twice", shown(name));
    }
    json_array_append_new(deps, json_pack("{s:s, s:s}", "service", name, "condition", condition));
    return 0;
}

/* depends_on: a list of services (started), or a mapping of service to {condition, required}. */
static int depends_on(struct cx *c, const json_t *v, json_t *deps)
{
    static const char *const keys[] = {"condition", "required", NULL};
    static const char *const conditions[] = {"service_started", "service_healthy",
                                             "service_completed_successfully", NULL};
    const char *k;
    json_t *e;
    size_t i;

    if (json_is_array(v)) {
        json_array_foreach(v, i, e)
        {
            struct mark m = push_idx(c, i);
            if (!json_is_string(e))
                return fail(c, WR_EINVAL, "must be a service's name");
            if (dependency(c, json_string_value(e), deps, "service_started") < 0)
                return -1;
            pop(c, m);
        }
        return 0;
    }
    if (!json_is_object(v))
        return fail(c, WR_EINVAL, "must be a list of services or a mapping");
    json_object_foreach((json_t *)v, k, e)
    {
        struct mark m = push_key(c, k);
        const char *cond = "service_started";
        json_t *x;
        if (!json_is_null(e) && !json_is_object(e))
            return fail(c, WR_EINVAL, "must be a mapping: {condition: ...}");
        if (json_is_object(e)) {
            if (closed(c, e, keys) < 0)
                return -1;
            if ((x = opt(e, "condition")) != NULL) {
                struct mark m2 = push_key(c, "condition");
                if (!json_is_string(x) || !in_list(json_string_value(x), conditions))
                    return fail(c, WR_EINVAL,
                                "must be service_started, service_healthy or "
                                "service_completed_successfully");
                cond = json_string_value(x);
                pop(c, m2);
            }
            if ((x = opt(e, "required")) != NULL) {
                bool req;
                struct mark m2 = push_key(c, "required");
                if (boolean(c, x, &req) < 0)
                    return -1;
                if (!req)
                    return fail(c, WR_EUNSUPPORTED, "`required: false` is not supported");
                pop(c, m2);
            }
        }
        if (dependency(c, k, deps, cond) < 0)
            return -1;
        pop(c, m);
    }
    return 0;
}

/* A duration of the healthcheck h at key, or def when absent (or 0 for interval and timeout). */
static int hc_duration(struct cx *c, const json_t *h, const char *key, long long def, long long *ms)
{
    json_t *v = opt(h, key);
    struct mark m;

    *ms = def;
    if (v == NULL)
        return 0;
    m = push_key(c, key);
    if (duration(c, v, ms) < 0)
        return -1;
    if (*ms == 0 && strcmp(key, "start_period") != 0)
        *ms = def;
    pop(c, m);
    return 0;
}

/* healthcheck: {test, interval, timeout, retries, start_period, start_interval, disable}; NULL
 * on error, json null when disabled. */
static json_t *healthcheck(struct cx *c, const json_t *h)
{
    static const char *const keys[] = {"test",         "interval",       "timeout", "retries",
                                       "start_period", "start_interval", "disable", NULL};
    json_t *test = opt(h, "test"), *x;
    _cleanup_json_ json_t *argv = NULL;
    long long interval, timeout, retries = 3, start;
    bool disable = false;

    if (!json_is_object(h)) {
        fail(c, WR_EINVAL, "must be a mapping");
        return NULL;
    }
    if (closed(c, h, keys) < 0)
        return NULL;
    if ((x = opt(h, "disable")) != NULL) {
        struct mark m = push_key(c, "disable");
        if (boolean(c, x, &disable) < 0)
            return NULL;
        pop(c, m);
    }
    if (test != NULL) {
        struct mark m = push_key(c, "test");
        const char *kind = json_string_value(json_array_get(test, 0));
        size_t n = json_array_size(test), i;
        json_t *e;
        if (json_is_string(test)) {
            argv = json_pack("[s, s, O]", "/bin/sh", "-c", test);
        } else if (!json_is_array(test) || kind == NULL) {
            fail(c, WR_EINVAL, "must be a string, or a list starting with CMD, CMD-SHELL or NONE");
            return NULL;
        } else {
            json_array_foreach(test, i, e)
            {
                if (!json_is_string(e)) {
                    fail(c, WR_EINVAL, "must be a list of strings");
                    return NULL;
                }
            }
            if (strcmp(kind, "NONE") == 0 && n == 1) {
                argv = NULL;
            } else if (strcmp(kind, "CMD") == 0 && n >= 2) {
                argv = json_array();
                for (i = 1; i < n; i++)
                    json_array_append(argv, json_array_get(test, i));
            } else if (strcmp(kind, "CMD-SHELL") == 0 && n == 2) {
                argv = json_pack("[s, s, O]", "/bin/sh", "-c", json_array_get(test, 1));
            } else {
                fail(c, WR_EINVAL,
                     "must be [CMD, arg...], [CMD-SHELL, command], [NONE] or a command string");
                return NULL;
            }
        }
        if (disable && argv != NULL) {
            fail(c, WR_EINVAL, "a test and `disable: true` together: keep one");
            return NULL;
        }
        if (argv == NULL)
            return json_null();
        pop(c, m);
    } else if (disable) {
        return json_null();
    } else {
        fail(c, WR_EUNSUPPORTED,
             "a healthcheck without `test` is not supported (the image's HEALTHCHECK is not "
             "read)");
        return NULL;
    }
    if (hc_duration(c, h, "interval", 30000, &interval) < 0 ||
        hc_duration(c, h, "timeout", 30000, &timeout) < 0 ||
        hc_duration(c, h, "start_period", 0, &start) < 0 ||
        hc_duration(c, h, "start_interval", 0, &(long long){0}) < 0)
        return NULL;
    if ((x = opt(h, "retries")) != NULL) {
        struct mark m = push_key(c, "retries");
        if (integer(c, x, 0, 1000000, &retries) < 0)
            return NULL;
        pop(c, m);
    }
    return json_pack("{s:O, s:I, s:I, s:I, s:I}", "test", argv, "interval_ms", (json_int_t)interval,
                     "timeout_ms", (json_int_t)timeout, "retries", (json_int_t)retries,
                     "start_period_ms", (json_int_t)start);
}

/* deploy: only resources.limits.{cpus,memory}. */
static int deploy(struct cx *c, const json_t *d, json_t **cpus, json_t **memory)
{
    static const char *const dkeys[] = {"resources", NULL};
    static const char *const rkeys[] = {"limits", NULL};
    static const char *const lkeys[] = {"cpus", "memory", NULL};
    json_t *r, *l;
    struct mark m;

    if (!json_is_object(d))
        return fail(c, WR_EINVAL, "must be a mapping");
    if (closed(c, d, dkeys) < 0)
        return -1;
    if ((r = opt(d, "resources")) == NULL)
        return 0;
    m = push_key(c, "resources");
    if (!json_is_object(r))
        return fail(c, WR_EINVAL, "must be a mapping");
    if (closed(c, r, rkeys) < 0)
        return -1;
    if ((l = opt(r, "limits")) != NULL) {
        push_key(c, "limits");
        if (!json_is_object(l))
            return fail(c, WR_EINVAL, "must be a mapping");
        if (closed(c, l, lkeys) < 0)
            return -1;
        *cpus = opt(l, "cpus");
        *memory = opt(l, "memory");
    }
    pop(c, m);
    return 0;
}

/* cpus or mem_limit from the service's key and deploy's limit, which must agree if both are
 * given; conv converts at each's path. */
static int limit(struct cx *c, const json_t *svc, const char *key, const json_t *from_deploy,
                 const char *deploy_path, int (*conv)(struct cx *, const json_t *, long long *),
                 long long *out)
{
    json_t *v = opt(svc, key);
    long long a = 0, b = 0;
    struct mark m;

    *out = 0;
    if (v != NULL) {
        m = push_key(c, key);
        if (conv(c, v, &a) < 0)
            return -1;
        pop(c, m);
    }
    if (from_deploy != NULL) {
        m = push_key(c, "deploy");
        push_key(c, "resources");
        push_key(c, "limits");
        push_key(c, deploy_path);
        if (conv(c, from_deploy, &b) < 0)
            return -1;
        if (v != NULL && a != b)
            return fail(c, WR_EINVAL, "differs from `%s`", key);
        pop(c, m);
    }
    *out = v != NULL ? a : b;
    return 0;
}

/* ---- a service ------------------------------------------------------------------------------- */

static bool service_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 63 || !(islower((unsigned char)s[0]) || isdigit((unsigned char)s[0])))
        return false;
    for (; *s; s++)
        if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && strchr("_.-", *s) == NULL)
            return false;
    return true;
}

static int restart_policy(struct cx *c, const json_t *v, const char **policy, long long *max)
{
    const char *s = json_string_value(v);

    *policy = "no";
    *max = 0;
    if (v == NULL)
        return 0;
    if (s == NULL)
        return fail(c, WR_EINVAL, "must be no, always, on-failure[:N] or unless-stopped");
    if (strcmp(s, "no") == 0 || strcmp(s, "always") == 0 || strcmp(s, "unless-stopped") == 0 ||
        strcmp(s, "on-failure") == 0) {
        *policy = s;
        return 0;
    }
    if (strncmp(s, "on-failure:", 11) == 0) {
        char *end;
        errno = 0;
        *policy = "on-failure";
        *max = strtoll(s + 11, &end, 10);
        if (isdigit((unsigned char)s[11]) && *end == '\0' && errno == 0 && *max <= 1000000)
            return 0;
        return fail(c, WR_EINVAL, "`%s`: the number of retries must be from 0 to 1000000",
                    shown(s));
    }
    return fail(c, WR_EINVAL, "`%s` is not no, always, on-failure[:N] or unless-stopped", shown(s));
}

/* `networks`, top-level or a service's, naming only Compose's `default` network (what
 * `docker compose config` writes): the services' one network namespace is that network, so it is
 * read and dropped. Any other network is refused. */
static int default_network_only(struct cx *c, const json_t *v, bool top)
{
    static const char *const top_keys[] = {"name", NULL};
    static const char *const none[] = {NULL};
    struct mark m = push_key(c, "networks");
    const json_t *d;
    size_t i;

    if (json_is_array(v) && !top) {
        json_array_foreach(v, i, d) if (!json_is_string(d) ||
                                        strcmp(json_string_value(d), "default") != 0)
        {
            (void)push_idx(c, i);
            return unsupported(c);
        }
    } else if (json_is_object(v)) {
        if (closed(c, v, (const char *const[]){"default", NULL}) < 0)
            return -1;
        if ((d = opt(v, "default")) != NULL) {
            (void)push_key(c, "default");
            if (!json_is_object(d))
                return fail(c, WR_EINVAL, "must be empty or a mapping");
            if (closed(c, d, top ? top_keys : none) < 0)
                return -1;
        }
    } else {
        return fail(c, WR_EINVAL, "must be a list or a mapping of networks");
    }
    pop(c, m);
    return 0;
}

static json_t *service(struct cx *c, const char *name, const json_t *svc)
{
    static const char *const keys[] = {
        "image",       "command",     "entrypoint", "environment", "env_file",
        "working_dir", "user",        "ports",      "expose",      "volumes",
        "depends_on",  "healthcheck", "restart",    "cpus",        "mem_limit",
        "deploy",      "labels",      "init",       "stop_signal", "stop_grace_period",
        "networks",    NULL};
    _cleanup_json_ json_t *out = json_object();
    json_t *vars = json_object(), *ports = json_array(), *vols = json_array();
    json_t *deps = json_array(), *v, *dcpus = NULL, *dmem = NULL;
    const char *image = NULL, *policy = NULL;
    long long n;
    struct mark m;

    /* every key, in the documented order; set again below */
    for (const char *const *k =
             (const char *const[]){"name", "image", "entrypoint", "command", NULL};
         *k; k++)
        json_object_set_new(out, *k, json_null());
    json_object_set_new(out, "environment", vars);
    json_object_set_new(out, "working_dir", json_null());
    json_object_set_new(out, "user", json_null());
    json_object_set_new(out, "ports", ports);
    json_object_set_new(out, "volumes", vols);
    json_object_set_new(out, "depends_on", deps);
    json_object_set_new(out, "healthcheck", json_null());
    json_object_set_new(out, "name", json_string(name));
    if (!json_is_object(svc)) {
        fail(c, WR_EINVAL, "must be a mapping");
        return NULL;
    }
    if (closed(c, svc, keys) < 0)
        return NULL;
    if ((v = opt(svc, "networks")) != NULL && default_network_only(c, v, false) < 0)
        return NULL;

    if ((v = opt(svc, "image")) == NULL) {
        fail(c, WR_EINVAL, "`image` is required");
        return NULL;
    }
    m = push_key(c, "image");
    if (string(c, v, &image) < 0)
        return NULL;
    if (*image == '\0' || strpbrk(image, " \t\r\n") != NULL) {
        fail(c, WR_EINVAL, "`%s` is not an image reference", shown(image));
        return NULL;
    }
    json_object_set_new(out, "image", json_string(image));
    pop(c, m);

    for (const char *const *k = (const char *const[]){"entrypoint", "command", NULL}; *k; k++) {
        json_t *a;
        m = push_key(c, *k);
        if ((a = argv_of(c, opt(svc, *k))) == NULL)
            return NULL;
        json_object_set_new(out, *k, a);
        pop(c, m);
    }

    if ((v = opt(svc, "env_file")) != NULL) {
        m = push_key(c, "env_file");
        if (env_files(c, v, vars) < 0)
            return NULL;
        pop(c, m);
    }
    if ((v = opt(svc, "environment")) != NULL) {
        m = push_key(c, "environment");
        if (environment(c, v, vars) < 0)
            return NULL;
        pop(c, m);
    }

    if ((v = opt(svc, "working_dir")) != NULL) {
        const char *wd = NULL;
        m = push_key(c, "working_dir");
        if (string(c, v, &wd) < 0)
            return NULL;
        if (wd[0] != '/') {
            fail(c, WR_EINVAL, "must be an absolute path");
            return NULL;
        }
        json_object_set_new(out, "working_dir", json_string(wd));
        pop(c, m);
    }
    if ((v = opt(svc, "user")) != NULL) {
        _cleanup_free_ char *u = json_is_string(v) || json_is_integer(v) ? scalar_text(v) : NULL;
        m = push_key(c, "user");
        if (u == NULL || *u == '\0') {
            fail(c, WR_EINVAL, "must be a user: name, uid or uid:gid");
            return NULL;
        }
        json_object_set_new(out, "user", json_string(u));
        pop(c, m);
    }

    for (const char *const *k = (const char *const[]){"ports", "expose", NULL}; *k; k++) {
        if ((v = opt(svc, *k)) == NULL)
            continue;
        m = push_key(c, *k);
        if (port_list(c, name, v, ports) < 0)
            return NULL;
        pop(c, m);
    }
    if ((v = opt(svc, "volumes")) != NULL) {
        m = push_key(c, "volumes");
        if (volumes(c, v, vols) < 0)
            return NULL;
        pop(c, m);
    }
    if ((v = opt(svc, "depends_on")) != NULL) {
        m = push_key(c, "depends_on");
        if (depends_on(c, v, deps) < 0)
            return NULL;
        pop(c, m);
    }

    if ((v = opt(svc, "healthcheck")) != NULL) {
        json_t *h;
        m = push_key(c, "healthcheck");
        if ((h = healthcheck(c, v)) == NULL)
            return NULL;
        json_object_set_new(out, "healthcheck", h);
        pop(c, m);
    }

    m = push_key(c, "restart");
    if (restart_policy(c, opt(svc, "restart"), &policy, &n) < 0)
        return NULL;
    json_object_set_new(out, "restart", json_string(policy));
    json_object_set_new(out, "restart_max", json_integer(n));
    pop(c, m);

    if ((v = opt(svc, "deploy")) != NULL) {
        m = push_key(c, "deploy");
        if (deploy(c, v, &dcpus, &dmem) < 0)
            return NULL;
        pop(c, m);
    }
    if (limit(c, svc, "cpus", dcpus, "cpus", millicores, &n) < 0)
        return NULL;
    json_object_set_new(out, "cpus", json_integer(n));
    if (limit(c, svc, "mem_limit", dmem, "memory", size_bytes, &n) < 0)
        return NULL;
    json_object_set_new(out, "mem_limit", json_integer(n));

    n = SIGTERM;
    if ((v = opt(svc, "stop_signal")) != NULL) {
        m = push_key(c, "stop_signal");
        if (signal_number(c, v, &n) < 0)
            return NULL;
        pop(c, m);
    }
    json_object_set_new(out, "stop_signal", json_integer(n));
    n = 10000;
    if ((v = opt(svc, "stop_grace_period")) != NULL) {
        m = push_key(c, "stop_grace_period");
        if (duration(c, v, &n) < 0)
            return NULL;
        pop(c, m);
    }
    json_object_set_new(out, "stop_grace_ms", json_integer(n));

    if ((v = opt(svc, "init")) != NULL) {
        bool b;
        m = push_key(c, "init");
        if (boolean(c, v, &b) < 0)
            return NULL;
        pop(c, m);
    }
    if ((v = opt(svc, "labels")) != NULL && !json_is_object(v) && !json_is_array(v)) {
        push_key(c, "labels");
        fail(c, WR_EINVAL, "must be a mapping or a list");
        return NULL;
    }
    return steal_pointer(&out);
}

/* ---- start order ----------------------------------------------------------------------------- */

static const char *name_at(const json_t *svcs, size_t i)
{
    return json_string_value(json_object_get(json_array_get(svcs, i), "name"));
}

static size_t index_of(const json_t *svcs, const char *name)
{
    for (size_t i = 0; i < json_array_size(svcs); i++)
        if (strcmp(name_at(svcs, i), name) == 0)
            return i;
    return (size_t)-1;
}

/* Point c at services.<name>.depends_on, and at its entry for `on` in the mapping form. */
static void at_dependency(struct cx *c, const json_t *raw, const char *name, const char *on)
{
    reset(c);
    push_key(c, "services");
    push_key(c, name);
    push_key(c, "depends_on");
    if (on != NULL && json_is_object(json_object_get(json_object_get(raw, name), "depends_on")))
        push_key(c, on);
}

/* service_healthy needs a healthcheck on the service waited for. */
static int check_conditions(struct cx *c, const json_t *svcs, const json_t *raw)
{
    json_t *d;
    size_t k;

    for (size_t i = 0; i < json_array_size(svcs); i++) {
        json_array_foreach(json_object_get(json_array_get(svcs, i), "depends_on"), k, d)
        {
            const char *on = json_string_value(json_object_get(d, "service"));
            const char *cond = json_string_value(json_object_get(d, "condition"));
            json_t *target = json_array_get(svcs, index_of(svcs, on));
            if (strcmp(cond, "service_healthy") != 0 ||
                !json_is_null(json_object_get(target, "healthcheck")))
                continue;
            at_dependency(c, raw, name_at(svcs, i), on);
            return fail(c, WR_EINVAL,
                        "service `%s` has no healthcheck, which service_healthy needs", on);
        }
    }
    return 0;
}

/* Whether every service that i depends on is placed. */
static bool ready(const json_t *svcs, size_t i, const bool *placed)
{
    json_t *d;
    size_t k;

    json_array_foreach(json_object_get(json_array_get(svcs, i), "depends_on"), k, d)
    {
        if (!placed[index_of(svcs, json_string_value(json_object_get(d, "service")))])
            return false;
    }
    return true;
}

/* A service i (not placed) waits on: the first of its dependencies not placed. */
static size_t waits_on(const json_t *svcs, size_t i, const bool *placed)
{
    json_t *d;
    size_t k;

    json_array_foreach(json_object_get(json_array_get(svcs, i), "depends_on"), k, d)
    {
        size_t j = index_of(svcs, json_string_value(json_object_get(d, "service")));
        if (!placed[j])
            return j;
    }
    return i; /* not reached: a service left unplaced waits on one */
}

/* svcs in start order (Kahn's algorithm, the first ready by name first), or NULL with a cycle
 * named. */
static json_t *start_order(struct cx *c, const json_t *svcs, const json_t *raw)
{
    size_t n = json_array_size(svcs), best = 0;
    _cleanup_free_ bool *placed = xcalloc(n + 1, sizeof(bool));
    _cleanup_free_ size_t *walk = xcalloc(n + 1, sizeof(size_t));
    _cleanup_json_ json_t *order = json_array();
    _cleanup_buf_ struct wr_buf cycle = {0};
    size_t len = 0, from;

    for (size_t done = 0; done < n; done++) {
        best = (size_t)-1;
        for (size_t i = 0; i < n; i++)
            if (!placed[i] && ready(svcs, i, placed) &&
                (best == (size_t)-1 || strcmp(name_at(svcs, i), name_at(svcs, best)) < 0))
                best = i;
        if (best == (size_t)-1)
            break;
        placed[best] = true;
        json_array_append(order, json_array_get(svcs, best));
    }
    if (json_array_size(order) == n)
        return steal_pointer(&order);
    /* every service left waits on another left: from the first by name, walk until one repeats */
    best = (size_t)-1;
    for (size_t i = 0; i < n; i++)
        if (!placed[i] && (best == (size_t)-1 || strcmp(name_at(svcs, i), name_at(svcs, best)) < 0))
            best = i;
    for (size_t at = best;; at = waits_on(svcs, at, placed)) {
        for (from = 0; from < len && walk[from] != at; from++)
            ;
        if (from < len)
            break;
        walk[len++] = at;
    }
    for (size_t i = from; i < len; i++)
        wr_buf_printf(&cycle, "%s -> ", name_at(svcs, walk[i]));
    wr_buf_puts(&cycle, name_at(svcs, walk[from]));
    at_dependency(c, raw, name_at(svcs, walk[from]), NULL);
    fail(c, WR_EINVAL, "a dependency cycle: %s", wr_buf_str(&cycle));
    return NULL;
}

/* ---- the file -------------------------------------------------------------------------------- */

static int check_inputs(const json_t *env, const json_t *context, struct wr_err *err)
{
    const char *k;
    json_t *v;

    if (env != NULL && !json_is_object(env))
        return wr_err_set(err, WR_EINVAL, 0, "env must be an object of strings");
    json_object_foreach((json_t *)env, k, v)
    {
        if (!json_is_string(v))
            return wr_err_set(err, WR_EINVAL, 0, "env.%s: must be a string", shown(k));
    }
    if (context != NULL && !json_is_object(context))
        return wr_err_set(err, WR_EINVAL, 0, "the context must be an object of files");
    json_object_foreach((json_t *)context, k, v)
    {
        if (!normal_relative(k))
            return wr_err_set(err, WR_EINVAL, 0,
                              "the context's `%s` is not a relative path in normal form", shown(k));
        if (!json_is_string(v))
            return wr_err_set(err, WR_EINVAL, 0, "the context's `%s` must be a string", shown(k));
        if (k[strlen(k) - 1] != '/' && context_has_below(context, k))
            return wr_err_set(err, WR_EINVAL, 0,
                              "the context's `%s` is a file and a directory of other paths",
                              shown(k));
    }
    return 0;
}

/* The message as one line: a control character a user's key or value brought becomes '?'. */
static void one_line(struct wr_err *err)
{
    if (err == NULL)
        return;
    for (char *p = err->msg; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = '?';
}

static json_t *parse(struct cx *c, const char *text, size_t len, unsigned max_services)
{
    static const char *const top[] = {"services", "volumes", "name", "version", "networks", NULL};
    _cleanup_json_ json_t *lines = NULL, *svcs = json_array(), *vols = NULL, *ordered = NULL;
    _cleanup_json_ json_t *external = json_object();
    _cleanup_json_ json_t *root = wr_yaml_load(text, len, NULL, &lines, c->err);
    json_t *services, *v;
    const char *name;
    struct mark m;

    if (root == NULL)
        return NULL;
    c->lines = lines;
    if (!json_is_object(root)) {
        fail(c, WR_EINVAL, "a Compose file must be a mapping with `services`");
        return NULL;
    }
    if (closed(c, root, top) < 0 || interp_file(c, root) < 0)
        return NULL;
    if ((v = opt(root, "networks")) != NULL && default_network_only(c, v, true) < 0)
        return NULL;
    if ((v = opt(root, "name")) != NULL && !json_is_string(v)) {
        push_key(c, "name");
        fail(c, WR_EINVAL, "must be a string");
        return NULL;
    }
    services = json_object_get(root, "services");
    m = push_key(c, "services");
    if (!json_is_object(services) || json_object_size(services) == 0) {
        fail(c, WR_EINVAL, "must be a non-empty mapping of services");
        return NULL;
    }
    if (json_object_size(services) > max_services) {
        fail(c, WR_ETOOBIG, "%zu services, more than the %u allowed", json_object_size(services),
             max_services);
        return NULL;
    }
    pop(c, m);
    c->services = services;
    c->declared = opt(root, "volumes");
    m = push_key(c, "volumes");
    if ((vols = declared_volumes(c, c->declared, external)) == NULL)
        return NULL;
    pop(c, m);

    m = push_key(c, "services");
    json_object_foreach(services, name, v)
    {
        struct mark m2 = push_key(c, name);
        json_t *s;
        if (!service_name(name)) {
            fail(c, WR_EINVAL,
                 "not a service name: lowercase letters, digits, `_`, `.` and `-`, starting with a "
                 "letter or digit, 63 at most");
            return NULL;
        }
        if ((s = service(c, name, v)) == NULL)
            return NULL;
        json_array_append_new(svcs, s);
        pop(c, m2);
    }
    pop(c, m);
    if (check_conditions(c, svcs, services) < 0 ||
        (ordered = start_order(c, svcs, services)) == NULL)
        return NULL;
    return json_pack("{s:O, s:O, s:O}", "services", ordered, "volumes", vols, "external_volumes",
                     external);
}

json_t *wr_compose_parse(const char *text, size_t len, const json_t *env, const json_t *context,
                         const struct wr_compose_limits *lim, struct wr_err *err)
{
    size_t max_bytes = lim && lim->max_bytes ? lim->max_bytes : DEFAULT_MAX_BYTES;
    unsigned max_services = lim && lim->max_services ? lim->max_services : DEFAULT_MAX_SERVICES;
    _cleanup_json_ json_t *taken = json_object();
    struct cx c = {.env = env, .context = context, .ports_taken = taken, .err = err};
    json_t *spec;

    if (text == NULL)
        return wr_err_set(err, WR_EINVAL, 0, "no Compose file"), NULL;
    if (len > max_bytes)
        return wr_err_set(err, WR_ETOOBIG, 0,
                          "the Compose file is %zu bytes, more than the %zu allowed", len,
                          max_bytes),
               NULL;
    if (check_inputs(env, context, err) < 0)
        return NULL;
    c.max_bytes = max_bytes;
    c.budget = 4 * max_bytes;
    spec = parse(&c, text, len, max_services);
    if (spec == NULL)
        one_line(err);
    return spec;
}
