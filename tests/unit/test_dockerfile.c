/* SPDX-License-Identifier: Apache-2.0 */
/* The Dockerfile subset: what is accepted, how it is split, and that everything else is
 * refused naming its line. */
#include <string.h>

#include "../../src/core/dockerfile.h"
#include "tap.h"

static int parse(const char *text, struct wr_dockerfile *df, unsigned *line, struct wr_err *err)
{
    return wr_dockerfile_parse(text, df, line, err);
}

/* Parses and is refused at `want_line` with a message containing `want`. */
static void refused(const char *text, unsigned want_line, const char *want, const char *what)
{
    struct wr_dockerfile df;
    struct wr_err err;
    unsigned line = 0;

    ok(parse(text, &df, &line, &err) < 0 && err.kind == WR_EINVAL && line == want_line &&
           strstr(err.msg, want) != NULL,
       "%s (line %u: %s)", what, line, err.msg);
}

int main(void)
{
    struct wr_dockerfile df;
    struct wr_err err;
    unsigned line;

    ok(parse("# a comment\n"
             "FROM base\n"
             "\n"
             "RUN apt-get update && \\\n"
             "    # inside a continuation\n"
             "    apt-get install -y git\n"
             "ENV A=1 B=\"two words\" C=\n"
             "env PATH /opt/bin:/usr/bin\n"
             "WORKDIR /srv/app\n"
             "USER user:user\n"
             "COPY --chown=user:user app.py lib/ /srv/app/\n"
             "COPY [\"a b.txt\", \"/x/\"]\n"
             "RUN [\"/bin/echo\", \"hi\"]\n",
             &df, &line, &err) == 0,
       "a Dockerfile of every supported instruction parses (%s)", err.msg);
    ok(df.n == 9, "9 steps (%zu)", df.n);
    ok(df.steps[0].kind == WR_DF_FROM && df.steps[0].line == 2 &&
           strcmp(df.steps[0].argv[0], "base") == 0,
       "FROM base, line 2");
    ok(df.steps[1].kind == WR_DF_RUN && df.steps[1].line == 4 &&
           strcmp(df.steps[1].shell, "apt-get update &&      apt-get install -y git") == 0,
       "RUN joins continuations and skips the comment inside (%s)", df.steps[1].shell);
    ok(df.steps[2].kind == WR_DF_ENV && df.steps[2].argc == 6 &&
           strcmp(df.steps[2].argv[3], "two words") == 0 && strcmp(df.steps[2].argv[5], "") == 0,
       "ENV pairs with quotes and an empty value");
    ok(df.steps[3].argc == 2 && strcmp(df.steps[3].argv[0], "PATH") == 0 &&
           strcmp(df.steps[3].argv[1], "/opt/bin:/usr/bin") == 0 &&
           strncmp(df.steps[3].text, "ENV ", 4) == 0,
       "ENV KEY VALUE, lowercase instruction");
    ok(df.steps[4].kind == WR_DF_WORKDIR && strcmp(df.steps[4].argv[0], "/srv/app") == 0,
       "WORKDIR");
    ok(df.steps[5].kind == WR_DF_USER && strcmp(df.steps[5].argv[0], "user:user") == 0, "USER");
    ok(df.steps[6].kind == WR_DF_COPY && df.steps[6].argc == 3 &&
           strcmp(df.steps[6].chown, "user:user") == 0 &&
           strcmp(df.steps[6].argv[2], "/srv/app/") == 0,
       "COPY with --chown and two sources");
    ok(df.steps[7].argc == 2 && strcmp(df.steps[7].argv[0], "a b.txt") == 0, "COPY JSON form");
    ok(df.steps[8].kind == WR_DF_RUN && df.steps[8].shell == NULL && df.steps[8].argc == 2 &&
           df.steps[8].line == 13,
       "RUN exec form, line 13");
    wr_dockerfile_fini(&df);

    refused("FROM base\nRUN true\nADD x /x\n", 3, "unsupported instruction ADD", "ADD");
    refused("FROM base\nCMD [\"sh\"]\n", 2, "unsupported instruction CMD", "CMD");
    refused("RUN true\n", 1, "must be FROM", "no FROM first");
    refused("FROM base AS build\n", 1, "AS", "stages");
    refused("FROM base\nFROM other\n", 2, "multi-stage", "second FROM");
    refused("FROM base\nCOPY ../secret /x\n", 2, "outside the build context", "COPY ..");
    refused("FROM base\nCOPY /etc/passwd /x\n", 2, "outside the build context", "COPY abs");
    refused("FROM base\nCOPY a/../../b /x\n", 2, "outside the build context", "COPY a/../..");
    refused("FROM base\nCOPY *.py /x/\n", 2, "wildcards", "COPY glob");
    refused("FROM base\nCOPY a b /x\n", 2, "ending in /", "COPY many to a file");
    refused("FROM base\nCOPY a b \"\"\n", 2, "ending in /", "COPY many to an empty name");
    refused("FROM base\nCOPY --from=build a /x\n", 2, "option not supported", "COPY --from");
    refused("FROM base\nCOPY a\n", 2, "source and a destination", "COPY one arg");
    refused("FROM base\nENV 1BAD=x\n", 2, "not a variable name", "ENV key");
    refused("FROM base\nENV A=\"open\n", 2, "ENV takes", "ENV open quote");
    refused("FROM base\nRUN [\"a\", 1]\n", 2, "JSON array", "RUN bad JSON");
    refused("FROM base\nRUN\n", 2, "needs a command", "RUN empty");
    refused("FROM base\nWORKDIR a b\n", 2, "one path", "WORKDIR two");
    refused("# only a comment\n", 1, "no FROM", "empty");
    ok(parse("FROM base\n\n\\\nRUN \\\n\nfoo x\n", &df, &line, &err) == 0 && df.n == 2 &&
           df.steps[1].line == 3 && strcmp(df.steps[1].shell, "foo x") == 0,
       "a lone backslash and a blank line inside a continuation");
    wr_dockerfile_fini(&df);
    return done();
}
