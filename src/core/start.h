/* SPDX-License-Identifier: Apache-2.0 */
/* A template's start command and its readiness check (config.json `start`, docs/templates.md):
 * run as a background process of the sandbox (tag "start"), then polled every 20 ms until the
 * check answers or the timeout passes. Used by create.c (cold creates), warm.c (warm sandboxes,
 * before they can be taken) and pause.c (a resume from disk). Internal to src/core/; loop
 * thread only. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "../util/err.h"

struct wr_live_sb;

/* A parsed `start` object. */
struct wr_start_cfg {
    char *services; /* a sandbox's Compose services (JSON, services.c), started first; or NULL */
    char *cmd;      /* run as /bin/sh -c cmd; NULL: none (services only) */
    char *user;     /* NULL: the template's user */
    char *cwd;      /* NULL: the template's working directory */
    char **env;     /* NULL-terminated KEY=VALUE, on top of the sandbox's */
    /* Readiness: a TCP connect to 127.0.0.1:port inside (port 0: none); with path, an HTTP GET
     * of it must answer 2xx. Or ready_cmd must exit 0. Neither: ready once started. */
    uint16_t port;
    char *path;
    char *ready_cmd;
    uint32_t timeout_s; /* default 60, at most 600 */
};

#define WR_START_TIMEOUT_DEFAULT_S 60
#define WR_START_TIMEOUT_MAX_S     600
#define WR_START_POLL_MS           20
#define WR_START_TAG               "start"

/* The `start` of an image config (a json_t object, passed as void * so this header needs no
 * jansson): *out is NULL when it has none. WR_EINVAL naming the template for a malformed one. */
int wr__start_cfg_parse(const void *config, const char *tname, struct wr_start_cfg **out,
                        struct wr_err *err);
/* The same from a record's image_json ({"layers", "config"}); NULL image_json: none. */
int wr__start_cfg_of_image(const char *image_json, const char *tname, struct wr_start_cfg **out,
                           struct wr_err *err);
void wr__start_cfg_free(struct wr_start_cfg *c);
/* Start a sandbox's Compose services (compose_json, NULL: none) before its start command: *cfg
 * gets them (a cfg of its own if it was NULL). */
void wr__start_cfg_add_services(struct wr_start_cfg **cfg, const char *compose_json);

/* err NULL: the sandbox is ready. Else why not: WR_ESTARTFAILED (the command exited, the check
 * did not answer in time, warren-init died), WR_ECONFLICT (the sandbox is being deleted, the
 * daemon stops). */
typedef void (*wr_start_cb)(void *ctx, const struct wr_err *err);

/* Run cfg (owned by the run from now on) in sb, whose runtime sandbox (sb->rt) is up, and call
 * cb once it is ready or has failed (never before this returns). sb is CREATING (its agent is
 * connected here if it has none) or RUNNING (its agent connecting or connected). The run holds
 * a reference on sb and a unit of m->inflight until cb has been called. tname names the
 * template in errors. */
void wr__start_run(struct wr_live_sb *sb, struct wr_start_cfg *cfg, const char *tname,
                   wr_start_cb cb, void *ctx);

/* Let go of what a run left on a sandbox that is not handed out: its agent is closed and its
 * processes (the start command's among them) are dropped; the caller then tears down sb->rt. */
void wr__start_forget(struct wr_live_sb *sb, const struct wr_err *why);
