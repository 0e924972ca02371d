/* SPDX-License-Identifier: Apache-2.0 */
/* What the API reports of each request once it is over (api.h wr_api_on_finish): the HTTP
 * metrics, the access line, and the audit record of a state-changing request; and the metrics
 * listener's handler. */
#include <stdlib.h>
#include <string.h>

#include "../core/audit.h"
#include "../util/log.h"
#include "../util/cleanup.h"
#include "../util/metrics.h"
#include "../util/xalloc.h"
#include "api_int.h"

static struct wr_metric *m_requests, *m_duration, *m_in_flight, *m_bytes_in, *m_bytes_out,
    *m_aborted, *m_scrapes;

/* Request durations: 1 ms to 30 s. */
static const double duration_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                          0.25,  0.5,    1,     2.5,  5,     10,   30};

void wr_api_metrics_register(void)
{
    static const char *const req_labels[] = {"api", "route", "method", "code", NULL};
    static const char *const route_labels[] = {"api", "route", NULL};
    static const char *const api_label[] = {"api", NULL};

    m_requests = wr_metric_counter("warrend_http_requests_total",
                                   "API requests answered, by API, route pattern, method and "
                                   "status class (2xx, 4xx, ...).",
                                   req_labels);
    m_duration = wr_metric_histogram(
        "warrend_http_request_duration_seconds",
        "Time from a request's first byte to its answer's end, by API and route pattern.",
        route_labels, duration_buckets, WR_ARRAY_SIZE(duration_buckets));
    m_in_flight =
        wr_metric_gauge("warrend_http_requests_in_flight", "API requests being handled.", NULL);
    m_bytes_in = wr_metric_counter("warrend_http_request_body_bytes_total",
                                   "Request body bytes read, by API.", api_label);
    m_bytes_out = wr_metric_counter("warrend_http_response_body_bytes_total",
                                    "Response body bytes sent, by API.", api_label);
    m_aborted = wr_metric_counter("warrend_http_requests_aborted_total",
                                  "Requests whose client went away before the answer was "
                                  "complete, by API.",
                                  api_label);
    m_scrapes = wr_metric_counter("warrend_metrics_scrapes_total", "Scrapes of /metrics.", NULL);
    wr_metrics_register_process();
}

static void note_free(void *p)
{
    wr_metric_add(m_in_flight, NULL, -1);
    free(p);
}

struct api_note *api_note(struct wr_http_req *req)
{
    struct api_note *n = wr_http_req_note(req);

    if (n == NULL) {
        n = xcalloc(1, sizeof(*n));
        n->api = "native";
        n->route = "unmatched";
        wr_metric_add(m_in_flight, NULL, 1);
        wr_http_req_set_note(req, n, note_free);
    }
    return n;
}

void api_note_caller(struct wr_http_req *req, const struct wr_caller *who)
{
    struct api_note *n = api_note(req);

    snprintf(n->team, sizeof(n->team), "%s", who->team);
    snprintf(n->key_id, sizeof(n->key_id), "%s", who->key_id);
}

void api_note_object(struct wr_http_req *req, const char *id)
{
    snprintf(api_note(req)->object_id, sizeof(api_note(req)->object_id), "%s", id ? id : "");
}

static const char *status_class(int status)
{
    static const char *const classes[] = {"none", "1xx", "2xx", "3xx", "4xx", "5xx"};

    return status >= 100 && status < 600 ? classes[status / 100] : classes[0];
}

void wr_api_on_finish(struct wr_http_req *req, const struct wr_http_finish *f, void *ctx)
{
    struct wr_api *api = ctx;
    struct api_note *n = wr_http_req_note(req);
    const char *which = n ? n->api : "native", *route = n ? n->route : "unmatched";
    const char *method = wr_http_req_method(req);
    const char *code = wr_http_req_error_code(req);
    struct wr_log_field fields[12];
    size_t nf = 0;

    /* A method outside the table is one label value, not the client's string. */
    if (method == NULL ||
        (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0 && strcmp(method, "PUT") != 0 &&
         strcmp(method, "DELETE") != 0 && strcmp(method, "HEAD") != 0 &&
         strcmp(method, "PATCH") != 0 && strcmp(method, "OPTIONS") != 0))
        method = "other";
    wr_metric_inc(m_requests, (const char *const[]){which, route, method, status_class(f->status)});
    wr_metric_observe(m_duration, (const char *const[]){which, route}, f->duration_s);
    wr_metric_add(m_bytes_in, (const char *const[]){which}, (double)f->bytes_in);
    wr_metric_add(m_bytes_out, (const char *const[]){which}, (double)f->bytes_out);
    if (f->aborted)
        wr_metric_inc(m_aborted, (const char *const[]){which});

    if (WR_LOG_INFO >= wr_log_min) {
        fields[nf++] = (struct wr_log_field){"method", method, 0};
        fields[nf++] = (struct wr_log_field){"route", route, 0};
        fields[nf++] = (struct wr_log_field){"api", which, 0};
        fields[nf++] = (struct wr_log_field){"status", NULL, f->status};
        fields[nf++] = (struct wr_log_field){"bytes_in", NULL, (double)f->bytes_in};
        fields[nf++] = (struct wr_log_field){"bytes_out", NULL, (double)f->bytes_out};
        fields[nf++] = (struct wr_log_field){"duration_s", NULL, f->duration_s};
        fields[nf++] = (struct wr_log_field){"request_id", wr_http_req_id(req), 0};
        fields[nf++] = (struct wr_log_field){"remote", wr_http_req_peer(req), 0};
        if (n != NULL && n->team[0] != '\0')
            fields[nf++] = (struct wr_log_field){"team", n->team, 0};
        if (n != NULL && n->key_id[0] != '\0')
            fields[nf++] = (struct wr_log_field){"key", n->key_id, 0};
        if (f->aborted)
            fields[nf++] = (struct wr_log_field){"aborted", "true", 0};
        wr_log_fields(WR_LOG_INFO, "access", fields, nf);
    }

    if (n != NULL && n->action != NULL && api->audit != NULL) {
        struct wr_audit_rec r = {
            .request_id = (char *)wr_http_req_id(req),
            .team = n->team,
            .key_id = n->key_id,
            .peer = (char *)wr_http_req_peer(req),
            .action = (char *)n->action,
            .object_kind = (char *)n->object_kind,
            .object_id = n->object_id,
            .method = (char *)method,
            .route = (char *)route,
            .status = f->status,
            .code = (char *)(f->status >= 400 ? code : ""),
        };
        wr_audit_append(api->audit, &r);
    }
}

void wr_api_metrics_handle(struct wr_http_req *req, void *ctx)
{
    struct wr_buf out = {0};

    (void)ctx;
    if (strcmp(wr_http_req_path(req), "/metrics") != 0) {
        wr_http_respond_error(req, 404, wr_err_kind_name(WR_ENOTFOUND),
                              "no such endpoint: the metrics listener serves GET /metrics");
        return;
    }
    if (strcmp(wr_http_req_method(req), "GET") != 0) {
        wr_http_resp_header(req, "Allow", "GET");
        wr_http_respond_error(req, 405, wr_err_kind_name(WR_EMETHOD), "use GET");
        return;
    }
    wr_metric_inc(m_scrapes, NULL);
    wr_metrics_render(&out);
    wr_http_respond(req, 200, WR_METRICS_CONTENT_TYPE, out.data, out.len);
    wr_buf_fini(&out);
}
