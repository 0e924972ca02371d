/* SPDX-License-Identifier: Apache-2.0 */
/* warren-example: start a sandbox, run a command in it with its output streamed, put a file in
 * and read it back, then delete the sandbox. The endpoint and key come from the environment or
 * the `warren` config file (WARREN_API_URL, WARREN_API_KEY), as for the `warren` command.
 *
 *     cc -o warren-example warren-example.c $(pkg-config --cflags --libs warren)
 *     ./warren-example [TEMPLATE]
 *
 * tests/integration/test_libwarren.py builds and runs this file, so it stays correct. */
#include <stdio.h>
#include <string.h>
#include <warren.h>

static int print_out(const void *data, size_t len, void *ctx)
{
    (void)ctx;
    fwrite(data, 1, len, stdout);
    return 0;
}

static int print_err(const void *data, size_t len, void *ctx)
{
    (void)ctx;
    fwrite(data, 1, len, stderr);
    return 0;
}

static int fail(const char *what, const warren_error *err)
{
    fprintf(stderr, "warren-example: %s: %s [%s, HTTP %d]\n", what, err->message,
            warren_strcode(err->code), err->status);
    return 1;
}

int main(int argc, char **argv)
{
    warren *w;
    warren_sandbox *sb;
    warren_error err;
    warren_exit how;
    const char *id;
    void *data;
    size_t len;
    int rc = 1;

    /* NULL, NULL: the endpoint and key the `warren` command would use. */
    if (warren_connect(NULL, NULL, &w, &err) < 0)
        return fail("connect", &err);

    const char *env[] = {"GREETING=hello from libwarren", NULL};
    warren_create_opts co = {
        .template_name = argc > 1 ? argv[1] : NULL, .timeout_s = 120, .env = env};
    if (warren_create(w, &co, &sb, &err) < 0) {
        fail("create", &err);
        goto out;
    }
    id = warren_sandbox_id(sb);
    printf("sandbox %s (%s)\n", id, warren_sandbox_state(sb));

    /* Output arrives through the callbacks as the command writes it. */
    const char *cmd[] = {"sh", "-c", "echo \"$GREETING\"; echo to stderr >&2; exit 7", NULL};
    warren_exec_opts eo = {.argv = cmd, .on_stdout = print_out, .on_stderr = print_err};
    if (warren_exec(w, id, &eo, &how, &err) < 0) {
        fail("exec", &err);
        goto delete;
    }
    printf("exit code %d\n", how.exit_code);

    const char text[] = "written by warren-example\n";
    if (warren_file_write_buf(w, id, "/tmp/example.txt", 0644, text, strlen(text), &err) < 0 ||
        warren_file_read_buf(w, id, "/tmp/example.txt", &data, &len, &err) < 0) {
        fail("files", &err);
        goto delete;
    }
    printf("read back %zu bytes: %s", len, (char *)data);
    warren_free(data);
    rc = 0;

    delete : if (warren_delete(w, id, &err) < 0)
    {
        fail("delete", &err);
        rc = 1;
    }
    else
    {
        printf("deleted %s\n", id);
    }
    warren_sandbox_free(sb);
out:
    warren_close(w);
    return rc;
}
