/* tools/train_prefetch.h — weft-train's batch assembly on a thread of its
 * own: while a training step runs, the next step's batch (gather, convert
 * and normalise 64 images) is built beside it, off the loop's critical
 * path (issue 20).  Internal to weft-train. */
#ifndef WEFT_TOOLS_TRAIN_PREFETCH_H
#define WEFT_TOOLS_TRAIN_PREFETCH_H

#include <weft/weft.h>

/* Builds the host tensors of batch [start, start + count) into *x and *y
 * (new references); returns 0 or a negative weft error (message set). */
typedef int (*train_batch_fn)(void *ctx, long start, long count, weft_tensor **x,
                              weft_tensor **y);

typedef struct train_prefetch train_prefetch;

/* Starts the assembling thread.  Errors: WEFT_ENOMEM, or WEFT_EINVAL when
 * the thread cannot start (the caller then builds every batch itself). */
int train_prefetch_start(train_prefetch **out, train_batch_fn fn, void *ctx);
/* Asks for batch [start, start + count) to be built now, in the thread.
 * The inputs fn reads (the order of the images) must not change until
 * the batch is taken. */
void train_prefetch_request(train_prefetch *p, long start, long count);
/* Batch [start, start + count): the one requested when it is that one
 * (waiting for it if need be), else built on the calling thread; p NULL
 * builds it here.  An error of the thread is returned here with its
 * message. */
int train_prefetch_take(train_prefetch *p, train_batch_fn fn, void *ctx, long start, long count,
                        weft_tensor **x, weft_tensor **y);
/* Stops and joins the thread, dropping a batch not taken.  NULL is a
 * no-op. */
void train_prefetch_stop(train_prefetch *p);

#endif
