/* layouts/sparse/kernels.c — the arithmetic of the sparse kernels, written
 * once as macros over the element type and instantiated for float32,
 * float64, int32 and int64 into one table per dtype.  The hot loop (a CSR row times the dense
 * operand) is built twice, for the baseline ISA and for AVX2+FMA, and the
 * loader's ifunc picks the one the machine runs (target_clones): the plugin
 * stays one library that loads on any x86-64 and still fills 256-bit
 * registers where it can. */
#include "sparse.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__((target_clones("default", "arch=haswell")))
#else
#define HOT
#endif

#define DEFINE_KERNELS(T, NAME)                                                                    \
    static void axpy_##NAME(int64_t n, double a, const void *xv, void *yv)                       \
    {                                                                                              \
        const T *restrict x = xv;                                                                  \
        T *restrict y = yv;                                                                        \
        T k = (T)a;                                                                                \
        for (int64_t i = 0; i < n; i++)                                                            \
            y[i] += k * x[i];                                                                      \
    }                                                                                              \
    static void mul_##NAME(int64_t n, const void *bv, void *av)                                  \
    {                                                                                              \
        const T *restrict b = bv;                                                                  \
        T *restrict a = av;                                                                        \
        for (int64_t i = 0; i < n; i++)                                                            \
            a[i] *= b[i];                                                                          \
    }                                                                                              \
    static bool nonzero_##NAME(int64_t n, const void *xv)                                        \
    {                                                                                              \
        const T *x = xv;                                                                           \
        for (int64_t i = 0; i < n; i++)                                                            \
            if (x[i] != 0)                                                                         \
                return true;                                                                       \
        return false;                                                                              \
    }                                                                                              \
    static double dot_##NAME(int64_t n, const void *xv, const void *yv)                          \
    {                                                                                              \
        const T *restrict x = xv, *restrict y = yv;                                                \
        double acc = 0;                                                                            \
        for (int64_t i = 0; i < n; i++)                                                            \
            acc += (double)x[i] * (double)y[i];                                                    \
        return acc;                                                                                \
    }                                                                                              \
    /* one output row: the row stays in L1 while the nonzeros stream the    \
     * dense operand's rows through it; the loop over n vectorises */          \
    HOT static void spmm_##NAME(int64_t r0, int64_t r1, const void *crowv, const void *colv,     \
                                bool idx32, const void *valv, const void *bv, int64_t n,          \
                                void *outv)                                                        \
    {                                                                                              \
        const T *restrict val = valv;                                                              \
        const T *restrict b = bv;                                                                  \
        for (int64_t r = r0; r < r1; r++) {                                                        \
            T *restrict o = (T *)outv + r * n;                                                     \
            for (int64_t j = 0; j < n; j++)                                                        \
                o[j] = 0;                                                                          \
            int64_t k0 = idx32 ? ((const int32_t *)crowv)[r] : ((const int64_t *)crowv)[r];        \
            int64_t k1 = idx32 ? ((const int32_t *)crowv)[r + 1]                                   \
                               : ((const int64_t *)crowv)[r + 1];                                  \
            for (int64_t k = k0; k < k1; k++) {                                                    \
                int64_t c = idx32 ? ((const int32_t *)colv)[k] : ((const int64_t *)colv)[k];       \
                const T *restrict br = b + c * n;                                                  \
                T a = val[k];                                                                      \
                for (int64_t j = 0; j < n; j++)                                                    \
                    o[j] += a * br[j];                                                             \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static const sp__kernels kernels_##NAME = {axpy_##NAME, spmm_##NAME, mul_##NAME, dot_##NAME, nonzero_##NAME};

DEFINE_KERNELS(float, f32)
DEFINE_KERNELS(double, f64)
DEFINE_KERNELS(int32_t, i32)
DEFINE_KERNELS(int64_t, i64)

const sp__kernels *sp__kernels_for(weft_dtype dtype, const char *op)
{
    switch (dtype) {
    case WEFT_FLOAT32:
        return &kernels_f32;
    case WEFT_FLOAT64:
        return &kernels_f64;
    case WEFT_INT32:
        return &kernels_i32;
    case WEFT_INT64:
        return &kernels_i64;
    default:
        weft_set_error(WEFT_EDTYPE,
                       "%s: sparse values must be float32, float64, int32 or int64, got %s", op,
                       weft_dtype_name(dtype));
        return NULL;
    }
}
