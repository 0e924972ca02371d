/* SPDX-License-Identifier: Apache-2.0 */
/* Image archives (docker-archive, oci-archive), image configs and digests (see image.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "image_int.h"

#define MAX_JSON (4u << 20)

#define MT_OCI_INDEX    "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_LIST  "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"

void wr__digest_final(EVP_MD_CTX *md, char out[72])
{
    unsigned char h[32];
    unsigned int n = 0;

    EVP_DigestFinal_ex(md, h, &n);
    memcpy(out, "sha256:", 7);
    for (int i = 0; i < 32; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", h[i]);
}

void wr__digest_buf(const void *p, size_t n, char out[72])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();

    if (md == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        abort();
    EVP_DigestUpdate(md, p, n);
    wr__digest_final(md, out);
    EVP_MD_CTX_free(md);
}

bool wr__valid_digest(const char *d)
{
    if (d == NULL || strncmp(d, "sha256:", 7) != 0 || strlen(d) != 71)
        return false;
    for (const char *c = d + 7; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
            return false;
    return true;
}

bool wr__layer_media_type(const char *mt)
{
    static const char *const ok[] = {
        "application/vnd.oci.image.layer.v1.tar",
        "application/vnd.oci.image.layer.v1.tar+gzip",
        "application/vnd.oci.image.layer.v1.tar+zstd",
        "application/vnd.oci.image.layer.nondistributable.v1.tar",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
        "application/vnd.docker.image.rootfs.diff.tar",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        "application/vnd.docker.image.rootfs.diff.tar.zstd",
        "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
    };
    for (size_t i = 0; i < WR_ARRAY_SIZE(ok); i++)
        if (mt != NULL && strcmp(mt, ok[i]) == 0)
            return true;
    return false;
}

void wr__image_add_layer(struct wr_oci_image *img, const char *path, const char *digest,
                         const char *media_type)
{
    struct wr_oci_layer *l;

    img->layers = xrealloc(img->layers, (img->nlayers + 1) * sizeof(*img->layers));
    l = &img->layers[img->nlayers++];
    l->path = xstrdup(path);
    l->digest = xstrdup(digest);
    l->media_type = xstrdup(media_type ? media_type : "");
}

void wr_oci_image_fini(struct wr_oci_image *img)
{
    if (img == NULL)
        return;
    for (size_t i = 0; i < img->nlayers; i++) {
        free(img->layers[i].path);
        free(img->layers[i].digest);
        free(img->layers[i].media_type);
    }
    free(img->layers);
    json_decref(img->config);
    memset(img, 0, sizeof(*img));
}

json_t *wr_oci_config_convert(const json_t *oci_config)
{
    const json_t *c = json_object_get(oci_config, "config");
    json_t *out = json_object(), *env = json_object(), *v;
    const char *s;
    size_t i;

    json_array_foreach(json_object_get(c, "Env"), i, v)
    {
        const char *kv = json_string_value(v), *eq = kv ? strchr(kv, '=') : NULL;
        if (eq != NULL && eq > kv) {
            _cleanup_free_ char *k = xstrndup(kv, (size_t)(eq - kv));
            json_object_set_new(env, k, json_string(eq + 1));
        }
    }
    json_object_set_new(out, "env", env);
    if ((s = json_string_value(json_object_get(c, "WorkingDir"))) != NULL && s[0] != '\0')
        json_object_set_new(out, "cwd", json_string(s));
    if ((s = json_string_value(json_object_get(c, "User"))) != NULL && s[0] != '\0')
        json_object_set_new(out, "user", json_string(s));
    if (json_is_array(json_object_get(c, "Cmd")))
        json_object_set(out, "cmd", json_object_get(c, "Cmd"));
    if (json_is_array(json_object_get(c, "Entrypoint")))
        json_object_set(out, "entrypoint", json_object_get(c, "Entrypoint"));
    return out;
}

/* ---- archives ------------------------------------------------------------------------------ */

/* A path the archive names (manifest.json's Config and Layers): relative, no `..`. The
 * extracted tree has no symlinks, so such a path stays inside it. */
static bool safe_rel(const char *p)
{
    if (p == NULL || p[0] == '\0' || p[0] == '/')
        return false;
    for (const char *c = p; (c = strstr(c, "..")) != NULL; c += 2)
        if ((c == p || c[-1] == '/') && (c[2] == '\0' || c[2] == '/'))
            return false;
    return true;
}

/* Load dir/rel as JSON (at most MAX_JSON bytes), checking its digest if want is set. */
static json_t *load_json(const char *dir, const char *rel, const char *want, struct wr_err *err)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, rel);
    _cleanup_close_ int fd = -1;
    _cleanup_free_ char *buf = NULL;
    json_error_t je;
    struct stat st;
    char got[72];
    json_t *j;

    fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return wr_err_set(err, WR_EBADDATA, 0, "the archive has no file `%s`", rel), NULL;
    if ((uint64_t)st.st_size > MAX_JSON)
        return wr_err_set(err, WR_EBADDATA, 0, "`%s` is too large", rel), NULL;
    buf = xmalloc((size_t)st.st_size + 1);
    if (read(fd, buf, (size_t)st.st_size) != st.st_size)
        return wr_err_sys(err, "read `%s`", rel), NULL;
    if (want != NULL) {
        wr__digest_buf(buf, (size_t)st.st_size, got);
        if (strcmp(got, want) != 0)
            return wr_err_set(err, WR_EBADDATA, 0, "`%s`: its digest is %s, not %s", rel, got,
                              want),
                   NULL;
    }
    j = json_loadb(buf, (size_t)st.st_size, 0, &je);
    if (j == NULL)
        wr_err_set(err, WR_EBADDATA, 0, "`%s` is not JSON: %s", rel, je.text);
    return j;
}

static char *blob_rel(const char *digest)
{
    return xasprintf("blobs/sha256/%s", digest + 7);
}

static bool str_is(const json_t *j, const char *s)
{
    return json_is_string(j) && strcmp(json_string_value(j), s) == 0;
}

const json_t *wr__pick_amd64(const json_t *manifests, struct wr_err *err)
{
    const json_t *d;
    size_t i;

    if (json_array_size(manifests) == 1)
        return json_array_get(manifests, 0);
    json_array_foreach(manifests, i, d)
    {
        const json_t *p = json_object_get(d, "platform");
        if (str_is(json_object_get(p, "os"), "linux") &&
            str_is(json_object_get(p, "architecture"), "amd64"))
            return d;
    }
    wr_err_set(err, WR_ENOTFOUND, 0, "the index has %zu manifests and none for linux/amd64",
               json_array_size(manifests));
    return NULL;
}

/* The manifest of an OCI layout's index (nested indexes followed): the only one, or the one for
 * linux/amd64. */
static json_t *oci_pick_manifest(const char *dir, json_t *index, int depth, struct wr_err *err)
{
    json_t *ms = json_object_get(index, "manifests");
    const json_t *pick;
    const char *mt, *digest;

    if (!json_is_array(ms) || json_array_size(ms) == 0)
        return wr_err_set(err, WR_EBADDATA, 0, "the index lists no manifest"), NULL;
    pick = wr__pick_amd64(ms, err);
    if (pick == NULL)
        return NULL;
    digest = json_string_value(json_object_get(pick, "digest"));
    mt = json_string_value(json_object_get(pick, "mediaType"));
    if (!wr__valid_digest(digest))
        return wr_err_set(err, WR_EBADDATA, 0, "a manifest descriptor has no sha256 digest"), NULL;
    _cleanup_free_ char *rel = blob_rel(digest);
    json_t *m = load_json(dir, rel, digest, err);
    if (m == NULL)
        return NULL;
    if (mt == NULL)
        mt = json_string_value(json_object_get(m, "mediaType"));
    if (mt != NULL && (strcmp(mt, MT_OCI_INDEX) == 0 || strcmp(mt, MT_DOCKER_LIST) == 0)) {
        json_t *inner;
        if (depth >= 4) {
            json_decref(m);
            return wr_err_set(err, WR_EBADDATA, 0, "indexes nested too deep"), NULL;
        }
        inner = oci_pick_manifest(dir, m, depth + 1, err);
        json_decref(m);
        return inner;
    }
    return m;
}

static int read_oci(const char *dir, struct wr_oci_image *img, struct wr_err *err)
{
    json_t *index = load_json(dir, "index.json", NULL, err), *m, *cfgd, *cfg, *l;
    const char *cd;
    size_t i;
    int rc = -1;

    if (index == NULL)
        return -1;
    m = oci_pick_manifest(dir, index, 0, err);
    json_decref(index);
    if (m == NULL)
        return -1;
    cfgd = json_object_get(m, "config");
    cd = json_string_value(json_object_get(cfgd, "digest"));
    if (!wr__valid_digest(cd) || !json_is_array(json_object_get(m, "layers"))) {
        wr_err_set(err, WR_EBADDATA, 0, "the manifest has no config or layers");
        goto out;
    }
    {
        _cleanup_free_ char *rel = blob_rel(cd);
        cfg = load_json(dir, rel, cd, err);
    }
    if (cfg == NULL)
        goto out;
    img->config = wr_oci_config_convert(cfg);
    json_decref(cfg);
    json_array_foreach(json_object_get(m, "layers"), i, l)
    {
        const char *d = json_string_value(json_object_get(l, "digest"));
        const char *mt = json_string_value(json_object_get(l, "mediaType"));
        _cleanup_free_ char *path = NULL;
        if (!wr__valid_digest(d)) {
            wr_err_set(err, WR_EBADDATA, 0, "layer %zu has no sha256 digest", i);
            goto out;
        }
        if (!wr__layer_media_type(mt)) {
            wr_err_set(err, WR_EBADDATA, 0, "layer %zu has media type `%s`, not a layer's", i,
                       mt ? mt : "");
            goto out;
        }
        path = xasprintf("%s/blobs/sha256/%s", dir, d + 7);
        if (access(path, R_OK) < 0) {
            wr_err_set(err, WR_EBADDATA, 0, "the archive has no blob %s", d);
            goto out;
        }
        wr__image_add_layer(img, path, d, mt);
    }
    rc = 0;
out:
    json_decref(m);
    return rc;
}

/* The digest a file named in a docker-archive must have, when its name says it: "<hex>.json",
 * "<hex>.tar" or "blobs/sha256/<hex>"; else NULL. */
static char *digest_of_name(const char *rel)
{
    const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    size_t n = strcspn(base, ".");
    _cleanup_free_ char *d = NULL;

    if (n != 64)
        return NULL;
    if (base[64] != '\0' && strcmp(base + 64, ".json") != 0 && strcmp(base + 64, ".tar") != 0)
        return NULL;
    d = xasprintf("sha256:%.64s", base);
    return wr__valid_digest(d) ? steal_pointer(&d) : NULL;
}

static int read_docker(const char *dir, struct wr_oci_image *img, struct wr_err *err)
{
    json_t *mf = load_json(dir, "manifest.json", NULL, err), *m, *cfg = NULL, *diff, *l;
    const char *cpath;
    size_t i;
    int rc = -1;

    if (mf == NULL)
        return -1;
    m = json_array_get(mf, 0);
    cpath = json_string_value(json_object_get(m, "Config"));
    if (!safe_rel(cpath) || !json_is_array(json_object_get(m, "Layers"))) {
        wr_err_set(err, WR_EBADDATA, 0, "manifest.json names no config or layers");
        goto out;
    }
    {
        _cleanup_free_ char *want = digest_of_name(cpath);
        cfg = load_json(dir, cpath, want, err);
    }
    if (cfg == NULL)
        goto out;
    diff = json_object_get(json_object_get(cfg, "rootfs"), "diff_ids");
    if (json_array_size(diff) != json_array_size(json_object_get(m, "Layers"))) {
        wr_err_set(err, WR_EBADDATA, 0,
                   "the config's diff_ids do not match manifest.json's "
                   "layers");
        goto out;
    }
    img->config = wr_oci_config_convert(cfg);
    json_array_foreach(json_object_get(m, "Layers"), i, l)
    {
        const char *rel = json_string_value(l);
        const char *did = json_string_value(json_array_get(diff, i));
        _cleanup_free_ char *path = NULL, *named = NULL;
        if (!safe_rel(rel) || !wr__valid_digest(did)) {
            wr_err_set(err, WR_EBADDATA, 0, "layer %zu: a bad path or diff_id", i);
            goto out;
        }
        /* A blob named by its digest must have it; a plain "<id>/layer.tar" is the
         * uncompressed layer, whose digest is its diff_id. */
        named = strncmp(rel, "blobs/", 6) == 0 ? digest_of_name(rel) : NULL;
        path = xasprintf("%s/%s", dir, rel);
        if (access(path, R_OK) < 0) {
            wr_err_set(err, WR_EBADDATA, 0, "the archive has no file `%s`", rel);
            goto out;
        }
        wr__image_add_layer(img, path, named ? named : did, "");
    }
    rc = 0;
out:
    json_decref(cfg);
    json_decref(mf);
    return rc;
}

int wr_oci_archive_read(const char *path, const char *workdir, struct wr_oci_image *img,
                        struct wr_err *err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    _cleanup_close_ int root = open(workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc;

    memset(img, 0, sizeof(*img));
    if (fd < 0 || root < 0)
        return wr_err_sys(err, "open `%s`", fd < 0 ? path : workdir);
    if (wr__unpack_tar(fd, root, false, NULL, "the archive", err) < 0)
        return -1;
    if (faccessat(root, "index.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
        rc = read_oci(workdir, img, err);
    else if (faccessat(root, "manifest.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
        rc = read_docker(workdir, img, err);
    else
        rc = wr_err_set(err, WR_EBADDATA, 0,
                        "not an image archive: it has neither index.json (oci-archive) nor "
                        "manifest.json (docker-archive)");
    if (rc == 0 && img->nlayers == 0)
        rc = wr_err_set(err, WR_EBADDATA, 0, "the image has no layers");
    if (rc < 0)
        wr_oci_image_fini(img);
    return rc;
}
