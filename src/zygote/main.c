/* SPDX-License-Identifier: Apache-2.0 */
/* warren-zygote: the process that clones sandbox children for warrend (src/runtime/zygote.c).
 * A static program of its own, so that each clone copies a small address space rather than the
 * daemon's. warrend starts it with its socket at fd 3 and warren-init open at fd 4; it is not
 * meant to be run by hand.
 *
 * usage: warren-zygote --parent PID --run-dir DIR --init PATH [--uid-base N] [--uid-slots N]
 *                      [--cgroup MODE] [--cgroup-parent NAME] [--cgroup-v2-root DIR]
 *                      [--fault STEP] */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../init/entry.h"
#include "../runtime/runtime.h"
#include "../util/log.h"
#include "../util/parse.h"
#include "hugetext.h"

int main(int argc, char **argv)
{
    enum { O_PARENT = 256, O_RUN, O_INIT, O_BASE, O_SLOTS, O_CG, O_CGP, O_CGV2, O_FAULT };
    static const struct option longopts[] = {
        {"parent", required_argument, NULL, O_PARENT},
        {"run-dir", required_argument, NULL, O_RUN},
        {"init", required_argument, NULL, O_INIT},
        {"uid-base", required_argument, NULL, O_BASE},
        {"uid-slots", required_argument, NULL, O_SLOTS},
        {"cgroup", required_argument, NULL, O_CG},
        {"cgroup-parent", required_argument, NULL, O_CGP},
        {"cgroup-v2-root", required_argument, NULL, O_CGV2},
        {"fault", required_argument, NULL, O_FAULT},
        {NULL, 0, NULL, 0},
    };
    /* The sandboxes' PID 1 is a clone of this process that runs warren-init's body in place:
     * nothing in here belongs to any one sandbox (what does comes with "go", in the child). */
    struct wr_runtime_config cfg = {.init_main = WR_INIT_MAIN};
    struct wr_err err;
    uint64_t parent = 0, v;
    int c;

    /* Before anything else: every sandbox's setup and warren-init run out of this code. */
    (void)wr_hugetext();
    wr_log_min = WR_LOG_WARN; /* the daemon has said what the runtime is */
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case O_PARENT:
            if (wr_parse_uint(optarg, INT32_MAX, &parent, &err) < 0)
                goto bad;
            break;
        case O_RUN:
            cfg.run_dir = optarg;
            break;
        case O_INIT:
            cfg.init_path = optarg;
            break;
        case O_BASE:
            if (wr_parse_uint(optarg, UINT32_MAX, &v, &err) < 0)
                goto bad;
            cfg.uid_base = (uint32_t)v;
            break;
        case O_SLOTS:
            if (wr_parse_uint(optarg, 65535, &v, &err) < 0)
                goto bad;
            cfg.uid_slots = (uint32_t)v;
            break;
        case O_CG:
            cfg.cgroup_mode = optarg;
            break;
        case O_CGP:
            cfg.cgroup_parent = optarg;
            break;
        case O_CGV2:
            cfg.cgroup_v2_root = optarg;
            break;
        case O_FAULT:
            cfg.fault = optarg;
            break;
        default:
            fprintf(stderr, "warren-zygote: started by warrend, not by hand\n");
            return 2;
        }
    }
    if (parent == 0 || cfg.run_dir == NULL || cfg.init_path == NULL) {
        fprintf(stderr, "warren-zygote: started by warrend, not by hand\n");
        return 2;
    }
    wr_runtime_zygote_main(&cfg, 3, (pid_t)parent);
bad:
    fprintf(stderr, "warren-zygote: %s\n", err.msg);
    return 2;
}
