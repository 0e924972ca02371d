/* SPDX-License-Identifier: Apache-2.0 */
/* wr_caps_limit in a forked child: the bounding set becomes the sandbox mask (as far as the
 * host had it), and the inheritable and ambient sets hold nothing outside it. */
#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/runtime/caps.h"
#include "tap.h"

/* The hex value of a "CapXxx:" line of /proc/self/status, or UINT64_MAX. */
static uint64_t status_caps(const char *key)
{
    char line[256];
    uint64_t v = UINT64_MAX;
    FILE *f = fopen("/proc/self/status", "re");

    if (f == NULL)
        return v;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, key, strlen(key)) == 0)
            v = strtoull(line + strlen(key), NULL, 16);
    fclose(f);
    return v;
}

int main(void)
{
    uint64_t mask = wr_caps_sandbox_mask(), host = status_caps("CapBnd:"), got[4] = {0};
    int p[2], st = 0;
    pid_t pid;

    setvbuf(stdout, NULL, _IOLBF, 0);
    ok((mask & (UINT64_C(1) << CAP_SYS_PTRACE)) != 0, "mask keeps CAP_SYS_PTRACE");
    ok((mask & (UINT64_C(1) << CAP_SYS_ADMIN)) == 0, "mask drops CAP_SYS_ADMIN");
    ok((mask & (UINT64_C(1) << CAP_NET_ADMIN)) == 0, "mask drops CAP_NET_ADMIN");
    ok((mask & (UINT64_C(1) << CAP_DAC_READ_SEARCH)) == 0, "mask drops CAP_DAC_READ_SEARCH");
    is_int(__builtin_popcountll(mask), 15, "15 capabilities kept");
    if (geteuid() != 0) {
        printf("# not root: the bounding set cannot be changed; child part skipped\n");
        return done();
    }
    if (pipe(p) < 0)
        return 1;
    pid = fork();
    if (pid == 0) {
        uint64_t r[4];
        close(p[0]);
        r[0] = (uint64_t)(int64_t)wr_caps_limit(mask);
        r[1] = status_caps("CapBnd:");
        r[2] = status_caps("CapInh:");
        r[3] = status_caps("CapAmb:");
        (void)!write(p[1], r, sizeof(r));
        _exit(0);
    }
    close(p[1]);
    int n = (int)read(p[0], got, sizeof(got));
    waitpid(pid, &st, 0);
    is_int(n, sizeof(got), "child reported");
    is_int((int64_t)got[0], 0, "wr_caps_limit returns 0");
    ok(got[1] == (mask & host), "CapBnd %016llx == mask & host %016llx", (unsigned long long)got[1],
       (unsigned long long)(mask & host));
    ok((got[2] & ~mask) == 0, "CapInh holds nothing outside the mask");
    is_int(got[3], 0, "CapAmb empty");
    ok(status_caps("CapBnd:") == host, "the parent's bounding set is untouched");
    return done();
}
