/* tests/random_f32.h — reproducible random float32 tensors for the tests
 * of the CPU plugin's library switches (test_gemm_library,
 * test_conv_library): rnd() draws uniformly from [-1, 1) with a 64-bit
 * LCG whose state a test may seed; random_f32() fills a new tensor with
 * it and keeps it (tests/keep.h) for drop_all(). */
#ifndef WEFT_TESTS_RANDOM_F32_H
#define WEFT_TESTS_RANDOM_F32_H

#include <stdint.h>

#include <weft/weft.h>

#include "tests/keep.h"

static uint64_t rnd_seed = 12345;

static inline float rnd(void)
{
    rnd_seed = rnd_seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(rnd_seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static inline weft_tensor *random_f32(const int64_t *sizes, int nd)
{
    weft_tensor *t = NULL;
    if (weft_empty(&t, sizes, nd, WEFT_FLOAT32, WEFT_DEVICE_CPU) != 0)
        return NULL;
    float *p = weft_tensor_data_ptr(t);
    for (int64_t i = 0; i < weft_tensor_numel(t); i++)
        p[i] = rnd();
    return keep(t);
}

#endif
