/* SPDX-License-Identifier: Apache-2.0 */
/* The CLI's HTTP client: libwarren's transport (src/lib/http.h), under the names the verbs were
 * written with. Each cli_http_* name is its wl_http_* namesake, with the same contract (read it
 * in src/lib/http.h); verbs not yet moved onto the public API (include/warren.h) use these.
 * One struct cli_http is one connection, reused while the server keeps it alive; it is not
 * thread-safe (use one per thread). */
#pragma once

#include "../lib/http.h"

#define cli_http                wl_http
#define cli_http_req            wl_http_req
#define cli_http_resp           wl_http_resp
#define cli_http_header         wl_http_header
#define cli_http_body_fn        wl_http_body_fn
#define cli_body_kind           wl_body_kind
#define CLI_BODY_NONE           WL_BODY_NONE
#define CLI_BODY_MEM            WL_BODY_MEM
#define CLI_BODY_FD             WL_BODY_FD
#define CLI_BODY_STREAM         WL_BODY_STREAM
#define cli_buf_add_escaped     wl_buf_add_escaped
#define cli_http_open           wl_http_open
#define cli_http_check_url      wl_http_check_url
#define cli_http_close          wl_http_close
#define cli_http_set_request_id wl_http_set_request_id
#define cli_http_request        wl_http_request
#define cli_http_begin          wl_http_begin
#define cli_http_chunk          wl_http_chunk
#define cli_http_end            wl_http_end
#define cli_http_response       wl_http_response
#define cli_http_resp_header    wl_http_resp_header
#define cli_http_resp_fini      wl_http_resp_fini
#define cli_http_upgrade        wl_http_upgrade
#define cli_http_error          wl_http_error
