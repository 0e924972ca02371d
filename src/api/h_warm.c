/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/warm-pools: the daemon's warm pools (warrend --warm), each template's target and how
 * many of its sandboxes are ready to be taken now (core/warm.c). The same for every team: the
 * pools hold only shared and directory templates. */
#include "api_int.h"

void api_warm_pools(struct api_call *c)
{
    struct wr_warm_pool_info info[WR_WARM_POOLS_MAX];
    size_t n = wr_manager_warm_pools(c->api->mgr, info, WR_WARM_POOLS_MAX);
    json_t *pools = json_array();

    for (size_t i = 0; i < n && i < WR_WARM_POOLS_MAX; i++)
        json_array_append_new(pools, json_pack("{s:s,s:I,s:I}", "template", info[i].template_name,
                                               "target", (json_int_t)info[i].target, "ready",
                                               (json_int_t)info[i].ready));
    wr_http_respond_json(c->req, 200, json_pack("{s:o}", "pools", pools));
}
