/* tests/gpu_type.h — which GPU plugin a tests/test_cuda*.c program checks:
 * the CUDA one, or, built with WEFT_TEST_HIP, the HIP one (the same plugin
 * sources through backends/cuda/gpu.h).  One test source then covers both
 * plugins, and each comparison with the CPU backend runs for whichever
 * device the machine has. */
#ifndef WEFT_TESTS_GPU_TYPE_H
#define WEFT_TESTS_GPU_TYPE_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#ifdef WEFT_TEST_HIP
#define TEST_GPU_TYPE WEFT_DEVICE_TYPE_HIP
#define TEST_GPU_NAME "hip"
#else
#define TEST_GPU_TYPE WEFT_DEVICE_TYPE_CUDA
#define TEST_GPU_NAME "cuda"
#endif

/* Whether the plugin registered a kernel of its own for op (rather than
 * leaving it to the CPU fallback): the HIP build registers fewer (gpu.h),
 * and the CUDA one fewer without cuDNN. */
static inline bool test_gpu_has_kernel(const char *name)
{
    const weft_op *op = NULL;
    char *table = NULL;
    if (weft_op_find(&op, name) != 0 || weft_op_dump_table(&table, op) != 0)
        return false;
    const char *row = strstr(table, "Dense[" TEST_GPU_NAME "]");
    const char *eol = row ? strchr(row, '\n') : NULL;
    const char *kernel = row ? strstr(row, "kernel") : NULL;
    bool has = kernel && (!eol || kernel < eol);
    free(table);
    return has;
}

#endif
