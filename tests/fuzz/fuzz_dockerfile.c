/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the Dockerfile parser (src/core/dockerfile.c): the input is a tenant's
 * Dockerfile. A parse either fails with WR_EINVAL, or yields steps that begin with one FROM, in
 * line order, each with the fields its kind promises (dockerfile.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/dockerfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

static void check_step(const struct wr_df_step *s)
{
    check(s->text != NULL && s->line >= 1);
    if (s->argv != NULL) {
        for (size_t i = 0; i < s->argc; i++)
            check(s->argv[i] != NULL);
        check(s->argv[s->argc] == NULL);
    }
    switch (s->kind) {
    case WR_DF_FROM:
    case WR_DF_WORKDIR:
    case WR_DF_USER:
        check(s->argc == 1);
        break;
    case WR_DF_RUN:
        check((s->argv != NULL && s->argc >= 1) != (s->shell != NULL));
        break;
    case WR_DF_ENV:
        check(s->argc >= 2 && s->argc % 2 == 0);
        for (size_t i = 0; i < s->argc; i += 2)
            check(s->argv[i][0] != '\0' && strchr(s->argv[i], '=') == NULL);
        break;
    case WR_DF_COPY:
        check(s->argc >= 2);
        break;
    default:
        check(0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = strndup((const char *)data, size);
    struct wr_dockerfile df;
    struct wr_err err;
    unsigned bad = 0;

    check(text != NULL);
    if (wr_dockerfile_parse(text, &df, &bad, &err) < 0) {
        check(err.kind == WR_EINVAL && err.msg[0] != '\0');
        free(text);
        return 0;
    }
    check(df.n >= 1 && df.steps[0].kind == WR_DF_FROM);
    for (size_t i = 0; i < df.n; i++) {
        check_step(&df.steps[i]);
        check(i == 0 ||
              (df.steps[i].line > df.steps[i - 1].line && df.steps[i].kind != WR_DF_FROM));
    }
    wr_dockerfile_fini(&df);
    free(text);
    return 0;
}
