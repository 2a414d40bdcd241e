/* tests/fuzz/fuzz_common.h — what every libFuzzer harness of weft uses: an
 * invariant check that aborts (libFuzzer then saves the input), and a
 * reader that takes little-endian integers from the input front to back,
 * zeros once it runs out. */
#ifndef WEFT_TESTS_FUZZ_COMMON_H
#define WEFT_TESTS_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "invariant failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

typedef struct reader {
    const uint8_t *p;
    size_t left;
} reader;

static inline uint64_t take(reader *r, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        v |= (uint64_t)(r->left ? *r->p : 0) << (8 * i);
        if (r->left)
            r->p++, r->left--;
    }
    return v;
}

#endif
