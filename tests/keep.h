/* tests/keep.h — tensors a test wants released at the end of a case:
 * keep(t) returns t and remembers it, drop_all() releases everything kept.
 * The list grows as needed, so keep() never drops a tensor still in use. */
#ifndef WEFT_TESTS_KEEP_H
#define WEFT_TESTS_KEEP_H

#include <stdlib.h>

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

#endif
