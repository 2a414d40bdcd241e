/* tests/test_gemm_library.c — the CPU plugin's float32 products through
 * the library WEFT_CPU_GEMM picks (backends/cpu/gemm_lib.c): mm, addmm
 * (linear's path, bias as beta), bmm and conv2d on random shapes with the
 * odd sizes training makes (batch remainders, one row, one column,
 * transposed operands, k of 1), each against a float64 product computed
 * here; that the library asked for is the one that ran (a product's bits
 * equal those of the same call made here straight to that library);
 * that no product starts threads beyond weft's pool (oneDNN's OpenMP runs
 * one thread on each caller); and an unknown WEFT_CPU_GEMM is an error
 * naming the variable.  tests/gemm_libraries.sh runs this once per value. */
#define _GNU_SOURCE
#include <dirent.h>
#include <link.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/dir_entries.h"
#include "tests/keep.h"
#include "tests/random_f32.h"


/* element (i, j) of a 2-D float32 tensor, any strides */
static double at2(const weft_tensor *t, int64_t i, int64_t j)
{
    const float *p = weft_tensor_data_ptr(t);
    return p[i * weft_tensor_stride(t, 0) + j * weft_tensor_stride(t, 1)];
}

typedef int (*dnnl_sgemm_fn)(char, char, int64_t, int64_t, int64_t, float, const float *,
                             int64_t, const float *, int64_t, float, float *, int64_t);

/* Which library computed weft's [n, k] x [k, m] product: "openblas" or
 * "onednn" when its bits equal that library's own answer and not the
 * other's, NULL when both libraries give the same bits (then the product
 * cannot tell).  Each library is called here on blocks of `block` rows, the
 * cut backends/cpu/blas.c makes (a product below its first grain is one
 * piece; a cut changed there shows here as "(neither)"). */
static const char *library_that_ran(int n, int k, int m, int block)
{
    int64_t as[2] = {n, k}, bs[2] = {k, m};
    weft_tensor *a = random_f32(as, 2), *b = random_f32(bs, 2), *out = NULL;
    if (weft_mm(&out, a, b) != 0)
        return "(mm failed)";
    keep(out);
    size_t bytes = (size_t)n * (size_t)m * sizeof(float);
    float *blas = malloc(bytes), *dnnl = malloc(bytes);
    const float *pa = weft_tensor_data_ptr(a), *pb = weft_tensor_data_ptr(b);
    /* OpenBLAS as the CPU plugin mapped it (linking it into this program
     * made the plugin variants' unloading leave glibc records valgrind
     * reports as lost); cblas_sgemm(RowMajor = 101, NoTrans = 111) */
    void *ob = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
    void (*sgemm_blas)(int, int, int, int, int, int, float, const float *, int, const float *,
                       int, float, float *, int) =
        ob ? (void (*)(int, int, int, int, int, int, float, const float *, int, const float *,
                       int, float, float *, int))dlsym(ob, "cblas_sgemm")
           : NULL;
    const char *answer = "(OpenBLAS not found)";
    if (!blas || !dnnl || !sgemm_blas)
        goto out;
    for (int r = 0; r < n; r += block)
        sgemm_blas(101, 111, 111, n - r < block ? n - r : block, m, k, 1.0f, pa + (size_t)r * k,
                   k, pb, m, 0.0f, blas + (size_t)r * m, m);
    const float *mine = weft_tensor_data_ptr(out);
    bool is_blas = memcmp(mine, blas, bytes) == 0;
    if (is_blas && !getenv("WEFT_CPU_GEMM")) {
        answer = "openblas"; /* the default chose it: oneDNN need not be opened */
        goto out;
    }
    /* oneDNN only where it may have run: opening it in a valgrind run
     * (the default, OpenBLAS) made glibc's record of the plugins that hold
     * it unreachable at their unloading (a handle from RTLD_NOLOAD too:
     * the quantized plugin maps it) */
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    dnnl_sgemm_fn sgemm = h ? (dnnl_sgemm_fn)dlsym(h, "dnnl_sgemm") : NULL;
    void (*omp_threads)(int) = h ? (void (*)(int))dlsym(h, "omp_set_num_threads") : NULL;
    if (omp_threads) /* one thread, as the plugin runs it */
        omp_threads(1);
    for (int r = 0; sgemm && r < n; r += block)
        sgemm('N', 'N', n - r < block ? n - r : block, m, k, 1.0f, pa + (size_t)r * k, k, pb, m,
              0.0f, dnnl + (size_t)r * m, m);
    bool is_dnnl = sgemm && memcmp(mine, dnnl, bytes) == 0;
    answer = is_blas && is_dnnl ? NULL : is_blas ? "openblas" : is_dnnl ? "onednn" : "(neither)";
out:
    if (ob)
        dlclose(ob);
    free(blas);
    free(dnnl);
    return answer;
}

/* whether the CPU plugin in use is its AVX-512 build (where auto sends
 * every float32 product to oneDNN) */
static int find_avx512(struct dl_phdr_info *info, size_t size, void *found)
{
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "weft-cpu-avx512"))
        *(bool *)found = true;
    return 0;
}

static bool avx512_plugin(void)
{
    bool found = false;
    dl_iterate_phdr(find_avx512, &found);
    return found;
}

static int thread_count(void)
{
    return dir_entries("/proc/self/task");
}

/* a = [n, k] (or its transpose's view), b = [k, m] likewise; out = a @ b
 * (+ bias over rows when bias) against float64 */
static void check_product(int64_t n, int64_t m, int64_t k, bool ta, bool tb, bool with_bias)
{
    int64_t as[2] = {ta ? k : n, ta ? n : k}, bs[2] = {tb ? m : k, tb ? k : m}, bias_size = m;
    weft_tensor *a0 = random_f32(as, 2), *b0 = random_f32(bs, 2), *a = NULL, *b = NULL;
    weft_tensor *bias = with_bias ? random_f32(&bias_size, 1) : NULL, *out = NULL;
    int rc = ta ? weft_t(&a, a0) : (a = weft_tensor_retain(a0), 0);
    if (rc == 0)
        rc = tb ? weft_t(&b, b0) : (b = weft_tensor_retain(b0), 0);
    keep(a), keep(b);
    if (rc == 0)
        rc = with_bias ? weft_addmm(&out, bias, a, b) : weft_mm(&out, a, b);
    keep(out);
    double worst = 0;
    for (int64_t i = 0; rc == 0 && i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            double want = with_bias ? ((const float *)weft_tensor_data_ptr(bias))[j] : 0;
            for (int64_t q = 0; q < k; q++)
                want += at2(a, i, q) * at2(b, q, j);
            double err = fabs(at2(out, i, j) - want) / (1.0 + sqrt((double)k));
            worst = err > worst ? err : worst;
        }
    if (!ok(rc == 0 && worst < 1e-5, "%s [%lld, %lld]%s x [%lld, %lld]%s: error %.2g", with_bias
            ? "addmm" : "mm", (long long)n, (long long)k, ta ? "^T" : "", (long long)k,
            (long long)m, tb ? "^T" : "", worst))
        diag("%s", weft_last_error());
}

static void test_products(void)
{
    /* the shapes of a training step (a batch of 64 and its remainder of
     * 32, the MLP's 784 -> 256 -> 10) and the edges: one row, one column,
     * k of 1, sizes that are no multiple of any register tile */
    const int64_t shapes[][3] = {{64, 256, 784}, {32, 10, 256}, {256, 784, 64}, {10, 256, 64},
                                 {64, 256, 10},  {1, 300, 17},  {300, 1, 17},   {7, 5, 1},
                                 {1, 1, 1},      {65, 33, 129}, {3, 200, 2}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int form = 0; form < 4; form++)
            check_product(shapes[s][0], shapes[s][1], shapes[s][2], form & 1, form & 2,
                          s % 2 == 0);
    drop_all();
    /* a large product, cut into pieces over the pool */
    check_product(512, 384, 256, false, true, true);
    check_product(384, 512, 200, true, false, false);
    drop_all();
}

static void test_bmm(void)
{
    int64_t as[3] = {3, 17, 9}, bs[3] = {3, 9, 13};
    weft_tensor *a = random_f32(as, 3), *b = random_f32(bs, 3), *out = NULL;
    int rc = weft_bmm(&out, a, b);
    keep(out);
    double worst = 0;
    const float *pa = weft_tensor_data_ptr(a), *pb = weft_tensor_data_ptr(b);
    for (int64_t z = 0; rc == 0 && z < 3; z++)
        for (int64_t i = 0; i < 17; i++)
            for (int64_t j = 0; j < 13; j++) {
                double want = 0;
                for (int64_t q = 0; q < 9; q++)
                    want += (double)pa[(z * 17 + i) * 9 + q] * pb[(z * 9 + q) * 13 + j];
                double got = ((const float *)weft_tensor_data_ptr(out))[(z * 17 + i) * 13 + j];
                worst = fabs(got - want) > worst ? fabs(got - want) : worst;
            }
    ok(rc == 0 && worst < 1e-5, "bmm [3, 17, 9] x [3, 9, 13]: error %.2g", worst);
    drop_all();
}

/* conv2d with bias (its im2col products and the bias rows go through the
 * same library) against a direct loop */
static void test_conv(void)
{
    enum { N = 3, C = 4, H = 9, W = 7, OC = 5, K = 3 };
    int64_t xs[4] = {N, C, H, W}, ws[4] = {OC, C, K, K}, bs = OC;
    weft_tensor *x = random_f32(xs, 4), *w = random_f32(ws, 4), *b = random_f32(&bs, 1), *y = NULL;
    const int64_t stride[2] = {1, 1}, pad[2] = {1, 1}, dil[2] = {1, 1};
    int rc = weft_conv2d(&y, x, w, b, stride, 2, pad, 2, dil, 2, 1);
    keep(y);
    const float *px = weft_tensor_data_ptr(x), *pw = weft_tensor_data_ptr(w);
    const float *pb = weft_tensor_data_ptr(b);
    double worst = 0;
    for (int n = 0; rc == 0 && n < N; n++)
        for (int o = 0; o < OC; o++)
            for (int i = 0; i < H; i++)
                for (int j = 0; j < W; j++) {
                    double want = pb[o];
                    for (int c = 0; c < C; c++)
                        for (int u = 0; u < K; u++)
                            for (int v = 0; v < K; v++) {
                                int yy = i + u - 1, xx = j + v - 1;
                                if (yy >= 0 && yy < H && xx >= 0 && xx < W)
                                    want += (double)px[((n * C + c) * H + yy) * W + xx] *
                                            pw[((o * C + c) * K + u) * K + v];
                            }
                    double got = ((const float *)weft_tensor_data_ptr(y))[((n * OC + o) * H + i) * W + j];
                    worst = fabs(got - want) > worst ? fabs(got - want) : worst;
                }
    if (!ok(rc == 0 && worst < 1e-5, "conv2d [3, 4, 9, 7] 3x3 pad 1 with bias: error %.2g", worst))
        diag("%s", weft_last_error());
    drop_all();
}

int main(void)
{
    if (weft_load_default_plugins() <= 0)
        skip_all("no CPU plugin: %s", weft_last_error());
    const char *choice = getenv("WEFT_CPU_GEMM");
    bool known = !choice || !*choice || strcmp(choice, "auto") == 0 ||
                 strcmp(choice, "openblas") == 0 || strcmp(choice, "onednn") == 0;
    weft_set_num_threads(2);
    if (!known) {
        int64_t s[2] = {4, 4};
        weft_tensor *a = random_f32(s, 2), *out = NULL, *y = NULL;
        int rc = weft_mm(&out, a, a);
        ok(rc == WEFT_EINVAL && strstr(weft_last_error(), "WEFT_CPU_GEMM") &&
               strstr(weft_last_error(), choice),
           "WEFT_CPU_GEMM='%s' is an error naming the variable and the value: %s", choice,
           weft_last_error());
        int64_t xs[4] = {1, 1, 4, 4}, ws[4] = {1, 1, 3, 3};
        const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
        rc = weft_conv2d(&y, random_f32(xs, 4), random_f32(ws, 4), NULL, one, 2, zero, 2, one, 2,
                         1);
        ok(rc == WEFT_EINVAL && strstr(weft_last_error(), "WEFT_CPU_GEMM"),
           "and conv2d fails the same way: %s", weft_last_error());
        weft_tensor *d = NULL;
        int64_t ds[2] = {3, 3};
        weft_empty(&d, ds, 2, WEFT_FLOAT64, WEFT_DEVICE_CPU);
        keep(d);
        weft_fill_(d, 1.0);
        rc = weft_mm(&out, d, d);
        keep(out);
        ok(rc == WEFT_EINVAL, "float64 products too (the setting is refused, not half-applied)");
        drop_all();
        return done_testing();
    }
    int before = thread_count();
    test_products();
    test_bmm();
    test_conv();
    /* the pool has one worker besides this thread at 2 threads; oneDNN's
     * OpenMP must not have added a team of its own */
    int after = thread_count();
    ok(after <= before + 1, "no threads beyond weft's pool: %d before, %d after", before, after);
    /* [16, 200] x [200, 64] is one piece; [1024, 160] x [160, 1024] is
     * four pieces of 256 rows, each 42M multiply-adds: above what auto
     * gives oneDNN outside the AVX-512 build (gemm_lib.c) */
    const char *ran = library_that_ran(16, 200, 64, 16);
    const char *ran_large = library_that_ran(1024, 160, 1024, 256);
    bool forced = choice && (strcmp(choice, "onednn") == 0 || strcmp(choice, "openblas") == 0);
    if (!ran)
        skip(1, "both libraries give this product the same bits: which one ran cannot be told");
    else if (forced)
        ok(strcmp(ran, choice) == 0, "WEFT_CPU_GEMM=%s: the products ran on %s", choice, ran);
    else
        ok(strcmp(ran, "openblas") == 0 || strcmp(ran, "onednn") == 0,
           "WEFT_CPU_GEMM=%s: the products ran on %s", choice ? choice : "(unset)", ran);
    if (!ran_large)
        skip(1, "both libraries give the large product the same bits");
    else if (forced)
        ok(strcmp(ran_large, choice) == 0, "WEFT_CPU_GEMM=%s: a large product ran on %s too",
           choice, ran_large);
    else if (ran && strcmp(ran, "onednn") == 0 && !avx512_plugin())
        ok(strcmp(ran_large, "openblas") == 0, "auto without AVX-512: the small product on "
           "oneDNN, pieces above 2^25 multiply-adds on %s (want openblas)", ran_large);
    else
        ok(strcmp(ran_large, "openblas") == 0 || strcmp(ran_large, "onednn") == 0,
           "auto: the large product ran on %s", ran_large);
    drop_all();
    return done_testing();
}
