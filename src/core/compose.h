/* SPDX-License-Identifier: Apache-2.0 */
/* A Docker Compose file (YAML or JSON, through core/yaml.h) into Warren's normalized list of
 * services, for a sandbox that runs them side by side in one network namespace (docs/compose.md).
 * The keys are a closed list: a Compose key Warren does not do is refused, naming its path and
 * line, never ignored; only `x-*` extensions, `name`, `version`, `labels`, `init` and
 * healthcheck.start_interval are read and dropped.
 *
 * The normalized spec (every key always present):
 *
 *   {"services": [            in start order: each after what it depends on; ties by name
 *      {"name": "db",
 *       "image": "postgres:16",
 *       "entrypoint": ["..."] | null,     null: the image's; [] clears it. A string is split as
 *       "command": ["..."] | null,        a shell splits words (quotes, backslashes; no
 *                                         expansion, globbing or operators)
 *       "environment": {"K": "V"},        env_file entries first, `environment` over them
 *       "working_dir": "/abs" | null,
 *       "user": "uid[:gid]" | "name" | null,
 *       "ports": [5432],                  container ports (tcp), `ports` then `expose`, once each
 *       "volumes": [{"type": "volume" | "bind", "source": "pgdata" | "rel/path" | ".",
 *                    "target": "/abs/normal", "read_only": false}],
 *                                         a bind's source is relative to the build context
 *       "depends_on": [{"service": "db", "condition": "service_started" | "service_healthy" |
 *                       "service_completed_successfully"}],
 *       "healthcheck": {"test": ["argv"...], "interval_ms": 30000, "timeout_ms": 30000,
 *                       "retries": 3, "start_period_ms": 0} | null,
 *       "restart": "no" | "always" | "on-failure" | "unless-stopped",
 *       "restart_max": 0,                 on-failure:N's N; 0: no limit
 *       "cpus": 500,                      millicores; 0: no limit
 *       "mem_limit": 268435456,           bytes; 0: no limit
 *       "stop_signal": 15,
 *       "stop_grace_ms": 10000}],
 *    "volumes": ["pgdata"],                the top-level named volumes, in the file's order
 *    "external_volumes": {"pgdata": "v1"}} those declared `external: true`: the team's Warren
 *                                          volume each is (its `name`, else its key)
 *
 * A healthcheck's test is an argv: CMD's arguments, or ["/bin/sh", "-c", s] for CMD-SHELL or a
 * string. Durations are rounded up to whole milliseconds (a nonzero one is at least 1). */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "../util/err.h"

/* What a create's context may hold (the API checks; `warren create --context` and the SDKs'
 * compose_context read a directory within them). */
#define WR_COMPOSE_CONTEXT_MAX_FILES 512
#define WR_COMPOSE_CONTEXT_MAX_BYTES (8 << 20)

struct wr_compose_limits {
    size_t max_bytes;      /* the text; 0: 256 KiB */
    unsigned max_services; /* 0: 16 */
};

/* Parse and check the Compose file text[0..len).
 *
 * `env` (an object of strings, or NULL) is the only source of interpolation: ${VAR},
 * ${VAR:-default}, ${VAR-default}, ${VAR:?message}, ${VAR?message}, ${VAR:+other},
 * ${VAR+other} and $VAR in every string value (keys are not interpolated; `x-*` extensions are
 * skipped), $$ for a literal $; an unset VAR with no default reads as "".
 *
 * `context` (an object from relative path to file content, or NULL) is the build context, what
 * a Compose file's directory would hold: env_file names files in it, and a bind volume's source
 * must be a file in it or a directory above one. Its keys are relative paths in normal form
 * ("app/main.py"; no leading "/", no "." or ".." or empty component); a key ending in "/" names
 * an empty directory. Its values are strings.
 *
 * Returns the normalized spec (a new reference), or NULL with err: WR_ETOOBIG for a text larger
 * than lim->max_bytes (checked before parsing) or more than lim->max_services services;
 * WR_EUNSUPPORTED for a Compose key or value Warren does not do; WR_EINVAL for anything else
 * wrong. The message is one line naming the key's path and line when there is one:
 * "services.web.privileged (line 7): not supported". lim may be NULL (the defaults). */
json_t *wr_compose_parse(const char *text, size_t len, const json_t *env, const json_t *context,
                         const struct wr_compose_limits *lim, struct wr_err *err);
