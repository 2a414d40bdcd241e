/* distributed/dist.h — internal: the process groups' state shared by the
 * files of distributed/ (prefix wdist__).  This layer uses the public API
 * only (<weft/weft.h>, <weft/plugin.h>, <weft/distributed.h>): it moves
 * tensors' bytes through a backend plugin and never looks inside c10. */
#ifndef WF_DISTRIBUTED_DIST_H
#define WF_DISTRIBUTED_DIST_H

#include <pthread.h>
#include <stdint.h>

#include <weft/distributed.h>
#include <weft/plugin.h>

/* What every rank sends every other before a collective (the agreement
 * step): the call as this rank sees it, and whether it refused its own
 * arguments (status < 0, reason says why), so that one rank's bad input is
 * an error on every rank instead of a hang on the others. */
typedef struct wdist_meta {
    int64_t seq;    /* the group's call counter */
    int64_t kind;   /* weft_dist_kind */
    int64_t dtype;
    int64_t op;     /* weft_reduce_op, or -1 */
    int64_t count;  /* elements per rank block */
    int64_t root;   /* or -1 */
    int64_t status; /* 0, or the WEFT_E* code this rank refused with */
    char reason[200];
} wdist_meta;

struct weft_process_group {
    char name[96];
    int rank; /* -1: not a member */
    int size;
    int *world_ranks; /* size entries */
    void *comm;       /* the backend's communicator; NULL off the group */
    int64_t timeout_ms;
    uint64_t seq; /* collectives started, for the agreement's tags */
    /* set by a timeout: the backend may still hold requests of this group
     * that will never finish, so no further call is safe */
    char broken[600];
    weft_work *queue_head, *queue_tail; /* works not finished, in call order */
    weft_process_group *next_group;     /* the registry, for finalize */
    int is_world;
};

/* Process-wide state: the backend, the world, every group.  lock guards
 * all of it and every backend call. */
typedef struct wdist_state {
    pthread_mutex_t lock;
    void *library; /* dlopen handle of the backend plugin */
    const weft_dist_backend *backend;
    weft_process_group *world;
    weft_process_group *groups; /* every live group, the world included */
    int next_group_id;
    /* works abandoned at a timeout: the backend may still write them, so
     * they live on, here rather than nowhere */
    weft_work *abandoned;
} wdist_state;

extern wdist_state wdist__state;

/* What a version-1 backend leaves out reads as its version-1 meaning:
 * the device type whose memory the backend moves (the CPU: host buffers)
 * and its WEFT_DIST_CAP_* bits (none). */
int wdist__backend_device_type(void);
uint32_t wdist__backend_caps(void);
/* Whether the backend matches every request by order alone (it has an
 * exchange: nccl), so that the core must start them in call order. */
int wdist__backend_ordered(void);

/* The name of a kind in messages ("all_reduce"). */
const char *wdist__kind_name(int kind);

#endif
