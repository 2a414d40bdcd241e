/* distributed/work.h — internal: a collective call in flight (work.c) as
 * the collectives (collectives.c) build it. */
#ifndef WF_DISTRIBUTED_WORK_H
#define WF_DISTRIBUTED_WORK_H

#include <stdarg.h>
#include <stdbool.h>

#include "distributed/dist.h"

/* BEHIND: the agreement's exchange waits until every earlier call of the
 * group has started its data (a backend that matches by order alone). */
enum { WDIST_AGREE = 1, WDIST_READY, WDIST_DATA, WDIST_DONE, WDIST_BEHIND };

struct weft_work {
    weft_process_group *group;
    int phase;
    int error; /* 0, or the code that ended the work */
    char message[400];
    int64_t start_ms; /* the timeout counts from here */
    wdist_meta mine;    /* this rank's record for the agreement */
    wdist_meta *peers;  /* every member's record (size entries) */
    void **ctl;         /* the agreement's requests: 2 per peer, NULL when done */
    int refuse;         /* this rank refused its arguments with this code */
    int exchanged;      /* the records come by the backend's exchange (ctl[0]) */
    weft_dist_request_desc desc;
    void *request; /* the backend's, while the data moves */
    /* the tensors whose bytes desc points at (owned references), and where
     * the result goes afterwards when it was staged */
    weft_tensor *send_stage;
    weft_tensor *result;
    weft_tensor *dest;
    weft_tensor **dests; /* block i of result goes to dests[i] */
    int n_dests;
    int avg_divisor; /* > 1: divide result by it (avg) */
    weft_device device; /* the call's tensors' device; type -1 until the first */
    int leak;        /* abandoned by a timeout: the backend may still write it */
    int queued;
    weft_work *next;
};

int64_t wdist__now_ms(void);
int wdist__agree_start(weft_work *w);
void wdist__progress(weft_process_group *g);
int wdist__wait_locked(weft_work *w);
void wdist__work_destroy(weft_work *w);
/* copy_ from src into dst across devices (through dst's device). */
int wdist__copy_into(weft_tensor *dst, const weft_tensor *src);

#endif
