/* profiler/profiler.h — internal: the profiler's sessions and per-thread
 * buffers, shared by recording (record.c), the Chrome trace (trace.c) and
 * the tables (table.c).  Prefix wr__ ("weft recorder"). */
#ifndef WR_PROFILER_H
#define WR_PROFILER_H

#include <pthread.h>
#include <stdatomic.h>

#include <weft/profiler.h>

#include "c10/core.h"

typedef enum wr_kind {
    WR_OP = 0,    /* an operator call (the Profiler key's kernel) */
    WR_RANGE,     /* weft_profiler_range_push .. pop */
    WR_BACKWARD,  /* an autograd node's backward function */
    WR_MEMORY     /* a storage allocated (bytes > 0) or freed (bytes < 0) */
} wr_kind;

/* One thing on a thread's timeline.  Events are appended when they begin,
 * so a parent always comes before its children. */
typedef struct wr_event {
    const char *name;   /* an operator's name (lives for the process) or a
                         * copy in the buffer's strings; NULL for memory */
    int64_t start, end; /* CLOCK_MONOTONIC ns; end is -1 while open */
    int32_t parent;     /* the innermost event open when this began, or -1 */
    uint8_t kind;       /* wr_kind */
    int16_t device_type, device_index; /* an operator's first tensor's
                         * device, a storage's; -1 when none */
    uint32_t shapes;    /* 1 + offset of the input shapes in shapes[], 0: none */
    uint64_t seq;       /* WR_BACKWARD: the node's sequence number */
    int64_t bytes, live; /* WR_MEMORY: the change, and the device's live
                          * bytes after it (see wr__live) */
    /* WR_OP with record_device_time: when its device work ran, in ns on
     * the CPU clock (see wr_device_ref), -1 when not measured */
    int64_t device_start, device_end;
} wr_event;

/* An operator's device events, waiting to be read when the thread stops. */
typedef struct wr_device_pair {
    int32_t event;
    weft_event *start, *end;
} wr_device_pair;

/* Per device a thread timed: an event recorded on the drained stream when
 * the device's first operator was timed, and the CPU time just before it
 * was recorded.  Device times are placed on the CPU clock through it. */
typedef struct wr_device_ref {
    weft_device device;
    weft_event *event;
    int64_t cpu_ns;
} wr_device_ref;

/* An autograd node made inside an operator: node seq -> that event. */
typedef struct wr_link {
    uint64_t seq;
    int32_t event;
} wr_link;

typedef struct wr_strblock {
    struct wr_strblock *next;
    size_t used, size;
    char text[];
} wr_strblock;

/* What one thread recorded during one start..stop.  Written only by its
 * thread while it records, read by anyone after (the session's mutex
 * publishes `closed`). */
typedef struct wr_buffer {
    weft_profiler *session;
    uint64_t tid;
    wr_event *ev;
    int32_t n, cap;
    int32_t current;     /* innermost open event, -1 */
    int32_t open_ranges; /* ranges pushed while recording and still open */
    /* input shapes: per operator, the tensor count, then per tensor dtype,
     * device (type << 16 | index), ndim (-1 for None) and the sizes */
    int64_t *shapes;
    uint32_t nshapes, capshapes;
    wr_link *links;
    int32_t nlinks, caplinks;
    wr_strblock *strings;
    wr_device_pair *pairs;
    int32_t npairs, cappairs;
    wr_device_ref refs[4]; /* the devices timed (more are not timed) */
    int nrefs;
    uint64_t dropped;    /* events lost to a failed allocation */
    bool closed;
} wr_buffer;

struct weft_profiler {
    weft_profiler_options opts;
    int64_t t0;               /* creation time: the trace's origin */
    pthread_mutex_t mutex;    /* guards buffers and recording */
    wr_buffer **buffers;
    int nbuffers, capbuffers;
    int recording;            /* threads recording into it now */
};

/* Live bytes per device type of the storages allocated while some thread
 * profiled memory and not freed since (process-wide, so a counter returns
 * to where it started when the tensors made meanwhile are gone). */
extern _Atomic int64_t wr__live[WEFT_MAX_DEVICE_TYPES];

/* Registers the Profiler key's kernel (the composition root calls it). */
void wr__profiler_register(void);

/* 0 with p's mutex held when nobody records into p: its buffers may be
 * read until wr__unlock (a thread that starts recording into p meanwhile
 * waits, rather than growing the buffer list under the reader); else
 * WEFT_EBUSY naming fn, unlocked. */
int wr__lock_idle(const weft_profiler *p, const char *fn);
void wr__unlock(const weft_profiler *p);

/* "[[2, 3], [3]]" of an event's input shapes into buf (always terminated). */
void wr__format_shapes(const wr_buffer *b, const wr_event *e, char *buf, size_t size);

#endif
