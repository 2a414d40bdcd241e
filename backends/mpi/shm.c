/* backends/mpi/shm.c — all_reduce, broadcast and all_gather between the
 * ranks of one node through memory they all map, instead of Open MPI's
 * shared-memory transport: a 64 MB MPI_Sendrecv alone took longer here than gloo's whole
 * all_reduce.  Each rank owns a segment with two staging slots of `chunk`
 * bytes.  Per chunk of the buffer: every rank copies into its slot the
 * slices of the chunk that the other ranks reduce; (barrier) each rank
 * reduces its own 1/n slice over all ranks in rank order (its own
 * elements straight from its buffer, the others' from their slots) into
 * its slot and its output; (barrier) every rank copies the other ranks'
 * reduced slices out.  Each byte is read from and written to main memory
 * once per rank, a rank's own slice never passes through the slots, the
 * slots stay in cache, and each element is reduced by one rank, so every
 * rank gets the same bits.  The two slots
 * alternate, so a rank may fill the next chunk's slot while slower ranks
 * still copy out of the previous one.  Broadcast is the root's copy in
 * and the others' copy out; all_gather each rank's copy of its block in
 * and of the others' out.
 *
 * The memory is a weft shared-memory tensor (weft_tensor_share_memory on
 * rank 0, its handle broadcast, weft_shm_open elsewhere), not an MPI-3
 * window (MPI_Win_allocate_shared): freeing a window is collective, and
 * after a timeout the ranks that broke the group skip its destroy, so the
 * others hung in MPI_Win_free at finalize (tests/test_dist's timeout
 * test).  The tensor goes when the last rank lets go, with no collective.
 * MPI still decides whether the ranks share a node (MPI_Comm_split_type)
 * and agrees that every rank opened the memory.
 *
 * Nothing here blocks for long: the barriers are counters in the segments
 * that a rank bumps (release) and then polls (acquire), sleeping on a
 * futex for at most a millisecond per test; an op advances only inside
 * the core's tests (on the caller's thread, under the core's lock), so a
 * rank that never arrives ends at the core's timeout like any other
 * request; the group's path is then broken for good.  Elsewhere than
 * Linux the sleep is a sched_yield.  Depends on MPI and
 * the public API only. */
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
/* a count's waiters sleep on it, across processes (not FUTEX_PRIVATE) */
#define SLEEP_ON(word, seen, limit) syscall(SYS_futex, (word), FUTEX_WAIT, (seen), (limit), NULL, 0)
#define WAKE_ALL(word) syscall(SYS_futex, (word), FUTEX_WAKE, INT_MAX, NULL, NULL, 0)
#else
#define SLEEP_ON(word, seen, limit) sched_yield()
#define WAKE_ALL(word) ((void)0)
#endif
#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

#include <weft/plugin.h>

#include "mpi_backend.h"

enum { HEADER = 128 }; /* the counter, alone on its cache lines */

struct wmpi__shm {
    weft_tensor *memory; /* a shared-memory tensor: every rank's segment */
    int rank, size;
    char **segment;  /* each rank's segment: header, slot 0, slot 1 */
    size_t chunk;    /* bytes per slot */
    uint32_t epoch;  /* barriers this rank has arrived at */
    uint64_t chunks; /* chunks moved, to alternate the slots */
    int broken;      /* an op was abandoned: peers' positions are unknown */
    wmpi__shm_op *head, *tail;
};

enum { COPY_IN, WAIT_REDUCED, WAIT_COPIED };

struct wmpi__shm_op {
    wmpi__shm *shm;
    weft_dist_request_desc d;
    wmpi__kernel *kernel; /* all_reduce */
    size_t esize;
    int64_t per_chunk, next; /* elements: per slot; where the next chunk starts */
    int phase, finished;
    wmpi__shm_op *next_op;
};

static int spin_limit = 256;
/* Below this many bytes MPI's calls carry the collective. */
static int64_t shm_min_bytes = 0;

/* A rank's header: how many barriers it has arrived at, and whether a
 * peer sleeps on that count.  32 bits, the width of a futex word; counts
 * compare by their difference, so wrapping around is harmless. */
typedef struct header {
    _Atomic uint32_t arrived;
    _Atomic uint32_t sleepers;
} header;

static header *header_of(const wmpi__shm *s, int rank)
{
    return (header *)s->segment[rank];
}

static char *slot(const wmpi__shm *s, int rank)
{
    return s->segment[rank] + HEADER + (s->chunks & 1) * s->chunk;
}

/* seq_cst store, then the sleepers: with the sleeper's seq_cst store of
 * its flag and load of the count (peer_arrived), one of the two sees the
 * other, so no wake-up is lost.  Release: this rank's slot writes are
 * visible before its count. */
static void arrive(wmpi__shm *s)
{
    header *h = header_of(s, s->rank);
    s->epoch++;
    atomic_store(&h->arrived, s->epoch);
    if (atomic_load(&h->sleepers) && atomic_exchange(&h->sleepers, 0))
        WAKE_ALL(&h->arrived);
}

static int reached(uint32_t count, uint32_t epoch)
{
    return (int32_t)(count - epoch) >= 0;
}

/* Whether rank q has arrived at this rank's barrier, waiting a little:
 * spinning first (a peer running on another core arrives within
 * microseconds), then asleep on its count for at most a millisecond, so
 * that on a machine with more busy threads than cores the CPU goes to the
 * peer instead of to polling (the core's wait tests again, and checks its
 * deadline, when this returns 0). */
static int peer_arrived(const wmpi__shm *s, int q)
{
    header *h = header_of(s, q);
    for (int spin = 0; spin < spin_limit; spin++) {
        if (reached(atomic_load_explicit(&h->arrived, memory_order_acquire), s->epoch))
            return 1;
        CPU_RELAX();
    }
    atomic_store(&h->sleepers, 1);
    uint32_t seen = atomic_load(&h->arrived);
    if (reached(seen, s->epoch))
        return 1;
    struct timespec limit = {0, 1000000};
    SLEEP_ON(&h->arrived, seen, &limit);
    return reached(atomic_load_explicit(&h->arrived, memory_order_acquire), s->epoch);
}

/* acquire: the peers' slot writes are visible once this returns 1 */
static int all_arrived(const wmpi__shm *s)
{
    for (int q = 0; q < s->size; q++)
        if (q != s->rank && !peer_arrived(s, q))
            return 0;
    return 1;
}

static int64_t env_bytes(const char *name, int64_t fallback)
{
    const char *v = getenv(name);
    return v && *v ? strtoll(v, NULL, 10) : fallback;
}

void wmpi__shm_open(wmpi__shm **out, MPI_Comm data)
{
    *out = NULL;
    int size = 1, node_size = 0, rank = 0;
    MPI_Comm_size(data, &size);
    MPI_Comm_rank(data, &rank);
    /* WEFT_MPI_SHM=0 keeps MPI's calls (tests run both paths); it must be
     * the same on every rank, as mpirun passes it */
    const char *use = getenv("WEFT_MPI_SHM");
    if (size < 2 || (use && strcmp(use, "0") == 0))
        return;
    shm_min_bytes = env_bytes("WEFT_MPI_SHM_MIN_BYTES", shm_min_bytes);
    spin_limit = (int)env_bytes("WEFT_MPI_SHM_SPIN", spin_limit);
    /* 256 KiB per slot: two slots of every rank stay in a core's L2; a
     * multiple of 128 so that every segment starts on its own cache line
     * and every dtype's elements fit whole */
    int64_t chunk = env_bytes("WEFT_MPI_SHM_CHUNK", 256 << 10) / 128 * 128;
    if (chunk < 128)
        chunk = 128;
    int64_t segment_bytes = HEADER + 2 * chunk;
    /* the path needs every rank of data on this node: where they are on
     * several, every rank sees a node smaller than data */
    MPI_Comm node;
    if (MPI_Comm_split_type(data, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return;
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    if (node_size != size)
        return;
    /* rank 0 makes the memory, the others open it by its handle */
    wmpi__shm *s = calloc(1, sizeof *s);
    char **segment = calloc((size_t)size, sizeof *segment);
    char handle[WEFT_SHM_HANDLE_MAX] = "";
    weft_tensor *memory = NULL;
    int good = s && segment;
    if (rank == 0) {
        weft_tensor *plain = NULL;
        int64_t bytes = segment_bytes * size;
        good = good && weft_zeros(&plain, &bytes, 1, WEFT_UINT8, WEFT_DEVICE_CPU) == 0 &&
               weft_tensor_share_memory(&memory, plain) == 0 &&
               weft_shm_handle(handle, sizeof handle, memory) == 0;
        weft_tensor_release(plain);
    }
    int made = good;
    MPI_Bcast(&made, 1, MPI_INT, 0, data);
    if (made && MPI_Bcast(handle, sizeof handle, MPI_CHAR, 0, data) != MPI_SUCCESS)
        made = 0;
    if (made && rank != 0)
        good = good && weft_shm_open(&memory, handle) == 0;
    /* every rank takes the path or none does */
    if (MPI_Allreduce(MPI_IN_PLACE, &good, 1, MPI_INT, MPI_LAND, data) != MPI_SUCCESS || !made)
        good = 0;
    if (!good) {
        weft_tensor_release(memory);
        free(segment);
        free(s);
        return;
    }
    for (int q = 0; q < size; q++)
        segment[q] = (char *)weft_tensor_data_ptr(memory) + q * segment_bytes;
    s->memory = memory;
    s->size = size;
    s->rank = rank;
    s->segment = segment;
    s->chunk = (size_t)chunk;
    *out = s;
}

void wmpi__shm_close(wmpi__shm *s)
{
    if (!s)
        return;
    /* local: the memory goes when the last rank lets go */
    weft_tensor_release(s->memory);
    free(s->segment);
    free(s);
}

int wmpi__shm_takes(const wmpi__shm *s, const weft_dist_request_desc *d)
{
    if (!s || s->broken || d->count <= 0 ||
        d->count * (int64_t)weft_dtype_size(d->dtype) < shm_min_bytes)
        return 0;
    if (d->kind == WEFT_DIST_ALL_REDUCE)
        return wmpi__kernel_of(d->op, d->dtype) != NULL;
    return d->kind == WEFT_DIST_BROADCAST || d->kind == WEFT_DIST_ALL_GATHER;
}

int wmpi__shm_start(wmpi__shm_op **out, wmpi__shm *s, const weft_dist_request_desc *d)
{
    wmpi__shm_op *op = calloc(1, sizeof *op);
    if (!op)
        return weft_set_error(WEFT_ENOMEM, "mpi: out of memory");
    op->shm = s;
    op->d = *d;
    op->esize = weft_dtype_size(d->dtype);
    op->per_chunk = (int64_t)(s->chunk / op->esize);
    if (d->kind == WEFT_DIST_ALL_REDUCE)
        op->kernel = wmpi__kernel_of(d->op, d->dtype);
    if (s->tail)
        s->tail->next_op = op;
    else
        s->head = op;
    s->tail = op;
    *out = op;
    return 0;
}

static void unlink_op(wmpi__shm_op *op)
{
    wmpi__shm *s = op->shm;
    wmpi__shm_op *prev = NULL;
    for (wmpi__shm_op *p = s->head; p; prev = p, p = p->next_op)
        if (p == op) {
            if (prev)
                prev->next_op = op->next_op;
            else
                s->head = op->next_op;
            if (s->tail == op)
                s->tail = prev;
            return;
        }
}

/* rank q's slice of a chunk of len elements */
static int64_t slice_start(int64_t len, int q, int n)
{
    return len * q / n;
}

/* Reduces this rank's slice [lo, lo + k) of the chunk that starts at
 * element `at` of the buffer, over the ranks in rank order: this rank's
 * own elements straight from its send buffer (only the other ranks'
 * slices went through its slot), the others' from their slots.  The
 * result goes into this rank's slot, for the others to copy out, and into
 * its own output.  Accumulating in the slot is safe: it is no input. */
static void reduce_slice(const wmpi__shm_op *op, int64_t at, int64_t lo, int64_t k)
{
    const wmpi__shm *s = op->shm;
    int64_t es = (int64_t)op->esize;
    const char *mine = (const char *)op->d.send + (at + lo) * es;
    char *acc = slot(s, s->rank) + lo * es;
#define SOURCE(q) ((q) == s->rank ? mine : slot(s, (q)) + lo * es)
    op->kernel(acc, SOURCE(0), SOURCE(1), k);
    for (int q = 2; q < s->size; q++)
        op->kernel(acc, acc, SOURCE(q), k);
#undef SOURCE
    /* after the kernels: in place, mine is this very output */
    memcpy((char *)op->d.recv + (at + lo) * es, acc, (size_t)(k * es));
}

/* all_gather: where the current chunk of rank q's block goes in the
 * output (the blocks of count elements end to end in rank order) */
static char *block_at(const wmpi__shm_op *op, int q)
{
    return (char *)op->d.recv + ((int64_t)q * op->d.count + op->next) * (int64_t)op->esize;
}

/* Advances op (the head of its group's queue) as far as the peers allow:
 * 1 finished, 0 waiting for a peer. */
static int advance(wmpi__shm_op *op)
{
    wmpi__shm *s = op->shm;
    const weft_dist_request_desc *d = &op->d;
    size_t es = op->esize;
    int reduce = d->kind == WEFT_DIST_ALL_REDUCE, gather = d->kind == WEFT_DIST_ALL_GATHER;
    int n = s->size, me = s->rank;
    for (;;) {
        int64_t len = d->count - op->next < op->per_chunk ? d->count - op->next : op->per_chunk;
        char *out = (char *)d->recv + op->next * (int64_t)es;
        switch (op->phase) {
        case COPY_IN:
            if (op->next == d->count)
                return 1;
            for (int q = 0; reduce && q < n; q++) { /* the slices others reduce */
                int64_t lo = slice_start(len, q, n), hi = slice_start(len, q + 1, n);
                if (q != me)
                    memcpy(slot(s, me) + lo * (int64_t)es,
                           (const char *)d->send + (op->next + lo) * (int64_t)es,
                           (size_t)(hi - lo) * es);
            }
            if (gather) { /* this rank's block: into its slot and its own output */
                const char *mine = (const char *)d->send + op->next * (int64_t)es;
                memcpy(slot(s, me), mine, (size_t)len * es);
                memmove(block_at(op, me), mine, (size_t)len * es);
            }
            if (d->kind == WEFT_DIST_BROADCAST && me == d->root)
                memcpy(slot(s, me), out, (size_t)len * es);
            arrive(s);
            op->phase = WAIT_REDUCED;
            /* fall through */
        case WAIT_REDUCED:
            if (!all_arrived(s))
                return 0;
            if (reduce) {
                int64_t lo = slice_start(len, me, n);
                reduce_slice(op, op->next, lo, slice_start(len, me + 1, n) - lo);
            } else if (gather) {
                for (int q = 0; q < n; q++)
                    if (q != me)
                        memcpy(block_at(op, q), slot(s, q), (size_t)len * es);
            } else if (me != d->root) {
                memcpy(out, slot(s, d->root), (size_t)len * es);
            }
            arrive(s);
            op->phase = WAIT_COPIED;
            /* fall through */
        case WAIT_COPIED:
            if (!all_arrived(s))
                return 0;
            for (int q = 0; reduce && q < n; q++) {
                int64_t lo = slice_start(len, q, n), hi = slice_start(len, q + 1, n);
                if (q != me)
                    memcpy(out + lo * (int64_t)es, slot(s, q) + lo * (int64_t)es,
                           (size_t)(hi - lo) * es);
            }
            op->next += len;
            s->chunks++;
            op->phase = COPY_IN;
            /* one chunk per test: a test may sleep on a barrier, and the
             * caller's asynchronous start (which tests once) must return
             * while the transfer goes on */
            if (op->next < d->count)
                return 0;
        }
    }
}

int wmpi__shm_test(wmpi__shm_op *op)
{
    wmpi__shm *s = op->shm;
    if (!op->finished && s->broken) {
        unlink_op(op);
        free(op);
        return weft_set_error(WEFT_EIO, "mpi: the group's shared-memory path was given up at an "
                                        "earlier timeout");
    }
    /* the ops of a group share its slots: earlier ones go first */
    while (!op->finished && s->head && advance(s->head)) {
        s->head->finished = 1;
        unlink_op(s->head);
    }
    if (!op->finished)
        return 0;
    free(op);
    return 1;
}

void wmpi__shm_abandon(wmpi__shm_op *op)
{
    op->shm->broken = 1;
    unlink_op(op);
    free(op);
}
