/* SPDX-License-Identifier: Apache-2.0 */
/* A Compose file's services in one sandbox (docs/compose.md). Each service's root is a directory
 * of the sandbox's own tree, WR_SERVICES_DIR/<name>: its image's layers, each copied once below
 * that prefix into a layer of the store (wr_layer_relocate: hard links where the filesystem
 * allows) and cached by source and prefix, stacked on the sandbox's own image. So a service's
 * files are the sandbox's files: snapshot, fork and pause to disk keep them with no more code,
 * and the files API reaches them. The runtime binds /proc, /dev, /sys and the service's volumes
 * into each root (struct wr_inner_bind); warren-init runs each service chrooted there, in a
 * cgroup of its own under the sandbox's, in dependency order, with its healthcheck and restart
 * policy (src/init/service.c).
 *
 * Loop thread, but the copies and installs (on a worker). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../runtime/layer.h"
#include "../runtime/mount.h"
#include "../store/store.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"
#include "images.h"
#include "manager.h"
#include "oci.h"

#define CONTEXT_DIR "/.warren/context"

/* One layer a service's root needs: found in the cache, or to be made on the worker. */
struct prep_layer {
    char key[65];
    char *src;   /* its tree on the host */
    char *where; /* the prefix it goes below */
    char digest[80];
    uint64_t bytes;
    bool cached;
    bool kept; /* installed and recorded (keep_layer): the store refers to it */
};

struct prep {
    uv_work_t w;
    struct wr_manager *m;
    char *team;
    json_t *spec;                /* the compose spec, resolved as it goes */
    json_t *context;             /* path -> content, or NULL */
    json_t *base;                /* the sandbox's own image: {"layers", "config"} */
    struct wr_compose_pull pull; /* its strings owned */
    size_t pulling;              /* the service whose image is being pulled */
    struct prep_layer *l;
    size_t n;
    size_t *first; /* per service: its first layer in l; first[nsvc] = n */
    char ctx_digest[80];
    uint64_t ctx_bytes;
    bool ctx_kept;
    int rc;
    struct wr_err err;
    wr_manager_compose_cb cb;
    void *ctx;
};

static void prep_free(struct prep *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->l[i].src);
        free(p->l[i].where);
    }
    free(p->l);
    free(p->first);
    free(p->team);
    free((char *)p->pull.username);
    free((char *)p->pull.password);
    json_decref(p->spec);
    json_decref(p->context);
    json_decref(p->base);
    free(p);
}

/* sha256 hex of the strings, each followed by a NUL. */
static void key_of(char out[65], const char *const *parts, size_t n)
{
    EVP_MD_CTX *h = EVP_MD_CTX_new();
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;

    EVP_DigestInit_ex(h, EVP_sha256(), NULL);
    for (size_t i = 0; i < n; i++)
        EVP_DigestUpdate(h, parts[i], strlen(parts[i]) + 1);
    EVP_DigestFinal_ex(h, md, &len);
    EVP_MD_CTX_free(h);
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* The service's argv, env, cwd and user from its image's config under the Compose file's: as
 * Docker does (an entrypoint given drops the image's command). */
static int resolve_service(json_t *svc, const json_t *config, struct wr_err *err)
{
    const char *name = json_string_value(json_object_get(svc, "name"));
    json_t *ep = json_object_get(svc, "entrypoint"), *cmd = json_object_get(svc, "command");
    json_t *argv = json_array(), *env = json_object(), *v;
    size_t i;

    if (json_is_null(ep) || ep == NULL)
        ep = json_object_get(config, "entrypoint");
    if (json_is_null(cmd) || cmd == NULL) {
        if (json_is_array(json_object_get(svc, "entrypoint")))
            cmd = NULL;
        else
            cmd = json_object_get(config, "cmd");
    }
    json_array_foreach(ep, i, v) json_array_append(argv, v);
    json_array_foreach(cmd, i, v) json_array_append(argv, v);
    if (json_array_size(argv) == 0) {
        json_decref(argv);
        json_decref(env);
        return wr_err_set(err, WR_EINVAL, 0,
                          "service `%s` has no command: its image has none and the file gives "
                          "neither `command` nor `entrypoint`",
                          name);
    }
    json_array_foreach(argv, i, v) if (!json_is_string(v))
    {
        json_decref(argv);
        json_decref(env);
        return wr_err_set(err, WR_EINVAL, 0, "service `%s`: its image's command is malformed",
                          name);
    }
    if (json_is_object(json_object_get(config, "env")))
        json_object_update(env, json_object_get(config, "env"));
    json_object_update(env, json_object_get(svc, "environment"));
    json_object_set_new(svc, "argv", argv);
    json_object_set_new(svc, "env", env);
    if (json_is_null(json_object_get(svc, "working_dir")))
        json_object_set(svc, "working_dir",
                        json_is_string(json_object_get(config, "cwd"))
                            ? json_object_get(config, "cwd")
                            : json_null());
    if (json_is_null(json_object_get(svc, "user")))
        json_object_set(svc, "user",
                        json_is_string(json_object_get(config, "user"))
                            ? json_object_get(config, "user")
                            : json_null());
    json_object_set_new(svc, "root", json_sprintf("%s/%s", WR_SERVICES_DIR, name));
    return 0;
}

/* The cache key of a layer below a prefix: what the layer is (a store layer by its digest, a
 * directory template by its path and the identity of its root, which a rebuild replaces). */
static int layer_key(const char *ref, const char *path, const char *prefix, char out[65],
                     struct wr_err *err)
{
    char ident[64] = "";
    const char *parts[4] = {"warren-service-root-v1", ref, ident, prefix};

    if (strncmp(ref, "dir:", 4) == 0) {
        struct stat st;
        if (stat(path, &st) < 0)
            return wr_err_sys(err, "template directory `%s`", path);
        snprintf(ident, sizeof(ident), "%ju:%ju:%jd.%09ld", (uintmax_t)st.st_dev,
                 (uintmax_t)st.st_ino, (intmax_t)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
    }
    key_of(out, parts, 4);
    return 0;
}

static int add_service_layers(struct prep *p, json_t *svc, struct wr_err *err)
{
    struct wr_images *im = p->m->cfg.images;
    const char *name = json_string_value(json_object_get(svc, "name"));
    const char *ref = json_string_value(json_object_get(svc, "template"));
    _cleanup_free_ char *prefix = xasprintf("%s/%s", WR_SERVICES_DIR, name);
    struct wr_image img = {0};
    json_t *stack = NULL;
    char **paths = NULL;
    size_t np = 0;
    int rc = -1;

    if (wr_images_resolve(im, p->team, ref, &img, err) < 0) {
        wr_err_wrap(err, "service `%s`", name);
        return -1;
    }
    if (resolve_service(svc, img.config, err) < 0 ||
        wr_images_layer_paths(im, img.layers, &paths, &np, err) < 0)
        goto out;
    stack = wr_images_stack_clean(img.layers);
    p->l = xrealloc(p->l, (p->n + np) * sizeof(*p->l));
    for (size_t k = 0; k < np; k++) {
        struct prep_layer *l = &p->l[p->n];
        memset(l, 0, sizeof(*l));
        if (layer_key(json_string_value(json_array_get(stack, k)), paths[k], prefix, l->key, err) <
            0)
            goto out;
        l->src = xstrdup(paths[k]);
        l->where = xstrdup(prefix);
        p->n++;
        {
            struct wr_err miss;
            l->cached = wr_store_build_cache_get(p->m->cfg.store, l->key, l->digest, &miss) == 0;
        }
    }
    rc = 0;
out:
    for (size_t k = 0; k < np; k++)
        free(paths[k]);
    free(paths);
    json_decref(stack);
    wr_image_fini(&img);
    return rc;
}

static int write_new(const char *path, const char *s, size_t n, struct wr_err *err)
{
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);

    if (fd < 0 || fchmod(fd, 0644) < 0 || wr_write_all(fd, s, n) < 0)
        return wr_err_sys(err, "context file `%s`", path);
    return 0;
}

/* Worker: the context's files into a layer at tmp, below CONTEXT_DIR. */
static int context_layer(struct prep *p, char digest[80], uint64_t *bytes, struct wr_err *err)
{
    struct wr_images *im = p->m->cfg.images;
    _cleanup_free_ char *tmp = wr_images_tmp(im);
    _cleanup_free_ char *top = xasprintf("%s/fs%s", tmp, CONTEXT_DIR);
    const char *k;
    json_t *v;

    if (wr_mkdir_p(top, 0755, err) < 0)
        goto fail;
#ifdef WR_TESTING
    /* test_compose.py: a prepare that fails after the services' layers were installed. */
    if (getenv("WARREN_FAULT") != NULL && strcmp(getenv("WARREN_FAULT"), "compose-context") == 0) {
        wr_err_set(err, WR_ESYS, EIO, "context (WARREN_FAULT=compose-context)");
        goto fail;
    }
#endif
    json_object_foreach(p->context, k, v)
    {
        _cleanup_free_ char *path = xasprintf("%s/%s", top, k);
        size_t n = strlen(path);
        char *slash = strrchr(path, '/');
        if (path[n - 1] == '/') { /* an empty directory */
            path[n - 1] = '\0';
            if (wr_mkdir_p(path, 0755, err) < 0)
                goto fail;
            continue;
        }
        *slash = '\0';
        if (wr_mkdir_p(path, 0755, err) < 0)
            goto fail;
        *slash = '/';
        if (write_new(path, json_string_value(v), json_string_length(v), err) < 0)
            goto fail;
    }
    return wr_images_install(im, tmp, digest, bytes, err);
fail:
    (void)wr_layer_remove(tmp, NULL);
    return -1;
}

static void prep_run(uv_work_t *w)
{
    struct prep *p = w->data;
    struct wr_images *im = p->m->cfg.images;

    p->rc = 0;
    for (size_t i = 0; i < p->n; i++) {
        struct prep_layer *l = &p->l[i];
        _cleanup_free_ char *tmp = NULL;
        if (l->cached)
            continue;
        tmp = wr_images_tmp(im);
        if (wr_layer_relocate(l->src, tmp, l->where, wr_images_fs(im), &p->err) < 0 ||
            wr_images_install(im, tmp, l->digest, &l->bytes, &p->err) < 0) {
            p->rc = -1;
            return;
        }
    }
    if (p->context != NULL && json_object_size(p->context) > 0 &&
        context_layer(p, p->ctx_digest, &p->ctx_bytes, &p->err) < 0)
        p->rc = -1;
}

/* Loop: record a layer made for a service (or the context) and keep it in the cache, so it stays
 * in the store while the cache row does. */
static int keep_layer(struct prep *p, const char *key, const char *digest, uint64_t bytes,
                      struct wr_err *err)
{
    if (digest[0] == '\0')
        return 0;
    if (wr_store_layer_put(p->m->cfg.store, digest, bytes, err) < 0 ||
        wr_store_build_cache_put(p->m->cfg.store, key, digest, p->team, err) < 0)
        return -1;
    return 0;
}

static void prep_done(uv_work_t *w, int status)
{
    struct prep *p = w->data;
    struct wr_manager *m = p->m;
    json_t *layers = NULL, *image = NULL;
    char *image_json = NULL, *spec_json = NULL;

    if (p->rc < 0)
        goto out;
    layers = wr_images_stack_clean(json_object_get(p->base, "layers"));
    for (size_t i = 0; i < p->n; i++) {
        if (!p->l[i].cached &&
            keep_layer(p, p->l[i].key, p->l[i].digest, p->l[i].bytes, &p->err) < 0)
            goto fail;
        p->l[i].kept = true;
        if (p->l[i].digest[0] != '\0')
            wr_images_stack_push(layers, p->l[i].digest);
    }
    if (p->ctx_digest[0] != '\0') {
        char key[65];
        const char *parts[2] = {"warren-compose-context-v1", p->ctx_digest};
        key_of(key, parts, 2);
        if (keep_layer(p, key, p->ctx_digest, p->ctx_bytes, &p->err) < 0)
            goto fail;
        p->ctx_kept = true;
        wr_images_stack_push(layers, p->ctx_digest);
    }
    if (json_array_size(layers) > WR_MAX_LAYERS) {
        wr_err_set(&p->err, WR_ECONFLICT, 0,
                   "the sandbox and its services would stack %zu layers, and a sandbox stacks at "
                   "most %d",
                   json_array_size(layers), WR_MAX_LAYERS);
        goto fail;
    }
    image = json_pack("{sOsO}", "layers", layers, "config", json_object_get(p->base, "config"));
    image_json = json_dumps(image, JSON_COMPACT);
    spec_json = json_dumps(p->spec, JSON_COMPACT);
    p->cb(p->ctx, image_json, spec_json, NULL);
    free(image_json);
    free(spec_json);
    goto done;
fail:
    p->rc = -1;
out:
    /* The layers the worker installed that no row refers to: collection goes by rows, so they
     * go now, or they would stay in the store for good. */
    for (size_t i = 0; i < p->n; i++)
        if (!p->l[i].cached && !p->l[i].kept)
            wr_images_forget(m->cfg.images, p->l[i].digest, p->l[i].bytes);
    if (!p->ctx_kept)
        wr_images_forget(m->cfg.images, p->ctx_digest, p->ctx_bytes);
    p->cb(p->ctx, NULL, NULL, &p->err);
done:
    json_decref(layers);
    json_decref(image);
    prep_free(p);
    wr_images_gc(m->cfg.images); /* a layer made for nothing (an error) goes */
    wr__work_done(m);
}

/* The template an OCI reference is pulled into, for team: the same for every create of the team
 * that names it, so the first create pulls and later ones find it (Docker's `missing` policy). */
static char *pulled_name(const char *ref)
{
    char hex[65];
    const char *parts[2] = {"warren-compose-pull-v1", ref};

    key_of(hex, parts, 2);
    return xasprintf("pulled-%.16s", hex);
}

/* A service's image that is no template or snapshot of the team's but an OCI reference
 * (host[:port]/repo[:tag|@digest]): pulled into pulled_name(ref), unless it was already. */
static int find_image(struct prep *p, json_t *svc, struct wr_err *err)
{
    const char *ref = json_string_value(json_object_get(svc, "image"));
    _cleanup_free_ char *name = NULL;
    struct wr_image img = {0};

    if (strchr(ref, '/') == NULL) { /* no template or snapshot name has one */
        if (wr_images_resolve(p->m->cfg.images, p->team, ref, &img, err) < 0)
            return wr_err_wrap(err, "service `%s`",
                               json_string_value(json_object_get(svc, "name")));
        wr_image_fini(&img);
        json_object_set_new(svc, "template", json_string(ref));
        return 0;
    }
    name = pulled_name(ref);
    json_object_set_new(svc, "template", json_string(name));
    if (wr_images_resolve(p->m->cfg.images, p->team, name, &img, err) == 0) {
        wr_image_fini(&img);
        return 0;
    }
    json_object_set_new(svc, "pull", json_true());
    return 0;
}

static void pull_next(struct prep *p);

static void prep_layers(struct prep *p)
{
    json_t *svc;
    size_t i, binds = 0;

    json_array_foreach(json_object_get(p->spec, "services"), i, svc)
    {
        json_object_del(svc, "pull");
        if (add_service_layers(p, svc, &p->err) < 0)
            goto fail;
        binds += 3 + json_array_size(json_object_get(svc, "volumes"));
    }
    if (binds > WR_MAX_INNER_BINDS) {
        wr_err_set(&p->err, WR_EINVAL, 0,
                   "the services need %zu mounts (3 each and one per volume), and a sandbox "
                   "has at most %d",
                   binds, WR_MAX_INNER_BINDS);
        goto fail;
    }
    p->w.data = p;
    wr__queue_work(p->m, &p->w, prep_run, prep_done);
    return;
fail:
    p->cb(p->ctx, NULL, NULL, &p->err);
    prep_free(p);
}

static void pulled(void *ctx, const struct wr_image_rec *tpl, const struct wr_err *err)
{
    struct prep *p = ctx;
    json_t *svc = json_array_get(json_object_get(p->spec, "services"), p->pulling);

    if (err != NULL) {
        p->err = *err;
        wr_err_wrap(&p->err, "service `%s`: pull `%s`",
                    json_string_value(json_object_get(svc, "name")),
                    json_string_value(json_object_get(svc, "image")));
        p->cb(p->ctx, NULL, NULL, &p->err);
        prep_free(p);
        return;
    }
    json_object_del(svc, "pull");
    pull_next(p);
}

/* The pulls the services need, one at a time, then their layers. */
static void pull_next(struct prep *p)
{
    json_t *svc;
    size_t i;

    json_array_foreach(json_object_get(p->spec, "services"), i, svc)
    {
        struct wr_oci_request r;
        if (!json_is_true(json_object_get(svc, "pull")))
            continue;
        r = (struct wr_oci_request){
            .name = json_string_value(json_object_get(svc, "template")),
            .team = p->team,
            .admin = p->pull.admin,
            .image = json_string_value(json_object_get(svc, "image")),
            .username = p->pull.username,
            .password = p->pull.password,
            .insecure = p->pull.insecure,
        };
        p->pulling = i;
        log_info("compose: service `%s`: pulling `%s` into template `%s`",
                 json_string_value(json_object_get(svc, "name")), r.image, r.name);
        wr_oci_start(p->m, &r, pulled, p);
        return;
    }
    prep_layers(p);
}

void wr_manager_compose_prepare(struct wr_manager *m, const char *team, const char *template_name,
                                const json_t *spec, const json_t *context,
                                const struct wr_compose_pull *pull, wr_manager_compose_cb cb,
                                void *ctx)
{
    struct prep *p = xcalloc(1, sizeof(*p));
    struct wr_image base = {0};
    json_t *svc;
    size_t i;

    p->m = m;
    p->team = xstrdup(team);
    p->spec = json_deep_copy(spec);
    p->context = context != NULL ? json_deep_copy(context) : NULL;
    p->cb = cb;
    p->ctx = ctx;
    if (pull != NULL) {
        p->pull.admin = pull->admin;
        p->pull.insecure = pull->insecure;
        p->pull.username = pull->username ? xstrdup(pull->username) : NULL;
        p->pull.password = pull->password ? xstrdup(pull->password) : NULL;
    }
    if (wr_images_resolve(m->cfg.images, team, template_name ? template_name : "base", &base,
                          &p->err) < 0)
        goto fail;
    p->base = json_pack("{sOsO}", "layers", base.layers, "config", base.config);
    wr_image_fini(&base);
    json_array_foreach(json_object_get(p->spec, "services"), i,
                       svc) if (find_image(p, svc, &p->err) < 0) goto fail;
    pull_next(p);
    return;
fail:
    cb(ctx, NULL, NULL, &p->err);
    prep_free(p);
}

/* ---- a record's services into its start spec ------------------------------------------------ */

static void bind_add(struct start_spec *ss, char *src, char *dst, bool ro)
{
    ss->inner = xrealloc(ss->inner, (ss->n_inner + 1) * sizeof(*ss->inner));
    ss->inner[ss->n_inner++] = (struct wr_inner_bind){.src = src, .dst = dst, .read_only = ro};
}

int wr__services_spec(const struct wr_sandbox_rec *rec, struct start_spec *ss, struct wr_err *err)
{
    static const char *const sys[] = {"/proc", "/dev", "/sys"};
    json_t *spec, *svc, *vol;
    size_t i, k;

    if (rec->compose_json == NULL)
        return 0;
    spec = json_loads(rec->compose_json, 0, NULL);
    if (!json_is_array(json_object_get(spec, "services"))) {
        json_decref(spec);
        return wr_err_set(err, WR_EINTERNAL, 0, "sandbox `%s`: its services are malformed",
                          rec->id);
    }
    json_array_foreach(json_object_get(spec, "services"), i, svc)
    {
        const char *root = json_string_value(json_object_get(svc, "root"));
        if (root == NULL)
            continue;
        for (k = 0; k < 3; k++)
            bind_add(ss, xstrdup(sys[k]), xasprintf("%s%s", root, sys[k]), false);
        json_array_foreach(json_object_get(svc, "volumes"), k, vol)
        {
            const char *type = json_string_value(json_object_get(vol, "type"));
            const char *src = json_string_value(json_object_get(vol, "source"));
            const char *dst = json_string_value(json_object_get(vol, "target"));
            bool ro = json_is_true(json_object_get(vol, "read_only"));
            if (type == NULL || src == NULL || dst == NULL)
                continue;
            if (strcmp(type, "volume") == 0)
                bind_add(ss, xasprintf("%s/%s", WR_COMPOSE_VOLUMES, src),
                         xasprintf("%s%s", root, dst), ro);
            else if (strcmp(src, ".") == 0)
                bind_add(ss, xstrdup(CONTEXT_DIR), xasprintf("%s%s", root, dst), ro);
            else
                bind_add(ss, xasprintf("%s/%s", CONTEXT_DIR, src), xasprintf("%s%s", root, dst),
                         ro);
        }
    }
    json_decref(spec);
    return 0;
}

/* ---- starting them, once warren-init is up ---------------------------------------------------
 */

/* A service's own cgroup: its name under the sandbox's. */
static char *cgroup_name(const char *service)
{
    return xasprintf("svc-%s", service);
}

struct svc_start {
    uv_work_t w;
    struct wr_live_sb *sb; /* referenced */
    json_t *spec;
    size_t n;
    int (*fds)[WR_CMD_CGROUP_FDS];
    size_t *nfds;
    bool *has_cg;
    size_t pending; /* defines in flight, and the start */
    bool failed;
    int rc;
    struct wr_err err;
    wr__services_cb cb;
    void *ctx;
};

static void svc_start_free(struct svc_start *s)
{
    for (size_t i = 0; i < s->n; i++)
        for (size_t k = 0; k < s->nfds[i]; k++)
            (void)close(s->fds[i][k]);
    free(s->fds);
    free(s->nfds);
    free(s->has_cg);
    json_decref(s->spec);
    wr_live_sb_unref(s->sb);
    free(s);
}

/* Worker: every service's cgroup, with its limits. */
static void cgroups_run(uv_work_t *w)
{
    struct svc_start *s = w->data;
    struct wr_runtime *rt = s->sb->m->cfg.rt;
    json_t *svc;
    size_t i;

    s->rc = 0;
    json_array_foreach(json_object_get(s->spec, "services"), i, svc)
    {
        const char *name = json_string_value(json_object_get(svc, "name"));
        uint64_t mem = (uint64_t)json_integer_value(json_object_get(svc, "mem_limit"));
        uint32_t cpu = (uint32_t)json_integer_value(json_object_get(svc, "cpus"));
        _cleanup_free_ char *cg = cgroup_name(name);
        struct wr_err e;

        if (wr_sandbox_cmd_cgroup_create(rt, s->sb->id, cg, mem, cpu, s->fds[i], &s->nfds[i], &e) ==
            0) {
            s->has_cg[i] = true;
        } else if (e.kind == WR_EUNSUPPORTED && mem == 0 && cpu == 0) {
            s->nfds[i] = 0; /* accounted with the sandbox */
        } else {
            s->err = e;
            wr_err_wrap(&s->err, "service `%s`: its cgroup", name);
            s->rc = -1;
            return;
        }
    }
}

static void svc_step_done(struct svc_start *s, const struct wr_err *err)
{
    if (err != NULL && !s->failed) {
        s->failed = true;
        s->err = *err;
    }
    if (--s->pending > 0)
        return;
    s->cb(s->ctx, s->failed ? &s->err : NULL);
    svc_start_free(s);
}

static void started_cb(void *ctx, const struct wr_err *err)
{
    svc_step_done(ctx, err);
}

/* One define answered (or the loop that sends them is over): after the last, the start. */
static void defined_cb(void *ctx, const struct wr_err *err)
{
    struct svc_start *s = ctx;
    struct wr_err e;

    if (err != NULL && !s->failed) {
        s->failed = true;
        s->err = *err;
    }
    if (--s->pending > 1)
        return;
    /* One unit left: the start's. */
    if (s->failed) {
        svc_step_done(s, NULL);
    } else if (s->sb->agent == NULL) {
        wr_err_set(&e, WR_ECONFLICT, 0, "the connection to warren-init closed");
        svc_step_done(s, &e);
    } else if (wr_agent_services_start(s->sb->agent, started_cb, s, &e) < 0) {
        svc_step_done(s, &e);
    }
}

static char **strv_of_array(const json_t *a)
{
    char **v = xcalloc(json_array_size(a) + 1, sizeof(char *));
    json_t *x;
    size_t i, n = 0;

    json_array_foreach(a, i, x) if (json_is_string(x)) v[n++] = xstrdup(json_string_value(x));
    return v;
}

static char **env_of(const json_t *o)
{
    char **v = xcalloc(json_object_size(o) + 1, sizeof(char *));
    const char *k;
    json_t *x;
    size_t n = 0;

    json_object_foreach((json_t *)o, k, x) if (json_is_string(x)) v[n++] =
        xasprintf("%s=%s", k, json_string_value(x));
    return v;
}

static uint32_t restart_of(const char *r)
{
    if (r == NULL || strcmp(r, "no") == 0)
        return WR_RESTART_NO;
    if (strcmp(r, "always") == 0)
        return WR_RESTART_ALWAYS;
    if (strcmp(r, "on-failure") == 0)
        return WR_RESTART_ON_FAILURE;
    return WR_RESTART_UNLESS_STOPPED;
}

static uint32_t depend_of(const char *c)
{
    if (c != NULL && strcmp(c, "service_healthy") == 0)
        return WR_DEPEND_HEALTHY;
    if (c != NULL && strcmp(c, "service_completed_successfully") == 0)
        return WR_DEPEND_COMPLETED;
    return WR_DEPEND_STARTED;
}

/* A duration of the spec in what warren-init takes (at most WR_SERVICE_MS_MAX). */
static uint64_t ms_of(const json_t *v)
{
    json_int_t ms = json_integer_value(v);
    return ms <= 0 ? 0 : (uint64_t)ms > WR_SERVICE_MS_MAX ? WR_SERVICE_MS_MAX : (uint64_t)ms;
}

/* The struct wr_service of one service of the spec (its strings owned: wr_service_fini). */
static void service_of(const json_t *svc, bool has_cg, size_t nfds, struct wr_service *out)
{
    const json_t *hc = json_object_get(svc, "healthcheck"),
                 *deps = json_object_get(svc, "depends_on");
    const char *s;
    json_t *d;
    size_t i;

    memset(out, 0, sizeof(*out));
    out->name = xstrdup(json_string_value(json_object_get(svc, "name")));
    out->root = xstrdup(json_string_value(json_object_get(svc, "root")));
    out->sp.argv = strv_of_array(json_object_get(svc, "argv"));
    out->sp.env = env_of(json_object_get(svc, "env"));
    if ((s = json_string_value(json_object_get(svc, "working_dir"))) != NULL)
        out->sp.cwd = xstrdup(s);
    if ((s = json_string_value(json_object_get(svc, "user"))) != NULL)
        out->sp.user = xstrdup(s);
    out->sp.uid = out->sp.gid = -1;
    if (has_cg) {
        out->sp.nfds = (uint32_t)nfds;
        out->sp.cgroup = cgroup_name(out->name);
    }
    if (json_array_size(deps) > 0) {
        out->depends = xcalloc(json_array_size(deps) + 1, sizeof(char *));
        json_array_foreach(deps, i, d) out->depends[i] =
            xasprintf("%s=%u", json_string_value(json_object_get(d, "service")),
                      depend_of(json_string_value(json_object_get(d, "condition"))));
    }
    if (json_is_object(hc)) {
        out->health_argv = strv_of_array(json_object_get(hc, "test"));
        out->health_interval_ms = ms_of(json_object_get(hc, "interval_ms"));
        out->health_timeout_ms = ms_of(json_object_get(hc, "timeout_ms"));
        out->health_start_period_ms = ms_of(json_object_get(hc, "start_period_ms"));
        out->health_retries = (uint32_t)json_integer_value(json_object_get(hc, "retries"));
    }
    out->restart = restart_of(json_string_value(json_object_get(svc, "restart")));
    out->restart_max = (uint32_t)json_integer_value(json_object_get(svc, "restart_max"));
    out->stop_signal = (uint32_t)json_integer_value(json_object_get(svc, "stop_signal"));
}

static void cgroups_done(uv_work_t *w, int status)
{
    struct svc_start *s = w->data;
    struct wr_manager *m = s->sb->m;
    json_t *svc;
    size_t i;

    if (s->rc < 0 || s->sb->agent == NULL || !wr_agent_is_ready(s->sb->agent)) {
        if (s->rc == 0)
            wr_err_set(&s->err, WR_ECONFLICT, 0, "the connection to warren-init closed");
        s->cb(s->ctx, &s->err);
        svc_start_free(s);
        wr__work_done(m);
        return;
    }
    /* Every define, the loop below (so that no answer frees s while it runs), then the start. */
    s->pending = s->n + 2;
    json_array_foreach(json_object_get(s->spec, "services"), i, svc)
    {
        struct wr_service def;
        struct wr_err e;
        service_of(svc, s->has_cg[i], s->nfds[i], &def);
        int r = wr_agent_service_define(s->sb->agent, &def, s->fds[i], defined_cb, s, &e);
        s->nfds[i] = 0; /* the agent's now, sent or closed */
        if (r < 0)
            defined_cb(s, &e);
        wr_service_fini(&def);
    }
    defined_cb(s, NULL);
    wr__work_done(m);
}

void wr__services_start(struct wr_live_sb *sb, const char *compose_json, wr__services_cb cb,
                        void *ctx)
{
    struct svc_start *s = xcalloc(1, sizeof(*s));

    s->sb = sb;
    wr_live_sb_ref(sb);
    s->spec = json_loads(compose_json, 0, NULL);
    s->n = json_array_size(json_object_get(s->spec, "services"));
    s->fds = xcalloc(s->n + 1, sizeof(*s->fds));
    s->nfds = xcalloc(s->n + 1, sizeof(*s->nfds));
    s->has_cg = xcalloc(s->n + 1, sizeof(*s->has_cg));
    s->cb = cb;
    s->ctx = ctx;
    s->w.data = s;
    wr__queue_work(sb->m, &s->w, cgroups_run, cgroups_done);
}

/* ---- their states ---------------------------------------------------------------------------- */

struct svc_list {
    struct wr_live_sb *sb;
    json_t *spec;
    wr_manager_services_cb cb;
    void *ctx;
};

static void listed(void *ctx, const struct wr_service_info *infos, size_t n,
                   const struct wr_err *err)
{
    struct svc_list *l = ctx;
    json_t *out = json_array(), *svc;
    size_t i;

    if (err != NULL) {
        l->cb(l->ctx, NULL, err);
        goto out;
    }
    json_array_foreach(json_object_get(l->spec, "services"), i, svc)
    {
        const char *name = json_string_value(json_object_get(svc, "name"));
        json_t *o = json_pack("{s:s,s:O,s:O,s:s,s:n,s:I,s:n,s:n,s:n}", "name", name, "image",
                              json_object_get(svc, "image"), "ports", json_object_get(svc, "ports"),
                              "state", "defining", "pid", "restarts", (json_int_t)0, "exit_code",
                              "signal", "message");
        for (size_t k = 0; k < n; k++) {
            const struct wr_service_info *in = &infos[k];
            if (in->name == NULL || strcmp(in->name, name) != 0)
                continue;
            json_object_set_new(o, "state", json_string(in->state ? in->state : "unknown"));
            json_object_set_new(o, "pid", in->pid > 0 ? json_integer(in->pid) : json_null());
            json_object_set_new(o, "restarts", json_integer((json_int_t)in->restarts));
            if (in->has_exit && in->signal != 0)
                json_object_set_new(o, "signal", json_integer(in->signal));
            else if (in->has_exit)
                json_object_set_new(o, "exit_code", json_integer(in->exit_code));
            if (in->message != NULL)
                json_object_set_new(o, "message", json_string(in->message));
        }
        json_array_append_new(out, o);
    }
    l->cb(l->ctx, out, NULL);
out:
    json_decref(out);
    json_decref(l->spec);
    wr_live_sb_unref(l->sb);
    free(l);
}

void wr_manager_services(struct wr_live_sb *sb, wr_manager_services_cb cb, void *ctx)
{
    struct wr_manager *m = sb->m;
    struct wr_sandbox_rec rec;
    struct svc_list *l;
    struct wr_err err;

    if (wr_store_sandbox_get(m->cfg.store, NULL, sb->id, &rec, &err) < 0) {
        cb(ctx, NULL, &err);
        return;
    }
    l = xcalloc(1, sizeof(*l));
    l->spec = rec.compose_json != NULL ? json_loads(rec.compose_json, 0, NULL) : json_object();
    wr_sandbox_rec_fini(&rec);
    l->sb = sb;
    wr_live_sb_ref(sb);
    l->cb = cb;
    l->ctx = ctx;
    if (json_array_size(json_object_get(l->spec, "services")) == 0) {
        listed(l, NULL, 0, NULL);
        return;
    }
    if (sb->agent == NULL || wr_agent_service_list(sb->agent, listed, l, &err) < 0) {
        if (sb->agent == NULL)
            wr_err_set(&err, WR_ECONFLICT, 0, "sandbox `%s` is not running", sb->id);
        listed(l, NULL, 0, &err);
    }
}

bool wr_manager_sandbox_has_service(struct wr_manager *m, struct wr_live_sb *sb, const char *name)
{
    struct wr_sandbox_rec rec;
    struct wr_err err;
    json_t *spec, *svc;
    bool found = false;
    size_t i;

    if (wr_store_sandbox_get(m->cfg.store, NULL, sb->id, &rec, &err) < 0)
        return false;
    spec = rec.compose_json != NULL ? json_loads(rec.compose_json, 0, NULL) : NULL;
    wr_sandbox_rec_fini(&rec);
    json_array_foreach(json_object_get(spec, "services"), i, svc)
    {
        const char *n = json_string_value(json_object_get(svc, "name"));
        if (n != NULL && strcmp(n, name) == 0)
            found = true;
    }
    json_decref(spec);
    return found;
}
