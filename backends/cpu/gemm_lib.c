/* backends/cpu/gemm_lib.c — which library multiplies float32 matrices on
 * one thread: OpenBLAS (linked, the default) or oneDNN's sgemm, opened
 * through the plugin's shared handle at the first product that wants it
 * (onednn.c: the plugin does not map oneDNN's 40 MB otherwise).
 *
 * WEFT_CPU_GEMM=openblas|onednn|auto, read once when the plugin starts:
 *  - openblas: always OpenBLAS;
 *  - onednn: oneDNN's sgemm for float32 (float64 stays on OpenBLAS: oneDNN
 *    has no dgemm); a oneDNN that cannot be opened is an error at the
 *    first product, naming the library;
 *  - auto (the default), where libdnnl.so.2 opens: in the AVX-512 build of
 *    the plugin, oneDNN for every float32 product (Debian 12's OpenBLAS
 *    0.3.21 chooses its kernels by CPU model and predates the AVX-512
 *    cores of recent EPYCs, while oneDNN's sgemm is generated at run time
 *    for the instruction set the CPU reports; reasoned, not measured);
 *    elsewhere, oneDNN for the library calls of at most AUTO_ONEDNN_MAX_WORK
 *    multiply-adds and OpenBLAS above.  Measured on the AVX2 machine (one
 *    thread, thread CPU time, docs/benchmarks.md, issue 20's twelfth
 *    session): oneDNN is 9-14% faster on the pieces training runs
 *    ([64, 784] x [784, 128], [256, 64] x [64, 392] where OpenBLAS must
 *    also zero C first; the [64, 10]-sized products 0-38%), as fast at
 *    256^3 and 384^3, and 1.7-2.5x *slower* from 512^3 up (its one-thread
 *    sgemm falls to 30-50 GFLOP/s there, OpenBLAS keeps 75-80).
 *    OpenBLAS where oneDNN does not open (or under valgrind and ASan).
 * Either library runs single-threaded here: large products are cut into
 * pieces over weft's own pool (blas.c), whose workers sleep when idle;
 * oneDNN's OpenMP is told one thread for the duration of each call. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cblas.h>

#include "cpu.h"

/* The largest library call (n * m * k multiply-adds) that auto gives
 * oneDNN outside the AVX-512 build: 2^25, about 322^3, between the 384^3
 * where the two libraries tie and the 512^3 where oneDNN falls behind;
 * every piece of the MLP's and the CNN's products (at most 12.8M) is
 * below it, every piece of a 1024^3 product (268M) above. */
#define AUTO_ONEDNN_MAX_WORK ((double)(1 << 25))

typedef int (*dnnl_sgemm_fn)(char transa, char transb, int64_t m, int64_t n, int64_t k,
                             float alpha, const float *a, int64_t lda, const float *b,
                             int64_t ldb, float beta, float *c, int64_t ldc);

static struct {
    cpu_gemm_library chosen; /* from the environment; AUTO resolved at open */
    char bad_value[64];      /* an unknown WEFT_CPU_GEMM, kept for the message */
    pthread_once_t once;
    dnnl_sgemm_fn sgemm;
    char open_error[320];
    cpu_gemm_library active; /* what float32 products use once resolved */
    bool by_size;            /* oneDNN only up to AUTO_ONEDNN_MAX_WORK (auto) */
} lib = {.once = PTHREAD_ONCE_INIT};

void cpu__gemm_library_init(void)
{
    lib.chosen = (cpu_gemm_library)cpu__library_choice("WEFT_CPU_GEMM", "openblas", "onednn",
                                                       lib.bad_value, sizeof lib.bad_value);
}

static bool wants_onednn(void)
{
    return lib.chosen == CPU_GEMM_ONEDNN ||
           (lib.chosen == CPU_GEMM_AUTO && cpu__onednn_by_default());
}

static void open_onednn(void)
{
    lib.active = CPU_GEMM_OPENBLAS;
    if (lib.bad_value[0] || !wants_onednn())
        return;
    const char *error = NULL;
    if (!cpu__onednn_open(&error)) {
        snprintf(lib.open_error, sizeof lib.open_error, "%s", error);
        return;
    }
    if (!(lib.sgemm = (dnnl_sgemm_fn)cpu__onednn_symbol("dnnl_sgemm"))) {
        snprintf(lib.open_error, sizeof lib.open_error, "oneDNN lacks dnnl_sgemm");
        return;
    }
    lib.active = CPU_GEMM_ONEDNN;
#if !defined(__AVX512F__)
    lib.by_size = lib.chosen == CPU_GEMM_AUTO;
#endif
}

int cpu__gemm_library_ready(const char *op)
{
    if (lib.bad_value[0])
        return weft_set_error(WEFT_EINVAL, "%s: WEFT_CPU_GEMM='%s': expected openblas, onednn "
                              "or auto", op, lib.bad_value);
    pthread_once(&lib.once, open_onednn);
    if (lib.chosen == CPU_GEMM_ONEDNN && lib.active != CPU_GEMM_ONEDNN)
        return weft_set_error(WEFT_ENOTSUP, "%s: WEFT_CPU_GEMM=onednn, but oneDNN cannot be "
                              "used: %s (Debian: apt-get install libdnnl2)", op, lib.open_error);
    return 0;
}

void cpu__gemm_library_fini(void)
{
    /* the plugin's fini joins the pool first: nobody is inside oneDNN;
     * it closes the library itself after this (cpu__onednn_fini) */
    lib.sgemm = NULL;
    lib.active = CPU_GEMM_OPENBLAS;
    lib.by_size = false;
    lib.once = (pthread_once_t)PTHREAD_ONCE_INIT;
}

void cpu__gemm_serial(weft_dtype dtype, bool ta, bool tb, int64_t n, int64_t m, int64_t k,
                      double alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                      double beta, void *c, int64_t ldc)
{
    if (dtype == WEFT_FLOAT32 && lib.active == CPU_GEMM_ONEDNN &&
        (!lib.by_size || (double)n * (double)m * (double)k <= AUTO_ONEDNN_MAX_WORK)) {
        /* one OpenMP thread for this call only (see cpu.h) */
        int before = cpu__onednn_one_thread();
        /* row-major, as cblas's CblasRowMajor; a status other than success
         * is an invalid argument, which the callers' checks rule out */
        lib.sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', n, m, k, (float)alpha, a, lda, b, ldb,
                  (float)beta, c, ldc);
        cpu__onednn_threads_restore(before);
        return;
    }
    enum CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE opb = tb ? CblasTrans : CblasNoTrans;
    if (beta == 0 && n > 0 && m > 0 && k > 0) {
        /* OpenBLAS scales C by beta in a pass of its own before it adds
         * the product (sgemm_beta: 5% of weft-train's MLP epoch); zeroing
         * C with memset and adding to it is the same sum and cheaper:
         * 12% for a [256, 64] x [64, 784] weight gradient, 34% for
         * [64, 10] x [10, 256] (one thread, process CPU time) */
        size_t es = dtype == WEFT_FLOAT32 ? sizeof(float) : sizeof(double);
        if (ldc == m)
            memset(c, 0, (size_t)n * (size_t)m * es);
        else
            for (int64_t i = 0; i < n; i++)
                memset((char *)c + (size_t)i * (size_t)ldc * es, 0, (size_t)m * es);
        beta = 1;
    }
    if (dtype == WEFT_FLOAT32)
        cblas_sgemm(CblasRowMajor, opa, opb, (int)n, (int)m, (int)k, (float)alpha, a, (int)lda, b,
                    (int)ldb, (float)beta, c, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, opa, opb, (int)n, (int)m, (int)k, alpha, a, (int)lda, b,
                    (int)ldb, beta, c, (int)ldc);
}
