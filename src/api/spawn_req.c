/* SPDX-License-Identifier: Apache-2.0 */
/* Spawn requests from the API's three doors (api_int.h): the native exec body, an E2B
 * process.Start and a terminal's query. What the doors share is checked here once: argv entries
 * are strings without NUL, env is an object of at most WR_MAX_ARGS strings under keys that are
 * not empty and hold no '=', and a terminal is 1 to 65535 rows and columns. */
#include <string.h>

#include "../util/parse.h"
#include "../util/strv.h"
#include "../util/xalloc.h"
#include "e2b_int.h"

#define TTY_DIM_MAX  65535
#define TTY_SIZE_MSG "`rows` and `cols` must be 1 to 65535"
#define LOGIN_SHELL  "exec \"${SHELL:-/bin/sh}\" -l" /* SHELL: set by warren-init from passwd */

static void spawn_init(struct wr_spawn *sp)
{
    *sp = (struct wr_spawn){
        .uid = -1, .gid = -1, .rows = WR_TTY_ROWS_DEFAULT, .cols = WR_TTY_COLS_DEFAULT};
}

/* argv = /bin/sh -c line. */
static void set_shell(struct wr_spawn *sp, const char *line)
{
    sp->argv = xcalloc(4, sizeof(char *));
    sp->argv[0] = xstrdup("/bin/sh");
    sp->argv[1] = xstrdup("-c");
    sp->argv[2] = xstrdup(line);
}

/* argv = argv0 (if not NULL) and the strings of the array arr, which the caller has checked to
 * be an array of at most WR_MAX_ARGS entries with argv0. `name` is arr's name in messages. */
static int set_argv(struct wr_spawn *sp, const char *argv0, json_t *arr, const char *name,
                    struct wr_err *err)
{
    size_t k = argv0 != NULL, i;
    json_t *a;

    json_array_foreach(arr, i, a)
    {
        if (!json_is_string(a) || memchr(json_string_value(a), '\0', json_string_length(a)))
            return wr_err_set(err, WR_EINVAL, 0, "`%s[%zu]` must be a string", name, i);
    }
    sp->argv = xcalloc(k + json_array_size(arr) + 1, sizeof(char *));
    if (argv0 != NULL)
        sp->argv[0] = xstrdup(argv0);
    for (i = 0; i < json_array_size(arr); i++)
        sp->argv[k + i] = xstrdup(json_string_value(json_array_get(arr, i)));
    return 0;
}

/* env from obj (absent or null: none). `name` is obj's name in messages. */
static int set_env(struct wr_spawn *sp, json_t *obj, const char *name, struct wr_err *err)
{
    const char *k;
    json_t *v;
    size_t i = 0;

    if (obj == NULL || json_is_null(obj))
        return 0;
    if (!json_is_object(obj) || json_object_size(obj) > WR_MAX_ARGS)
        return wr_err_set(err, WR_EINVAL, 0, "`%s` must be an object of strings", name);
    sp->env = xcalloc(json_object_size(obj) + 1, sizeof(char *));
    json_object_foreach(obj, k, v)
    {
        if (!json_is_string(v) || k[0] == '\0' || strchr(k, '=') != NULL)
            return wr_err_set(err, WR_EINVAL, 0, "`%s.%s` is not valid", name, k);
        sp->env[i++] = xasprintf("%s=%s", k, json_string_value(v));
    }
    return 0;
}

/* rows and cols from JSON values (absent or null: the default). Each valid one is set; -1 if
 * either is not an integer from 1 to 65535. */
static int set_size(struct wr_spawn *sp, json_t *rows, json_t *cols, struct wr_err *err)
{
    json_t *v[2] = {rows, cols};
    uint16_t *out[2] = {&sp->rows, &sp->cols};
    int rc = 0;

    for (int i = 0; i < 2; i++) {
        if (v[i] == NULL || json_is_null(v[i]))
            continue;
        if (json_is_integer(v[i]) && json_integer_value(v[i]) >= 1 &&
            json_integer_value(v[i]) <= TTY_DIM_MAX)
            *out[i] = (uint16_t)json_integer_value(v[i]);
        else
            rc = wr_err_set(err, WR_EINVAL, 0, TTY_SIZE_MSG);
    }
    return rc;
}

int api_spawn_from_exec(json_t *j, struct wr_spawn *sp, struct wr_err *err)
{
    json_t *cmd = json_object_get(j, "cmd"), *v;

    spawn_init(sp);
    if (json_is_string(cmd)) {
        set_shell(sp, json_string_value(cmd));
    } else if (json_is_array(cmd) && json_array_size(cmd) > 0 &&
               json_array_size(cmd) <= WR_MAX_ARGS) {
        if (set_argv(sp, NULL, cmd, "cmd", err) < 0)
            return -1;
    } else {
        return wr_err_set(err, WR_EINVAL, 0,
                          "`cmd` must be a non-empty array of strings or a shell string");
    }
    if (set_env(sp, json_object_get(j, "env"), "env", err) < 0)
        return -1;
    if ((v = json_object_get(j, "cwd")) != NULL && !json_is_null(v)) {
        if (!json_is_string(v) || json_string_value(v)[0] != '/')
            return wr_err_set(err, WR_EINVAL, 0, "`cwd` must be an absolute path");
        sp->cwd = xstrdup(json_string_value(v));
    }
    if ((v = json_object_get(j, "user")) != NULL && !json_is_null(v)) {
        if (!json_is_string(v) || json_string_length(v) == 0)
            return wr_err_set(err, WR_EINVAL, 0, "`user` must be a user name or uid");
        sp->user = xstrdup(json_string_value(v));
    }
    if ((v = json_object_get(j, "pty")) != NULL && !json_is_null(v)) {
        if (!json_is_boolean(v))
            return wr_err_set(err, WR_EINVAL, 0, "`pty` must be a boolean");
        sp->pty = json_is_true(v);
    }
    if ((v = json_object_get(j, "service")) != NULL && !json_is_null(v)) {
        if (!json_is_string(v) || !api_service_name_ok(json_string_value(v)))
            return wr_err_set(err, WR_EINVAL, 0, "`service` must be a service's name");
        sp->service = xstrdup(json_string_value(v));
    }
    return set_size(sp, json_object_get(j, "rows"), json_object_get(j, "cols"), err);
}

int api_spawn_from_e2b(json_t *j, const char *user, struct wr_spawn *sp, struct wr_err *err)
{
    json_t *proc = json_object_get(j, "process");
    json_t *args = json_object_get(proc, "args");
    json_t *pty = json_object_get(j, "pty");
    const char *cmd = json_string_value(json_object_get(proc, "cmd"));
    const char *cwd = json_string_value(json_object_get(proc, "cwd"));

    spawn_init(sp);
    if (cmd == NULL || cmd[0] == '\0')
        return wr_err_set(err, WR_EINVAL, 0, "`process.cmd` must be a non-empty string");
    if ((args != NULL && !json_is_array(args) && !json_is_null(args)) ||
        json_array_size(args) >= WR_MAX_ARGS)
        return wr_err_set(err, WR_EINVAL, 0, "`process.args` must be an array of strings");
    if (set_argv(sp, cmd, args, "process.args", err) < 0 ||
        set_env(sp, json_object_get(proc, "envs"), "process.envs", err) < 0)
        return -1;
    if (cwd != NULL && cwd[0] != '\0') {
        sp->cwd = e2b_abs_path(user, cwd);
        if (sp->cwd == NULL)
            return wr_err_set(err, WR_EINVAL, 0, "`process.cwd` is not valid");
    } else if (user != NULL) {
        /* envd starts in the user's home; the template's cwd is its default user's. */
        sp->cwd = e2b_abs_path(user, "~");
    }
    sp->user = user ? xstrdup(user) : NULL;
    if (pty != NULL && !json_is_null(pty)) {
        json_t *size = json_object_get(pty, "size");
        struct wr_err ignored;
        sp->pty = true;
        /* envd's size fields are uint32 that it never refuses: a bad one keeps the default. */
        (void)set_size(sp, json_object_get(size, "rows"), json_object_get(size, "cols"), &ignored);
    }
    return 0;
}

int api_spawn_from_terminal(struct wr_http_req *req, struct wr_spawn *sp, struct wr_err *err)
{
    const char *cmd = wr_http_req_query(req, "cmd");
    const char *user = wr_http_req_query(req, "user");
    const char *cwd = wr_http_req_query(req, "cwd");
    const char *q[2] = {wr_http_req_query(req, "rows"), wr_http_req_query(req, "cols")};
    uint16_t *out[2] = {&sp->rows, &sp->cols};

    spawn_init(sp);
    sp->pty = true;
    for (int i = 0; i < 2; i++) {
        uint64_t n;
        if (q[i] == NULL)
            continue;
        if (wr_parse_uint(q[i], TTY_DIM_MAX, &n, err) < 0 || n == 0)
            return wr_err_set(err, WR_EINVAL, 0, TTY_SIZE_MSG);
        *out[i] = (uint16_t)n;
    }
    if (cwd != NULL && cwd[0] != '/')
        return wr_err_set(err, WR_EINVAL, 0, "`cwd` must be an absolute path");
    set_shell(sp, cmd != NULL ? cmd : LOGIN_SHELL);
    sp->user = user ? xstrdup(user) : NULL;
    sp->cwd = cwd ? xstrdup(cwd) : NULL;
    return 0;
}
