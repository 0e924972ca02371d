/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for OCI layer unpacking (src/image/unpack.c): the input is a layer tar (or
 * an archive's outer tar) from a registry or a tenant's upload, unpacked as a layer and as an
 * outer tar into a fresh directory. Whatever its paths, links and whiteouts say, nothing outside
 * that directory changes: next to it is a canary file, which must keep its one link and content,
 * and the two must stay the only entries of their parent. Runs as root (owners, devices). */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/image/image_int.h"

#define CANARY "canary\n"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

static char parent[] = "/tmp/fuzz-unpack-XXXXXX";
static char root_path[sizeof(parent) + 8], canary_path[sizeof(parent) + 8];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 ? -1 : 0;
}

/* The parent holds exactly "root" and an intact canary. */
static void check_parent(void)
{
    DIR *d = opendir(parent);
    struct dirent *de;
    struct stat st;
    char buf[64];
    int fd, n = 0;

    check(d != NULL);
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
            check(strcmp(de->d_name, "root") == 0 || strcmp(de->d_name, "canary") == 0);
            n++;
        }
    closedir(d);
    check(n == 2);
    fd = open(canary_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    check(fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1);
    check(read(fd, buf, sizeof(buf)) == (ssize_t)strlen(CANARY) && memcmp(buf, CANARY, 7) == 0);
    close(fd);
}

static void unpack(int in, bool layer)
{
    struct wr_err err;
    int root;

    check(mkdir(root_path, 0755) == 0);
    root = open(root_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    check(root >= 0 && lseek(in, 0, SEEK_SET) == 0);
    if (wr__unpack_tar(in, root, layer, NULL, "fuzz", &err) < 0)
        check(err.msg[0] != '\0');
    close(root);
    check_parent();
    check(nftw(root_path, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0);
}

static void cleanup(void)
{
    (void)unlink(canary_path);
    (void)rmdir(parent);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    int in;

    if (!ready) {
        int fd;
        check(mkdtemp(parent) != NULL && atexit(cleanup) == 0);
        snprintf(root_path, sizeof(root_path), "%s/root", parent);
        snprintf(canary_path, sizeof(canary_path), "%s/canary", parent);
        fd = open(canary_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        check(fd >= 0 && write(fd, CANARY, strlen(CANARY)) == (ssize_t)strlen(CANARY));
        close(fd);
        ready = 1;
    }
    in = memfd_create("layer", MFD_CLOEXEC);
    check(in >= 0 && write(in, data, size) == (ssize_t)size);
    unpack(in, true);
    unpack(in, false);
    close(in);
    return 0;
}
