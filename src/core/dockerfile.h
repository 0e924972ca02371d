/* SPDX-License-Identifier: Apache-2.0 */
/* The Dockerfile subset Warren builds templates from: FROM, RUN, ENV, WORKDIR, USER, COPY.
 *
 *   - one instruction per logical line; a `\` at the end of a line continues it; `#` starts a
 *     comment line; blank lines are skipped; instructions are case-insensitive;
 *   - FROM <template | snapshot | registry image "host[:port]/repo[:tag|@digest]"> (one
 *     stage: `AS` and a second FROM are refused);
 *   - RUN <shell command>, or RUN ["exec", "form"];
 *   - ENV KEY=VALUE ... (values may be "double-quoted"), or ENV KEY VALUE;
 *   - WORKDIR <path> (relative to the previous one);
 *   - USER <name or uid>[:<group>];
 *   - COPY [--chown=U[:G]] <src>... <dest>, or COPY ["src", ..., "dest"]: sources are paths in
 *     the build context (no wildcards, nothing outside it); dest ends in `/` or is a directory
 *     when there are several sources.
 *
 * Anything else (ADD, ARG, CMD, ...) is refused, naming its line. Pure: no I/O. */
#pragma once

#include <stddef.h>

#include "../util/err.h"

enum wr_df_kind { WR_DF_FROM, WR_DF_RUN, WR_DF_ENV, WR_DF_WORKDIR, WR_DF_USER, WR_DF_COPY };

struct wr_df_step {
    enum wr_df_kind kind;
    unsigned line; /* 1-based line of the instruction's first line */
    char *text;    /* the instruction as written, continuations joined (for logs and keys) */
    /* FROM: argv[0] = the image. RUN: argv = the exec form, or NULL with shell = the command.
     * ENV: argv = KEY, VALUE, KEY, VALUE, ... WORKDIR, USER: argv[0]. COPY: argv = sources...,
     * destination; chown = the --chown value or NULL. */
    char **argv;
    size_t argc;
    char *shell;
    char *chown;
};

struct wr_dockerfile {
    struct wr_df_step *steps;
    size_t n;
};

/* Parse text. WR_EINVAL with a message that names the line ("line 7: ADD is not supported
 * (...)") for anything outside the subset; *bad_line gets it (0 if none). */
int wr_dockerfile_parse(const char *text, struct wr_dockerfile *out, unsigned *bad_line,
                        struct wr_err *err);
void wr_dockerfile_fini(struct wr_dockerfile *df);
