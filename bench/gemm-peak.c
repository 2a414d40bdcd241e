/* bench/gemm-peak.c — the machine's float32 GEMM peak, the figure the
 * training rows of bench/train-compare are a share of (issue 20): the best
 * of OpenBLAS's own threaded cblas_sgemm and weft_mm on square products
 * (1024, 2048), with the thread count given, measured in this process.
 * Prints one JSON object: {"threads": T, "openblas_gflops": ..,
 * "weft_gflops": .., "peak_gflops": the larger}.
 *
 *   bench/gemm-peak [THREADS]   (default: every CPU; run through libtool
 *                                --mode=execute with WEFT_PLUGIN_PATH set) */
#include <cblas.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>

extern void openblas_set_num_threads(int num_threads) __attribute__((weak));

typedef int (*dnnl_sgemm_fn)(char, char, int64_t, int64_t, int64_t, float, const float *,
                             int64_t, const float *, int64_t, float, float *, int64_t);
static dnnl_sgemm_fn dnnl_sgemm;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "gemm-peak: %s: %s\n", what, weft_last_error());
    exit(1);
}

/* The best GFLOP/s of rounds of reps products n^3, run by one of the two. */
enum { OPENBLAS, ONEDNN, WEFT };

static double measure(int n, int who, weft_tensor *a, weft_tensor *b, weft_tensor *c)
{
    double flop = 2.0 * n * n * (double)n, best = 0;
    int reps = n >= 2048 ? 2 : 8;
    for (int round = 0; round < 5; round++) {
        double t0 = now();
        for (int r = 0; r < reps; r++) {
            if (who == WEFT) {
                if (weft_mm_out(c, a, b) < 0)
                    die("weft_mm_out");
            } else if (who == ONEDNN) {
                dnnl_sgemm('N', 'N', n, n, n, 1.0f, weft_tensor_data_ptr(a), n,
                           weft_tensor_data_ptr(b), n, 0.0f, weft_tensor_data_ptr(c), n);
            } else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                            weft_tensor_data_ptr(a), n, weft_tensor_data_ptr(b), n, 0.0f,
                            weft_tensor_data_ptr(c), n);
            }
        }
        double rate = flop * reps / (now() - t0) / 1e9;
        if (rate > best)
            best = rate;
    }
    return best;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) {
        fprintf(stderr, "usage: gemm-peak [THREADS]\n");
        return 2;
    }
    if (weft_load_default_plugins() < 0)
        die("loading the plugins");
    weft_set_num_threads(threads);
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    void (*omp_threads)(int) = h ? (void (*)(int))dlsym(h, "omp_set_num_threads") : NULL;
    dnnl_sgemm = h ? (dnnl_sgemm_fn)dlsym(h, "dnnl_sgemm") : NULL;
    if (omp_threads)
        omp_threads(threads);
    double blas = 0, dnnl = 0, mine = 0;
    const int sizes[] = {1024, 2048};
    for (int s = 0; s < 2; s++) {
        int n = sizes[s];
        int64_t shape[2] = {n, n};
        weft_tensor *a = NULL, *b = NULL, *c = NULL;
        if (weft_rand(&a, shape, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL) < 0 ||
            weft_rand(&b, shape, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL) < 0 ||
            weft_empty(&c, shape, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU) < 0)
            die("making the operands");
        /* the CPU plugin runs OpenBLAS on one thread of its own pool's
         * pieces; here OpenBLAS runs its own threads, then back to one */
        if (openblas_set_num_threads)
            openblas_set_num_threads(threads);
        double r = measure(n, OPENBLAS, a, b, c);
        if (openblas_set_num_threads)
            openblas_set_num_threads(1);
        blas = r > blas ? r : blas;
        r = dnnl_sgemm && omp_threads ? measure(n, ONEDNN, a, b, c) : 0;
        dnnl = r > dnnl ? r : dnnl;
        r = measure(n, WEFT, a, b, c);
        mine = r > mine ? r : mine;
        weft_tensor_release(a);
        weft_tensor_release(b);
        weft_tensor_release(c);
    }
    double peak = blas > dnnl ? blas : dnnl;
    peak = mine > peak ? mine : peak;
    printf("{\"threads\": %d, \"openblas_gflops\": %.1f, \"onednn_gflops\": %.1f, "
           "\"weft_gflops\": %.1f, \"peak_gflops\": %.1f}\n",
           threads, blas, dnnl, mine, peak);
    return 0;
}
