/* tests/test_cuda.c — the CUDA plugin.  Everywhere: it loads, provides the
 * cuda device type with its device count, and a tensor on a device that does
 * not exist is a clear error.  With a GPU: every kernel against the CPU
 * backend on random inputs and edge shapes (broadcast, strided, empty,
 * in-place, out=), the copies both ways, and the caching allocator's
 * steady state in a loop.  Without one the GPU part says SKIP and why. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

static const weft_device CUDA0 = {.type = WEFT_DEVICE_TYPE_CUDA, .index = 0};

/* A random CPU tensor of the given shape and dtype. */
static weft_tensor *rand_cpu(const int64_t *sizes, int nd, weft_dtype dtype, weft_generator *g)
{
    weft_tensor *t = NULL;
    if (weft_empty(&t, sizes, nd, dtype, WEFT_DEVICE_CPU) != 0 ||
        weft_uniform_ex_(t, -2.0, 2.0, g) != 0)
        return NULL;
    return keep(t);
}

static weft_tensor *to(const weft_tensor *t, weft_device d)
{
    weft_tensor *r = NULL;
    return weft_to_device(&r, t, d) == 0 ? keep(r) : NULL;
}

/* max |a - b| over the elements, a on the GPU, b on the CPU; INFINITY when
 * the shapes differ or a copy fails. */
static double max_diff(const weft_tensor *gpu, const weft_tensor *cpu)
{
    weft_tensor *h = gpu ? to(gpu, WEFT_DEVICE_CPU) : NULL;
    if (!h || weft_tensor_numel(h) != weft_tensor_numel(cpu) ||
        weft_tensor_ndim(h) != weft_tensor_ndim(cpu))
        return INFINITY;
    const double *x = values_of(h), *y = values_of(cpu);
    double m = 0;
    for (int64_t i = 0; i < weft_tensor_numel(h); i++) {
        double d = fabs(x[i] - y[i]);
        if (!(d <= m))
            m = isnan(d) ? INFINITY : d;
    }
    return m;
}

typedef int (*binary_fn)(weft_tensor **, const weft_tensor *, const weft_tensor *);
typedef int (*unary_fn)(weft_tensor **, const weft_tensor *);

static void gpu_kernels(void)
{
    weft_generator *g = NULL;
    weft_generator_create(&g, 7);
    static const struct {
        const char *name;
        binary_fn fn;
    } binaries[] = {{"add", weft_add}, {"sub", weft_sub}, {"mul", weft_mul}, {"div", weft_div}};
    static const struct {
        const char *name;
        unary_fn fn;
    } unaries[] = {{"neg", weft_neg}, {"exp", weft_exp}, {"relu", weft_relu},
                   {"sigmoid", weft_sigmoid}, {"tanh", weft_tanh}};
    /* shapes: same, broadcast row, broadcast scalar, empty, large */
    static const int64_t shapes[][2][2] = {
        {{31, 17}, {31, 17}}, {{64, 33}, {1, 33}}, {{5, 1}, {1, 7}}, {{0, 4}, {1, 4}},
        {{1024, 1031}, {1024, 1031}}};
    for (int dt = 0; dt < 2; dt++) {
        weft_dtype dtype = dt ? WEFT_FLOAT64 : WEFT_FLOAT32;
        double tol = dt ? 1e-12 : 1e-5;
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            weft_tensor *a = rand_cpu(shapes[s][0], 2, dtype, g);
            weft_tensor *b = rand_cpu(shapes[s][1], 2, dtype, g);
            weft_tensor *ga = to(a, CUDA0), *gb = to(b, CUDA0);
            for (size_t k = 0; k < sizeof binaries / sizeof *binaries; k++) {
                weft_tensor *want = NULL, *got = NULL;
                binaries[k].fn(&want, a, b);
                int rc = binaries[k].fn(&got, ga, gb);
                keep(want), keep(got);
                double d = rc == 0 ? max_diff(got, want) : INFINITY;
                ok(d <= tol * 4, "%s %s case %zu matches the CPU (max diff %g)%s%s",
                   binaries[k].name, weft_dtype_name(dtype), s, d, rc ? ": " : "",
                   rc ? weft_last_error() : "");
            }
            for (size_t k = 0; k < sizeof unaries / sizeof *unaries; k++) {
                weft_tensor *want = NULL, *got = NULL;
                unaries[k].fn(&want, a);
                int rc = unaries[k].fn(&got, ga);
                keep(want), keep(got);
                double d = rc == 0 ? max_diff(got, want) : INFINITY;
                ok(d <= tol * 4, "%s %s case %zu matches the CPU (max diff %g)",
                   unaries[k].name, weft_dtype_name(dtype), s, d);
            }
            drop_all();
        }
    }

    /* a transposed (strided) operand, in-place and out= */
    const int64_t sq[2] = {45, 45};
    weft_tensor *a = rand_cpu(sq, 2, WEFT_FLOAT32, g), *b = rand_cpu(sq, 2, WEFT_FLOAT32, g);
    weft_tensor *at = NULL, *gat = NULL, *want = NULL, *got = NULL;
    weft_transpose(&at, a, 0, 1);
    keep(at);
    weft_transpose(&gat, to(a, CUDA0), 0, 1);
    keep(gat);
    weft_add(&want, at, b);
    keep(want);
    weft_add(&got, gat, to(b, CUDA0));
    keep(got);
    ok(max_diff(got, want) < 1e-5, "add with a transposed operand");
    weft_tensor *inplace = to(a, CUDA0);
    ok(weft_mul_(inplace, to(b, CUDA0)) == 0, "mul_ in place");
    weft_tensor *prod = NULL;
    weft_mul(&prod, a, b);
    keep(prod);
    ok(max_diff(inplace, prod) < 1e-5, "mul_ matches the CPU");
    weft_tensor *out = NULL;
    weft_empty(&out, sq, 2, WEFT_FLOAT32, CUDA0);
    keep(out);
    ok(weft_sub_out(out, to(a, CUDA0), to(b, CUDA0)) == 0, "sub_out");
    weft_tensor *diff = NULL;
    weft_sub(&diff, a, b);
    keep(diff);
    ok(max_diff(out, diff) < 1e-5, "sub_out matches the CPU");
    weft_tensor *ints = NULL;
    weft_zeros(&ints, sq, 2, WEFT_INT64, CUDA0);
    ok(ints == NULL || weft_add(&got, to(ints, CUDA0), to(ints, CUDA0)) == WEFT_EDTYPE,
       "an int64 add says the CUDA kernel supports float32 and float64: %s", weft_last_error());
    weft_tensor_release(ints);
    drop_all();

    /* a created stream: kernels and copies run on it, events time it */
    weft_stream *st = NULL;
    weft_event *e0 = NULL, *e1 = NULL;
    ok(weft_stream_create(&st, CUDA0) == 0, "a CUDA stream: %s", weft_last_error());
    ok(weft_set_current_stream(CUDA0, st) == 0, "made current");
    ok(weft_event_create(&e0, CUDA0) == 0 && weft_event_create(&e1, CUDA0) == 0, "two events");
    weft_event_record(e0, NULL);
    weft_tensor *sa = rand_cpu((const int64_t[]){512, 512}, 2, WEFT_FLOAT32, g);
    weft_tensor *sb = rand_cpu((const int64_t[]){512, 512}, 2, WEFT_FLOAT32, g);
    weft_tensor *swant = NULL, *sgot = NULL;
    weft_mul(&swant, sa, sb);
    keep(swant);
    ok(weft_mul(&sgot, to(sa, CUDA0), to(sb, CUDA0)) == 0, "mul on the stream");
    keep(sgot);
    weft_event_record(e1, NULL);
    ok(weft_stream_synchronize(st) == 0 && weft_stream_query(st) == 1, "the stream drains");
    float ms = -1;
    ok(weft_event_elapsed_ms(&ms, e0, e1) == 0 && ms >= 0, "elapsed time %g ms", ms);
    ok(max_diff(sgot, swant) < 1e-5, "the stream's result matches the CPU");
    /* its memory, used on a second stream, waits for that stream */
    ok(weft_record_stream(sgot, NULL) == 0, "record_stream on the default stream");
    weft_set_current_stream(CUDA0, NULL);
    weft_event_destroy(e0);
    weft_event_destroy(e1);
    drop_all();
    weft_stream_destroy(st);

    /* the allocator's steady state: no cudaMalloc after the first step */
    weft_allocator_stats st0 = {.struct_size = sizeof st0}, st1 = {.struct_size = sizeof st1};
    for (int step = 0; step < 20; step++) {
        weft_tensor *x = keep(rand_cpu((const int64_t[]){64, 784}, 2, WEFT_FLOAT32, g));
        weft_tensor *gx = to(x, CUDA0), *y = NULL;
        weft_relu(&y, gx);
        keep(y);
        drop_all();
        if (step == 1)
            weft_device_memory_stats(CUDA0, &st0);
    }
    weft_device_memory_stats(CUDA0, &st1);
    ok(st1.alloc_calls == st0.alloc_calls,
       "a loop calls cudaMalloc only in its first steps (%llu then %llu)",
       (unsigned long long)st0.alloc_calls, (unsigned long long)st1.alloc_calls);
    weft_generator_destroy(g);
}

int main(void)
{
    weft_load_default_plugins();
    int type = weft_device_type_from_name("cuda");
    ok(type == WEFT_DEVICE_TYPE_CUDA, "the cuda device type is known");
    int n = weft_device_count(WEFT_DEVICE_TYPE_CUDA);
    ok(n >= 0, "the CUDA plugin loaded and reports %d devices", n);
    char *report = NULL;
    weft_plugin_report_string(&report);
    const char *row = report ? strstr(report, "name=cuda") : NULL;
    const char *eol = row ? strchr(row, '\n') : NULL, *chosen = row ? strstr(row, "chosen=yes") : NULL;
    ok(chosen && (!eol || chosen < eol), "the load report lists the cuda plugin as loaded");
    free(report);

    /* a device that does not exist: a clear error, nothing allocated */
    weft_tensor *t = (weft_tensor *)1;
    weft_device missing = {.type = WEFT_DEVICE_TYPE_CUDA, .index = (int16_t)n};
    int rc = weft_empty(&t, (const int64_t[]){4}, 1, WEFT_FLOAT32, missing);
    ok(rc < 0 && t == NULL && strstr(weft_last_error(), "cuda"),
       "a tensor on cuda:%d (which does not exist) is refused: %s", n, weft_last_error());

    if (n == 0) {
        skip(1, "no CUDA device here (cudaGetDeviceCount reports none): the kernel "
                "comparisons run only with a GPU");
        return done_testing();
    }
    gpu_kernels();
    return done_testing();
}
