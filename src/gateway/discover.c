/* SPDX-License-Identifier: Apache-2.0 */
/* Node discovery (see discover.h): the static list. */
#include <stdlib.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "discover.h"

struct wr_discovery {
    struct wr_node_addr *nodes;
    size_t n;
};

int wr_discovery_new(const char *spec, struct wr_discovery **out, struct wr_err *err)
{
    _cleanup_free_ char *copy = NULL;
    struct wr_discovery *d;
    char *save = NULL;

    if (strncmp(spec, "static:", 7) != 0)
        return wr_err_set(err, WR_EINVAL, 0, "`%s`: the source is static:ID@HOST:PORT,...", spec);
    copy = xstrdup(spec + 7);
    d = xcalloc(1, sizeof(*d));
    for (char *e = strtok_r(copy, ",", &save); e != NULL; e = strtok_r(NULL, ",", &save)) {
        char *at = strchr(e, '@'), *colon = strrchr(e, ':');
        struct wr_node_addr *a;
        uint64_t port;
        if (at == NULL || colon == NULL || colon < at || (size_t)(at - e) >= sizeof(a->id) ||
            at == e || (size_t)(colon - at - 1) >= sizeof(a->host) || colon == at + 1 ||
            wr_parse_uint(colon + 1, 65535, &port, err) < 0 || port == 0) {
            wr_discovery_free(d);
            return wr_err_set(err, WR_EINVAL, 0, "`%s` is not ID@HOST:PORT", e);
        }
        d->nodes = xrealloc(d->nodes, (d->n + 1) * sizeof(*d->nodes));
        a = &d->nodes[d->n++];
        memset(a, 0, sizeof(*a));
        memcpy(a->id, e, (size_t)(at - e));
        memcpy(a->host, at + 1, (size_t)(colon - at - 1));
        a->port = (int)port;
    }
    *out = d;
    return 0;
}

void wr_discovery_free(struct wr_discovery *d)
{
    if (d == NULL)
        return;
    free(d->nodes);
    free(d);
}

int wr_discovery_list(struct wr_discovery *d, struct wr_node_addr **out, size_t *n,
                      struct wr_err *err)
{
    (void)err;
    *out = xmalloc((d->n ? d->n : 1) * sizeof(**out));
    memcpy(*out, d->nodes, d->n * sizeof(**out));
    *n = d->n;
    return 0;
}
