/* tests/test_cuda.c — the CUDA plugin.  Everywhere: it loads, provides the
 * cuda device type with its device count, and a tensor on a device that does
 * not exist is a clear error.  With a GPU: every kernel against the CPU
 * backend on random inputs and edge shapes (broadcast, strided, empty,
 * in-place, out=), the copies both ways, and the caching allocator's
 * steady state in a loop.  Without one the GPU part says SKIP and why. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <weft/nn.h>
#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/gpu_type.h"
#include "tests/keep.h"
#include "backends/cuda/plan.h"
#include "backends/cuda/pinned_cache.h"

static const weft_device CUDA0 = {.type = TEST_GPU_TYPE, .index = 0};

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
    int erc = weft_event_elapsed_ms(&ms, e0, e1); /* before ok() reads ms for its message */
    ok(erc == 0 && ms >= 0, "elapsed time %g ms", ms);
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
        /* rand_cpu keeps what it makes: keeping it again released it
         * twice (heap corruption, found by ASan on an H200) */
        weft_tensor *x = rand_cpu((const int64_t[]){64, 784}, 2, WEFT_FLOAT32, g);
        weft_tensor *gx = to(x, CUDA0), *y = NULL;
        weft_relu(&y, gx);
        keep(y);
        drop_all();
        if (step == 1)
            weft_device_memory_stats(CUDA0, &st0);
    }
    weft_device_memory_stats(CUDA0, &st1);
    ok(st1.system_alloc_calls == st0.system_alloc_calls && st1.alloc_calls > st0.alloc_calls,
       "a loop calls cudaMalloc only in its first steps (%llu then %llu, while serving %llu "
       "allocations)", (unsigned long long)st0.system_alloc_calls,
       (unsigned long long)st1.system_alloc_calls,
       (unsigned long long)(st1.alloc_calls - st0.alloc_calls));
    weft_generator_destroy(g);
}


/* ------------------------------------------ host-side planning (any machine) */

/* The offset of output element i in flip's plan, as the kernel walks it. */
static int64_t flip_plan_offset(const wfc_flip *f, int64_t i)
{
    int64_t off = f->offset;
    for (int d = f->ndim - 1; d >= 0; d--) {
        off += (i % f->sizes[d]) * f->strides[d];
        i /= f->sizes[d];
    }
    return off;
}

/* flip's plan against the definition, element by element: source
 * coordinate c_d, or size - 1 - c_d along a flipped dim. */
static void flip_plan_checks(void)
{
    static const int64_t sizes[4] = {3, 1, 4, 5};
    const int64_t contiguous[4] = {20, 20, 5, 1}, transposed[4] = {1, 3, 15, 3 * 4};
    const int64_t *layouts[2] = {contiguous, transposed};
    for (int layout = 0; layout < 2; layout++)
        for (int mask = 0; mask < 16; mask++) {
            bool flipped[4];
            for (int d = 0; d < 4; d++)
                flipped[d] = (mask >> d) & 1;
            wfc_flip f;
            bool good = wfc_plan_flip(&f, sizes, layouts[layout], 4, flipped) == 0;
            for (int64_t i = 0; good && i < 60; i++) {
                int64_t rest = i, want = 0;
                for (int d = 3; d >= 0; d--) {
                    int64_t c = rest % sizes[d];
                    rest /= sizes[d];
                    want += (flipped[d] ? sizes[d] - 1 - c : c) * layouts[layout][d];
                }
                good = flip_plan_offset(&f, i) == want;
            }
            ok(good && f.ndim <= 3, "flip plan: %s [3,1,4,5], dims mask %d, reads every element "
               "where the definition does (%d dims after merging)",
               layout ? "a transposed" : "a contiguous", mask, f.ndim);
        }
    wfc_flip f;
    ok(wfc_plan_flip(&f, sizes, contiguous, 4, (const bool[]){false, false, false, false}) == 0 &&
           f.ndim == 1 && f.sizes[0] == 60 && f.strides[0] == 1 && f.offset == 0,
       "flip plan: nothing flipped in a contiguous tensor is one run of 60");
    ok(wfc_plan_flip(&f, sizes, contiguous, 4, (const bool[]){true, true, true, true}) == 0 &&
           f.ndim == 1 && f.sizes[0] == 60 && f.strides[0] == -1 && f.offset == 59,
       "flip plan: every dim flipped is one run backwards from the last element");
    ok(wfc_plan_flip(&f, (const int64_t[]){3, 0}, (const int64_t[]){1, 1}, 2,
                     (const bool[]){true, true}) == 0 && f.ndim == 1 && f.sizes[0] == 0,
       "flip plan: an empty tensor reads nothing");
    int64_t many[10], steps[10];
    bool every[10];
    for (int d = 0; d < 10; d++)
        many[d] = 2, steps[d] = (int64_t)1 << (2 * (9 - d)), every[d] = d % 2 == 0;
    ok(wfc_plan_flip(&f, many, steps, 10, every) < 0,
       "flip plan: 10 dims that cannot merge are more than the kernel indexes");
}

static void plan_checks(void)
{
    wfc_gemm_operand p;
    ok(wfc_plan_gemm_operand(&p, 3, 4, 4, 1) == 0 && !p.trans && p.ld == 4,
       "gemm plan: a row-major [3,4] goes in untransposed with ld 4");
    ok(wfc_plan_gemm_operand(&p, 4, 3, 1, 4) == 0 && p.trans && p.ld == 4,
       "gemm plan: a transposed view [4,3] (strides 1,4) goes in transposed, no copy");
    ok(wfc_plan_gemm_operand(&p, 3, 4, 10, 1) == 0 && !p.trans && p.ld == 10,
       "gemm plan: padded rows keep their leading dim 10");
    ok(wfc_plan_gemm_operand(&p, 5, 1, 1, 1) == 0 && p.ld >= 1,
       "gemm plan: a column [5,1] fits");
    ok(wfc_plan_gemm_operand(&p, 1, 4, 999, 1) == 0 && !p.trans && p.ld == 4,
       "gemm plan: a single row ignores its row stride");
    ok(wfc_plan_gemm_operand(&p, 3, 4, 0, 1) < 0, "gemm plan: an expanded (stride 0) matrix needs a copy");
    ok(wfc_plan_gemm_operand(&p, 3, 4, 8, 2) < 0, "gemm plan: every-other-column needs a copy");
    ok(wfc_plan_gemm_operand(&p, 4, 3, 1, 2) < 0, "gemm plan: a column stride below the rows needs a copy");

    wfc_geometry g;
    static int64_t st[WFC_MAX_OPERANDS][64];
    const int64_t sz[3] = {4, 5, 6};
    const int64_t dense[3] = {30, 6, 1};
    for (int k = 0; k < 3; k++)
        wfc_broadcast_strides(st[k], sz, dense, 3, sz, 3);
    ok(wfc_plan_geometry(&g, sz, 3, 3, (const int64_t(*)[64])st) == 0 && g.ndim == 1 &&
           g.contiguous && g.sizes[0] == 120,
       "geometry: three dense [4,5,6] operands collapse to one contiguous run of 120");
    const int64_t row_sz[2] = {1, 6}, row_st[2] = {6, 1};
    wfc_broadcast_strides(st[2], row_sz, row_st, 2, sz, 3);
    ok(st[2][0] == 0 && st[2][1] == 0 && st[2][2] == 1, "broadcast strides: a [1,6] row in [4,5,6] "
       "steps 0, 0, 1");
    ok(wfc_plan_geometry(&g, sz, 3, 3, (const int64_t(*)[64])st) == 0 && g.ndim == 2 &&
           !g.contiguous && g.sizes[0] == 20 && g.sizes[1] == 6 && g.strides[2][0] == 0,
       "geometry: a broadcast row leaves two dims [20, 6] (got %d dims)", g.ndim);
    const int64_t tsz[2] = {5, 7}, tst[2] = {1, 5}, csz[2] = {5, 7}, cst[2] = {7, 1};
    wfc_broadcast_strides(st[0], csz, cst, 2, csz, 2);
    wfc_broadcast_strides(st[1], tsz, tst, 2, csz, 2);
    ok(wfc_plan_geometry(&g, csz, 2, 2, (const int64_t(*)[64])st) == 0 && g.ndim == 2 &&
           !g.contiguous && g.strides[1][0] == 1 && g.strides[1][1] == 5,
       "geometry: a transposed operand keeps its strides");
    const int64_t ones[4] = {1, 3, 1, 1}, ones_st[4] = {3, 1, 1, 1};
    wfc_broadcast_strides(st[0], ones, ones_st, 4, ones, 4);
    ok(wfc_plan_geometry(&g, ones, 4, 1, (const int64_t(*)[64])st) == 0 && g.ndim == 1 &&
           g.sizes[0] == 3 && g.contiguous, "geometry: size-1 dims go");
    const int64_t empty[2] = {0, 4}, empty_st[2] = {4, 1};
    wfc_broadcast_strides(st[0], empty, empty_st, 2, empty, 2);
    ok(wfc_plan_geometry(&g, empty, 2, 1, (const int64_t(*)[64])st) == 0 && g.ndim == 1 &&
           g.sizes[0] == 0, "geometry: an empty shape is one empty dim");
    ok(wfc_plan_geometry(&g, NULL, 0, 2, (const int64_t(*)[64])st) == 0 && g.ndim == 0 &&
           g.contiguous, "geometry: a 0-d tensor is one element, contiguous");
    /* 32-bit indexing: a bias [1,64,1,1] broadcast over a [64,64,56,56]
     * output qualifies; 2^31 elements, or an offset of 2^31, do not */
    const int64_t conv_sz[4] = {64, 64, 56, 56}, conv_st[4] = {64 * 56 * 56, 56 * 56, 56, 1};
    const int64_t bias_sz[4] = {1, 64, 1, 1}, bias_st[4] = {64, 1, 1, 1};
    wfc_broadcast_strides(st[0], conv_sz, conv_st, 4, conv_sz, 4);
    wfc_broadcast_strides(st[1], conv_sz, conv_st, 4, conv_sz, 4);
    wfc_broadcast_strides(st[2], bias_sz, bias_st, 4, conv_sz, 4);
    ok(wfc_plan_geometry(&g, conv_sz, 4, 3, (const int64_t(*)[64])st) == 0 && g.ndim == 3 &&
           g.index32 && !g.contiguous,
       "geometry: a bias broadcast over a convolution's output indexes in 32 bits");
    const int64_t big_sz[2] = {(int64_t)1 << 16, (int64_t)1 << 15}, big_st[2] = {1, (int64_t)1 << 16};
    wfc_broadcast_strides(st[0], big_sz, big_st, 2, big_sz, 2);
    ok(wfc_plan_geometry(&g, big_sz, 2, 1, (const int64_t(*)[64])st) == 0 && !g.index32,
       "geometry: 2^31 elements need 64-bit indexing");
    const int64_t few_sz[2] = {3, 2}, far_st[2] = {(int64_t)1 << 30, 1};
    wfc_broadcast_strides(st[0], few_sz, far_st, 2, few_sz, 2);
    ok(wfc_plan_geometry(&g, few_sz, 2, 1, (const int64_t(*)[64])st) == 0 && !g.index32,
       "geometry: an offset of 2^31 needs 64-bit indexing, however few the elements");
    const int64_t near_st[2] = {(int64_t)1 << 29, 1};
    wfc_broadcast_strides(st[0], few_sz, near_st, 2, few_sz, 2);
    ok(wfc_plan_geometry(&g, few_sz, 2, 1, (const int64_t(*)[64])st) == 0 && g.index32,
       "geometry: a largest offset of 2^30 + 1 fits 32 bits");
    /* the divisors as multiplier and shift: exact for every dividend below
     * 2^31, checked on edge values and a pseudo-random sweep */
    {
        static const uint32_t ds[] = {1, 2, 3, 5, 7, 56, 3136, 4096, 65535, 65537, 1000003,
                                      (uint32_t)1 << 30, ((uint32_t)1 << 30) + 1,
                                      ((uint32_t)1 << 31) - 1};
        long wrong = 0, checked = 0;
        uint64_t x = 88172645463325252ull;
        for (size_t k = 0; k < sizeof ds / sizeof *ds; k++) {
            uint32_t mul;
            uint8_t sh;
            wfc_plan_divisor(ds[k], &mul, &sh);
            uint32_t ns[4104] = {0, 1, ds[k] - 1, ds[k], ds[k] + 1, 2 * ds[k] - 1,
                                 ((uint32_t)1 << 31) - 1, ((uint32_t)1 << 31) - 2};
            for (int r = 8; r < 4104; r++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                ns[r] = (uint32_t)(x >> 33); /* below 2^31 */
            }
            for (int r = 0; r < 4104; r++) {
                uint32_t n = ns[r];
                if (n >= (uint32_t)1 << 31)
                    continue;
                uint32_t hi = (uint32_t)(((uint64_t)n * mul) >> 32);
                uint32_t q = (uint32_t)(((uint64_t)hi + n) >> sh);
                wrong += q != n / ds[k];
                checked++;
            }
        }
        ok(wrong == 0, "divisors as multiply and shift: %ld of %ld quotients wrong", wrong, checked);
    }
    /* nine dims that cannot merge: every other element of each */
    int64_t nine[9], nine_st[9];
    for (int d = 8, step = 2; d >= 0; d--, step *= 4)
        nine[d] = 2, nine_st[d] = step;
    wfc_broadcast_strides(st[0], nine, nine_st, 9, nine, 9);
    ok(wfc_plan_geometry(&g, nine, 9, 1, (const int64_t(*)[64])st) < 0,
       "geometry: more than %d dims that cannot merge are refused (the kernel hands them over)",
       WFC_MAX_DIMS);

    ok(wfc_plan_blocks(0, 256, 8192) == 1 && wfc_plan_blocks(1000, 256, 8192) == 4 &&
           wfc_plan_blocks((int64_t)1 << 40, 256, 8192) == 8192,
       "launch: blocks cover n once, capped for the grid-stride loop");

    bool mask[4];
    char err[160];
    ok(wfc_plan_reduce_dims(mask, 4, (const int64_t[]){-1, 1}, 2, err, sizeof err) == 0 &&
           !mask[0] && mask[1] && !mask[2] && mask[3], "reduce dims: -1 wraps to 3");
    ok(wfc_plan_reduce_dims(mask, 3, NULL, 0, err, sizeof err) == 0 && mask[0] && mask[1] && mask[2],
       "reduce dims: none given means all");
    ok(wfc_plan_reduce_dims(mask, 3, (const int64_t[]){1, -2}, 2, err, sizeof err) < 0 &&
           strstr(err, "more than once"), "reduce dims: a repeated dim is refused: %s", err);
    ok(wfc_plan_reduce_dims(mask, 3, (const int64_t[]){3}, 1, err, sizeof err) < 0 &&
           strstr(err, "out of range"), "reduce dims: dim 3 of 3 is refused: %s", err);
    ok(wfc_plan_reduce_dims(mask, 0, (const int64_t[]){-1}, 1, err, sizeof err) == 0,
       "reduce dims: a 0-d tensor accepts -1");
}

/* --------------------- the pinned staging cache over a simulated heap */

/* Simulated events: an event is done once the simulated GPU's clock has
 * passed the tick it was recorded at. */
typedef struct {
    int ticks, allocs, frees, live_events, fail_next_alloc, fail_next_event, syncs;
} fake_gpu;

static int fake_alloc(void *ctx, size_t n, void **out)
{
    fake_gpu *f = ctx;
    if (f->fail_next_alloc) {
        f->fail_next_alloc = 0;
        return WEFT_ENOMEM;
    }
    f->allocs++;
    return (*out = malloc(n)) ? 0 : WEFT_ENOMEM;
}

static void fake_free(void *ctx, void *p)
{
    ((fake_gpu *)ctx)->frees++;
    free(p);
}

static int fake_record(void *ctx, void *stream, void **ev)
{
    (void)stream;
    fake_gpu *f = ctx;
    if (f->fail_next_event) {
        f->fail_next_event = 0;
        return WEFT_EDEVICE;
    }
    int *tick = malloc(sizeof *tick);
    if (!tick)
        return WEFT_ENOMEM;
    *tick = f->ticks;
    f->live_events++;
    *ev = tick;
    return 0;
}

static int fake_query(void *ctx, void *ev)
{
    return ((fake_gpu *)ctx)->ticks > *(int *)ev;
}

static int fake_event_sync(void *ctx, void *ev)
{
    fake_gpu *f = ctx;
    if (f->ticks <= *(int *)ev)
        f->ticks = *(int *)ev + 1;
    f->syncs++;
    return 0;
}

static void fake_event_free(void *ctx, void *ev)
{
    ((fake_gpu *)ctx)->live_events--;
    free(ev);
}

static int fake_stream_sync(void *ctx, void *stream)
{
    (void)stream;
    ((fake_gpu *)ctx)->syncs++;
    return 0;
}

static void pinned_checks(void)
{
    fake_gpu f = {0};
    const wfc_pinned_ops ops = {&f, fake_alloc, fake_free, fake_record, fake_query,
                                fake_event_sync, fake_event_free, fake_stream_sync};
    ok(wfc_pinned_round(1) == 65536 && wfc_pinned_round(65537) == 131072 &&
           wfc_pinned_round((size_t)3 << 20) == (size_t)4 << 20,
       "pinned: sizes round to powers of two from 64 KiB");
    wfc_pinned_cache *c = wfc_pinned_create(&ops, (size_t)1 << 20);
    void *a = NULL, *b = NULL, *d = NULL;
    ok(wfc_pinned_get(c, 1000, &a) == 0 && a && f.allocs == 1, "pinned: a first block is allocated");
    ok(wfc_pinned_put_after(c, a, NULL) == 0, "pinned: given back behind an event");
    ok(wfc_pinned_get(c, 1000, &b) == 0 && b != a && f.allocs == 2,
       "pinned: while its copy runs, the block is not reused (a second is allocated)");
    f.ticks++; /* the first copy completes */
    ok(wfc_pinned_get(c, 2000, &d) == 0 && d == a && f.allocs == 2,
       "pinned: once its event completed, the block is reused without an allocation");
    wfc_pinned_stats st;
    wfc_pinned_get_stats(c, &st);
    ok(st.reuses == 1 && st.alloc_calls == 2 && st.in_flight == 0 && f.live_events == 0,
       "pinned: statistics count 2 allocations, 1 reuse, no event left");
    wfc_pinned_put(c, d);
    f.fail_next_event = 1;
    int syncs = f.syncs;
    ok(wfc_pinned_put_after(c, b, NULL) == WEFT_EDEVICE && f.syncs == syncs + 1,
       "pinned: without an event the stream is waited for, and the error returned");
    wfc_pinned_get_stats(c, &st);
    ok(st.cached_bytes == 2 * 65536, "pinned: both blocks are cached (%llu bytes)",
       (unsigned long long)st.cached_bytes);
    f.fail_next_alloc = 1;
    void *big = (void *)1;
    ok(wfc_pinned_get(c, (size_t)2 << 20, &big) == WEFT_ENOMEM && big == NULL,
       "pinned: a failed allocation leaves *out NULL");
    /* over the limit: a completed block goes back to the system */
    void *huge = NULL;
    ok(wfc_pinned_get(c, (size_t)2 << 20, &huge) == 0 && huge, "pinned: a 2 MiB block");
    wfc_pinned_put_after(c, huge, NULL);
    f.ticks++;
    int frees = f.frees;
    wfc_pinned_get_stats(c, &st);
    ok(f.frees == frees + 1 && st.cached_bytes == 2 * 65536,
       "pinned: a block that would pass the 1 MiB limit is freed when reclaimed");
    wfc_pinned_empty(c);
    wfc_pinned_get_stats(c, &st);
    ok(st.cached_bytes == 0 && f.frees == f.allocs, "pinned: empty frees the cached blocks");
    void *last = NULL;
    wfc_pinned_get(c, 10, &last);
    wfc_pinned_put_after(c, last, NULL);
    wfc_pinned_destroy(c); /* waits for the copy in flight */
    ok(f.frees == f.allocs && f.live_events == 0, "pinned: destroy waits for the block in flight "
       "and frees everything (%d allocations, %d frees)", f.allocs, f.frees);
}

/* ----------------------------------------------- products through cuBLAS */

/* A random CPU tensor in dtype (drawn in float32, so both sides start from
 * the same rounded values). */
static weft_tensor *rand_as(const int64_t *sizes, int nd, weft_dtype dtype, weft_generator *g)
{
    weft_tensor *f = rand_cpu(sizes, nd, WEFT_FLOAT32, g), *r = NULL;
    if (!f || weft_to_dtype(&r, f, dtype) != 0)
        return NULL;
    return keep(r);
}

/* The CPU's answer in float64 from the same (rounded) inputs. */
static weft_tensor *wide(const weft_tensor *t)
{
    weft_tensor *r = NULL;
    return weft_to_dtype(&r, t, WEFT_FLOAT64) == 0 ? keep(r) : NULL;
}

static void gpu_blas(void)
{
    weft_generator *g = NULL;
    weft_generator_create(&g, 11);
    static const weft_dtype dtypes[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT16, WEFT_BFLOAT16};
    /* per-element tolerance relative to sqrt(k): fp32 without TF32 is
     * near-exact; half types keep 11 and 8 bits of their result */
    static const double tols[] = {2e-5, 1e-12, 4e-3, 3e-2};
    /* n, k, m: odd sizes, a vector-like one, an empty product, k = 0 */
    static const int64_t shapes[][3] = {{33, 17, 9}, {1, 64, 1}, {128, 257, 65}, {0, 5, 3}, {4, 0, 6}};
    for (size_t di = 0; di < 4; di++) {
        weft_dtype dt = dtypes[di];
        const char *dn = weft_dtype_name(dt);
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            int64_t n = shapes[s][0], k = shapes[s][1], m = shapes[s][2];
            double tol = tols[di] * sqrt((double)(k > 0 ? k : 1)) * 4;
            weft_tensor *a = rand_as((const int64_t[]){n, k}, 2, dt, g);
            weft_tensor *b = rand_as((const int64_t[]){k, m}, 2, dt, g);
            weft_tensor *bt_src = rand_as((const int64_t[]){m, k}, 2, dt, g);
            weft_tensor *want = NULL, *got = NULL, *bt = NULL, *gbt = NULL;
            weft_mm(&want, wide(a), wide(b));
            keep(want);
            int rc = weft_mm(&got, to(a, CUDA0), to(b, CUDA0));
            keep(got);
            double d = rc == 0 ? max_diff(got, want) : INFINITY;
            ok(d <= tol, "mm %s [%lld,%lld]x[%lld,%lld] matches the CPU (max diff %g)%s%s", dn,
               (long long)n, (long long)k, (long long)k, (long long)m, d, rc ? ": " : "",
               rc ? weft_last_error() : "");
            /* a transposed right operand (as linear's weight.t()): no copy */
            weft_t(&bt, bt_src);
            keep(bt);
            weft_t(&gbt, to(bt_src, CUDA0));
            keep(gbt);
            weft_mm(&want, wide(a), wide(bt));
            keep(want);
            rc = weft_mm(&got, to(a, CUDA0), gbt);
            keep(got);
            d = rc == 0 ? max_diff(got, want) : INFINITY;
            ok(d <= tol, "mm %s with a transposed operand matches the CPU (max diff %g)", dn, d);
            /* addmm: a broadcast bias row, beta and alpha */
            weft_tensor *bias = rand_as((const int64_t[]){m}, 1, dt, g);
            weft_addmm_ex(&want, wide(bias), wide(a), wide(b), 0.5, 2.0);
            keep(want);
            rc = weft_addmm_ex(&got, to(bias, CUDA0), to(a, CUDA0), to(b, CUDA0), 0.5, 2.0);
            keep(got);
            d = rc == 0 ? max_diff(got, want) : INFINITY;
            ok(d <= tol * 2, "addmm %s (beta 0.5, alpha 2) matches the CPU (max diff %g)%s%s", dn,
               d, rc ? ": " : "", rc ? weft_last_error() : "");
            drop_all();
        }
        /* bmm with a transposed batch operand, and linear / matmul */
        weft_tensor *a = rand_as((const int64_t[]){3, 19, 23}, 3, dt, g);
        weft_tensor *b = rand_as((const int64_t[]){3, 23, 7}, 3, dt, g);
        weft_tensor *want = NULL, *got = NULL, *bt = NULL;
        double tol = tols[di] * sqrt(23.0) * 4;
        weft_bmm(&want, wide(a), wide(b));
        keep(want);
        int rc = weft_bmm(&got, to(a, CUDA0), to(b, CUDA0));
        keep(got);
        double d = rc == 0 ? max_diff(got, want) : INFINITY;
        ok(d <= tol, "bmm %s matches the CPU (max diff %g)%s%s", dn, d, rc ? ": " : "",
           rc ? weft_last_error() : "");
        weft_tensor *w = rand_as((const int64_t[]){7, 23}, 2, dt, g);
        weft_tensor *bias = rand_as((const int64_t[]){7}, 1, dt, g);
        weft_linear(&want, wide(a), wide(w), wide(bias));
        keep(want);
        rc = weft_linear(&got, to(a, CUDA0), to(w, CUDA0), to(bias, CUDA0));
        keep(got);
        d = rc == 0 ? max_diff(got, want) : INFINITY;
        ok(d <= tol * 2, "linear %s on a 3-D input matches the CPU (max diff %g)", dn, d);
        weft_transpose(&bt, to(b, CUDA0), 1, 2);
        keep(bt);
        weft_tensor *btc = NULL;
        weft_transpose(&btc, wide(b), 1, 2);
        keep(btc);
        weft_tensor *bt2 = NULL, *btc2 = NULL;
        weft_transpose(&bt2, bt, 1, 2);
        keep(bt2);
        weft_transpose(&btc2, btc, 1, 2);
        keep(btc2);
        weft_matmul(&want, wide(a), btc2);
        keep(want);
        rc = weft_matmul(&got, to(a, CUDA0), bt2);
        keep(got);
        d = rc == 0 ? max_diff(got, want) : INFINITY;
        ok(d <= tol, "matmul %s with a twice-transposed batch operand matches (max diff %g)", dn, d);
        drop_all();
    }
    /* errors before any launch, nothing allocated for the caller */
    weft_tensor *a = to(rand_cpu((const int64_t[]){3, 4}, 2, WEFT_FLOAT32, g), CUDA0);
    weft_tensor *b = to(rand_cpu((const int64_t[]){5, 6}, 2, WEFT_FLOAT32, g), CUDA0);
    weft_tensor *bad = (weft_tensor *)1;
    ok(weft_mm(&bad, a, b) == WEFT_ESHAPE && bad == NULL && strstr(weft_last_error(), "3x4 and 5x6"),
       "mm of [3,4] and [5,6] says which shapes: %s", weft_last_error());
    weft_tensor *h = to(rand_cpu((const int64_t[]){4, 2}, 2, WEFT_FLOAT64, g), CUDA0);
    bad = (weft_tensor *)1;
    ok(weft_mm(&bad, a, h) == WEFT_EDTYPE && bad == NULL, "mm of float32 and float64 is refused: %s",
       weft_last_error());
    drop_all();
    weft_generator_destroy(g);
}

/* -------------------------------- the elementwise engine beyond float32/64 */

static void gpu_elementwise_dtypes(void)
{
    weft_generator *g = NULL;
    weft_generator_create(&g, 5);
    static const weft_dtype dtypes[] = {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_INT32, WEFT_INT64};
    const int64_t sa[3] = {7, 1, 130}, sb[2] = {9, 130};
    for (size_t di = 0; di < 4; di++) {
        weft_dtype dt = dtypes[di];
        weft_tensor *fa = rand_cpu(sa, 3, WEFT_FLOAT32, g), *fb = rand_cpu(sb, 2, WEFT_FLOAT32, g);
        weft_tensor *a = NULL, *b = NULL;
        weft_mul_scalar(&a, fa, 10.0);
        keep(a);
        weft_mul_scalar(&b, fb, 10.0);
        keep(b);
        weft_tensor *ca = NULL, *cb = NULL;
        weft_to_dtype(&ca, a, dt);
        keep(ca);
        weft_to_dtype(&cb, b, dt);
        keep(cb);
        double tol = dt == WEFT_FLOAT16 ? 0.05 : dt == WEFT_BFLOAT16 ? 0.4 : 0;
        binary_fn fns[] = {weft_add, weft_sub, weft_mul, weft_maximum, weft_lt, weft_eq};
        const char *names[] = {"add", "sub", "mul", "maximum", "lt", "eq"};
        for (int k = 0; k < 6; k++) {
            weft_tensor *want = NULL, *got = NULL;
            fns[k](&want, ca, cb);
            keep(want);
            int rc = fns[k](&got, to(ca, CUDA0), to(cb, CUDA0));
            keep(got);
            double d = rc == 0 ? max_diff(got, want) : INFINITY;
            ok(d <= tol && got && weft_tensor_dtype(got) == weft_tensor_dtype(want),
               "%s %s broadcast [7,1,130] with [9,130] matches the CPU (max diff %g)", names[k],
               weft_dtype_name(dt), d);
        }
        unary_fn un[] = {weft_neg, weft_abs, weft_relu};
        for (int k = 0; k < 3; k++) {
            weft_tensor *want = NULL, *got = NULL;
            un[k](&want, ca);
            keep(want);
            int rc = un[k](&got, to(ca, CUDA0));
            keep(got);
            ok(rc == 0 && max_diff(got, want) <= tol, "unary %d on %s matches the CPU", k,
               weft_dtype_name(dt));
        }
        /* a converting copy on the device, and back */
        weft_tensor *conv = NULL, *want = NULL;
        ok(weft_to_dtype(&conv, to(a, CUDA0), dt) == 0, "to_dtype %s on the device",
           weft_dtype_name(dt));
        keep(conv);
        weft_to_dtype(&want, a, dt);
        keep(want);
        ok(max_diff(conv, want) == 0, "the device's conversion to %s equals the CPU's",
           weft_dtype_name(dt));
        drop_all();
    }
    /* the rest of the unary set, float32 and float64, positive inputs for
     * the functions of a positive argument */
    static const struct {
        const char *name;
        unary_fn fn;
        bool positive;
    } more[] = {{"rsqrt", weft_rsqrt, true}, {"reciprocal", weft_reciprocal, false},
                {"sin", weft_sin, false}, {"cos", weft_cos, false}, {"log1p", weft_log1p, true},
                {"expm1", weft_expm1, false}, {"erf", weft_erf, false}, {"silu", weft_silu, false},
                {"sign", weft_sign, false}, {"floor", weft_floor, false}, {"ceil", weft_ceil, false},
                {"round", weft_round, false}, {"log", weft_log, true}, {"sqrt", weft_sqrt, true},
                {"abs", weft_abs, false}};
    for (int dt = 0; dt < 2; dt++) {
        weft_dtype dtype = dt ? WEFT_FLOAT64 : WEFT_FLOAT32;
        double tol = dt ? 1e-12 : 2e-6;
        weft_tensor *x = rand_cpu((const int64_t[]){17, 33}, 2, dtype, g), *px = NULL;
        weft_abs(&px, x);
        keep(px);
        weft_add_scalar_(px, 0.1);
        for (size_t k = 0; k < sizeof more / sizeof *more; k++) {
            weft_tensor *in = more[k].positive ? px : x, *want = NULL, *got = NULL;
            more[k].fn(&want, in);
            keep(want);
            int rc = more[k].fn(&got, to(in, CUDA0));
            keep(got);
            double d = rc == 0 ? max_diff(got, want) : INFINITY;
            ok(d <= tol * 4, "%s %s matches the CPU (max diff %g)", more[k].name,
               weft_dtype_name(dtype), d);
        }
        weft_tensor *want = NULL, *got = NULL, *y = rand_cpu((const int64_t[]){33}, 1, dtype, g);
        weft_leaky_relu(&want, x, 0.2);
        keep(want);
        ok(weft_leaky_relu(&got, to(x, CUDA0), 0.2) == 0 && max_diff(keep(got), want) <= tol,
           "leaky_relu %s", weft_dtype_name(dtype));
        for (int approx = 0; approx < 2; approx++) {
            weft_gelu_ex(&want, x, approx ? "tanh" : "none");
            keep(want);
            ok(weft_gelu_ex(&got, to(x, CUDA0), approx ? "tanh" : "none") == 0 &&
                   max_diff(keep(got), want) <= tol * 4,
               "gelu (%s) %s", approx ? "tanh" : "none", weft_dtype_name(dtype));
        }
        weft_pow_scalar(&want, px, 2.5);
        keep(want);
        ok(weft_pow_scalar(&got, to(px, CUDA0), 2.5) == 0 && max_diff(keep(got), want) <= tol * 10,
           "pow_scalar 2.5 %s", weft_dtype_name(dtype));
        weft_hardtanh(&want, x, -0.5, 0.25);
        keep(want);
        ok(weft_hardtanh(&got, to(x, CUDA0), -0.5, 0.25) == 0 && max_diff(keep(got), want) == 0,
           "hardtanh %s", weft_dtype_name(dtype));
        weft_lerp_scalar(&want, x, y, 0.3);
        keep(want);
        ok(weft_lerp_scalar(&got, to(x, CUDA0), to(y, CUDA0), 0.3) == 0 &&
               max_diff(keep(got), want) <= tol, "lerp_scalar with a broadcast end %s",
           weft_dtype_name(dtype));
        drop_all();
    }
    weft_tensor *bad = (weft_tensor *)1;
    ok(weft_gelu_ex(&bad, to(rand_cpu((const int64_t[]){3}, 1, WEFT_FLOAT32, g), CUDA0), "fast") < 0 &&
           bad == NULL, "gelu with approximate='fast' is refused: %s", weft_last_error());
    drop_all();

    /* mixed dtypes promote; exp of an int64 goes to float on the fallback;
     * where and clamp */
    weft_tensor *x = rand_cpu((const int64_t[]){33, 65}, 2, WEFT_FLOAT32, g);
    weft_tensor *y = rand_cpu((const int64_t[]){65}, 1, WEFT_FLOAT64, g);
    weft_tensor *want = NULL, *got = NULL, *cond = NULL, *gcond = NULL;
    weft_add(&want, x, y);
    keep(want);
    ok(weft_add(&got, to(x, CUDA0), to(y, CUDA0)) == 0 && weft_tensor_dtype(keep(got)) == WEFT_FLOAT64 &&
           max_diff(got, want) < 1e-6, "float32 + float64 promotes to float64 on the device");
    weft_gt(&cond, x, to(y, WEFT_DEVICE_CPU));
    keep(cond);
    weft_where(&want, cond, x, y);
    keep(want);
    weft_gt(&gcond, to(x, CUDA0), to(y, CUDA0));
    keep(gcond);
    ok(weft_where(&got, gcond, to(x, CUDA0), to(y, CUDA0)) == 0 && max_diff(keep(got), want) < 1e-6,
       "where with a broadcast operand matches the CPU");
    double lo = -0.5, hi = 0.7;
    weft_clamp(&want, x, &lo, &hi);
    keep(want);
    ok(weft_clamp(&got, to(x, CUDA0), &lo, &hi) == 0 && max_diff(keep(got), want) == 0,
       "clamp matches the CPU");
    weft_clamp(&want, x, NULL, &hi);
    keep(want);
    ok(weft_clamp(&got, to(x, CUDA0), NULL, &hi) == 0 && max_diff(keep(got), want) == 0,
       "clamp with only a max matches the CPU");
    /* in-place with an overlapping operand: x += x^T on a square */
    weft_tensor *sq = rand_cpu((const int64_t[]){37, 37}, 2, WEFT_FLOAT32, g), *sqt = NULL;
    weft_tensor *gsq = to(sq, CUDA0), *gsqt = NULL;
    weft_t(&sqt, sq);
    keep(sqt);
    weft_add(&want, sq, sqt);
    keep(want);
    weft_t(&gsqt, gsq);
    keep(gsqt);
    ok(weft_add_(gsq, gsqt) == 0 && max_diff(gsq, want) < 1e-6,
       "add_ of a tensor and its own transpose reads the old values");
    /* a strided destination for copy_ and a transposed source */
    weft_tensor *dst = to(rand_cpu((const int64_t[]){37, 37}, 2, WEFT_FLOAT64, g), CUDA0), *dstt = NULL;
    weft_t(&dstt, dst);
    keep(dstt);
    ok(weft_copy_(dstt, to(sq, CUDA0)) == 0, "copy_ into a transposed float64 view from float32");
    weft_tensor *back = to(dst, WEFT_DEVICE_CPU), *sq64 = NULL;
    weft_to_dtype(&sq64, sqt, WEFT_FLOAT64);
    keep(sq64);
    ok(max_diff(back, sq64) == 0, "the transposed converting copy lands element for element");
    /* host -> strided device view, and a 0-d tensor */
    weft_tensor *host = rand_cpu((const int64_t[]){37, 37}, 2, WEFT_FLOAT32, g), *ht = NULL;
    weft_t(&ht, host);
    keep(ht);
    ok(weft_copy_(dstt, host) == 0 && max_diff(dst, ht) < 1e-6,
       "copy_ from the host into a transposed device view converts and strides");
    weft_tensor *zero_d = NULL;
    weft_full(&zero_d, NULL, 0, 2.5, WEFT_FLOAT32, CUDA0);
    keep(zero_d);
    weft_mul(&got, to(x, CUDA0), zero_d);
    keep(got);
    weft_mul_scalar(&want, x, 2.5);
    keep(want);
    ok(max_diff(got, want) < 1e-6, "a 0-d device operand broadcasts");
    drop_all();
    weft_generator_destroy(g);
}


/* ------------------------------------------------------------ training */

/* The models of tools/weft-train, initialised from a seeded generator so
 * the CPU and GPU copies start equal. */
static weft_module *train_model(bool cnn, uint64_t seed)
{
    static const int64_t k3[2] = {3, 3}, pad1[2] = {1, 1}, two[2] = {2, 2};
    weft_generator *g = NULL;
    weft_generator_create(&g, seed);
    weft_module *seq = NULL, *m = NULL;
    int rc = weft_module_sequential(&seq);
#define ADD(call) (rc = rc == 0 && (call) == 0 ? weft_module_sequential_append(seq, m) : -1)
    if (cnn) {
        ADD(weft_module_conv2d(&m, 1, 16, k3, NULL, pad1, NULL, 1, true, g));
        ADD(weft_module_activation(&m, WEFT_ACTIVATION_RELU));
        ADD(weft_module_max_pool2d(&m, two, NULL, NULL));
        ADD(weft_module_conv2d(&m, 16, 32, k3, NULL, pad1, NULL, 1, true, g));
        ADD(weft_module_activation(&m, WEFT_ACTIVATION_RELU));
        ADD(weft_module_max_pool2d(&m, two, NULL, NULL));
        ADD(weft_module_flatten(&m, 1, -1));
        ADD(weft_module_linear(&m, 32 * 7 * 7, 10, true, g));
    } else {
        ADD(weft_module_linear(&m, 784, 256, true, g));
        ADD(weft_module_activation(&m, WEFT_ACTIVATION_RELU));
        ADD(weft_module_linear(&m, 256, 10, true, g));
    }
#undef ADD
    weft_generator_destroy(g);
    if (rc < 0) {
        weft_module_destroy(seq);
        return NULL;
    }
    return seq;
}

/* One SGD step on (x, y); the loss as a double, NAN on error. */
static double train_step(weft_module *model, weft_optimizer *opt, weft_tensor *x, weft_tensor *y)
{
    weft_tensor *logits = NULL, *loss = NULL, *host = NULL;
    int rc = weft_module_forward(model, x, &logits);
    if (rc == 0)
        rc = weft_cross_entropy(&loss, logits, y, NULL, "mean", -100, 0.0);
    if (rc == 0)
        rc = weft_backward(&loss, 1, NULL, false, false);
    if (rc == 0)
        rc = weft_optimizer_step(opt);
    if (rc == 0)
        rc = weft_optimizer_zero_grad(opt);
    if (rc == 0)
        rc = weft_to_device(&host, loss, WEFT_DEVICE_CPU);
    double v = rc == 0 ? *values_of(host) : NAN;
    if (rc < 0)
        diag("training step: %s", weft_last_error());
    weft_tensor_release(logits);
    weft_tensor_release(loss);
    weft_tensor_release(host);
    return v;
}

static weft_optimizer *sgd_of(weft_module *m)
{
    weft_tensor *params[16];
    int n = weft_module_parameters(m, params, NULL, 16);
    weft_optimizer *opt = NULL;
    return n > 0 && weft_optimizer_sgd(&opt, params, n, 0.05, 0.9, 0, 0, false) == 0 ? opt : NULL;
}

static void gpu_training(void)
{
    weft_generator *g = NULL;
    weft_generator_create(&g, 99);
    for (int cnn = 0; cnn < 2; cnn++) {
        const char *name = cnn ? "CNN" : "MLP";
        weft_module *cpu = train_model(cnn, 5), *gpu = train_model(cnn, 5);
        ok(cpu && gpu && weft_module_to_device(gpu, CUDA0) == 0, "%s: two equal models, one moved "
           "to cuda:0", name);
        weft_optimizer *ocpu = cpu ? sgd_of(cpu) : NULL, *ogpu = gpu ? sgd_of(gpu) : NULL;
        const int64_t xs[4] = {32, 1, 28, 28}, flat[2] = {32, 784};
        weft_tensor *x = rand_cpu(cnn ? xs : flat, cnn ? 4 : 2, WEFT_FLOAT32, g), *y = NULL;
        weft_randint(&y, 0, 10, (const int64_t[]){32}, 1, WEFT_INT64, WEFT_DEVICE_CPU, g);
        keep(y);
        weft_tensor *gx = to(x, CUDA0), *gy = to(y, CUDA0);
        weft_allocator_stats s3 = {.struct_size = sizeof s3}, s_end = {.struct_size = sizeof s_end};
        double first = NAN, last = NAN, worst = 0;
        for (int step = 0; ocpu && ogpu && step < 30; step++) {
            double lc = train_step(cpu, ocpu, x, y), lg = train_step(gpu, ogpu, gx, gy);
            if (step == 0)
                first = lg;
            last = lg;
            double d = fabs(lc - lg) / (1 + fabs(lc));
            if (!(d <= worst))
                worst = isnan(d) ? INFINITY : d;
            if (step == 3)
                weft_device_memory_stats(CUDA0, &s3);
        }
        weft_device_memory_stats(CUDA0, &s_end);
        ok(worst < 1e-3, "%s: 30 SGD steps on the GPU follow the CPU's losses (worst relative "
           "difference %g)", name, worst);
        ok(last < first * 0.5, "%s: the loss on the fixed batch falls (%g -> %g)", name, first, last);
        ok(s_end.system_alloc_calls == s3.system_alloc_calls,
           "%s: no cudaMalloc after the first steps (%llu at step 3, %llu after step 30)", name,
           (unsigned long long)s3.system_alloc_calls, (unsigned long long)s_end.system_alloc_calls);
        weft_optimizer_destroy(ocpu);
        weft_optimizer_destroy(ogpu);
        weft_module_destroy(cpu);
        weft_module_destroy(gpu);
        drop_all();
    }
    diag("CPU fallback calls so far: %llu", (unsigned long long)weft_cpu_fallback_calls());
    weft_generator_destroy(g);
}

/* ------------------------------------------------------------------------
 * The operators that went through the CPU fallback until issue 6's last
 * round (shape.c, and the new elementwise entries): each against the CPU
 * backend on the same inputs, then a check that none of them fell back. */

/* gpu's values against cpu's: same dtype and shape, the result on the GPU,
 * |x - y| / (1 + |y|) within tol everywhere, NaN meeting NaN. */
static bool matches(const weft_tensor *gpu, const weft_tensor *cpu, double tol, double *worst)
{
    *worst = INFINITY;
    if (!gpu || !cpu || weft_tensor_dtype(gpu) != weft_tensor_dtype(cpu) ||
        weft_tensor_device(gpu).type != TEST_GPU_TYPE ||
        weft_tensor_ndim(gpu) != weft_tensor_ndim(cpu))
        return false;
    for (int d = 0; d < weft_tensor_ndim(cpu); d++)
        if (weft_tensor_size(gpu, d) != weft_tensor_size(cpu, d))
            return false;
    const weft_tensor *h = to(gpu, WEFT_DEVICE_CPU);
    const double *x = h ? values_of(h) : NULL, *y = values_of(cpu);
    if (!x || !y)
        return false;
    double m = 0;
    for (int64_t i = 0; i < weft_tensor_numel(cpu); i++) {
        if (isnan(x[i]) && isnan(y[i]))
            continue;
        double e = fabs(x[i] - y[i]) / (1 + fabs(y[i]));
        if (!(e <= m))
            m = isnan(e) ? INFINITY : e;
    }
    *worst = m;
    return m <= tol;
}

/* Runs fn on the CPU inputs and on their GPU copies and compares. */
#define SAME_AS_CPU(tol, what, call_cpu, call_gpu)                                             \
    do {                                                                                       \
        weft_tensor *want_ = NULL, *got_ = NULL;                                               \
        int rc_cpu_ = (call_cpu), rc_gpu_ = (call_gpu);                                        \
        keep(want_);                                                                           \
        keep(got_);                                                                            \
        double worst_ = INFINITY;                                                              \
        bool good_ = rc_cpu_ == 0 && rc_gpu_ == 0 && matches(got_, want_, tol, &worst_);       \
        ok(good_, "%s matches the CPU (worst %g)", what, worst_);                              \
        if (!good_)                                                                            \
            diag("cpu rc %d, gpu rc %d: %s", rc_cpu_, rc_gpu_, weft_last_error());             \
    } while (0)

static weft_tensor *as_dtype_cpu(const weft_tensor *t, weft_dtype dtype)
{
    weft_tensor *r = NULL;
    return weft_to_dtype(&r, t, dtype) == 0 ? keep(r) : NULL;
}

/* t rounded to whole numbers (many zeros among uniform(-2, 2)), as dtype */
static weft_tensor *whole(const weft_tensor *t, weft_dtype dtype)
{
    weft_tensor *r = NULL;
    return weft_round(&r, t) == 0 ? as_dtype_cpu(keep(r), dtype) : NULL;
}

static weft_tensor *transposed(const weft_tensor *t, int d0, int d1)
{
    weft_tensor *r = NULL;
    return weft_transpose(&r, t, d0, d1) == 0 ? keep(r) : NULL;
}

static weft_tensor *affine(const weft_tensor *t, double mul, double add)
{
    weft_tensor *m = NULL, *r = NULL;
    if (weft_mul_scalar(&m, t, mul) != 0)
        return NULL;
    keep(m);
    return weft_add_scalar(&r, m, add) == 0 ? keep(r) : NULL;
}

static void gpu_former_fallback_shape(weft_generator *g)
{
    weft_tensor *a = rand_cpu((const int64_t[]){4, 5, 6}, 3, WEFT_FLOAT32, g);
    weft_tensor *b = as_dtype_cpu(rand_cpu((const int64_t[]){4, 3, 6}, 3, WEFT_FLOAT32, g), WEFT_FLOAT64);
    weft_tensor *e = rand_cpu((const int64_t[]){4, 0, 6}, 3, WEFT_FLOAT32, g);
    weft_tensor *skip1 = rand_cpu((const int64_t[]){0}, 1, WEFT_FLOAT32, g);
    weft_tensor *at = transposed(a, 0, 2); /* [6, 5, 4], strided */
    weft_tensor *ga = to(a, CUDA0), *gb = to(b, CUDA0), *ge = to(e, CUDA0), *gs = to(skip1, CUDA0);
    weft_tensor *gat = transposed(ga, 0, 2);

    /* cat: promotion, an empty part, the legacy skipped [0], negative dim */
    weft_tensor *cl[4] = {a, b, e, skip1}, *gl[4] = {ga, gb, ge, gs};
    SAME_AS_CPU(0, "cat of float32 [4,5,6], float64 [4,3,6], [4,0,6] and [0] along dim 1",
                weft_cat(&want_, cl, 4, 1), weft_cat(&got_, gl, 4, 1));
    SAME_AS_CPU(0, "cat along dim -1 of a tensor and itself",
                weft_cat(&want_, (weft_tensor *[]){a, a}, 2, -1),
                weft_cat(&got_, (weft_tensor *[]){ga, ga}, 2, -1));
    SAME_AS_CPU(0, "cat of transposed views along dim 0",
                weft_cat(&want_, (weft_tensor *[]){at, at}, 2, 0),
                weft_cat(&got_, (weft_tensor *[]){gat, gat}, 2, 0));
    SAME_AS_CPU(0, "cat of nothing but skipped [0] tensors",
                weft_cat(&want_, (weft_tensor *[]){skip1, skip1}, 2, 0),
                weft_cat(&got_, (weft_tensor *[]){gs, gs}, 2, 0));
    /* stack at every position, and of 0-d tensors */
    for (int64_t dim = -4; dim <= 3; dim += 2) {
        char what[64];
        snprintf(what, sizeof what, "stack of three [4,5,6] at dim %lld", (long long)dim);
        SAME_AS_CPU(0, what, weft_stack(&want_, (weft_tensor *[]){a, a, a}, 3, dim),
                    weft_stack(&got_, (weft_tensor *[]){ga, ga, ga}, 3, dim));
    }
    weft_tensor *s0 = rand_cpu(NULL, 0, WEFT_FLOAT32, g), *gs0 = to(s0, CUDA0);
    SAME_AS_CPU(0, "stack of two 0-d tensors",
                weft_stack(&want_, (weft_tensor *[]){s0, s0}, 2, 0),
                weft_stack(&got_, (weft_tensor *[]){gs0, gs0}, 2, 0));

    /* flip, any dims, strided, other dtypes */
    weft_tensor *i64 = whole(affine(a, 1000, 0), WEFT_INT64), *gi64 = to(i64, CUDA0);
    weft_tensor *f16 = as_dtype_cpu(a, WEFT_FLOAT16), *gf16 = to(f16, CUDA0);
    SAME_AS_CPU(0, "flip dims {0, 2} of [4,5,6]", weft_flip(&want_, a, (const int64_t[]){0, 2}, 2),
                weft_flip(&got_, ga, (const int64_t[]){0, 2}, 2));
    SAME_AS_CPU(0, "flip dim -1 of a transposed view", weft_flip(&want_, at, (const int64_t[]){-1}, 1),
                weft_flip(&got_, gat, (const int64_t[]){-1}, 1));
    SAME_AS_CPU(0, "flip of no dims", weft_flip(&want_, a, NULL, 0), weft_flip(&got_, ga, NULL, 0));
    SAME_AS_CPU(0, "flip of int64, every dim", weft_flip(&want_, i64, (const int64_t[]){0, 1, 2}, 3),
                weft_flip(&got_, gi64, (const int64_t[]){0, 1, 2}, 3));
    SAME_AS_CPU(0, "flip of float16 dim 1", weft_flip(&want_, f16, (const int64_t[]){1}, 1),
                weft_flip(&got_, gf16, (const int64_t[]){1}, 1));
    SAME_AS_CPU(0, "flip of an empty tensor", weft_flip(&want_, e, (const int64_t[]){1}, 1),
                weft_flip(&got_, ge, (const int64_t[]){1}, 1));

    /* roll */
    SAME_AS_CPU(0, "roll by 2 along dim 1", weft_roll(&want_, a, (const int64_t[]){2}, 1, (const int64_t[]){1}, 1),
                weft_roll(&got_, ga, (const int64_t[]){2}, 1, (const int64_t[]){1}, 1));
    SAME_AS_CPU(0, "roll by (-3, 7) along dims (0, -1) of a transposed view",
                weft_roll(&want_, at, (const int64_t[]){-3, 7}, 2, (const int64_t[]){0, -1}, 2),
                weft_roll(&got_, gat, (const int64_t[]){-3, 7}, 2, (const int64_t[]){0, -1}, 2));
    SAME_AS_CPU(0, "roll of the flattened tensor by 5", weft_roll(&want_, at, (const int64_t[]){5}, 1, NULL, 0),
                weft_roll(&got_, gat, (const int64_t[]){5}, 1, NULL, 0));

    /* repeat */
    SAME_AS_CPU(0, "repeat (2, 1, 3, 1) of [4,5,6]", weft_repeat(&want_, a, (const int64_t[]){2, 1, 3, 1}, 4),
                weft_repeat(&got_, ga, (const int64_t[]){2, 1, 3, 1}, 4));
    SAME_AS_CPU(0, "repeat (1, 2, 0) (an empty result)", weft_repeat(&want_, a, (const int64_t[]){1, 2, 0}, 3),
                weft_repeat(&got_, ga, (const int64_t[]){1, 2, 0}, 3));
    SAME_AS_CPU(0, "repeat of a transposed int64 view",
                weft_repeat(&want_, transposed(i64, 0, 1), (const int64_t[]){2, 2, 1}, 3),
                weft_repeat(&got_, transposed(gi64, 0, 1), (const int64_t[]){2, 2, 1}, 3));

    /* pad, constant mode */
    double v = 1.5;
    SAME_AS_CPU(0, "pad (1, 2) with 1.5", weft_pad(&want_, a, (const int64_t[]){1, 2}, 2, "constant", &v),
                weft_pad(&got_, ga, (const int64_t[]){1, 2}, 2, "constant", &v));
    SAME_AS_CPU(0, "pad (1, -1, 2, 0, 0, 3), crop and grow, of a transposed view",
                weft_pad(&want_, at, (const int64_t[]){1, -1, 2, 0, 0, 3}, 6, "constant", NULL),
                weft_pad(&got_, gat, (const int64_t[]){1, -1, 2, 0, 0, 3}, 6, "constant", NULL));
    SAME_AS_CPU(0, "pad of int64 by (0, 0)", weft_pad(&want_, i64, (const int64_t[]){0, 0}, 2, "constant", &v),
                weft_pad(&got_, gi64, (const int64_t[]){0, 0}, 2, "constant", &v));

    SAME_AS_CPU(0, "pad (2, 3, 1, 0) in reflect mode of a transposed view",
                weft_pad(&want_, at, (const int64_t[]){2, 3, 1, 0}, 4, "reflect", NULL),
                weft_pad(&got_, gat, (const int64_t[]){2, 3, 1, 0}, 4, "reflect", NULL));
    SAME_AS_CPU(0, "pad (4, 1) in replicate mode of int64",
                weft_pad(&want_, i64, (const int64_t[]){4, 1}, 2, "replicate", NULL),
                weft_pad(&got_, gi64, (const int64_t[]){4, 1}, 2, "replicate", NULL));
    SAME_AS_CPU(0, "pad of no pairs in reflect mode (a copy)",
                weft_pad(&want_, a, NULL, 0, "reflect", NULL), weft_pad(&got_, ga, NULL, 0, "reflect", NULL));

    /* tril and triu, diagonals inside and beyond the matrix, in place */
    const int64_t diagonals[] = {0, 1, -2, 100, -100};
    for (int k = 0; k < 5; k++) {
        char what[96];
        snprintf(what, sizeof what, "tril(%lld) of a transposed [6,5,4]", (long long)diagonals[k]);
        SAME_AS_CPU(0, what, weft_tril(&want_, at, diagonals[k]), weft_tril(&got_, gat, diagonals[k]));
        snprintf(what, sizeof what, "triu(%lld) of int64 [4,5,6]", (long long)diagonals[k]);
        SAME_AS_CPU(0, what, weft_triu(&want_, i64, diagonals[k]), weft_triu(&got_, gi64, diagonals[k]));
    }
    {
        weft_tensor *c = NULL, *gc = NULL;
        weft_to_dtype(&c, a, WEFT_FLOAT32);
        keep(c);
        gc = to(a, CUDA0);
        int rc_cpu = weft_tril_(c, -1), rc_gpu = gc ? weft_tril_(gc, -1) : -1;
        double worst = INFINITY;
        ok(rc_cpu == 0 && rc_gpu == 0 && matches(gc, c, 0, &worst),
           "tril_(-1) in place matches the CPU (worst %g)", worst);
        weft_tensor *gt = transposed(to(a, CUDA0), 1, 2), *ct = transposed(as_dtype_cpu(a, WEFT_FLOAT32), 1, 2);
        rc_cpu = ct ? weft_tril_(ct, 1) : -1;
        rc_gpu = gt ? weft_tril_(gt, 1) : -1;
        ok(rc_cpu == 0 && rc_gpu == 0 && matches(gt, ct, 0, &worst),
           "tril_(1) in place on a transposed (non-contiguous) view matches the CPU (worst %g)", worst);
    }

    /* cumsum and cumprod: the CPU's order in float64, so the same bits */
    for (int64_t dim = -1; dim <= 2; dim++) {
        char what[96];
        snprintf(what, sizeof what, "cumsum along %lld of a transposed float32 view", (long long)dim);
        SAME_AS_CPU(0, what, weft_cumsum(&want_, at, dim), weft_cumsum(&got_, gat, dim));
        snprintf(what, sizeof what, "cumprod along %lld of float32", (long long)dim);
        SAME_AS_CPU(0, what, weft_cumprod(&want_, a, dim), weft_cumprod(&got_, ga, dim));
    }
    weft_tensor *i32 = whole(affine(a, 30, 0), WEFT_INT32), *gi32 = to(i32, CUDA0);
    SAME_AS_CPU(0, "cumsum of int32 (an int64 result)", weft_cumsum(&want_, i32, 1), weft_cumsum(&got_, gi32, 1));
    SAME_AS_CPU(0, "cumprod of int32 (wrapping int64)", weft_cumprod(&want_, i32, 2), weft_cumprod(&got_, gi32, 2));
    SAME_AS_CPU(0, "cumsum of float16 into float32",
                weft_cumsum_ex(&want_, f16, 0, WEFT_FLOAT32), weft_cumsum_ex(&got_, gf16, 0, WEFT_FLOAT32));
    SAME_AS_CPU(0, "cumsum of a 0-d tensor", weft_cumsum(&want_, s0, 0), weft_cumsum(&got_, gs0, -1));
    SAME_AS_CPU(0, "cumsum of an empty tensor", weft_cumsum(&want_, e, 1), weft_cumsum(&got_, ge, 1));
    {
        weft_tensor *o = NULL, *go = NULL;
        weft_empty(&o, (const int64_t[]){4, 5, 6}, 3, WEFT_FLOAT64, WEFT_DEVICE_CPU);
        keep(o);
        go = to(o, CUDA0);
        int rc_cpu = weft_cumsum_out(o, a, 1), rc_gpu = go ? weft_cumsum_out(go, ga, 1) : -1;
        double worst = INFINITY;
        ok(rc_cpu == 0 && rc_gpu == 0 && matches(go, o, 0, &worst),
           "cumsum_out of float32 into float64 matches the CPU (worst %g)", worst);
    }
}

static void gpu_former_fallback_elementwise(weft_generator *g)
{
    weft_tensor *a = rand_cpu((const int64_t[]){7, 1, 5}, 3, WEFT_FLOAT32, g);
    weft_tensor *b = rand_cpu((const int64_t[]){9, 5}, 2, WEFT_FLOAT32, g);
    weft_tensor *a64 = as_dtype_cpu(a, WEFT_FLOAT64), *b64 = as_dtype_cpu(b, WEFT_FLOAT64);
    weft_tensor *bt_base = rand_cpu((const int64_t[]){5, 9}, 2, WEFT_FLOAT32, g);
    weft_tensor *bt = transposed(bt_base, 0, 1);
    weft_tensor *ga = to(a, CUDA0), *gb = to(b, CUDA0), *ga64 = to(a64, CUDA0), *gb64 = to(b64, CUDA0);
    weft_tensor *gbt = transposed(to(bt_base, CUDA0), 0, 1);
    weft_tensor *s0 = rand_cpu(NULL, 0, WEFT_FLOAT32, g), *gs0 = to(s0, CUDA0);
    weft_tensor *e = rand_cpu((const int64_t[]){3, 0}, 2, WEFT_FLOAT32, g), *ge = to(e, CUDA0);
    weft_tensor *ia = whole(affine(a, 3, 0), WEFT_INT32), *gia = to(ia, CUDA0);
    weft_tensor *ib = whole(b, WEFT_INT64), *gib = to(ib, CUDA0);
    weft_tensor *wa = whole(a, WEFT_FLOAT32), *gwa = to(wa, CUDA0); /* many zeros */
    weft_tensor *bools = as_dtype_cpu(wa, WEFT_BOOL), *gbools = to(bools, CUDA0);
    weft_tensor *h = as_dtype_cpu(a, WEFT_FLOAT16), *gh = to(h, CUDA0);

    /* the scalar comparisons: float, integers with whole and fractional
     * scalars, float16 (the scalar rounded to float16 first), bool, 0-d */
    typedef int (*cmp_fn)(weft_tensor **, const weft_tensor *, double);
    const cmp_fn cmps[] = {weft_eq_scalar, weft_ne_scalar, weft_lt_scalar, weft_le_scalar,
                           weft_gt_scalar, weft_ge_scalar};
    const char *cmp_names[] = {"eq_scalar", "ne_scalar", "lt_scalar", "le_scalar", "gt_scalar", "ge_scalar"};
    for (int k = 0; k < 6; k++) {
        char what[96];
        snprintf(what, sizeof what, "%s(float32, 0.5)", cmp_names[k]);
        SAME_AS_CPU(0, what, cmps[k](&want_, a, 0.5), cmps[k](&got_, ga, 0.5));
        snprintf(what, sizeof what, "%s(whole float32, 1)", cmp_names[k]);
        SAME_AS_CPU(0, what, cmps[k](&want_, wa, 1), cmps[k](&got_, gwa, 1));
        snprintf(what, sizeof what, "%s(int32, 2)", cmp_names[k]);
        SAME_AS_CPU(0, what, cmps[k](&want_, ia, 2), cmps[k](&got_, gia, 2));
        snprintf(what, sizeof what, "%s(int32, 1.5)", cmp_names[k]);
        SAME_AS_CPU(0, what, cmps[k](&want_, ia, 1.5), cmps[k](&got_, gia, 1.5));
        snprintf(what, sizeof what, "%s(float16, 0.1)", cmp_names[k]);
        SAME_AS_CPU(0, what, cmps[k](&want_, h, 0.1), cmps[k](&got_, gh, 0.1));
        snprintf(what, sizeof what, "%s(bool, 1)", cmp_names[k]);
        SAME_AS_CPU(0, what, cmps[k](&want_, bools, 1), cmps[k](&got_, gbools, 1));
        snprintf(what, sizeof what, "%s(0-d, 0)", cmp_names[k]);
        SAME_AS_CPU(0, what, cmps[k](&want_, s0, 0), cmps[k](&got_, gs0, 0));
    }
    SAME_AS_CPU(0, "gt_scalar of an empty tensor", weft_gt_scalar(&want_, e, 0), weft_gt_scalar(&got_, ge, 0));

    /* the logical operators: mixed dtypes, broadcast, a transposed operand */
    binary_fn logical[] = {weft_logical_and, weft_logical_or, weft_logical_xor};
    const char *logical_names[] = {"logical_and", "logical_or", "logical_xor"};
    for (int k = 0; k < 3; k++) {
        char what[128];
        snprintf(what, sizeof what, "%s of whole float32 [7,1,5] and int64 [9,5]", logical_names[k]);
        SAME_AS_CPU(0, what, logical[k](&want_, wa, ib), logical[k](&got_, gwa, gib));
        snprintf(what, sizeof what, "%s of bool [7,1,5] and a transposed float32 [9,5]", logical_names[k]);
        SAME_AS_CPU(0, what, logical[k](&want_, bools, bt), logical[k](&got_, gbools, gbt));
        snprintf(what, sizeof what, "%s of bool and bool", logical_names[k]);
        SAME_AS_CPU(0, what, logical[k](&want_, bools, bools), logical[k](&got_, gbools, gbools));
    }
    SAME_AS_CPU(0, "logical_not of whole float32", weft_logical_not(&want_, wa), weft_logical_not(&got_, gwa));
    SAME_AS_CPU(0, "logical_not of bool", weft_logical_not(&want_, bools), weft_logical_not(&got_, gbools));
    SAME_AS_CPU(0, "logical_not of int32", weft_logical_not(&want_, ia), weft_logical_not(&got_, gia));

    /* the activations with parameters */
    SAME_AS_CPU(2e-6, "softplus(1, 20) float32", weft_softplus(&want_, a, 1, 20), weft_softplus(&got_, ga, 1, 20));
    SAME_AS_CPU(2e-6, "softplus(2, 1) float32 (the threshold reached)",
                weft_softplus(&want_, a, 2, 1), weft_softplus(&got_, ga, 2, 1));
    SAME_AS_CPU(1e-12, "softplus(0.5, 20) float64", weft_softplus(&want_, a64, 0.5, 20),
                weft_softplus(&got_, ga64, 0.5, 20));
    SAME_AS_CPU(2e-6, "elu(1, 1, 1) float32", weft_elu(&want_, a, 1, 1, 1), weft_elu(&got_, ga, 1, 1, 1));
    SAME_AS_CPU(1e-12, "elu(0.5, 1.2, 2) float64", weft_elu(&want_, a64, 0.5, 1.2, 2),
                weft_elu(&got_, ga64, 0.5, 1.2, 2));
    SAME_AS_CPU(2e-3, "elu(1, 1, 1) float16", weft_elu(&want_, h, 1, 1, 1), weft_elu(&got_, gh, 1, 1, 1));

    /* clamp: an integer tensor with a fractional bound computes in float32 */
    const double lo = -0.5, hi = 0.5, whole_lo = -1, whole_hi = 2;
    SAME_AS_CPU(0, "clamp(-0.5, 0.5) of int32 (float32)", weft_clamp(&want_, ia, &lo, &hi),
                weft_clamp(&got_, gia, &lo, &hi));
    SAME_AS_CPU(0, "clamp(None, 0.5) of int64 (float32)", weft_clamp(&want_, ib, NULL, &hi),
                weft_clamp(&got_, gib, NULL, &hi));
    SAME_AS_CPU(0, "clamp(-1, 2) of int32 (int32)", weft_clamp(&want_, ia, &whole_lo, &whole_hi),
                weft_clamp(&got_, gia, &whole_lo, &whole_hi));
    SAME_AS_CPU(0, "clamp(-0.5, None) of float32", weft_clamp(&want_, a, &lo, NULL),
                weft_clamp(&got_, ga, &lo, NULL));

    /* the binary functions: broadcast, transposed, integers to float32 */
    weft_tensor *pos = affine(rand_cpu((const int64_t[]){7, 1, 5}, 3, WEFT_FLOAT32, g), 0.5, 1.1);
    weft_tensor *gpos = to(pos, CUDA0), *far = affine(b, 1, 3), *gfar = to(far, CUDA0);
    SAME_AS_CPU(2e-6, "atan2 float32 [7,1,5] with [9,5]", weft_atan2(&want_, a, b), weft_atan2(&got_, ga, gb));
    SAME_AS_CPU(2e-6, "atan2 with a transposed operand", weft_atan2(&want_, a, bt), weft_atan2(&got_, ga, gbt));
    SAME_AS_CPU(1e-12, "atan2 float64", weft_atan2(&want_, a64, b64), weft_atan2(&got_, ga64, gb64));
    SAME_AS_CPU(2e-6, "atan2 of int32 and int64 (float32)", weft_atan2(&want_, ia, ib), weft_atan2(&got_, gia, gib));
    SAME_AS_CPU(0, "fmod float32 by divisors away from 0", weft_fmod(&want_, a, far), weft_fmod(&got_, ga, gfar));
    SAME_AS_CPU(0, "fmod float32 by 0 (NaN on both)", weft_fmod(&want_, a, wa), weft_fmod(&got_, ga, gwa));
    weft_tensor *idiv = whole(far, WEFT_INT64), *gidiv = to(idiv, CUDA0); /* 1 to 5 */
    weft_tensor *neg = whole(affine(b, -1, -3), WEFT_INT32), *gneg = to(neg, CUDA0); /* -5 to -1 */
    SAME_AS_CPU(0, "fmod of int32 by int64 divisors (1 to 5)", weft_fmod(&want_, ia, idiv),
                weft_fmod(&got_, gia, gidiv));
    SAME_AS_CPU(0, "fmod of int32 by negative divisors, -1 among them", weft_fmod(&want_, ia, neg),
                weft_fmod(&got_, gia, gneg));
    SAME_AS_CPU(0, "pow of int32 to int64 exponents, negative ones among them",
                weft_pow(&want_, ia, ib), weft_pow(&got_, gia, gib));
    weft_tensor *big = whole(affine(a, 3000, 0), WEFT_INT32), *gbig = to(big, CUDA0);
    SAME_AS_CPU(0, "pow of int32 up to 6000 to int64 exponents up to 5 (wrapping)",
                weft_pow(&want_, big, idiv), weft_pow(&got_, gbig, gidiv));
    SAME_AS_CPU(2e-6, "pow of positive float32 bases to tensor exponents", weft_pow(&want_, pos, b),
                weft_pow(&got_, gpos, gb));
    SAME_AS_CPU(1e-12, "pow float64", weft_pow(&want_, as_dtype_cpu(pos, WEFT_FLOAT64), b64),
                weft_pow(&got_, to(as_dtype_cpu(pos, WEFT_FLOAT64), CUDA0), gb64));

    /* the ternaries */
    weft_tensor *w = affine(rand_cpu((const int64_t[]){5}, 1, WEFT_FLOAT32, g), 0.25, 0.5); /* [0, 1] */
    weft_tensor *gw = to(w, CUDA0);
    SAME_AS_CPU(2e-6, "lerp with a tensor weight, broadcast [7,1,5], [9,5], [5]",
                weft_lerp(&want_, a, b, w), weft_lerp(&got_, ga, gb, gw));
    SAME_AS_CPU(2e-6, "lerp with a transposed end", weft_lerp(&want_, a, bt, w), weft_lerp(&got_, ga, gbt, gw));
    SAME_AS_CPU(2e-6, "addcmul(value 0.5)", weft_addcmul_ex(&want_, a, b, bt, 0.5),
                weft_addcmul_ex(&got_, ga, gb, gbt, 0.5));
    SAME_AS_CPU(0, "addcmul of int32 and int64 (value 3)", weft_addcmul_ex(&want_, ia, ib, ia, 3),
                weft_addcmul_ex(&got_, gia, gib, gia, 3));
    SAME_AS_CPU(2e-6, "addcdiv(value -0.5)", weft_addcdiv_ex(&want_, a, b, far, -0.5),
                weft_addcdiv_ex(&got_, ga, gb, gfar, -0.5));
    SAME_AS_CPU(1e-12, "addcdiv float64", weft_addcdiv(&want_, a64, b64, as_dtype_cpu(far, WEFT_FLOAT64)),
                weft_addcdiv(&got_, ga64, gb64, to(as_dtype_cpu(far, WEFT_FLOAT64), CUDA0)));
    {
        weft_tensor *c = NULL, *gc = NULL;
        weft_expand(&c, a, (const int64_t[]){7, 9, 5}, 3);
        keep(c);
        weft_tensor *cc = as_dtype_cpu(c, WEFT_FLOAT32); /* a contiguous self to update */
        gc = to(cc, CUDA0);
        int rc_cpu = weft_addcdiv_(cc, b, far), rc_gpu = gc ? weft_addcdiv_(gc, gb, gfar) : -1;
        double worst = INFINITY;
        ok(rc_cpu == 0 && rc_gpu == 0 && matches(gc, cc, 2e-6, &worst),
           "addcdiv_ in place matches the CPU (worst %g)", worst);
    }
}

/* The integer products (the tiled GEMM; cuBLAS has none): exact, with
 * int64 wrapping as on the CPU, a transposed operand, an empty k. */
static void gpu_former_fallback_integer_mm(weft_generator *g)
{
    static const weft_dtype dtypes[] = {WEFT_INT64, WEFT_INT32, WEFT_INT16, WEFT_INT8, WEFT_UINT8};
    for (size_t di = 0; di < sizeof dtypes / sizeof *dtypes; di++) {
        weft_dtype dt = dtypes[di];
        const char *dn = weft_dtype_name(dt);
        weft_tensor *a = whole(affine(rand_cpu((const int64_t[]){37, 19}, 2, WEFT_FLOAT32, g), 10, 0), dt);
        weft_tensor *bt = whole(affine(rand_cpu((const int64_t[]){23, 19}, 2, WEFT_FLOAT32, g), 10, 0), dt);
        weft_tensor *b = transposed(bt, 0, 1); /* [19, 23], strided */
        weft_tensor *ga = to(a, CUDA0), *gb = transposed(to(bt, CUDA0), 0, 1);
        char what[96];
        snprintf(what, sizeof what, "mm %s [37,19] x transposed [19,23]", dn);
        SAME_AS_CPU(0, what, weft_mm(&want_, a, b), weft_mm(&got_, ga, gb));
        weft_tensor *e0 = rand_cpu((const int64_t[]){4, 0}, 2, WEFT_FLOAT32, g);
        weft_tensor *e1 = rand_cpu((const int64_t[]){0, 3}, 2, WEFT_FLOAT32, g);
        weft_tensor *ie0 = as_dtype_cpu(e0, dt), *ie1 = as_dtype_cpu(e1, dt);
        snprintf(what, sizeof what, "mm %s [4,0] x [0,3] (zeros)", dn);
        SAME_AS_CPU(0, what, weft_mm(&want_, ie0, ie1), weft_mm(&got_, to(ie0, CUDA0), to(ie1, CUDA0)));
    }
    /* int64 products that overflow wrap the same way on both */
    weft_tensor *big = whole(affine(rand_cpu((const int64_t[]){8, 8}, 2, WEFT_FLOAT64, g), 1e18, 0),
                             WEFT_INT64);
    SAME_AS_CPU(0, "mm int64 of values near 1e18 (wrapping)", weft_mm(&want_, big, big),
                weft_mm(&got_, to(big, CUDA0), to(big, CUDA0)));
}

/* The former fallbacks, then how many calls still fell back. */
static void gpu_former_fallbacks(void)
{
    weft_generator *g = NULL;
    weft_generator_create(&g, 23);
    uint64_t before = weft_cpu_fallback_calls();
    gpu_former_fallback_shape(g);
    gpu_former_fallback_elementwise(g);
    gpu_former_fallback_integer_mm(g);
    is_int((long long)(weft_cpu_fallback_calls() - before), 0,
           "cat, stack, flip, roll, repeat, pad, tril/triu, cumsum/cumprod, the scalar "
           "comparisons, the logical operators, softplus, elu, clamp of integers by fractions, atan2, "
           "fmod and pow (integers too), lerp, addcmul, addcdiv and the integer mm ran on the GPU "
           "(no fallback call)");
    /* a refused call still goes to the fallback, with the CPU's message */
    weft_tensor *s = rand_cpu(NULL, 0, WEFT_FLOAT32, g), *gs = to(s, CUDA0), *r = NULL;
    char cpu_message[512];
    int rc_cpu = weft_cat(&r, (weft_tensor *[]){s, s}, 2, 0);
    snprintf(cpu_message, sizeof cpu_message, "%s", weft_last_error());
    int rc_gpu = weft_cat(&r, (weft_tensor *[]){gs, gs}, 2, 0);
    ok(rc_cpu < 0 && rc_gpu == rc_cpu && strcmp(weft_last_error(), cpu_message) == 0,
       "cat of 0-d tensors on the GPU is refused as on the CPU: %s", weft_last_error());
    weft_tensor *num = whole(affine(rand_cpu((const int64_t[]){6}, 1, WEFT_FLOAT32, g), 5, 0), WEFT_INT32);
    weft_tensor *den = whole(rand_cpu((const int64_t[]){6}, 1, WEFT_FLOAT32, g), WEFT_INT32);
    weft_tensor *den0 = NULL;
    weft_mul_scalar(&den0, den, 0.0);
    keep(den0);
    rc_cpu = weft_fmod(&r, num, den0);
    snprintf(cpu_message, sizeof cpu_message, "%s", weft_last_error());
    rc_gpu = weft_fmod(&r, to(num, CUDA0), to(den0, CUDA0));
    ok(rc_cpu < 0 && rc_gpu == rc_cpu && strcmp(weft_last_error(), cpu_message) == 0,
       "fmod of integers by zero on the GPU is refused as on the CPU: %s", weft_last_error());
    rc_cpu = weft_clamp(&r, s, NULL, NULL);
    snprintf(cpu_message, sizeof cpu_message, "%s", weft_last_error());
    rc_gpu = weft_clamp(&r, gs, NULL, NULL);
    ok(rc_cpu < 0 && rc_gpu == rc_cpu && strcmp(weft_last_error(), cpu_message) == 0,
       "clamp with neither bound on the GPU is refused as on the CPU: %s", weft_last_error());
    weft_tensor *m = rand_cpu((const int64_t[]){2, 3}, 2, WEFT_FLOAT32, g), *gm = to(m, CUDA0);
    rc_cpu = weft_pad(&r, m, (const int64_t[]){3, 0}, 2, "reflect", NULL);
    snprintf(cpu_message, sizeof cpu_message, "%s", weft_last_error());
    rc_gpu = weft_pad(&r, gm, (const int64_t[]){3, 0}, 2, "reflect", NULL);
    ok(rc_cpu < 0 && rc_gpu == rc_cpu && strcmp(weft_last_error(), cpu_message) == 0,
       "reflect padding as wide as the dim on the GPU is refused as on the CPU: %s",
       weft_last_error());
    rc_cpu = weft_flip(&r, s, (const int64_t[]){0, 0}, 2);
    snprintf(cpu_message, sizeof cpu_message, "%s", weft_last_error());
    rc_gpu = weft_flip(&r, gs, (const int64_t[]){0, 0}, 2);
    ok(rc_cpu < 0 && rc_gpu == rc_cpu && strcmp(weft_last_error(), cpu_message) == 0,
       "flip of a repeated dim on the GPU is refused as on the CPU: %s", weft_last_error());
    drop_all();
    weft_generator_destroy(g);
}

int main(void)
{
    plan_checks();
    flip_plan_checks();
    pinned_checks();
    weft_load_default_plugins();
    int type = weft_device_type_from_name(TEST_GPU_NAME);
    ok(type == TEST_GPU_TYPE, "the " TEST_GPU_NAME " device type is known");
    int n = weft_device_count(TEST_GPU_TYPE);
    ok(n >= 0, "the " TEST_GPU_NAME " plugin loaded and reports %d devices", n);
    char *report = NULL;
    weft_plugin_report_string(&report);
    const char *row = report ? strstr(report, "name=" TEST_GPU_NAME) : NULL;
    const char *eol = row ? strchr(row, '\n') : NULL, *chosen = row ? strstr(row, "chosen=yes") : NULL;
    ok(chosen && (!eol || chosen < eol), "the load report lists the " TEST_GPU_NAME " plugin as loaded");
    free(report);

    /* a device that does not exist: a clear error, nothing allocated */
    weft_tensor *t = (weft_tensor *)1;
    weft_device missing = {.type = TEST_GPU_TYPE, .index = (int16_t)n};
    int rc = weft_empty(&t, (const int64_t[]){4}, 1, WEFT_FLOAT32, missing);
    ok(rc < 0 && t == NULL && strstr(weft_last_error(), TEST_GPU_NAME),
       "a tensor on " TEST_GPU_NAME ":%d (which does not exist) is refused: %s", n, weft_last_error());

    if (n == 0) {
        skip(1, "no " TEST_GPU_NAME " device here (the runtime reports none): the kernel "
                "comparisons run only with a GPU");
        return done_testing();
    }
    gpu_kernels();
    gpu_blas();
    gpu_elementwise_dtypes();
    gpu_former_fallbacks();
    gpu_training();
    return done_testing();
}
