/* SPDX-License-Identifier: Apache-2.0 */
/* Shared between files.c and list.c: the streamed jobs (reads and listings) of a connection. */
#pragma once

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "init.h"

struct init_job {
    struct init_job *next;
    uint32_t id; /* the request id: DATA, STAT and the final OK carry it */
    bool list;
    /* read */
    int fd;
    uint64_t offset;
    uint64_t remaining; /* UINT64_MAX: to end of file */
    /* list: a depth-first walk with an explicit stack */
    struct init_user user;
    unsigned maxdepth;
    unsigned top;
    DIR *dirs[INIT_MAX_DEPTH];
    char *prefix[INIT_MAX_DEPTH]; /* path of dirs[i] relative to the listed directory */
};

/* Append j to c's jobs (it takes ownership). */
void init_files_add_job(struct init_conn *c, struct init_job *j);
/* One chunk of a read / a few entries of a listing. Return true once the job is finished
 * (its final OK or ERROR is queued). */
bool init_files_read_step(struct init_conn *c, struct init_job *j);
bool init_files_list_step(struct init_conn *c, struct init_job *j);
/* Start a FILE_LIST (replies ERROR at once if the directory cannot be opened). */
void init_files_list(struct init_conn *c, uint32_t id, const struct wr_file_req *r,
                     const struct init_user *u);
/* Release a listing's directories and user (no-op for reads). */
void init_files_list_fini(struct init_job *j);

/* Queue a STAT frame for st (name and link may be NULL). */
void init_files_stat_reply(struct init_conn *c, uint32_t id, const char *name,
                           const struct stat *st, const char *link);
/* Queue an ERROR from err (its errno, or EIO). */
void init_files_reply_err(struct init_conn *c, uint32_t id, const struct wr_err *err);
/* readlinkat into a new string, or NULL. */
char *init_files_readlink(int dirfd, const char *path);
