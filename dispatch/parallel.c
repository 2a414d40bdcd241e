/* dispatch/parallel.c — weft_parallel_for: a loop handed to the intra-op
 * pool a plugin registered (weft_register_parallel_for, in registrar.c).
 * The core starts no threads itself: without a pool, or where a pool
 * would not help, the loop runs on the calling thread. */
#include "dispatch/dispatcher.h"

WEFT_API int weft_parallel_for(int64_t begin, int64_t end, int64_t grain, weft_range_fn fn,
                               void *ctx)
{
    if (!fn)
        return wf__errorf(WEFT_EINVAL, "parallel_for: NULL function");
    if (end <= begin)
        return 0;
    /* acquire: the pool's state was published before its registration */
    weft_parallel_for_fn pool = atomic_load_explicit(&wd__parallel_for, memory_order_acquire);
    if (!pool || end - begin <= (grain > 1 ? grain : 1) || weft_get_num_threads() <= 1) {
        fn(begin, end, ctx);
        return 0;
    }
    return pool(begin, end, grain, fn, ctx);
}
