/* tests/keep.h — tensors a test wants released at the end of a case:
 * keep(t) returns t and remembers it, drop_all() releases everything kept.
 * The list grows as needed, so keep() never drops a tensor still in use. */
#ifndef WEFT_TESTS_KEEP_H
#define WEFT_TESTS_KEEP_H

#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

static weft_tensor **kept;
static int nkept, capkept;

static inline weft_tensor *keep(weft_tensor *t)
{
    if (!t)
        return t;
    if (nkept == capkept) {
        int cap = capkept ? 2 * capkept : 256;
        weft_tensor **grown = realloc(kept, (size_t)cap * sizeof *grown);
        if (!grown) {
            fprintf(stderr, "keep: out of memory\n");
            abort(); /* a test program, not the library */
        }
        kept = grown;
        capkept = cap;
    }
    kept[nkept++] = t;
    return t;
}

static inline void drop_all(void)
{
    while (nkept > 0)
        weft_tensor_release(kept[--nkept]);
    free(kept);
    kept = NULL;
    capkept = 0;
}

/* A kept int64 tensor of the given shape holding values (row-major). */
static inline weft_tensor *keep_int64(const int64_t *sizes, int nd, const int64_t *values)
{
    weft_tensor *t = NULL;
    if (weft_empty(&t, sizes, nd, WEFT_INT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    memcpy(weft_tensor_data_ptr(t), values, (size_t)weft_tensor_numel(t) * sizeof(int64_t));
    return keep(t);
}

/* t's values as float64, contiguous, in a kept tensor; returns its data. */
static inline const double *values_of(const weft_tensor *t)
{
    weft_tensor *d = NULL;
    if (!t || weft_to_dtype(&d, t, WEFT_FLOAT64) != 0)
        return NULL;
    keep(d);
    return weft_tensor_data_ptr(d);
}

#endif
