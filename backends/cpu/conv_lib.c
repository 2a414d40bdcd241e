/* backends/cpu/conv_lib.c — float32 convolutions through oneDNN's
 * primitives (forward, input gradient, weight gradient), the library
 * opened through the plugin's shared handle at the first convolution
 * that wants it (onednn.c, which gemm_lib.c's sgemm shares: the plugin
 * does not map oneDNN's 40 MB otherwise).  oneDNN's header gives the
 * types and the functions' signatures; the functions themselves come
 * from cpu__onednn_symbol.
 *
 * WEFT_CPU_CONV=im2col|onednn|auto, read once when the plugin starts:
 *  - im2col: always nn_conv.c's own im2col + GEMM;
 *  - onednn: float32 convolutions through oneDNN (float64 stays on
 *    im2col: oneDNN has no f64 convolution); a oneDNN that cannot be
 *    opened is an error at the first convolution, naming the library;
 *  - auto (the default): oneDNN where it opens for convolutions of 8 or
 *    more channels per group in and out (ONEDNN_MIN_CHANNELS, below, with
 *    the measurements), im2col otherwise, and im2col under valgrind
 *    (which must not see oneDNN opened and closed: its JIT and glibc's
 *    records of a dlopen'ed library upset the leak check;
 *    tests/memcheck.sh runs the suite with the default) and in an
 *    AddressSanitizer build (cpu__onednn_by_default, cpu.h).
 *
 * Threads: the batch is cut into pieces over weft's pool, whose workers
 * sleep when idle, and each piece runs its primitive with oneDNN's OpenMP
 * told one thread for the duration of the call; so no thread runs beyond
 * the pool and the cache needs no thread count in its key.  Forward and
 * input-gradient pieces are independent images (their results do not
 * depend on the cut); the weight gradient's pieces follow from the batch
 * size alone and their partial sums are added in piece order, so its
 * bits do not depend on the thread count either.
 *
 * The primitive picks its own layouts (blocked, 8 channels a block on
 * AVX2) and each piece reorders its NCHW operands in and its result out:
 * measured faster than primitives on plain NCHW, which oneDNN runs as
 * its own im2col + GEMM (docs/benchmarks.md). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"

typedef enum conv_library { CONV_AUTO, CONV_IM2COL, CONV_ONEDNN } conv_library;

static struct {
    conv_library chosen;
    char bad_value[64]; /* an unknown WEFT_CPU_CONV, kept for the message */
    pthread_once_t once;
    bool active;        /* float32 convolutions run on oneDNN */
    char open_error[320];
} lib = {.once = PTHREAD_ONCE_INIT};

void cpu__conv_library_init(void)
{
    lib.chosen = (conv_library)cpu__library_choice("WEFT_CPU_CONV", "im2col", "onednn",
                                                   lib.bad_value, sizeof lib.bad_value);
}

#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

/* Every oneDNN function used here, resolved by name from the library. */
#define DNNL_FUNCTIONS(X)                                                                     \
    X(dnnl_engine_create) X(dnnl_engine_destroy) X(dnnl_stream_create) X(dnnl_stream_destroy) \
    X(dnnl_stream_wait) X(dnnl_memory_desc_init_by_tag) X(dnnl_memory_desc_equal)              \
    X(dnnl_memory_desc_get_size) X(dnnl_memory_create) X(dnnl_memory_destroy)                  \
    X(dnnl_primitive_attr_create) X(dnnl_primitive_attr_destroy)                               \
    X(dnnl_primitive_attr_set_scratchpad_mode) X(dnnl_dilated_convolution_forward_desc_init)   \
    X(dnnl_dilated_convolution_backward_data_desc_init)                                        \
    X(dnnl_dilated_convolution_backward_weights_desc_init) X(dnnl_primitive_desc_create)       \
    X(dnnl_primitive_desc_query_md) X(dnnl_primitive_desc_destroy)                             \
    X(dnnl_reorder_primitive_desc_create) X(dnnl_primitive_create) X(dnnl_primitive_execute)   \
    X(dnnl_primitive_destroy) X(dnnl_status2str)

static struct {
    bool resolved; /* the functions below and the engine are there */
    dnnl_engine_t engine;
#define X(name) __typeof__(&name) name;
    DNNL_FUNCTIONS(X)
#undef X
} dl;

static bool wants_onednn(void)
{
    if (lib.bad_value[0] || lib.chosen == CONV_IM2COL)
        return false;
    /* not under valgrind or a sanitizer unless asked for by name */
    return lib.chosen == CONV_ONEDNN || cpu__onednn_by_default();
}

static void open_onednn(void)
{
    lib.active = false;
    if (!wants_onednn())
        return;
    const char *error = NULL;
    if (!cpu__onednn_open(&error)) {
        snprintf(lib.open_error, sizeof lib.open_error, "%s", error);
        return;
    }
    const char *missing = NULL;
#define X(name)                                                                               \
    if (!missing && !(dl.name = (__typeof__(&name))cpu__onednn_symbol(#name)))                \
        missing = #name;
    DNNL_FUNCTIONS(X)
#undef X
    if (!missing && dl.dnnl_engine_create(&dl.engine, dnnl_cpu, 0) != dnnl_success)
        missing = "a CPU engine";
    if (missing) {
        snprintf(lib.open_error, sizeof lib.open_error, "oneDNN lacks %s", missing);
        memset(&dl, 0, sizeof dl);
        return;
    }
    dl.resolved = true;
    lib.active = true;
}

/* ------------------------------------------------------ the primitive cache */

/* Everything a primitive depends on: one piece's shape and parameters
 * (float32 always; one thread always, see the top). */
typedef struct conv_key {
    int64_t pass, bias;
    int64_t n, c, h, w, oc, kh, kw, oh, ow;
    int64_t stride[2], padding[2], dilation[2], groups;
} conv_key;

/* An operand of the primitive: where it is in the user's layout (NCHW,
 * OIHW or GOIHW) and where in the primitive's, and the reorder between
 * them (NULL when the layouts are the same). */
typedef struct conv_operand {
    int arg; /* DNNL_ARG_* */
    dnnl_memory_desc_t user, prim;
    dnnl_primitive_t reorder;
} conv_operand;

/* operands 0 and 1 are read, 2 is written */
typedef struct conv_entry {
    conv_key key;
    dnnl_primitive_t prim;
    conv_operand op[3];
    dnnl_memory_desc_t bias_md, scratch_md;
    size_t scratch_bytes;
} conv_entry;

#define CACHE_ENTRIES 64
static struct {
    pthread_mutex_t lock;
    int used;
    conv_entry entries[CACHE_ENTRIES];
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int dnnl_error(const char *op, const char *what, dnnl_status_t st)
{
    return weft_set_error(WEFT_ENOTSUP, "%s: oneDNN refused %s (%s)", op, what,
                          dl.dnnl_status2str(st));
}

static void entry_destroy(conv_entry *e)
{
    dl.dnnl_primitive_destroy(e->prim);
    for (int i = 0; i < 3; i++)
        dl.dnnl_primitive_destroy(e->op[i].reorder);
    memset(e, 0, sizeof *e);
}

static const char *pass_name(int64_t pass)
{
    return pass == CPU_CONV_FORWARD          ? "the forward convolution"
           : pass == CPU_CONV_BACKWARD_INPUT ? "the convolution's input gradient"
                                             : "the convolution's weight gradient";
}

/* The convolution descriptor of key's pass, its operands' logical shapes
 * with layouts left to the primitive (format any). */
static dnnl_status_t describe(const conv_key *k, bool forward, const dnnl_memory_desc_t *bias,
                              dnnl_convolution_desc_t *d)
{
    dnnl_dims_t sd = {k->n, k->c, k->h, k->w}, dd = {k->n, k->oc, k->oh, k->ow};
    dnnl_dims_t wd = {k->oc, k->c, k->kh, k->kw};
    if (k->groups > 1) {
        dnnl_dims_t gd = {k->groups, k->oc / k->groups, k->c / k->groups, k->kh, k->kw};
        memcpy(wd, gd, sizeof gd);
    }
    dnnl_dims_t strides = {k->stride[0], k->stride[1]},
                dil = {k->dilation[0] - 1, k->dilation[1] - 1},
                pad = {k->padding[0], k->padding[1]};
    dnnl_memory_desc_t src, dst, wei;
    dnnl_status_t st;
    if ((st = dl.dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, dnnl_format_tag_any)) ||
        (st = dl.dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, dnnl_format_tag_any)) ||
        (st = dl.dnnl_memory_desc_init_by_tag(&wei, k->groups > 1 ? 5 : 4, wd, dnnl_f32,
                                              dnnl_format_tag_any)))
        return st;
    if (forward)
        return dl.dnnl_dilated_convolution_forward_desc_init(d, dnnl_forward_training,
                                                             dnnl_convolution_direct, &src, &wei,
                                                             bias, &dst, strides, dil, pad, pad);
    if (k->pass == CPU_CONV_BACKWARD_INPUT)
        return dl.dnnl_dilated_convolution_backward_data_desc_init(
            d, dnnl_convolution_direct, &src, &wei, &dst, strides, dil, pad, pad);
    return dl.dnnl_dilated_convolution_backward_weights_desc_init(
        d, dnnl_convolution_direct, &src, &wei, NULL, &dst, strides, dil, pad, pad);
}

/* Operand i of e: its DNNL_ARG, the primitive's layout (query), the
 * user's (tag), and the reorder between them in the direction of use. */
static dnnl_status_t operand(conv_entry *e, int i, int arg, const_dnnl_primitive_desc_t pd,
                             dnnl_query_t query, dnnl_format_tag_t tag)
{
    conv_operand *o = &e->op[i];
    o->arg = arg;
    o->prim = *dl.dnnl_primitive_desc_query_md(pd, query, 0);
    dnnl_status_t st = dl.dnnl_memory_desc_init_by_tag(&o->user, o->prim.ndims, o->prim.dims,
                                                       dnnl_f32, tag);
    if (st || dl.dnnl_memory_desc_equal(&o->user, &o->prim))
        return st;
    const dnnl_memory_desc_t *from = i < 2 ? &o->user : &o->prim, *to = i < 2 ? &o->prim : &o->user;
    dnnl_primitive_desc_t rpd = NULL;
    st = dl.dnnl_reorder_primitive_desc_create(&rpd, from, dl.engine, to, dl.engine, NULL);
    if (!st)
        st = dl.dnnl_primitive_create(&o->reorder, rpd);
    dl.dnnl_primitive_desc_destroy(rpd);
    return st;
}

static int build(const char *op, const conv_key *k, conv_entry *e)
{
    memset(e, 0, sizeof *e);
    e->key = *k;
    dnnl_dims_t bd = {k->oc};
    dnnl_convolution_desc_t fd, bwd;
    dnnl_primitive_desc_t hint = NULL, pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    const char *what = pass_name(k->pass);
    dnnl_status_t st = dl.dnnl_memory_desc_init_by_tag(&e->bias_md, 1, bd, dnnl_f32, dnnl_a);
    bool forward = k->pass == CPU_CONV_FORWARD;
    if (!st)
        st = describe(k, true, forward && k->bias ? &e->bias_md : NULL, &fd);
    /* scratch memory passed with each call, so that pieces on different
     * threads may run one primitive at once */
    if (!st)
        st = dl.dnnl_primitive_attr_create(&attr);
    if (!st)
        st = dl.dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (!st && forward) {
        st = dl.dnnl_primitive_desc_create(&pd, &fd, attr, dl.engine, NULL);
    } else if (!st) { /* a backward pass is described with the forward as a hint */
        st = dl.dnnl_primitive_desc_create(&hint, &fd, NULL, dl.engine, NULL);
        if (!st)
            st = describe(k, false, NULL, &bwd);
        if (!st)
            st = dl.dnnl_primitive_desc_create(&pd, &bwd, attr, dl.engine, hint);
    }
    /* each pass's operands: the two it reads, then the one it writes */
    static const struct {
        int arg;
        dnnl_query_t query;
        bool weights;
    } operands[3][3] = {
        [CPU_CONV_FORWARD] = {{DNNL_ARG_SRC, dnnl_query_src_md, false},
                              {DNNL_ARG_WEIGHTS, dnnl_query_weights_md, true},
                              {DNNL_ARG_DST, dnnl_query_dst_md, false}},
        [CPU_CONV_BACKWARD_INPUT] = {{DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md, false},
                                     {DNNL_ARG_WEIGHTS, dnnl_query_weights_md, true},
                                     {DNNL_ARG_DIFF_SRC, dnnl_query_diff_src_md, false}},
        [CPU_CONV_BACKWARD_WEIGHT] = {{DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md, false},
                                      {DNNL_ARG_SRC, dnnl_query_src_md, false},
                                      {DNNL_ARG_DIFF_WEIGHTS, dnnl_query_diff_weights_md, true}},
    };
    dnnl_format_tag_t wtag = k->groups > 1 ? dnnl_goihw : dnnl_oihw;
    for (int i = 0; i < 3 && !st; i++)
        st = operand(e, i, operands[k->pass][i].arg, pd, operands[k->pass][i].query,
                     operands[k->pass][i].weights ? wtag : dnnl_nchw);
    if (!st) {
        const dnnl_memory_desc_t *smd = dl.dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        if (smd) {
            e->scratch_md = *smd;
            e->scratch_bytes = dl.dnnl_memory_desc_get_size(smd);
        }
        st = dl.dnnl_primitive_create(&e->prim, pd);
    }
    dl.dnnl_primitive_desc_destroy(pd);
    dl.dnnl_primitive_desc_destroy(hint);
    dl.dnnl_primitive_attr_destroy(attr);
    if (st) {
        entry_destroy(e);
        return dnnl_error(op, what, st);
    }
    return 0;
}

/* The cached entry for k, made on first use; *spare is used (and then
 * owned by the caller, who destroys it) when the cache is full. */
static int entry_for(const char *op, const conv_key *k, conv_entry *spare,
                     const conv_entry **out)
{
    int rc = 0;
    pthread_mutex_lock(&cache.lock);
    /* making a primitive runs OpenMP loops too: one thread, as the calls */
    int before = cpu__onednn_one_thread();
    *out = NULL;
    for (int i = 0; i < cache.used && !*out; i++)
        if (memcmp(&cache.entries[i].key, k, sizeof *k) == 0)
            *out = &cache.entries[i];
    if (!*out) {
        conv_entry *e = cache.used < CACHE_ENTRIES ? &cache.entries[cache.used] : spare;
        if ((rc = build(op, k, e)) == 0) {
            cache.used += e != spare;
            *out = e;
        }
    }
    cpu__onednn_threads_restore(before);
    pthread_mutex_unlock(&cache.lock);
    return rc;
}

/* ------------------------------------------------------------- running */

typedef struct dnnl_job {
    const conv_geometry *g;
    cpu_conv_pass pass;
    int64_t pieces;
    const conv_entry *entry[2]; /* pieces of n / pieces images, and of one more */
    const float *a, *b, *bias;
    float *out, *partials; /* weight gradient: piece p > 0 writes partial p - 1 */
    int failed;            /* a piece's oneDNN status or -1 for memory; 0 */
    pthread_mutex_t lock;
} dnnl_job;

static int64_t piece_start(const dnnl_job *j, int64_t p)
{
    return p * j->g->N / j->pieces;
}

static void *aligned(size_t bytes)
{
    void *p = NULL;
    return posix_memalign(&p, 64, bytes ? bytes : 64) ? NULL : p;
}

/* Runs entry e on operands in[0], in[1] into out, on this thread. */
static int run_entry(const conv_entry *e, const void *in0, const void *in1, const float *bias,
                     void *out)
{
    const void *user[3] = {in0, in1, out};
    void *buf[4] = {NULL, NULL, NULL, NULL};
    dnnl_memory_t um[3] = {NULL, NULL, NULL}, pm[3] = {NULL, NULL, NULL}, bm = NULL, sm = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_status_t st = dl.dnnl_stream_create(&stream, dl.engine, dnnl_stream_default_flags);
    for (int i = 0; i < 3 && !st; i++) {
        const conv_operand *o = &e->op[i];
        st = dl.dnnl_memory_create(&um[i], &o->user, dl.engine, (void *)user[i]);
        if (!st && o->reorder && !(buf[i] = aligned(dl.dnnl_memory_desc_get_size(&o->prim))))
            st = dnnl_out_of_memory;
        if (!st)
            st = dl.dnnl_memory_create(&pm[i], &o->prim, dl.engine,
                                       o->reorder ? buf[i] : (void *)user[i]);
        if (!st && o->reorder && i < 2) {
            dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, um[i]}, {DNNL_ARG_TO, pm[i]}};
            st = dl.dnnl_primitive_execute(o->reorder, stream, 2, args);
        }
    }
    if (!st && e->scratch_bytes && !(buf[3] = aligned(e->scratch_bytes)))
        st = dnnl_out_of_memory;
    if (!st && e->scratch_bytes)
        st = dl.dnnl_memory_create(&sm, &e->scratch_md, dl.engine, buf[3]);
    if (!st && bias)
        st = dl.dnnl_memory_create(&bm, &e->bias_md, dl.engine, (void *)bias);
    if (!st) {
        dnnl_exec_arg_t args[5] = {{e->op[0].arg, pm[0]}, {e->op[1].arg, pm[1]},
                                   {e->op[2].arg, pm[2]}};
        int n = 3;
        if (sm)
            args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, sm};
        if (bm)
            args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bm};
        st = dl.dnnl_primitive_execute(e->prim, stream, n, args);
    }
    if (!st && e->op[2].reorder) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, pm[2]}, {DNNL_ARG_TO, um[2]}};
        st = dl.dnnl_primitive_execute(e->op[2].reorder, stream, 2, args);
    }
    if (!st)
        st = dl.dnnl_stream_wait(stream);
    dl.dnnl_stream_destroy(stream);
    for (int i = 0; i < 3; i++) {
        dl.dnnl_memory_destroy(um[i]);
        dl.dnnl_memory_destroy(pm[i]);
    }
    dl.dnnl_memory_destroy(bm);
    dl.dnnl_memory_destroy(sm);
    for (int i = 0; i < 4; i++)
        free(buf[i]);
    return st;
}

static void piece_range(int64_t begin, int64_t end, void *ctx)
{
    dnnl_job *j = ctx;
    const conv_geometry *g = j->g;
    int64_t in_image = g->C * g->H * g->W, out_image = g->OC * g->OH * g->OW;
    int64_t nw = g->OC * (g->C / g->groups) * g->KH * g->KW;
    /* one OpenMP thread for these calls only (see cpu.h) */
    int before = cpu__onednn_one_thread();
    for (int64_t p = begin; p < end; p++) {
        int64_t b0 = piece_start(j, p), n = piece_start(j, p + 1) - b0;
        const conv_entry *e = j->entry[n != piece_start(j, 1)];
        int st;
        if (j->pass == CPU_CONV_FORWARD)
            st = run_entry(e, j->a + b0 * in_image, j->b, j->bias, j->out + b0 * out_image);
        else if (j->pass == CPU_CONV_BACKWARD_INPUT)
            st = run_entry(e, j->a + b0 * out_image, j->b, NULL, j->out + b0 * in_image);
        else
            st = run_entry(e, j->a + b0 * out_image, j->b + b0 * in_image, NULL,
                           p == 0 ? j->out : j->partials + (p - 1) * nw);
        if (st) {
            pthread_mutex_lock(&j->lock);
            j->failed = j->failed ? j->failed : st;
            pthread_mutex_unlock(&j->lock);
        }
    }
    cpu__onednn_threads_restore(before);
}

/* The weight gradient sums pieces of the batch into at most this many
 * partials; their number depends on the batch size alone. */
#define WEIGHT_PIECES 8

int cpu__conv_onednn(const char *op, cpu_conv_pass pass, const conv_geometry *g, const float *a,
                     const float *b, const float *bias, float *out)
{
    dnnl_job j = {.g = g, .pass = pass, .a = a, .b = b, .bias = bias, .out = out,
                  .lock = PTHREAD_MUTEX_INITIALIZER};
    int64_t most = pass == CPU_CONV_BACKWARD_WEIGHT ? WEIGHT_PIECES : cpu__num_threads();
    j.pieces = g->N < most ? g->N : most;
    if (j.pieces < 1)
        return 0;
    conv_key k;
    memset(&k, 0, sizeof k); /* compared with memcmp: no stray padding bytes */
    k.pass = pass, k.bias = bias != NULL;
    k.c = g->C, k.h = g->H, k.w = g->W, k.oc = g->OC, k.kh = g->KH, k.kw = g->KW;
    k.oh = g->OH, k.ow = g->OW, k.groups = g->groups;
    for (int i = 0; i < 2; i++)
        k.stride[i] = g->stride[i], k.padding[i] = g->padding[i], k.dilation[i] = g->dilation[i];
    conv_entry spare[2];
    memset(spare, 0, sizeof spare);
    int rc = 0;
    for (int s = 0; s < 2 && rc == 0; s++) {
        k.n = g->N / j.pieces + s;
        if (s == 0 || g->N % j.pieces)
            rc = entry_for(op, &k, &spare[s], &j.entry[s]);
    }
    int64_t nw = g->OC * (g->C / g->groups) * g->KH * g->KW;
    if (rc == 0 && pass == CPU_CONV_BACKWARD_WEIGHT && j.pieces > 1 &&
        !(j.partials = aligned(sizeof(float) * (size_t)(nw * (j.pieces - 1)))))
        rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory for %lld partial weight gradients",
                            op, (long long)(j.pieces - 1));
    if (rc == 0) {
        /* a piece's work is thousands of flops at the least: one piece a
         * thread (the pool runs small ranges on this thread anyway) */
        cpu__parallel_for(0, j.pieces, 1, piece_range, &j);
        if (j.failed)
            rc = j.failed == dnnl_out_of_memory
                     ? weft_set_error(WEFT_ENOMEM, "%s: out of memory in oneDNN", op)
                     : dnnl_error(op, pass_name(pass), (dnnl_status_t)j.failed);
    }
    if (rc == 0 && j.partials) /* the partials in piece order */
        for (int64_t i = 0; i < nw; i++) {
            float s = out[i];
            for (int64_t p = 1; p < j.pieces; p++)
                s += j.partials[(p - 1) * nw + i];
            out[i] = s;
        }
    free(j.partials);
    for (int s = 0; s < 2; s++)
        if (spare[s].prim)
            entry_destroy(&spare[s]);
    return rc;
}

static void close_onednn(void)
{
    pthread_mutex_lock(&cache.lock);
    for (int i = 0; i < cache.used; i++)
        entry_destroy(&cache.entries[i]);
    cache.used = 0;
    pthread_mutex_unlock(&cache.lock);
    if (dl.resolved) /* the library itself is closed by cpu__onednn_fini */
        dl.dnnl_engine_destroy(dl.engine);
    memset(&dl, 0, sizeof dl);
}

#else /* built without oneDNN's header */

static void open_onednn(void)
{
    lib.active = false;
    snprintf(lib.open_error, sizeof lib.open_error,
             "this CPU plugin was built without oneDNN's header (Debian: libdnnl-dev)");
}

int cpu__conv_onednn(const char *op, cpu_conv_pass pass, const conv_geometry *g, const float *a,
                     const float *b, const float *bias, float *out)
{
    (void)pass, (void)g, (void)a, (void)b, (void)bias, (void)out;
    return weft_set_error(WEFT_ENOTSUP, "%s: %s", op, lib.open_error);
}

static void close_onednn(void)
{
}
#endif

/* auto takes oneDNN for convolutions whose input and output channels per
 * group fill at least one of its channel blocks (8 floats on AVX2):
 * measured on the training CNN (bench/conv-compare, docs/benchmarks.md),
 * its 16 -> 32 channel layer ran 1.4-2.7x faster on oneDNN in every pass,
 * while its 1 -> 16 layer ran 1.3-6x slower there than on im2col's
 * small-k kernel (oneDNN has no blocked kernel for a single channel). */
#define ONEDNN_MIN_CHANNELS 8

int cpu__conv_library_choose(const char *op, weft_dtype dtype, const conv_geometry *g)
{
    if (lib.bad_value[0])
        return weft_set_error(WEFT_EINVAL, "%s: WEFT_CPU_CONV='%s': expected im2col, onednn or "
                              "auto", op, lib.bad_value);
    bool wide = g->C / g->groups >= ONEDNN_MIN_CHANNELS &&
                g->OC / g->groups >= ONEDNN_MIN_CHANNELS;
    if (dtype != WEFT_FLOAT32 || lib.chosen == CONV_IM2COL || (lib.chosen == CONV_AUTO && !wide))
        return 0; /* before opening: a program of narrow convolutions never maps oneDNN */
    pthread_once(&lib.once, open_onednn);
    if (lib.chosen == CONV_ONEDNN && !lib.active)
        return weft_set_error(WEFT_ENOTSUP, "%s: WEFT_CPU_CONV=onednn, but oneDNN cannot be "
                              "used: %s (Debian: apt-get install libdnnl2)", op, lib.open_error);
    return lib.active ? 1 : 0;
}

void cpu__conv_library_fini(void)
{
    /* the plugin's fini joins the pool first: nobody is inside oneDNN */
    close_onednn();
    lib.active = false;
    lib.open_error[0] = '\0';
    lib.once = (pthread_once_t)PTHREAD_ONCE_INIT;
}
