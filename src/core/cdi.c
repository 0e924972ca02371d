/* SPDX-License-Identifier: Apache-2.0 */
/* Devices from CDI specs (cdi.h). The spec's format: github.com/cncf-tags/container-device-
 * interface, SPEC.md (0.3.0 to 1.1.0): {cdiVersion, kind, annotations?, devices: [{name,
 * annotations?, containerEdits}], containerEdits?}, the spec's own edits applying with each of
 * its devices. */
#include "cdi.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/json_cleanup.h"
#include "../util/log.h"
#include "../util/strv.h"
#include "../util/xalloc.h"
#include "yaml.h"

#define SPEC_MAX_BYTES (1 << 20)

struct device {
    char *name;    /* vendor.com/class=name */
    char *kind;    /* vendor.com/class */
    json_t *edits; /* {env, deviceNodes}: the spec's, then the device's */
    char *refused; /* why a create naming it is refused, or NULL */
    char *holder;  /* the sandbox that holds it, or NULL */
    char *source;  /* the spec file */
};

struct wr_cdi {
    struct device *dev;
    size_t n, cap;
};

/* ---- checking a spec --------------------------------------------------------------------------
 */

/* Only the keys in allowed (NULL-terminated); what: where, for the message. */
static int only_keys(const json_t *o, const char *const *allowed, const char *what,
                     struct wr_err *err)
{
    const char *k;
    json_t *v;

    if (!json_is_object(o))
        return wr_err_set(err, WR_EINVAL, 0, "%s must be a mapping", what);
    json_object_foreach((json_t *)o, k, v)
    {
        size_t i = 0;
        while (allowed[i] != NULL && strcmp(allowed[i], k) != 0)
            i++;
        if (allowed[i] == NULL)
            return wr_err_set(err, WR_EINVAL, 0, "%s: unknown field `%s`", what, k);
    }
    return 0;
}

static bool name_chars(const char *s, const char *extra)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr(extra, *s) != NULL))
            return false;
    return true;
}

/* vendor.com/class: a vendor of [A-Za-z0-9.-] with a dot, a class of [A-Za-z0-9_.-]. */
static bool valid_kind(const char *k)
{
    const char *slash = strchr(k, '/');
    _cleanup_free_ char *vendor = NULL;

    if (slash == NULL || slash == k || slash[1] == '\0' || strlen(k) > 200)
        return false;
    vendor = xstrndup(k, (size_t)(slash - k));
    return strchr(vendor, '.') != NULL && name_chars(vendor, ".-") && name_chars(slash + 1, "_.-");
}

static bool valid_name(const char *n)
{
    return n[0] != '\0' && strlen(n) <= 128 && name_chars(n, "_.:-") &&
           ((n[0] >= 'a' && n[0] <= 'z') || (n[0] >= 'A' && n[0] <= 'Z') ||
            (n[0] >= '0' && n[0] <= '9'));
}

static bool string_array(const json_t *a)
{
    size_t i;
    json_t *v;

    if (!json_is_array(a))
        return false;
    json_array_foreach(a, i, v) if (!json_is_string(v)) return false;
    return true;
}

/* The NVIDIA hooks Warren does natively: nvidia-cdi-hook SUB ... or nvidia-ctk hook SUB ...,
 * run at createContainer, SUB create-symlinks (--link TARGET::LINK) or update-ldcache
 * (--folder DIR). The index of the first argument after SUB, or -1 for another hook. */
static int nvidia_hook(const json_t *h, const char **sub)
{
    const char *path = json_string_value(json_object_get(h, "path"));
    const char *name = json_string_value(json_object_get(h, "hookName"));
    const char *base = path ? strrchr(path, '/') : NULL;
    json_t *args = json_object_get(h, "args");
    int i;

    base = base ? base + 1 : path;
    if (base == NULL || name == NULL || strcmp(name, "createContainer") != 0 || !string_array(args))
        return -1;
    if (strcmp(base, "nvidia-cdi-hook") == 0)
        i = 1;
    else if (strcmp(base, "nvidia-ctk") == 0 &&
             strcmp(json_string_value(json_array_get(args, 1)) ?: "", "hook") == 0)
        i = 2;
    else
        return -1;
    *sub = json_string_value(json_array_get(args, (size_t)i));
    if (*sub == NULL ||
        (strcmp(*sub, "create-symlinks") != 0 && strcmp(*sub, "update-ldcache") != 0))
        return -1;
    /* Every flag must be one we do: --link for create-symlinks, --folder for update-ldcache. */
    for (size_t k = (size_t)i + 1; k < json_array_size(args); k++) {
        const char *a = json_string_value(json_array_get(args, k));
        const char *flag = strcmp(*sub, "create-symlinks") == 0 ? "--link" : "--folder";
        size_t n = strlen(flag);
        if (strcmp(a, flag) == 0 && k + 1 < json_array_size(args))
            k++;
        else if (!(strncmp(a, flag, n) == 0 && a[n] == '='))
            return -1;
    }
    return i + 1;
}

/* Why a valid containerEdits cannot be applied by Warren (a string), or NULL. */
static char *unsupported_edits(const json_t *e)
{
    json_t *h;
    size_t i;

    json_array_foreach(json_object_get(e, "hooks"), i, h)
    {
        const char *sub;
        if (nvidia_hook(h, &sub) < 0)
            return xasprintf("its CDI hook `%s` (%s) would run as the host's root: Warren runs "
                             "no hooks (it does NVIDIA's create-symlinks and update-ldcache "
                             "itself)",
                             json_string_value(json_object_get(h, "path")),
                             json_string_value(json_object_get(h, "hookName")));
    }
    if (json_array_size(json_object_get(e, "additionalGids")) > 0)
        return xstrdup("its CDI additionalGids are not supported");
    if (json_object_get(e, "intelRdt") != NULL || json_object_get(e, "netDevices") != NULL)
        return xstrdup("its CDI intelRdt or netDevices are not supported");
    return NULL;
}

static int check_edits(const json_t *e, const char *what, struct wr_err *err)
{
    static const char *const keys[] = {
        "env", "deviceNodes", "mounts", "hooks", "additionalGids", "intelRdt", "netDevices", NULL};
    static const char *const node_keys[] = {"path",     "hostPath",    "type", "major", "minor",
                                            "fileMode", "permissions", "uid",  "gid",   NULL};
    static const char *const mount_keys[] = {"hostPath", "containerPath", "type", "options", NULL};
    static const char *const hook_keys[] = {"hookName", "path", "args", "env", "timeout", NULL};
    json_t *v;
    size_t i;

    if (only_keys(e, keys, what, err) < 0)
        return -1;
    if ((v = json_object_get(e, "env")) != NULL) {
        if (!string_array(v))
            return wr_err_set(err, WR_EINVAL, 0, "%s: `env` must be a list of strings", what);
        json_t *kv;
        json_array_foreach(v, i, kv)
        {
            const char *s = json_string_value(kv);
            if (strchr(s, '=') == NULL || s[0] == '=')
                return wr_err_set(err, WR_EINVAL, 0, "%s: env `%s` is not KEY=VALUE", what, s);
        }
    }
    json_array_foreach(json_object_get(e, "deviceNodes"), i, v)
    {
        const char *path = json_string_value(json_object_get(v, "path"));
        const char *host = json_string_value(json_object_get(v, "hostPath"));
        const char *type = json_string_value(json_object_get(v, "type"));
        const char *perms = json_string_value(json_object_get(v, "permissions"));
        if (only_keys(v, node_keys, "a device node", err) < 0)
            return wr_err_wrap(err, "%s", what);
        if (path == NULL || strncmp(path, "/dev/", 5) != 0 || strstr(path, "/..") != NULL ||
            strstr(path, "//") != NULL || strlen(path) > 63 || path[strlen(path) - 1] == '/')
            return wr_err_set(err, WR_EINVAL, 0,
                              "%s: a device node's `path` must be below /dev/ (63 bytes at most)",
                              what);
        if ((json_object_get(v, "hostPath") != NULL && (host == NULL || host[0] != '/')) ||
            (json_object_get(v, "type") != NULL &&
             (type == NULL || (strcmp(type, "c") != 0 && strcmp(type, "b") != 0))) ||
            (json_object_get(v, "permissions") != NULL &&
             (perms == NULL || strspn(perms, "rwm") != strlen(perms))))
            return wr_err_set(err, WR_EINVAL, 0,
                              "%s: device node `%s`: bad hostPath, type (c or b) or permissions "
                              "(of rwm)",
                              what, path);
        for (const char *const *k =
                 (const char *const[]){"major", "minor", "fileMode", "uid", "gid", NULL};
             *k; k++) {
            json_t *n = json_object_get(v, *k);
            if (n != NULL && (!json_is_integer(n) || json_integer_value(n) < 0 ||
                              json_integer_value(n) > 0xffffffffll))
                return wr_err_set(err, WR_EINVAL, 0, "%s: device node `%s`: bad `%s`", what, path,
                                  *k);
        }
    }
    json_array_foreach(json_object_get(e, "mounts"), i, v)
    {
        const char *type = json_string_value(json_object_get(v, "type"));
        json_t *opts = json_object_get(v, "options");
        if (only_keys(v, mount_keys, "a mount", err) < 0)
            return wr_err_wrap(err, "%s", what);
        if (!json_is_string(json_object_get(v, "hostPath")) ||
            !json_is_string(json_object_get(v, "containerPath")) ||
            (json_object_get(v, "type") != NULL && (type == NULL || strcmp(type, "bind") != 0)) ||
            (opts != NULL && !string_array(opts)))
            return wr_err_set(err, WR_EINVAL, 0,
                              "%s: a mount needs `hostPath` and `containerPath`, of type bind",
                              what);
    }
    json_array_foreach(json_object_get(e, "hooks"), i, v)
    {
        if (only_keys(v, hook_keys, "a hook", err) < 0 ||
            !json_is_string(json_object_get(v, "path")) ||
            !json_is_string(json_object_get(v, "hookName")))
            return wr_err_set(err, WR_EINVAL, 0, "%s: a hook needs `hookName` and `path`", what);
    }
    for (const char *const *k = (const char *const[]){"deviceNodes", "mounts", "hooks", NULL}; *k;
         k++)
        if ((v = json_object_get(e, *k)) != NULL && !json_is_array(v))
            return wr_err_set(err, WR_EINVAL, 0, "%s: `%s` must be a list", what, *k);
    return 0;
}

/* The spec's edits then the device's, as one {env, deviceNodes, ...}. */
static json_t *merged(const json_t *spec_edits, const json_t *dev_edits)
{
    json_t *out = json_object();
    const char *k;
    json_t *v;

    for (const json_t *const *e = (const json_t *const[]){spec_edits, dev_edits, NULL}; *e; e++)
        json_object_foreach((json_t *)*e, k, v)
        {
            json_t *have = json_object_get(out, k);
            if (json_is_array(v) && json_is_array(have))
                json_array_extend(have, v);
            else
                json_object_set_new(out, k, json_deep_copy(v));
        }
    return out;
}

static struct device *find(const struct wr_cdi *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->dev[i].name, name) == 0)
            return &c->dev[i];
    return NULL;
}

static void device_fini(struct device *d)
{
    free(d->name);
    free(d->kind);
    json_decref(d->edits);
    free(d->refused);
    free(d->holder);
    free(d->source);
}

/* Add (or, for a name a previous spec gave, replace) the devices of one checked spec. */
static void add_spec(struct wr_cdi *c, const json_t *spec, const char *source)
{
    const char *kind = json_string_value(json_object_get(spec, "kind"));
    json_t *spec_edits = json_object_get(spec, "containerEdits"), *d;
    size_t i;

    json_array_foreach(json_object_get(spec, "devices"), i, d)
    {
        _cleanup_free_ char *name =
            xasprintf("%s=%s", kind, json_string_value(json_object_get(d, "name")));
        struct device *old = find(c, name), nd = {0};
        nd.name = steal_pointer(&name);
        nd.kind = xstrdup(kind);
        nd.edits = merged(spec_edits, json_object_get(d, "containerEdits"));
        nd.refused = unsupported_edits(nd.edits);
        nd.source = xstrdup(source);
        if (old != NULL) {
            device_fini(old);
            *old = nd;
            continue;
        }
        if (c->n == c->cap) {
            c->cap = c->cap ? c->cap * 2 : 16;
            c->dev = xrealloc(c->dev, c->cap * sizeof(*c->dev));
        }
        c->dev[c->n++] = nd;
    }
}

static int check_spec(const json_t *spec, struct wr_err *err)
{
    static const char *const keys[] = {"cdiVersion", "kind",           "annotations",
                                       "devices",    "containerEdits", NULL};
    static const char *const dev_keys[] = {"name", "annotations", "containerEdits", NULL};
    const char *version = json_string_value(json_object_get(spec, "cdiVersion"));
    const char *kind = json_string_value(json_object_get(spec, "kind"));
    json_t *devs = json_object_get(spec, "devices"), *d;
    size_t i;

    if (only_keys(spec, keys, "the spec", err) < 0)
        return -1;
    /* 0.3.0 to 0.8.0 are subsets of 1.0's fields (nvidia-ctk writes the lowest a spec needs) */
    if (version == NULL ||
        !(strncmp(version, "1.", 2) == 0 || (strncmp(version, "0.", 2) == 0 && version[2] != '\0' &&
                                             strchr("345678", version[2]) && version[3] == '.')))
        return wr_err_set(err, WR_EINVAL, 0, "`cdiVersion` must be 0.3.0 to 1.x, not `%s`",
                          version ? version : "");
    if (kind == NULL || !valid_kind(kind))
        return wr_err_set(err, WR_EINVAL, 0, "`kind` must be vendor.com/class");
    if (!json_is_array(devs) || json_array_size(devs) == 0)
        return wr_err_set(err, WR_EINVAL, 0, "`devices` must be a list of one or more");
    if (json_object_get(spec, "containerEdits") != NULL &&
        check_edits(json_object_get(spec, "containerEdits"), "the spec's containerEdits", err) < 0)
        return -1;
    json_array_foreach(devs, i, d)
    {
        const char *name = json_string_value(json_object_get(d, "name"));
        _cleanup_free_ char *what = xasprintf("device `%s`", name ? name : "?");
        if (only_keys(d, dev_keys, "a device", err) < 0)
            return -1;
        if (name == NULL || !valid_name(name))
            return wr_err_set(err, WR_EINVAL, 0, "a device's `name` must be of [A-Za-z0-9_.:-]");
        if (!json_is_object(json_object_get(d, "containerEdits")))
            return wr_err_set(err, WR_EINVAL, 0, "%s needs `containerEdits`", what);
        if (check_edits(json_object_get(d, "containerEdits"), what, err) < 0)
            return -1;
    }
    return 0;
}

/* ---- reading the directories ----------------------------------------------------------------- */

/* The spec at path, checked, or NULL with err. */
static json_t *read_spec(int dirfd, const char *name, struct wr_err *err)
{
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    _cleanup_free_ char *buf = NULL;
    struct stat st;
    ssize_t n;
    json_t *j;

    if (fd < 0 || fstat(fd, &st) < 0)
        return wr_err_sys(err, "open"), NULL;
    if (!S_ISREG(st.st_mode))
        return wr_err_set(err, WR_EINVAL, 0, "not a regular file"), NULL;
    if (st.st_uid != 0 || (st.st_mode & 022) != 0)
        return wr_err_set(err, WR_EINVAL, 0,
                          "owned by uid %u, mode %03o: a spec must be root's and writable by "
                          "nobody else",
                          (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777)),
               NULL;
    if (st.st_size > SPEC_MAX_BYTES)
        return wr_err_set(err, WR_EINVAL, 0, "larger than %d bytes", SPEC_MAX_BYTES), NULL;
    buf = xmalloc((size_t)st.st_size + 1);
    n = read(fd, buf, (size_t)st.st_size);
    if (n != st.st_size)
        return wr_err_sys(err, "read"), NULL;
    buf[n] = '\0';
    j = wr_yaml_load(buf, (size_t)n, NULL, NULL, err);
    if (j == NULL)
        return NULL;
    if (check_spec(j, err) < 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static bool spec_file(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && ((n > 5 && strcmp(name + n - 5, ".json") == 0) ||
                              (n > 5 && strcmp(name + n - 5, ".yaml") == 0) ||
                              (n > 4 && strcmp(name + n - 4, ".yml") == 0));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void read_dir(struct wr_cdi *c, const char *dir)
{
    _cleanup_closedir_ DIR *d = opendir(dir);
    char **names = NULL;
    size_t n = 0, cap = 0;

    if (d == NULL) {
        if (errno != ENOENT)
            log_warn("cdi: `%s`: %s", dir, strerror(errno));
        return;
    }
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (!spec_file(de->d_name))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            names = xrealloc(names, cap * sizeof(*names));
        }
        names[n++] = xstrdup(de->d_name);
    }
    qsort(names, n, sizeof(*names), cmp_str);
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, names[i]);
        struct wr_err err;
        json_t *spec = read_spec(dirfd(d), names[i], &err);
        if (spec == NULL) {
            log_warn("cdi: `%s` skipped: %s", path, err.msg);
        } else {
            add_spec(c, spec, path);
            json_decref(spec);
        }
        free(names[i]);
    }
    free(names);
}

int wr_cdi_open(const char *dirs, struct wr_cdi **out, struct wr_err *err)
{
    struct wr_cdi *c = xcalloc(1, sizeof(*c));
    _cleanup_free_ char *copy = xstrdup(dirs ? dirs : "");
    char *save = NULL;

    for (char *d = strtok_r(copy, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
        if (d[0] != '/') {
            wr_cdi_close(c);
            return wr_err_set(err, WR_EINVAL, 0, "--cdi-spec-dirs: `%s` is not absolute", d);
        }
        read_dir(c, d);
    }
    for (size_t i = 0; i < c->n; i++)
        log_info("cdi: device %s from `%s`%s%s", c->dev[i].name, c->dev[i].source,
                 c->dev[i].refused ? ": refused, " : "",
                 c->dev[i].refused ? c->dev[i].refused : "");
    *out = c;
    return 0;
}

int wr_cdi_reload(struct wr_cdi *c, const char *dirs, struct wr_err *err)
{
    struct wr_cdi *fresh;

    if (wr_cdi_open(dirs, &fresh, err) < 0)
        return -1;
    for (size_t i = 0; i < c->n; i++) {
        struct device *old = &c->dev[i], *nd;
        if (old->holder == NULL)
            continue;
        if ((nd = find(fresh, old->name)) != NULL) {
            nd->holder = steal_pointer(&old->holder);
            continue;
        }
        /* Its sandbox keeps it (the node is in its /dev) until it ends; nobody else gets it. */
        if (fresh->n == fresh->cap) {
            fresh->cap = fresh->cap ? fresh->cap * 2 : 16;
            fresh->dev = xrealloc(fresh->dev, fresh->cap * sizeof(*fresh->dev));
        }
        if (old->refused == NULL)
            old->refused =
                xstrdup("its spec is gone (a reload); its sandbox keeps it until it ends");
        fresh->dev[fresh->n++] = *old;
        memset(old, 0, sizeof(*old));
    }
    for (size_t i = 0; i < c->n; i++)
        device_fini(&c->dev[i]);
    free(c->dev);
    *c = *fresh;
    free(fresh);
    return 0;
}

void wr_cdi_close(struct wr_cdi *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n; i++)
        device_fini(&c->dev[i]);
    free(c->dev);
    free(c);
}

json_t *wr_cdi_list(const struct wr_cdi *c)
{
    json_t *a = json_array();

    for (size_t i = 0; c != NULL && i < c->n; i++) {
        json_t *d = json_pack("{s:s,s:s,s:b}", "name", c->dev[i].name, "kind", c->dev[i].kind,
                              "in_use", c->dev[i].holder != NULL);
        if (c->dev[i].refused != NULL)
            json_object_set_new(d, "refused", json_string(c->dev[i].refused));
        json_array_append_new(a, d);
    }
    return a;
}

/* ---- taking devices -------------------------------------------------------------------------- */

/* One device node of the edits, filled from the host's node. */
static int node_of(const json_t *n, struct wr_device_node *out, struct wr_err *err)
{
    const char *path = json_string_value(json_object_get(n, "path"));
    const char *host = json_string_value(json_object_get(n, "hostPath"));
    const char *type = json_string_value(json_object_get(n, "type"));
    const char *perms = json_string_value(json_object_get(n, "permissions"));
    json_t *v;
    struct stat st;

    if (host == NULL)
        host = path;
    if (stat(host, &st) < 0)
        return wr_err_sys(err, "device node `%s`", host);
    if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
        return wr_err_set(err, WR_EINVAL, 0, "`%s` is not a device node", host);
    *out = (struct wr_device_node){
        .path = xstrdup(path),
        .type = S_ISCHR(st.st_mode) ? 'c' : 'b',
        .major = major(st.st_rdev),
        .minor = minor(st.st_rdev),
        .mode = st.st_mode & 0777,
    };
    if ((type != NULL && type[0] != out->type) ||
        ((v = json_object_get(n, "major")) != NULL && json_integer_value(v) != out->major) ||
        ((v = json_object_get(n, "minor")) != NULL && json_integer_value(v) != out->minor)) {
        free((char *)out->path);
        return wr_err_set(err, WR_EINVAL, 0,
                          "device node `%s`: the spec's type or numbers are not the host's (%c "
                          "%u:%u)",
                          host, out->type, out->major, out->minor);
    }
    if ((v = json_object_get(n, "fileMode")) != NULL)
        out->mode = (uint32_t)json_integer_value(v) & 0777;
    out->uid = (uint32_t)json_integer_value(json_object_get(n, "uid"));
    out->gid = (uint32_t)json_integer_value(json_object_get(n, "gid"));
    snprintf(out->access, sizeof(out->access), "%s", perms ? perms : "rwm");
    return 0;
}

void wr_cdi_edits_fini(struct wr_cdi_edits *e)
{
    wr_strv_free(e->env);
    for (size_t i = 0; i < e->n_nodes; i++)
        free((char *)e->nodes[i].path);
    free(e->nodes);
    for (size_t i = 0; i < e->n_binds; i++) {
        free((char *)e->binds[i].host_path);
        free((char *)e->binds[i].target);
    }
    free(e->binds);
    for (size_t i = 0; i < e->n_links; i++) {
        free((char *)e->links[i].target);
        free((char *)e->links[i].link);
    }
    free(e->links);
    memset(e, 0, sizeof(*e));
}

/* The linker's default directories (searched without a cache entry): an update-ldcache of one
 * of them needs nothing. */
static bool default_lib_dir(const char *d)
{
    static const char *const dirs[] = {"/lib",
                                       "/usr/lib",
                                       "/lib64",
                                       "/usr/lib64",
                                       "/lib/x86_64-linux-gnu",
                                       "/usr/lib/x86_64-linux-gnu",
                                       "/lib/aarch64-linux-gnu",
                                       "/usr/lib/aarch64-linux-gnu"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
        if (strcmp(d, dirs[i]) == 0)
            return true;
    return false;
}

/* An NVIDIA hook's links into out, its folders into ld (':'-joined). */
static int hook_edits(const json_t *h, struct wr_cdi_edits *out, struct wr_buf *ld,
                      struct wr_err *err)
{
    const char *sub;
    int first = nvidia_hook(h, &sub);
    json_t *args = json_object_get(h, "args");

    for (size_t k = (size_t)first; k < json_array_size(args); k++) {
        const char *a = json_string_value(json_array_get(args, k));
        const char *v =
            strchr(a, '=') ? strchr(a, '=') + 1 : json_string_value(json_array_get(args, ++k));
        if (strcmp(sub, "update-ldcache") == 0) {
            if (v[0] != '/')
                return wr_err_set(err, WR_EINVAL, 0, "update-ldcache: `%s` is not absolute", v);
            if (!default_lib_dir(v))
                wr_buf_printf(ld, "%s%s", ld->len ? ":" : "", v);
            continue;
        }
        const char *sep = strstr(v, "::");
        if (sep == NULL || sep == v || sep[2] != '/')
            return wr_err_set(err, WR_EINVAL, 0, "create-symlinks: `%s` is not TARGET::/LINK", v);
        if (out->n_links == WR_MAX_SYMLINKS)
            return wr_err_set(err, WR_EINVAL, 0, "more than %d symbolic links", WR_MAX_SYMLINKS);
        out->links = xrealloc(out->links, (out->n_links + 1) * sizeof(*out->links));
        out->links[out->n_links++] = (struct wr_symlink_spec){
            .target = xstrndup(v, (size_t)(sep - v)),
            .link = xstrdup(sep + 2),
        };
    }
    return 0;
}

int wr_cdi_edits_of(const struct wr_cdi *c, const char *const *names, size_t n,
                    struct wr_cdi_edits *out, struct wr_err *err)
{
    size_t n_env = 0;
    struct wr_buf ld;

    memset(out, 0, sizeof(*out));
    out->env = xcalloc(1, sizeof(*out->env));
    wr_buf_init(&ld);
    for (size_t i = 0; i < n; i++) {
        const struct device *d = c != NULL ? find(c, names[i]) : NULL;
        json_t *v;
        size_t j;

        if (d == NULL) {
            wr_cdi_edits_fini(out);
            wr_buf_fini(&ld);
            return wr_err_set(err, WR_EINVAL, 0, "no device `%s` on this host (GET /v1/devices)",
                              names[i]);
        }
        if (d->refused != NULL) {
            wr_cdi_edits_fini(out);
            wr_buf_fini(&ld);
            return wr_err_set(err, WR_EINVAL, 0, "device `%s`: %s", names[i], d->refused);
        }
        json_array_foreach(json_object_get(d->edits, "hooks"), j, v)
        {
            if (hook_edits(v, out, &ld, err) < 0) {
                wr_cdi_edits_fini(out);
                wr_buf_fini(&ld);
                return wr_err_wrap(err, "device `%s`", names[i]);
            }
        }
        json_array_foreach(json_object_get(d->edits, "env"), j, v)
        {
            out->env = xrealloc(out->env, (n_env + 2) * sizeof(*out->env));
            out->env[n_env++] = xstrdup(json_string_value(v));
            out->env[n_env] = NULL;
        }
        json_array_foreach(json_object_get(d->edits, "deviceNodes"), j, v)
        {
            if (out->n_nodes == WR_MAX_DEVICE_NODES) {
                wr_cdi_edits_fini(out);
                return wr_err_set(err, WR_EINVAL, 0, "more than %d device nodes",
                                  WR_MAX_DEVICE_NODES);
            }
            out->nodes = xrealloc(out->nodes, (out->n_nodes + 1) * sizeof(*out->nodes));
            if (node_of(v, &out->nodes[out->n_nodes], err) < 0) {
                wr_cdi_edits_fini(out);
                return wr_err_wrap(err, "device `%s`", names[i]);
            }
            out->n_nodes++;
        }
        /* Mounts are always read-only, nosuid and nodev, whatever their options say. */
        json_array_foreach(json_object_get(d->edits, "mounts"), j, v)
        {
            if (out->n_binds == WR_MAX_BINDS) {
                wr_cdi_edits_fini(out);
                return wr_err_set(err, WR_EINVAL, 0, "more than %d mounts", WR_MAX_BINDS);
            }
            out->binds = xrealloc(out->binds, (out->n_binds + 1) * sizeof(*out->binds));
            out->binds[out->n_binds++] = (struct wr_bind_spec){
                .host_path = xstrdup(json_string_value(json_object_get(v, "hostPath"))),
                .target = xstrdup(json_string_value(json_object_get(v, "containerPath"))),
            };
        }
    }
    if (ld.len > 0) {
        out->env = xrealloc(out->env, (n_env + 2) * sizeof(*out->env));
        out->env[n_env++] = xasprintf("LD_LIBRARY_PATH=%s", wr_buf_str(&ld));
        out->env[n_env] = NULL;
    }
    wr_buf_fini(&ld);
    if (wr_devices_check(out->nodes, out->n_nodes, err) < 0 ||
        wr_binds_check(out->binds, out->n_binds, err) < 0 ||
        wr_symlinks_check(out->links, out->n_links, err) < 0) {
        wr_cdi_edits_fini(out);
        return wr_err_wrap(err, "devices");
    }
    return 0;
}

int wr_cdi_take(struct wr_cdi *c, const char *id, const char *const *names, size_t n,
                struct wr_cdi_edits *out, struct wr_err *err)
{
    if (n > WR_CDI_MAX_DEVICES)
        return wr_err_set(err, WR_EINVAL, 0, "at most %d devices per sandbox, not %zu",
                          WR_CDI_MAX_DEVICES, n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return wr_err_set(err, WR_EINVAL, 0, "device `%s` is named twice", names[i]);
    if (wr_cdi_edits_of(c, names, n, out, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const struct device *d = find(c, names[i]);
        if (d->holder != NULL && strcmp(d->holder, id) != 0) {
            wr_cdi_edits_fini(out);
            return wr_err_set(err, WR_ELIMIT, 0,
                              "device `%s` is in use by another sandbox; each device serves one "
                              "sandbox at a time",
                              names[i]);
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct device *d = find(c, names[i]);
        if (d->holder == NULL)
            d->holder = xstrdup(id);
    }
    return 0;
}

void wr_cdi_release(struct wr_cdi *c, const char *id)
{
    for (size_t i = 0; c != NULL && i < c->n; i++)
        if (c->dev[i].holder != NULL && strcmp(c->dev[i].holder, id) == 0) {
            free(c->dev[i].holder);
            c->dev[i].holder = NULL;
        }
}
