/* SPDX-License-Identifier: Apache-2.0 */
/* The id pool's lock files and its recorded layout (src/runtime/uidpool.c). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../src/runtime/uidpool.h"
#include "tap.h"

#define BASE_A 0x50000000u
#define BASE_B 0x51000000u

int main(void)
{
    char dir[] = "/tmp/test-uidpool.XXXXXX", path[256], buf[64] = "";
    struct wr_uidpool *p = NULL, *q = NULL;
    struct wr_err err = {0};
    uint32_t base, base2;
    int fd, fd2, lf;
    ssize_t n;

    if (mkdtemp(dir) == NULL)
        return 1;
    ok(wr_uidpool_open(dir, BASE_A, 2, &p, &err) == 0, "open a new pool");
    snprintf(path, sizeof(path), "%s/layout", dir);
    lf = open(path, O_RDONLY);
    n = lf >= 0 ? read(lf, buf, sizeof(buf) - 1) : -1;
    if (lf >= 0)
        close(lf);
    buf[n > 0 ? n : 0] = '\0';
    is_str(buf, "1342177280 2\n", "its layout is recorded");
    ok(wr_uidpool_alloc(p, &base, &fd, &err) == 0 && base == BASE_A, "slot 0: base A");
    ok(wr_uidpool_alloc(p, &base2, &fd2, &err) == 0 && base2 == BASE_A + WR_UID_RANGE,
       "slot 1: the next range");
    ok(wr_uidpool_alloc(p, &base2, &lf, &err) < 0 && err.kind == WR_ELIMIT, "full: %s", err.msg);
    close(fd2);

    /* Another layout while slot 0 is held would give its ids to a second sandbox. */
    ok(wr_uidpool_open(dir, BASE_B, 2, &q, &err) < 0 && err.kind == WR_ECONFLICT,
       "another base while a slot is held: %s", err.msg);
    ok(wr_uidpool_open(dir, BASE_A, 4, &q, &err) < 0 && err.kind == WR_ECONFLICT,
       "another count while a slot is held");
    ok(wr_uidpool_open(dir, BASE_A, 2, &q, &err) == 0, "the same layout opens");
    wr_uidpool_close(q);
    q = NULL;

    /* A pool of a daemon that kept no record, with a slot held: refused. */
    unlink(path);
    ok(wr_uidpool_open(dir, BASE_A, 2, &q, &err) < 0 && err.kind == WR_ECONFLICT,
       "no record and a slot held: refused");

    /* Nothing held: the new layout is taken and recorded. */
    close(fd);
    ok(wr_uidpool_open(dir, BASE_B, 3, &q, &err) == 0, "nothing held: another layout");
    ok(wr_uidpool_alloc(q, &base, &fd, &err) == 0 && base == BASE_B, "its first range");
    close(fd);
    wr_uidpool_close(q);
    wr_uidpool_close(p);
    ok(wr_uidpool_open(dir, 0xffff0000u, 2, &q, &err) < 0 && err.kind == WR_EINVAL,
       "a layout past 32 bits is refused");

    snprintf(path, sizeof(path), "rm -rf '%s'", dir);
    if (system(path) != 0)
        return 1;
    return done();
}
