/* SPDX-License-Identifier: Apache-2.0 */
/* Moves between nodes through the object store (placeholder until the move lands). */
#include "api_int.h"

void api_node_export(struct wr_api *api, struct wr_http_req *req, const char *id)
{
    (void)api;
    (void)id;
    api_fail(req, WR_EUNSUPPORTED, "moving sandboxes between nodes is not built");
}

void api_node_import(struct wr_api *api, struct wr_http_req *req)
{
    api_node_export(api, req, NULL);
}

void api_node_image_export(struct wr_api *api, struct wr_http_req *req)
{
    api_node_export(api, req, NULL);
}

void api_node_image_import(struct wr_api *api, struct wr_http_req *req)
{
    api_node_export(api, req, NULL);
}
