/* SPDX-License-Identifier: Apache-2.0 */
/* Packing a layer directory into a tar that wr_oci_unpack_layer reads back (see image.h): the
 * inverse of unpack.c's layer mode, overlayfs' whiteouts turned into OCI ones. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "image_int.h"

/* The tar being written: to fd, hashed as it goes. */
struct sink {
    int fd;
    EVP_MD_CTX *md;
    uint64_t size;
    int sys_errno; /* a write that failed */
};

static la_ssize_t sink_write(struct archive *a, void *data, const void *buf, size_t n)
{
    struct sink *s = data;
    const char *p = buf;
    size_t left = n;

    while (left > 0) {
        ssize_t w = write(s->fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            s->sys_errno = errno;
            archive_set_error(a, errno, "write");
            return -1;
        }
        p += w;
        left -= (size_t)w;
    }
    EVP_DigestUpdate(s->md, buf, n);
    s->size += n;
    return (la_ssize_t)n;
}

static int tar_fail(struct archive *a, const char *what, const char *name, struct wr_err *err)
{
    int e = archive_errno(a);
    return wr_err_set(err, e == ENOSPC || e == EDQUOT ? WR_ESYS : WR_EBADDATA, e > 0 ? e : 0,
                      "%s `%s`: %s", what, name, archive_error_string(a));
}

/* Keep the entry's extended attributes but overlayfs' own (turned into whiteouts, or its
 * private bookkeeping); *opaque says the directory was marked opaque. */
static void filter_xattrs(struct archive_entry *e, bool *opaque)
{
    struct archive_entry *copy = archive_entry_clone(e);
    const char *name;
    const void *val;
    size_t size;

    *opaque = false;
    archive_entry_xattr_clear(e);
    archive_entry_xattr_reset(copy);
    while (archive_entry_xattr_next(copy, &name, &val, &size) == ARCHIVE_OK) {
        if (strncmp(name, "trusted.overlay.", 16) == 0) {
            if (strcmp(name, "trusted.overlay.opaque") == 0 && size == 1 &&
                ((const char *)val)[0] == 'y')
                *opaque = true;
            continue;
        }
        archive_entry_xattr_add_entry(e, name, val, size);
    }
    archive_entry_free(copy);
}

/* An empty regular file named name, as OCI whiteouts are. */
static int write_marker(struct archive *w, const char *name, struct wr_err *err)
{
    struct archive_entry *m = archive_entry_new();
    int r;

    archive_entry_set_pathname(m, name);
    archive_entry_set_filetype(m, AE_IFREG);
    archive_entry_set_perm(m, 0);
    archive_entry_set_size(m, 0);
    r = archive_write_header(w, m);
    archive_entry_free(m);
    return r < ARCHIVE_WARN ? tar_fail(w, "write", name, err) : 0;
}

static int copy_data(struct archive *disk, struct archive *w, const char *name, struct wr_err *err)
{
    char buf[64 * 1024];
    la_ssize_t n;

    while ((n = archive_read_data(disk, buf, sizeof(buf))) > 0)
        if (archive_write_data(w, buf, (size_t)n) < n)
            return tar_fail(w, "write", name, err);
    return n < 0 ? tar_fail(disk, "read", name, err) : 0;
}

/* One entry of the walk, at rel (relative to the root; "." for the root itself). */
static int pack_entry(struct archive *disk, struct archive *w,
                      struct archive_entry_linkresolver *lr, struct archive_entry *e,
                      const char *rel, struct wr_err *err)
{
    mode_t type = archive_entry_filetype(e);
    struct archive_entry *spare = NULL;
    bool opaque;

    if (type == AE_IFSOCK)
        return 0; /* a tar holds no sockets; a sandbox gets a new one by binding */
    if (type == AE_IFCHR && archive_entry_rdev(e) == 0) {
        /* overlayfs' whiteout: OCI's .wh.NAME beside it */
        _cleanup_free_ char *name = NULL;
        const char *slash = strrchr(rel, '/');
        if (slash == NULL)
            name = xasprintf(".wh.%s", rel);
        else
            name = xasprintf("%.*s/.wh.%s", (int)(slash - rel), rel, slash + 1);
        return write_marker(w, name, err);
    }
    archive_entry_set_pathname(e, rel);
    archive_entry_set_uname(e, NULL);
    archive_entry_set_gname(e, NULL);
    archive_entry_unset_atime(e);
    archive_entry_unset_ctime(e);
    archive_entry_unset_birthtime(e);
    filter_xattrs(e, &opaque);
    archive_entry_linkify(lr, &e, &spare);
    if (spare != NULL)
        archive_entry_free(spare);
    if (archive_write_header(w, e) < ARCHIVE_WARN)
        return tar_fail(w, "write", rel, err);
    if (type == AE_IFREG && archive_entry_hardlink(e) == NULL && archive_entry_size(e) > 0 &&
        copy_data(disk, w, rel, err) < 0)
        return -1;
    if (opaque) {
        _cleanup_free_ char *name =
            strcmp(rel, ".") == 0 ? xstrdup(".wh..wh..opq") : xasprintf("%s/.wh..wh..opq", rel);
        return write_marker(w, name, err);
    }
    return 0;
}

/* Walk root, writing every entry to w. */
static int pack_tree(const char *root, struct archive *w, struct wr_err *err)
{
    struct archive *disk = archive_read_disk_new();
    struct archive_entry_linkresolver *lr = archive_entry_linkresolver_new();
    struct archive_entry *e = archive_entry_new();
    size_t rlen = strlen(root);
    int rc = -1, r;

    archive_read_disk_set_symlink_physical(disk);
    archive_read_disk_set_behavior(disk, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS |
                                             ARCHIVE_READDISK_NO_ACL | ARCHIVE_READDISK_NO_FFLAGS);
    archive_entry_linkresolver_set_strategy(lr, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    if (archive_read_disk_open(disk, root) != ARCHIVE_OK) {
        tar_fail(disk, "open", root, err);
        goto out;
    }
    while ((r = archive_read_next_header2(disk, e)) != ARCHIVE_EOF) {
        const char *src;
        _cleanup_free_ char *rel = NULL;
        if (r < ARCHIVE_WARN) {
            tar_fail(disk, "read", root, err);
            goto out;
        }
        src = archive_entry_sourcepath(e);
        if (src == NULL || strncmp(src, root, rlen) != 0 ||
            (src[rlen] != '\0' && src[rlen] != '/')) {
            wr_err_set(err, WR_EINTERNAL, 0, "pack `%s`: an entry outside it", root);
            goto out;
        }
        rel = xstrdup(src[rlen] == '\0' ? "." : src + rlen + 1);
        if (archive_read_disk_can_descend(disk))
            archive_read_disk_descend(disk);
        if (pack_entry(disk, w, lr, e, rel, err) < 0)
            goto out;
        archive_entry_clear(e);
    }
    rc = 0;
out:
    archive_entry_free(e);
    archive_entry_linkresolver_free(lr);
    archive_read_free(disk);
    return rc;
}

int wr_oci_pack_layer(const char *dir, const char *path, char digest[72], uint64_t *size,
                      struct wr_err *err)
{
    _cleanup_free_ char *root = realpath(dir, NULL);
    struct sink s = {.fd = -1};
    struct archive *w = NULL;
    int rc = -1;

    if (root == NULL)
        return wr_err_sys(err, "layer `%s`", dir);
    s.fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (s.fd < 0)
        return wr_err_sys(err, "create `%s`", path);
    s.md = EVP_MD_CTX_new();
    if (s.md == NULL || EVP_DigestInit_ex(s.md, EVP_sha256(), NULL) != 1)
        abort();
    w = archive_write_new();
    archive_write_set_format_pax_restricted(w);
    archive_write_set_bytes_in_last_block(w, 1);
    if (archive_write_open(w, &s, NULL, sink_write, NULL) != ARCHIVE_OK) {
        tar_fail(w, "write", path, err);
        goto out;
    }
    if (pack_tree(root, w, err) < 0)
        goto out;
    if (archive_write_close(w) != ARCHIVE_OK) {
        tar_fail(w, "write", path, err);
        goto out;
    }
    if (fsync(s.fd) < 0) {
        wr_err_sys(err, "fsync `%s`", path);
        goto out;
    }
    wr__digest_final(s.md, digest);
    *size = s.size;
    rc = 0;
out:
    if (s.sys_errno != 0 && rc < 0)
        err->kind = WR_ESYS;
    archive_write_free(w);
    EVP_MD_CTX_free(s.md);
    close(s.fd);
    if (rc < 0)
        (void)unlink(path);
    return rc;
}

void wr_oci_digest(const void *p, size_t n, char out[72])
{
    wr__digest_buf(p, n, out);
}
