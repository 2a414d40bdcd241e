/* distributed.h — process groups and collectives between processes (issue
 * 18), and the interface a collective backend plugin implements.
 *
 * The core knows no transport: a backend ("mpi", "nccl") is a shared library
 * libweftdist-NAME.so, opened with dlopen on first use from the plugin
 * search path, that exports one data object, weft_dist_backend_entry.  The
 * core checks arguments, agrees with the other ranks on what is being
 * called (so that a mismatch is an error on every rank instead of a hang or
 * garbage), stages non-contiguous tensors, orders the calls and enforces
 * the timeout; the backend moves contiguous buffers: host memory (mpi), or
 * the memory of the one device type it declares (nccl: CUDA tensors, on
 * the caller's current stream).
 *
 * Conventions (as in weft.h): fallible calls return 0 or a negative WEFT_E*
 * code with the thread's message set (weft_last_error); tensors are
 * borrowed.  Thread safety: every call below is serialised by one
 * process-wide lock, so any thread may call; as with MPI and torch, the
 * collectives of one group must be called in the same order on every
 * member rank.
 */
#ifndef WEFT_DISTRIBUTED_H
#define WEFT_DISTRIBUTED_H

#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A set of ranks that run collectives together.  The world group comes
 * from weft_dist_init; sub-groups from weft_dist_group_new. */
typedef struct weft_process_group weft_process_group;
/* An asynchronous call in flight: wait on it or test it, then free it. */
typedef struct weft_work weft_work;

typedef enum weft_reduce_op {
    WEFT_REDUCE_SUM = 0,
    WEFT_REDUCE_AVG, /* the sum divided by the group's size; floating and complex dtypes */
    WEFT_REDUCE_MAX, /* not for complex dtypes */
    WEFT_REDUCE_MIN, /* not for complex dtypes */
    WEFT_REDUCE_PROD,
    WEFT_REDUCE_NUM_OPS
} weft_reduce_op;

/* The name of a reduction ("sum", "avg", ...), or "invalid".  Static. */
WEFT_API const char *weft_reduce_op_name(int op);

typedef struct weft_dist_options {
    uint32_t struct_size; /* sizeof(weft_dist_options) */
    /* "mpi" or "nccl"; NULL: $WEFT_DIST_BACKEND, else "mpi" */
    const char *backend;
    /* -1: from the backend's environment (what mpirun sets).  Given, they
     * must agree with what the backend reports, else WEFT_EINVAL naming
     * both: a program launched with the wrong -np fails at once. */
    int rank;
    int world_size;
    /* How long a blocking call (and a work's wait) may take before it
     * fails with WEFT_EIO naming the collective, the group and the ranks
     * that did not answer.  <= 0: $WEFT_DIST_TIMEOUT_MS, else 30 minutes
     * (torch's default). */
    int64_t timeout_ms;
} weft_dist_options;

/* Initialises the process's world group: loads the backend plugin, lets it
 * start (MPI_Init_thread unless the application already did), and returns
 * the world group in *world, owned by the caller (weft_dist_finalize).
 * opts may be NULL for all defaults.  One world per process at a time.
 * Errors: WEFT_EINVAL (NULL world, bad options, rank or size disagreeing
 * with the environment), WEFT_ENOTFOUND (no such backend plugin: the
 * message lists where it looked), WEFT_EPLUGIN (it did not load or its
 * version is unknown), WEFT_EEXIST (a world is already initialised), the
 * backend's errors. */
WEFT_API int weft_dist_init(weft_process_group **world, const weft_dist_options *opts);
/* Frees the world and every sub-group still alive, and shuts the backend
 * down (MPI_Finalize when weft_dist_init started MPI).  Collective: every
 * rank calls it.  Works still in flight are abandoned.  NULL is a no-op.
 * Returns 0 or the backend's error. */
WEFT_API int weft_dist_finalize(weft_process_group *world);

/* A sub-group of parent made of the parent ranks ranks[0..n-1] (distinct,
 * each in [0, size)); its ranks are numbered in that order.  Every rank of
 * parent calls it with the same list (as torch.distributed.new_group);
 * a rank not in the list gets a group whose weft_dist_rank is -1 and on
 * which every collective fails with WEFT_EINVAL ("not a member").  *out is
 * owned by the caller (weft_dist_group_free).  Errors: WEFT_EINVAL (NULL
 * argument, n < 1, a rank out of range or repeated), WEFT_ENOMEM, the
 * backend's errors. */
WEFT_API int weft_dist_group_new(weft_process_group **out, weft_process_group *parent,
                                 const int *ranks, int n);
/* Frees a sub-group (the world is freed by weft_dist_finalize), after
 * waiting for its works still in flight (they end done, or failed at the
 * timeout; their handles stay valid until weft_work_free).  NULL is a
 * no-op. */
WEFT_API void weft_dist_group_free(weft_process_group *group);
/* This process's rank in the group, -1 when it is not a member. */
WEFT_API int weft_dist_rank(const weft_process_group *group);
/* The number of ranks in the group. */
WEFT_API int weft_dist_size(const weft_process_group *group);
/* The world rank of the group's rank r, or -1 when r is out of range. */
WEFT_API int weft_dist_world_rank(const weft_process_group *group, int rank);
/* The group's name in messages: "world" or "group 1 [0, 2]".  Lives as long
 * as the group. */
WEFT_API const char *weft_dist_group_name(const weft_process_group *group);
/* The backend's name ("mpi"). */
WEFT_API const char *weft_dist_backend_name(const weft_process_group *group);
/* Sets the group's timeout in milliseconds (> 0; WEFT_EINVAL otherwise). */
WEFT_API int weft_dist_set_timeout(weft_process_group *group, int64_t timeout_ms);

/* Collectives.  Every one takes tensors of one dtype (every weft dtype) and
 * one device (any strides: non-contiguous tensors are staged; tensors of a
 * device other than the CPU are staged through host memory when the
 * backend moves host buffers, as mpi does; the nccl backend takes CUDA
 * tensors in place, on the caller's current stream, and refuses every
 * other device with WEFT_EDEVICE), and a last argument
 * work: NULL makes the call blocking (it returns when done, or fails at the
 * group's timeout); otherwise *work receives a handle and the call returns
 * once it is started — the tensors must then stay alive and untouched until
 * the work is waited for.  Ranks are group ranks.  Errors, on every member
 * rank alike: WEFT_EINVAL (NULL argument, not a member, root or peer out of
 * range, a rank whose arguments the others do not match: another
 * collective, dtype, element count, reduction or root — the message names
 * the ranks and both values), WEFT_EDTYPE (a reduction the dtype lacks;
 * nccl: int16 reductions, complex prod), WEFT_ESHAPE (output sizes that
 * do not fit), WEFT_EDEVICE (tensors of two devices in one call; a device
 * the backend does not move), WEFT_ENOTSUP (the mpi backend: more than
 * 2^31-1 elements per rank, except for all_reduce, broadcast and reduce,
 * which it splits), WEFT_EIO (timeout: the message names the collective, the group
 * and the ranks that did not answer; the group is unusable afterwards),
 * WEFT_ENOMEM.  Results are left untouched on error. */

/* tensor = op over every rank's tensor, on every rank (in place). */
WEFT_API int weft_dist_all_reduce(weft_process_group *group, weft_tensor *tensor,
                                  weft_reduce_op op, weft_work **work);
/* Every rank's tensor = root's. */
WEFT_API int weft_dist_broadcast(weft_process_group *group, weft_tensor *tensor, int root,
                                 weft_work **work);
/* root's tensor = op over every rank's tensor; the others' are unchanged. */
WEFT_API int weft_dist_reduce(weft_process_group *group, weft_tensor *tensor, int root,
                              weft_reduce_op op, weft_work **work);
/* outputs[i] = rank i's input, on every rank; size outputs, each with the
 * input's number of elements. */
WEFT_API int weft_dist_all_gather(weft_process_group *group, weft_tensor *const *outputs,
                                  const weft_tensor *input, weft_work **work);
/* output (size * input's elements, any shape) = the ranks' inputs laid end to
 * end in rank order (torch's all_gather_into_tensor). */
WEFT_API int weft_dist_all_gather_into(weft_process_group *group, weft_tensor *output,
                                       const weft_tensor *input, weft_work **work);
/* output = op over every rank's inputs[my rank]; size inputs, each with
 * output's number of elements. */
WEFT_API int weft_dist_reduce_scatter(weft_process_group *group, weft_tensor *output,
                                      weft_tensor *const *inputs, weft_reduce_op op,
                                      weft_work **work);
/* output = op over every rank's input's my-rank block (input: size *
 * output's elements; torch's reduce_scatter_tensor). */
WEFT_API int weft_dist_reduce_scatter_into(weft_process_group *group, weft_tensor *output,
                                           const weft_tensor *input, weft_reduce_op op,
                                           weft_work **work);
/* input and output hold size equal blocks; output block j = rank j's input
 * block my-rank (torch's all_to_all_single with equal splits). */
WEFT_API int weft_dist_all_to_all(weft_process_group *group, weft_tensor *output,
                                  const weft_tensor *input, weft_work **work);
/* On root, outputs[i] = rank i's input (size tensors); outputs is ignored
 * (may be NULL) elsewhere. */
WEFT_API int weft_dist_gather(weft_process_group *group, weft_tensor *const *outputs,
                              const weft_tensor *input, int root, weft_work **work);
/* output = root's inputs[my rank]; inputs is ignored (may be NULL) off root. */
WEFT_API int weft_dist_scatter(weft_process_group *group, weft_tensor *output,
                               weft_tensor *const *inputs, int root, weft_work **work);
/* Returns when every rank of the group has called it. */
WEFT_API int weft_dist_barrier(weft_process_group *group, weft_work **work);
/* Point to point: tensor to rank dst / from rank src, matched by tag
 * (0 <= tag < 2^20) and dtype; the receiver's element count must equal the
 * sender's (WEFT_ESHAPE on the receiver otherwise).  Not collective: no
 * agreement step, so a dtype mismatch shows as the receiver's timeout. */
WEFT_API int weft_dist_send(weft_process_group *group, const weft_tensor *tensor, int dst,
                            int tag, weft_work **work);
WEFT_API int weft_dist_recv(weft_process_group *group, weft_tensor *tensor, int src, int tag,
                            weft_work **work);

/* Waits until the work is done (its results are then in its tensors), or
 * fails at its group's timeout, counted from the call that started it.
 * Returns 0, or the error that ended the work (again at each call).
 * Does not free the work. */
WEFT_API int weft_work_wait(weft_work *work);
/* 1 when done, 0 while in flight, or the negative error that ended it.
 * Makes progress; never blocks. */
WEFT_API int weft_work_test(weft_work *work);
/* Frees a work; one still in flight is waited for first (so that its
 * tensors are not written after the caller lets go of them).  NULL is a
 * no-op. */
WEFT_API void weft_work_free(weft_work *work);

/* ------------------------------------------------ shared-memory tensors */

/* A tensor whose storage is a POSIX shared-memory object, so that another
 * process of this machine can map the same elements
 * (torch.multiprocessing's file_descriptor/file_system strategies).  The
 * object is unlinked when the last tensor of the last process that opened
 * it lets go.  Handles are plain text, passed between processes any way
 * the caller likes (a pipe, an environment variable, a collective). */
#define WEFT_SHM_HANDLE_MAX 512
/* *out = a new contiguous CPU tensor in shared memory with t's sizes,
 * dtype and elements (t itself when it is already one; a new reference in
 * both cases).  Errors: WEFT_EINVAL (NULL argument, a layout tensor),
 * WEFT_EDEVICE (not a CPU tensor), WEFT_EIO (shm_open, ftruncate or mmap
 * failed: the message gives errno's text), WEFT_ENOMEM. */
WEFT_API int weft_tensor_share_memory(weft_tensor **out, const weft_tensor *t);
/* Whether t's storage is shared memory made by weft_tensor_share_memory or
 * weft_shm_open. */
WEFT_API bool weft_tensor_is_shared(const weft_tensor *t);
/* Writes the handle of a shared tensor (the object's name, its dtype, sizes
 * and strides, and where t starts in the object) into buf (size bytes;
 * WEFT_SHM_HANDLE_MAX is always enough).  Errors: WEFT_EINVAL (not a
 * shared tensor, NULL argument, more than 8 dimensions), WEFT_ERANGE (buf
 * too small). */
WEFT_API int weft_shm_handle(char *buf, size_t size, const weft_tensor *t);
/* *out = a new tensor over the shared memory a handle names, from any
 * process of this machine; it keeps the object alive like the original.
 * Errors: WEFT_EINVAL (malformed handle), WEFT_ENOTFOUND (no such object:
 * every holder let go already), WEFT_EIO (mmap failed or the object is
 * smaller than the handle says), WEFT_ENOMEM. */
WEFT_API int weft_shm_open(weft_tensor **out, const char *handle);

/* ------------------------------------------------ data-parallel training */

/* torch's DistributedDataParallel for a weft_module (nn/ddp.c): every rank
 * holds a replica and trains on its shard of the global batch.  Creating
 * it broadcasts rank 0's parameters and buffers; during backward a hook on
 * each parameter copies its gradient into a bucket (parameters in reverse
 * order, as backward meets them, up to bucket_bytes each), and a full
 * bucket's average over the ranks starts at once as an asynchronous
 * all_reduce, so communication overlaps the rest of backward;
 * weft_ddp_finish waits for the buckets and writes the averages into the
 * parameters' grad.  With equal shards this is the gradient of the global
 * batch's mean loss.  The module must outlive the weft_ddp and keep its
 * parameters (no to_device/to_dtype meanwhile).  The parameters may be on
 * any one device: the buckets live there and the collectives stage them. */
typedef struct weft_module weft_module;
typedef struct weft_ddp weft_ddp;
/* bucket_bytes <= 0: 25 MiB (torch's default).  Collective over group.
 * Errors: WEFT_EINVAL (NULL argument, not a member, a module without
 * parameters), the broadcast's errors, WEFT_ENOMEM. */
WEFT_API int weft_ddp_new(weft_ddp **out, weft_module *module, weft_process_group *group,
                          int64_t bucket_bytes);
/* Off (torch's no_sync): backward only accumulates local gradients; the
 * first backward after turning it back on reduces the accumulated sum.
 * Returns the previous setting. */
WEFT_API bool weft_ddp_set_sync(weft_ddp *ddp, bool sync);
/* After backward: waits for every bucket and sets each parameter's grad to
 * the average over the ranks.  Errors: WEFT_EINVAL naming the first
 * parameter that received no gradient in this backward (every parameter
 * must take part, as in torch without find_unused_parameters), the
 * all_reduce's errors (WEFT_EIO at the timeout).  A no-op with sync off. */
WEFT_API int weft_ddp_finish(weft_ddp *ddp);
/* The number of buckets, for tests and tuning. */
WEFT_API int weft_ddp_num_buckets(const weft_ddp *ddp);
/* Frees it (waiting for buckets in flight); the hooks it left on the
 * parameters become no-ops.  NULL is a no-op. */
WEFT_API void weft_ddp_destroy(weft_ddp *ddp);

/* ---------------------------------------------- the backend's interface */

/* A backend plugin (libweftdist-NAME.so) exports
 *     const weft_dist_backend weft_dist_backend_entry;
 * Like every plugin-facing struct it starts with its size and version and
 * only grows at the end.  The core calls it under its lock, one call at a
 * time.  Communicators and requests are the backend's opaque pointers. */
/* 1: init..finalize; 2: device_type, caps, exchange (and the request
 * description's device and stream).  The core loads both. */
#define WEFT_DIST_BACKEND_VERSION 2
#define WEFT_DIST_BACKEND_SYMBOL "weft_dist_backend_entry"

/* What a request does, on contiguous host buffers of dtype. */
typedef enum weft_dist_kind {
    WEFT_DIST_ALL_REDUCE = 0, /* recv = op(send); send == recv means in place */
    WEFT_DIST_BROADCAST,      /* recv (count) from root */
    WEFT_DIST_REDUCE,         /* recv = op(send) on root; send == recv means in place */
    WEFT_DIST_ALL_GATHER,     /* recv (size*count) = every rank's send (count) */
    WEFT_DIST_REDUCE_SCATTER, /* recv (count) = op over send's (size*count) my block */
    WEFT_DIST_ALL_TO_ALL,     /* send, recv: size blocks of count */
    WEFT_DIST_GATHER,         /* recv (size*count, root only) = every send (count) */
    WEFT_DIST_SCATTER,        /* recv (count) = root's send (size*count) my block */
    WEFT_DIST_BARRIER,
    WEFT_DIST_SEND, /* send (count) to peer with tag */
    WEFT_DIST_RECV, /* recv (count) from peer with tag; a different count is WEFT_ESHAPE */
    WEFT_DIST_NUM_KINDS
} weft_dist_kind;

typedef struct weft_dist_request_desc {
    uint32_t struct_size;
    int kind;    /* weft_dist_kind */
    int op;      /* weft_reduce_op, never AVG (the core divides) */
    int dtype;   /* weft_dtype */
    const void *send;
    void *recv;
    int64_t count; /* elements per rank block */
    int root;      /* group rank, or the peer of SEND/RECV */
    int tag;       /* SEND/RECV only */
    /* true: a message of the core's agreement step, on a channel of its
     * own that never matches the application's send/recv */
    int control;
    /* Version 2.  The device of send and recv: the CPU, or the backend's
     * device_type (below) when it moves device memory itself; type -1 for
     * a barrier, which has no tensors. */
    weft_device device;
    /* The plugin's handle (weft_stream_handle) of the caller's current
     * stream on device when the call was made (NULL: the default stream):
     * a device backend queues its transfer there, after the core's staging
     * copies and before the caller's later kernels. */
    void *stream;
} weft_dist_request_desc;

/* Bits of weft_dist_backend.caps (version 2). */
enum {
    /* start() takes op WEFT_REDUCE_AVG (floating dtypes) and divides
     * itself, instead of the core's sum then division */
    WEFT_DIST_CAP_AVG = 1u << 0
};

typedef struct weft_dist_backend {
    uint32_t struct_size; /* sizeof(weft_dist_backend) as compiled */
    uint32_t version;     /* WEFT_DIST_BACKEND_VERSION */
    const char *name;
    /* Starts the backend; *world is the world communicator, *rank and
     * *size its rank and size (from the launcher's environment). */
    int (*init)(void **world, int *rank, int *size);
    /* A communicator of parent's ranks ranks[0..n-1]; called by exactly
     * those ranks. */
    int (*group_create)(void **out, void *parent, const int *ranks, int n);
    void (*group_destroy)(void *comm);
    /* Starts a request; *request is the backend's, to test.  Errors set a
     * message (weft_set_error) naming what the transport said. */
    int (*start)(void **request, void *comm, const weft_dist_request_desc *desc);
    /* 1 done (the request is freed), 0 pending, < 0 failed (freed). */
    int (*test)(void *request);
    /* The core gave up on a request (timeout): forget it; its buffers stay
     * alive for the rest of the process. */
    void (*abandon)(void *request);
    /* Shuts the backend down (after every communicator is destroyed). */
    int (*finalize)(void);
    /* ---- version 2: read only when version >= 2 ---- */
    /* The device type whose memory start() moves.  WEFT_DEVICE_TYPE_CPU
     * (what version 1 means): host buffers, and the core stages tensors of
     * other devices through host memory.  Another type (nccl:
     * WEFT_DEVICE_TYPE_CUDA): the core hands that device's tensors over in
     * place (non-contiguous ones through a contiguous copy on the same
     * device) and refuses every other device with WEFT_EDEVICE. */
    int device_type;
    uint32_t caps; /* WEFT_DIST_CAP_* */
    /* Optional: gathers every member's record (bytes of host memory at
     * mine) into all (size records, in rank order), as one request tested
     * with test().  The core's agreement step uses it instead of 2(n-1)
     * control send/recv, which a backend that matches messages by order
     * alone (NCCL) cannot keep apart from the data.  desc is the call's
     * (its device and stream).  NULL: control send/recv.  A backend with
     * an exchange is taken to match every request by order alone: the
     * core then posts a call's exchange only once every earlier call of
     * the group has started its data, and starts send/recv in call order
     * with the collectives, so every rank issues the same sequence. */
    int (*exchange)(void **request, void *comm, const void *mine, void *all, size_t bytes,
                    const weft_dist_request_desc *desc);
} weft_dist_backend;

#ifdef __cplusplus
}
#endif

#endif /* WEFT_DISTRIBUTED_H */
