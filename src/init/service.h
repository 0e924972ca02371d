/* SPDX-License-Identifier: Apache-2.0 */
/* Compose services supervised by warren-init (service.c): their definitions, start in dependency
 * order, restarts with backoff, healthchecks and log files. See docs/design/init.md,
 * "Services". Nothing outside src/init/ includes this header. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../proto/proto.h"
#include "init.h"

/* Handle SERVICE (define one, taking its cgroup fds from c), SERVICES_START and SERVICE_LIST:
 * the reply is queued on c. */
void init_service_request(struct init_conn *c, const struct wr_frame_hdr *h, const uint8_t *p);

/* The definition of the service called name, or NULL if there is none. Services are never
 * forgotten: the pointer stays valid for init's life. */
const struct wr_service *init_service_get(const char *name);

/* The reaper reaped pid with wait status `status`, and pid is not in the process table. Returns
 * true if it was a service's process or healthcheck (whose state it updates: a restart is
 * scheduled, a healthcheck counted), false if not (an orphan). */
bool init_services_reaped(pid_t pid, int status);

/* Do what is due: start the services whose dependencies are met (or fail those whose
 * dependencies failed), restart those whose backoff ended, start healthchecks, kill those past
 * their timeout. Called at the end of each loop iteration. Returns the ms until the next
 * deadline, which the loop waits at most (0: at once), or -1 if there is none. */
int init_services_pump(void);
