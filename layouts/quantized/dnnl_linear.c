/* layouts/quantized/dnnl_linear.c — quantized linear (and linear + relu)
 * through oneDNN's int8 matmul, the engine libtorch's quantized 'onednn'
 * path uses: quint8 activations (any zero point), qint8 weights with zero
 * points 0, per tensor or per output channel, a float bias, and an output
 * quantized to the caller's scale and zero point, as
 * torch.ao.nn.quantized.functional.linear.  oneDNN does the arithmetic;
 * what is written here is the bookkeeping: the weight's packed form (the
 * blocked layout the primitive asks for) is made once and cached with the
 * weight tensor, with the last primitive built for it, and dropped when
 * the weight's integers change version.  Only the dnnl_*.c files include
 * oneDNN; this one also holds their shared engine (dnnl_common.h). */
#define _GNU_SOURCE /* dladdr1 */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "dnnl_common.h"
#include "quantized.h"

/* The CPU engine, made on first use and destroyed by qt__dnnl_fini when
 * the plugin unloads (a static would leave it unreachable, a leak, once
 * the library is gone), so made under a lock a later load can start
 * again from, not a pthread_once. */
static dnnl_engine_t engine; /* NULL until made, under engine_lock */
static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;

/* oneDNN's OpenMP runtime, looked up among this plugin's dependencies
 * (libdnnl's) when the engine is made: the plugin does not link OpenMP
 * itself, and another build of oneDNN may thread otherwise (then both stay
 * NULL and oneDNN threads as it does). */
static struct {
    int (*get_max)(void);
    void (*set)(int);
} omp;

static void find_openmp(void)
{
    /* this plugin's own link map, which the loader's dlopen gave a search
     * list of its dependencies: a lookup through it reaches libdnnl's
     * OpenMP without another dlopen of libdnnl (whose dlclose left 64
     * bytes of the loader's scope lists unfreed at the plugin's unload) */
    Dl_info info;
    void *self = NULL;
    if (!dladdr1((void *)find_openmp, &info, &self, RTLD_DL_LINKMAP) || !self)
        return;
    int (*get_max)(void) = (int (*)(void))dlsym(self, "omp_get_max_threads");
    void (*set)(int) = (void (*)(int))dlsym(self, "omp_set_num_threads");
    if (get_max && set)
        omp.get_max = get_max, omp.set = set;
}

/* Below this many multiply-adds (about 10 us) a call stays on the
 * calling thread, OpenMP at one thread: a split would cost more than it
 * saves. */
#define SPLIT_WORK 1048576.0
/* Pieces of rows each read the whole weight (and oneDNN computes its
 * zero-point compensation over it again per piece): with fewer rows a
 * piece than this and a weight past a core's L2, oneDNN's own split (of
 * the columns) over an OpenMP team of weft's thread count does better
 * (64 x 1024 -> 1024 in bench/quant-torch.py: 700-800 us in pieces of 32
 * rows against 540-690 us on the team, alternating; docs/benchmarks.md). */
#define FEW_ROWS 128
#define LARGE_WEIGHT 262144.0

qt_dnnl_plan qt__dnnl_plan(int64_t rows, double work, double weight_bytes)
{
    qt_dnnl_plan plan = {1, 0};
    if (!omp.set)
        return plan;
    int threads = weft_get_num_threads();
    plan.threads_each = 1;
    if (work < SPLIT_WORK || threads < 2 || rows < 1)
        return plan;
    if (rows / threads < FEW_ROWS && weight_bytes > LARGE_WEIGHT) {
        plan.threads_each = threads;
        return plan;
    }
    plan.pieces = rows < threads ? rows : threads;
    plan.threads_each = threads / (int)plan.pieces;
    return plan;
}

int qt__dnnl_threads(int n)
{
    if (n < 1 || !omp.set)
        return 0;
    int before = omp.get_max();
    omp.set(n);
    return before;
}

void qt__dnnl_threads_restore(int before)
{
    if (before > 0)
        omp.set(before);
}

int qt__weight_sums(const char *op, const int8_t *w, int64_t rows, int64_t per, int64_t **sums)
{
    *sums = malloc(sizeof **sums * (size_t)(rows > 0 ? rows : 1));
    if (!*sums)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory for the weight sums", op);
    for (int64_t j = 0; j < rows; j++) {
        const int8_t *row = w + j * per;
        int64_t sum = 0;
        for (int64_t k = 0; k < per; k++)
            sum += row[k];
        (*sums)[j] = sum;
    }
    return 0;
}

size_t qt__dnnl_scratch(dnnl_primitive_desc_t pd, dnnl_memory_desc_t *md)
{
    const dnnl_memory_desc_t *s = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (!s) {
        memset(md, 0, sizeof *md);
        return 0;
    }
    *md = *s;
    return dnnl_memory_desc_get_size(s);
}

int qt__dnnl_build_slots(void *cache, int64_t total, qt_dnnl_plan *plan,
                         int (*build_slot)(void *cache, int s, int64_t rows),
                         void (*drop)(void *cache))
{
    drop(cache);
    int before = qt__dnnl_threads(plan->threads_each);
    int64_t lo = total / plan->pieces;
    int rc = build_slot(cache, 0, lo);
    if (rc == 0 && total % plan->pieces)
        rc = build_slot(cache, 1, lo + 1);
    if (rc == 1) {
        drop(cache);
        qt__dnnl_threads_restore(before);
        plan->pieces = 1;
        plan->threads_each = weft_get_num_threads();
        before = qt__dnnl_threads(plan->threads_each);
        rc = build_slot(cache, 0, total);
    }
    qt__dnnl_threads_restore(before);
    if (rc < 0)
        drop(cache);
    return rc;
}

typedef struct pieces_job {
    dnnl_status_t (*piece)(void *job, int64_t i);
    void *job;
    int threads_each;
    dnnl_status_t failed; /* the first piece's failure */
    pthread_mutex_t lock;
} pieces_job;

static void run_range(int64_t begin, int64_t end, void *ctx)
{
    pieces_job *j = ctx;
    int before = qt__dnnl_threads(j->threads_each);
    for (int64_t i = begin; i < end; i++) {
        dnnl_status_t st = j->piece(j->job, i);
        if (st) {
            pthread_mutex_lock(&j->lock);
            j->failed = j->failed ? j->failed : st;
            pthread_mutex_unlock(&j->lock);
        }
    }
    qt__dnnl_threads_restore(before);
}

dnnl_status_t qt__dnnl_run_pieces(int64_t pieces, int threads_each,
                                  dnnl_status_t (*piece)(void *job, int64_t i), void *job)
{
    pieces_job j = {piece, job, threads_each, dnnl_success, PTHREAD_MUTEX_INITIALIZER};
    if (pieces == 1)
        run_range(0, 1, &j);
    else if (weft_parallel_for(0, pieces, 1, run_range, &j) < 0) /* only a NULL fn fails */
        return dnnl_runtime_error;
    return j.failed;
}

int qt__dnnl_error(const char *op, const char *what, dnnl_status_t st)
{
    return weft_set_error(st == dnnl_out_of_memory ? WEFT_ENOMEM : WEFT_ENOTSUP,
                          "%s: oneDNN refused %s (status %d)", op, what, (int)st);
}

int qt__dnnl_int8_pd(dnnl_primitive_desc_t *pd, const void *op_desc, const qt_dnnl_requant *rq,
                     const float *w_scales, int64_t nout, dnnl_engine_t eng, const char *op,
                     const char *what)
{
    int64_t count = rq->per_channel ? nout : 1;
    float *scales = malloc(sizeof *scales * (size_t)count);
    if (!scales)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", op);
    for (int64_t j = 0; j < count; j++)
        scales[j] = qt__output_scale(rq->src_scale, w_scales[j], rq->dst_scale);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post = NULL;
    dnnl_status_t st;
    *pd = NULL;
    if (!(st = dnnl_primitive_attr_create(&attr)) &&
        !(st = dnnl_primitive_attr_set_output_scales(attr, count, rq->per_channel ? 1 << 1 : 0,
                                                     scales)) &&
        !(st = dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &rq->src_zp)) &&
        !(st = dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_DST, 1, 0, &rq->dst_zp)) &&
        !(st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user)) &&
        !(st = dnnl_post_ops_create(&post)) &&
        !(st = rq->relu ? dnnl_post_ops_append_eltwise(post, 1.0f, dnnl_eltwise_relu, 0, 0)
                        : dnnl_success) &&
        !(st = dnnl_primitive_attr_set_post_ops(attr, post)))
        st = dnnl_primitive_desc_create(pd, op_desc, attr, eng, NULL);
    free(scales);
    dnnl_post_ops_destroy(post);
    dnnl_primitive_attr_destroy(attr);
    return st ? qt__dnnl_error(op, what, st) : 0;
}

int qt__dnnl_engine(dnnl_engine_t *out, const char *op)
{
    dnnl_status_t st = dnnl_success;
    pthread_mutex_lock(&engine_lock);
    if (!engine && (st = dnnl_engine_create(&engine, dnnl_cpu, 0)) != dnnl_success)
        engine = NULL;
    if (engine && !omp.set)
        find_openmp();
    *out = engine;
    pthread_mutex_unlock(&engine_lock);
    return st ? qt__dnnl_error(op, "to make a CPU engine", st) : 0;
}

void qt__dnnl_fini(void)
{
    pthread_mutex_lock(&engine_lock);
    if (engine)
        dnnl_engine_destroy(engine);
    engine = NULL;
    omp.get_max = NULL, omp.set = NULL;
    pthread_mutex_unlock(&engine_lock);
}

int qt__dnnl_reorder(const char *op, const dnnl_memory_desc_t *from_md, const void *from,
                     const dnnl_memory_desc_t *to_md, void *to)
{
    dnnl_memory_t mf = NULL, mt = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t r = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_status_t st;
    /* a weight's packing, once per weight: on this thread alone, so that
     * oneDNN starts no OpenMP team beside weft's pool */
    int before = qt__dnnl_threads(1);
    if (!(st = dnnl_memory_create(&mf, from_md, engine, (void *)from)) &&
        !(st = dnnl_memory_create(&mt, to_md, engine, to)) &&
        !(st = dnnl_reorder_primitive_desc_create(&rpd, from_md, engine, to_md, engine, NULL)) &&
        !(st = dnnl_primitive_create(&r, rpd)) &&
        !(st = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags))) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, mf}, {DNNL_ARG_TO, mt}};
        if (!(st = dnnl_primitive_execute(r, stream, 2, args)))
            st = dnnl_stream_wait(stream);
    }
    dnnl_stream_destroy(stream);
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(mf);
    dnnl_memory_destroy(mt);
    qt__dnnl_threads_restore(before);
    return st ? qt__dnnl_error(op, "a reorder", st) : 0;
}

/* What the primitives were built for: the call's parameters they bake in
 * and how the rows were cut (qt__dnnl_plan). */
typedef struct prim_key {
    int64_t m, pieces;
    int threads_each;
    float src_scale, dst_scale;
    int32_t src_zp, dst_zp;
    bool relu, bias;
} prim_key;

/* One primitive, for pieces of `rows` rows. */
typedef struct linear_prim {
    int64_t rows;
    dnnl_primitive_t prim; /* NULL: unused */
    dnnl_memory_desc_t src_md, dst_md, scratch_md;
    size_t scratch_bytes;
} linear_prim;

/* A weight's cache for linear: the packed weights and the primitives of
 * the last call's parameters: pieces of m / pieces rows, and of one more
 * when the rows do not divide evenly. */
typedef struct linear_cache {
    qt_prepacked header;
    pthread_mutex_t lock;
    uint32_t version; /* of the weight's integers when packed */
    dnnl_memory_desc_t packed_md;
    void *packed;     /* the weights in packed_md's layout (aligned) */
    int64_t *wsum;    /* each output's weight integers summed, made with packed or ig */
    qt_igemm ig;      /* the AVX2 GEMM's packing (qt__igemm_on), of ig_version */
    uint32_t ig_version;
    /* the plan asked for, and the one built (see build); valid while
     * slot[0].prim is made */
    prim_key asked, key;
    linear_prim slot[2];
    dnnl_memory_desc_t bias_md;
} linear_cache;

static void drop_prims(linear_cache *p)
{
    for (int s = 0; s < 2; s++) {
        if (p->slot[s].prim)
            dnnl_primitive_destroy(p->slot[s].prim);
        memset(&p->slot[s], 0, sizeof p->slot[s]);
    }
}

static void linear_cache_free(qt_prepacked *h)
{
    linear_cache *p = (linear_cache *)h;
    drop_prims(p);
    free(p->packed);
    free(p->wsum);
    qt__igemm_free(&p->ig);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static qt_prepacked *linear_cache_new(void)
{
    linear_cache *p = calloc(1, sizeof *p);
    if (p && pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        p = NULL;
    }
    if (p)
        p->header.release = linear_cache_free;
    return p ? &p->header : NULL;
}

static bool key_equal(const prim_key *a, const prim_key *b)
{
    return a->m == b->m && a->pieces == b->pieces && a->threads_each == b->threads_each &&
           a->src_scale == b->src_scale && a->dst_scale == b->dst_scale &&
           a->src_zp == b->src_zp && a->dst_zp == b->dst_zp && a->relu == b->relu &&
           a->bias == b->bias;
}

/* The first row of piece i. */
static int64_t piece_start(int64_t m, int64_t pieces, int64_t i)
{
    return i * m / pieces;
}

/* What build_slot needs beyond the cache. */
typedef struct linear_build {
    linear_cache *p;
    const prim_key *key;
    const float *w_scales;
    int64_t n, k;
    bool per_channel;
} linear_build;

/* Builds the primitive of slot s for `rows` rows (bl->p->lock held): src
 * (rows, k) u8, weights (k, n) s8 in the layout oneDNN picks, bias (1, n)
 * f32, dst (rows, n) u8; output scales src_scale * w_scale[n] / dst_scale,
 * zero points of src and dst, relu as a post-op (applied before the dst
 * zero point is added, so it clamps at the zero point, as torch's quantized
 * relu does).  Returns 1 when slot 1 wants the weights in another layout
 * than slot 0 (the caller then runs one piece). */
static int build_slot(void *ctx, int s, int64_t rows)
{
    const char *op = "quantized_linear";
    const linear_build *bl = ctx;
    linear_cache *p = bl->p;
    const prim_key *key = bl->key;
    int64_t n = bl->n, k = bl->k;
    linear_prim *sl = &p->slot[s];
    dnnl_memory_desc_t wmd;
    dnnl_dims_t sd = {rows, k}, wd = {k, n}, bd = {1, n}, dd = {rows, n};
    dnnl_status_t st;
    if ((st = dnnl_memory_desc_init_by_tag(&sl->src_md, 2, sd, dnnl_u8, dnnl_ab)) ||
        (st = dnnl_memory_desc_init_by_tag(&wmd, 2, wd, dnnl_s8, dnnl_format_tag_any)) ||
        (st = dnnl_memory_desc_init_by_tag(&p->bias_md, 2, bd, dnnl_f32, dnnl_ab)) ||
        (st = dnnl_memory_desc_init_by_tag(&sl->dst_md, 2, dd, dnnl_u8, dnnl_ab)))
        return qt__dnnl_error(op, "a memory descriptor", st);
    dnnl_matmul_desc_t desc;
    if ((st = dnnl_matmul_desc_init(&desc, &sl->src_md, &wmd, key->bias ? &p->bias_md : NULL,
                                    &sl->dst_md)))
        return qt__dnnl_error(op, "the matmul descriptor", st);
    const qt_dnnl_requant rq = {key->src_scale, key->dst_scale, key->src_zp, key->dst_zp,
                                 key->relu != 0, bl->per_channel};
    dnnl_primitive_desc_t pd = NULL;
    int rc = qt__dnnl_int8_pd(&pd, &desc, &rq, bl->w_scales, n, engine, op,
                              "the int8 matmul for these parameters");
    if (rc < 0)
        return rc;
    const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (s == 1 && !dnnl_memory_desc_equal(want, &p->packed_md)) {
        dnnl_primitive_desc_destroy(pd);
        return 1;
    }
    if (s == 0 && p->packed && !dnnl_memory_desc_equal(want, &p->packed_md)) {
        free(p->packed); /* another batch size wants another layout: repack */
        p->packed = NULL;
    }
    if (!p->packed)
        p->packed_md = *want;
    sl->scratch_bytes = qt__dnnl_scratch(pd, &sl->scratch_md);
    st = dnnl_primitive_create(&sl->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (st) {
        sl->prim = NULL;
        return qt__dnnl_error(op, "to create the matmul", st);
    }
    sl->rows = rows;
    return 0;
}

static void drop_slots(void *ctx)
{
    drop_prims(((linear_build *)ctx)->p);
}

/* Builds the primitives for key (p->lock held); *key's plan may fall back
 * to one piece (qt__dnnl_build_slots). */
static int build(linear_cache *p, prim_key *key, const float *w_scales, int64_t n, int64_t k,
                 bool per_channel)
{
    linear_build bl = {p, key, w_scales, n, k, per_channel};
    qt_dnnl_plan plan = {key->pieces, key->threads_each};
    int rc = qt__dnnl_build_slots(&bl, key->m, &plan, build_slot, drop_slots);
    if (rc < 0)
        return rc;
    key->pieces = plan.pieces, key->threads_each = plan.threads_each;
    p->key = *key;
    return 0;
}

/* One call's pieces, run on weft's pool. */
typedef struct linear_job {
    const linear_cache *p;
    int64_t k, n;
    const uint8_t *x;
    uint8_t *y;
    const float *bias;
    uint8_t *scratch; /* scratch_stride bytes a piece */
    size_t scratch_stride;
} linear_job;

static dnnl_status_t run_piece(void *job, int64_t i)
{
    const linear_job *j = job;
    const linear_cache *p = j->p;
    int64_t r0 = piece_start(p->key.m, p->key.pieces, i);
    int64_t rows = piece_start(p->key.m, p->key.pieces, i + 1) - r0;
    const linear_prim *sl = &p->slot[rows != p->slot[0].rows];
    dnnl_memory_t ms = NULL, mw = NULL, mb = NULL, md = NULL, mscr = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_status_t st;
    if (!(st = dnnl_memory_create(&ms, &sl->src_md, engine, (void *)(j->x + r0 * j->k))) &&
        !(st = dnnl_memory_create(&mw, &p->packed_md, engine, p->packed)) &&
        !(st = dnnl_memory_create(&md, &sl->dst_md, engine, j->y + r0 * j->n)) &&
        !(st = j->bias ? dnnl_memory_create(&mb, &p->bias_md, engine, (void *)j->bias)
                       : dnnl_success) &&
        !(st = sl->scratch_bytes ? dnnl_memory_create(&mscr, &sl->scratch_md, engine,
                                                      j->scratch + (size_t)i * j->scratch_stride)
                                 : dnnl_success) &&
        !(st = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags))) {
        dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}};
        int nargs = 3;
        if (mb)
            args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, mb};
        if (mscr)
            args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, mscr};
        if (!(st = dnnl_primitive_execute(sl->prim, stream, nargs, args)))
            st = dnnl_stream_wait(stream);
    }
    dnnl_stream_destroy(stream);
    dnnl_memory_t all[] = {ms, mw, mb, md, mscr};
    for (int a = 0; a < 5; a++)
        dnnl_memory_destroy(all[a]);
    return st;
}

/* Reorders the (n, k) int8 weight w into p->packed_md's layout, and sums
 * its rows for the zero-point fold (linear_kernel). */
static int pack(linear_cache *p, const int8_t *w, int64_t n, int64_t k)
{
    const char *op = "quantized_linear";
    dnnl_memory_desc_t plain;
    dnnl_dims_t wd = {k, n};
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(&plain, 2, wd, dnnl_s8, dnnl_ba);
    size_t bytes = dnnl_memory_desc_get_size(&p->packed_md);
    void *buf = NULL;
    if (st || posix_memalign(&buf, 64, bytes ? bytes : 64))
        return st ? qt__dnnl_error(op, "the weight's descriptor", st)
                  : weft_set_error(WEFT_ENOMEM, "%s: out of memory for the packed weight", op);
    int rc = qt__dnnl_reorder(op, &plain, w, &p->packed_md, buf);
    free(p->wsum);
    p->wsum = NULL;
    if (rc == 0)
        rc = qt__weight_sums(op, w, n, k, &p->wsum);
    if (rc < 0)
        free(buf);
    else
        p->packed = buf;
    return rc;
}

static int check_inputs(const char *op, const weft_tensor *x, const weft_tensor *w,
                        const weft_tensor *bias, int64_t zero_point, double scale)
{
    int ql = qt__affine_layout;
    if (weft_tensor_layout(x) != ql || weft_tensor_layout(w) != ql)
        return weft_set_error(WEFT_EINVAL, "%s: expected quantized input and weight (quantize "
                                           "them with quantize_per_tensor / _per_channel)",
                              op);
    const qt_affine *qx = weft_tensor_layout_payload(x), *qw = weft_tensor_layout_payload(w);
    if (weft_tensor_dtype(x) != WEFT_UINT8 || qx->scheme != QT_PER_TENSOR_AFFINE)
        return weft_set_error(WEFT_EDTYPE, "%s: the input must be quint8 with a per-tensor "
                                           "quantizer, got %s%s",
                              op, weft_dtype_name(weft_tensor_dtype(x)),
                              qx->scheme == QT_PER_TENSOR_AFFINE ? "" : " per channel");
    if (weft_tensor_dtype(w) != WEFT_INT8 || weft_tensor_ndim(w) != 2 ||
        (qw->scheme == QT_PER_CHANNEL_AFFINE && qw->axis != 0))
        return weft_set_error(WEFT_EDTYPE, "%s: the weight must be a 2-d qint8 tensor "
                                           "(out_features, in_features), quantized per tensor "
                                           "or per output channel (axis 0)",
                              op);
    int64_t n = weft_tensor_size(w, 0), k = weft_tensor_size(w, 1);
    bool zero = qw->scheme == QT_PER_TENSOR_AFFINE ? qw->zero_point == 0 : true;
    for (int64_t j = 0; qw->scheme == QT_PER_CHANNEL_AFFINE && j < n; j++)
        zero &= ((const int64_t *)weft_tensor_data_ptr(qw->zero_points))[j] == 0;
    if (!zero)
        return weft_set_error(WEFT_EINVAL, "%s: the weight's zero points must be 0 (symmetric "
                                           "quantization, as torch's onednn engine requires)",
                              op);
    if (weft_tensor_ndim(x) < 1 || weft_tensor_size(x, -1) != k)
        return weft_set_error(WEFT_ESHAPE, "%s: the input's last size must be in_features (%lld)",
                              op, (long long)k);
    if (bias && (weft_tensor_layout(bias) || weft_tensor_ndim(bias) != 1 ||
                 weft_tensor_size(bias, 0) != n || !weft_dtype_is_floating(weft_tensor_dtype(bias))))
        return weft_set_error(WEFT_ESHAPE, "%s: expected a float bias of %lld entries", op,
                              (long long)n);
    return qt__check_params(op, scale, zero_point, WEFT_UINT8);
}

/* quantized_linear through igemm.c's kernels (p->lock held): packs the
 * weight when its integers changed version, folds the input zero point z
 * into b as the oneDNN path does, and runs with oneDNN's output scales, so
 * that both paths write the same bytes. */
static int igemm_linear(linear_cache *p, const qt_affine *qw, uint32_t version, int64_t n,
                        int64_t k, int64_t m, const weft_tensor *xc, weft_tensor *y,
                        const float *w_scales, float src_scale, float dst_scale, int64_t z,
                        float *b, int32_t out_zp, bool relu)
{
    const char *op = "quantized_linear";
    int rc = 0;
    if (!p->ig.b || p->ig_version != version) {
        weft_tensor *wc = NULL;
        qt__igemm_free(&p->ig);
        free(p->wsum);
        p->wsum = NULL;
        if ((rc = weft_contiguous(&wc, qw->repr)) == 0 &&
            (rc = qt__igemm_pack(&p->ig, weft_tensor_data_ptr(wc), n, k, op)) == 0 &&
            (rc = qt__weight_sums(op, weft_tensor_data_ptr(wc), n, k, &p->wsum)) < 0)
            qt__igemm_free(&p->ig);
        weft_tensor_release(wc);
        if (rc < 0)
            return rc;
        p->ig_version = version;
    }
    if (b)
        qt__fold_zero_point(b, z, p->wsum, n);
    /* scales and bias padded to the kernels' blocks of 16 columns */
    int64_t cols = p->ig.nb * 16;
    float *pad = calloc((size_t)(2 * cols), sizeof *pad);
    if (!pad)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", op);
    for (int64_t j = 0; j < n; j++)
        pad[j] = qt__output_scale(src_scale, w_scales[j], dst_scale);
    if (b)
        memcpy(pad + cols, b, sizeof *pad * (size_t)n);
    rc = qt__igemm_run(&p->ig, weft_tensor_data_ptr(xc), m, weft_tensor_data_ptr(y), pad,
                       b ? pad + cols : NULL, out_zp, relu);
    free(pad);
    return rc;
}

/* quantized_linear(Tensor input, Tensor weight, Tensor? bias, float scale, int zero_point, bool relu=False) */
static int linear_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "quantized_linear";
    const weft_tensor *x = weft_arg_tensor(call, 0), *w = weft_arg_tensor(call, 1),
                      *bias = weft_arg_tensor(call, 2);
    double out_scale = weft_arg_double(call, 3);
    int64_t out_zp = weft_arg_int(call, 4);
    bool relu = weft_arg_bool(call, 5);
    int rc = check_inputs(op, x, w, bias, out_zp, out_scale);
    if (rc < 0)
        return rc;
    dnnl_engine_t eng; /* the same as `engine`: made here on first use */
    if ((rc = qt__dnnl_engine(&eng, op)) < 0)
        return rc;
    (void)eng;
    qt_affine *qx = weft_tensor_layout_payload(x), *qw = weft_tensor_layout_payload(w);
    int64_t n = weft_tensor_size(w, 0), k = weft_tensor_size(w, 1);
    int64_t m = qt__leading_numel(x); /* the rows (numel / k fails for k = 0) */
    /* float32 weight scales, as oneDNN takes them */
    float *w_scales = malloc(sizeof(float) * (size_t)(n ? n : 1));
    /* an input zero point goes into the bias (qt__weight_sums says why):
     * 1000 x 784 -> 256 took 1.58 ms at zero point 73 against 1.45 at 0
     * when oneDNN was given it, the same either way since; weft-train's
     * int8 MLP reads pixel bytes at zero point 73 */
    const bool fold = qx->zero_point != 0;
    float *b = bias || fold ? calloc((size_t)(n ? n : 1), sizeof(float)) : NULL;
    weft_tensor *xc = NULL, *wc = NULL, *bc = NULL, *bf = NULL, *y = NULL, *out = NULL,
                *scratch = NULL;
    if (!w_scales || ((bias || fold) && !b)) {
        rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory", op);
        goto done;
    }
    for (int64_t j = 0; j < n; j++)
        w_scales[j] = (float)(qw->scheme == QT_PER_TENSOR_AFFINE
                                  ? qw->scale
                                  : ((const double *)weft_tensor_data_ptr(qw->scales))[j]);
    if ((rc = weft_contiguous(&xc, qx->repr)) < 0)
        goto done;
    int64_t sizes[16];
    int nd = weft_tensor_ndim(x);
    if (nd > 16) {
        rc = weft_set_error(WEFT_ESHAPE, "%s: at most 16 dimensions", op);
        goto done;
    }
    memcpy(sizes, weft_tensor_sizes(x), sizeof *sizes * (size_t)nd);
    sizes[nd - 1] = n;
    if ((rc = weft_new_output(&y, xc, sizes, nd, WEFT_UINT8)) < 0)
        goto done;
    if (bias) {
        /* oneDNN 2.x adds the bias before the output scales, in units of
         * src_scale * w_scale[n] */
        if ((rc = weft_to_dtype(&bf, bias, WEFT_FLOAT32)) < 0 || (rc = weft_contiguous(&bc, bf)) < 0)
            goto done;
        const float *bp = weft_tensor_data_ptr(bc);
        for (int64_t j = 0; j < n; j++)
            b[j] = bp[j] / ((float)qx->scale * w_scales[j]);
    }
    if (m == 0 || n == 0 || k == 0) {
        /* nothing to multiply: an empty output, or (no inputs) every row the
         * requantized bias, as the definition gives; no GEMM is asked (the
         * plan below would cut zero rows into zero pieces) */
        uint8_t *yp = weft_tensor_data_ptr(y);
        for (int64_t j = 0; m > 0 && j < n; j++) {
            float v = (b ? b[j] : 0.0f) *
                      qt__output_scale((float)qx->scale, w_scales[j], (float)out_scale);
            v = relu && !(v > 0.0f) ? 0.0f : v;
            v += (float)out_zp;
            uint8_t q = (uint8_t)nearbyintf(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);
            for (int64_t r = 0; r < m; r++)
                yp[r * n + j] = q;
        }
        goto wrap;
    }
    qt_dnnl_plan plan = qt__dnnl_plan(m, (double)m * (double)n * (double)k, (double)n * (double)k);
    prim_key key = {m, plan.pieces, plan.threads_each, (float)qx->scale, (float)out_scale,
                    fold ? 0 : (int32_t)qx->zero_point, (int32_t)out_zp, relu, bias || fold};
    linear_cache *p = (linear_cache *)qt__prepacked_get(qw, linear_cache_free, linear_cache_new);
    if (!p) {
        rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory", op);
        goto done;
    }
    pthread_mutex_lock(&p->lock);
    uint32_t version = weft_tensor_version(qw->repr);
    if (qt__igemm_on && k % 8 == 0 && k / 8 <= UINT16_MAX) { /* (m, n, k >= 1 here) */
        rc = igemm_linear(p, qw, version, n, k, m, xc, y, w_scales, (float)qx->scale,
                          (float)out_scale, fold ? qx->zero_point : 0, key.bias ? b : NULL,
                          (int32_t)out_zp, relu);
        pthread_mutex_unlock(&p->lock);
        goto wrap;
    }
    if (p->packed && p->version != version) { /* the weight was written: repack */
        free(p->packed);
        p->packed = NULL;
    }
    if (!p->slot[0].prim || !key_equal(&p->asked, &key) || !p->packed) {
        p->asked = key;
        rc = build(p, &key, w_scales, n, k, qw->scheme == QT_PER_CHANNEL_AFFINE);
    }
    if (rc == 0 && !p->packed && (rc = weft_contiguous(&wc, qw->repr)) == 0 &&
        (rc = pack(p, weft_tensor_data_ptr(wc), n, k)) == 0)
        p->version = version;
    if (rc == 0 && fold)
        qt__fold_zero_point(b, qx->zero_point, p->wsum, n);
    linear_job job = {.p = p, .k = k, .n = n, .bias = key.bias ? b : NULL};
    /* each piece's scratch, from weft's allocator (which keeps such blocks
     * for the next call; the int32 sums of a 500 x 256 piece are 512 KiB) */
    size_t most = p->slot[0].scratch_bytes > p->slot[1].scratch_bytes ? p->slot[0].scratch_bytes
                                                                      : p->slot[1].scratch_bytes;
    job.scratch_stride = (most + 63) / 64 * 64;
    if (rc == 0 && job.scratch_stride &&
        (rc = weft_new_output(&scratch, xc,
                              (int64_t[]){(int64_t)job.scratch_stride * p->key.pieces + 63}, 1,
                              WEFT_UINT8)) == 0)
        job.scratch = qt__align64(weft_tensor_data_ptr(scratch));
    if (rc == 0) {
        job.x = weft_tensor_data_ptr(xc);
        job.y = weft_tensor_data_ptr(y);
        dnnl_status_t st = qt__dnnl_run_pieces(p->key.pieces, p->key.threads_each, run_piece, &job);
        if (st)
            rc = qt__dnnl_error(op, "to run the matmul", st);
    }
    pthread_mutex_unlock(&p->lock);
wrap:
    if (rc == 0) {
        qt_affine q = {.scheme = QT_PER_TENSOR_AFFINE, .scale = out_scale, .zero_point = out_zp};
        rc = qt__wrap(&out, y, &q);
    }
done:
    free(w_scales);
    free(b);
    weft_tensor *all[] = {xc, wc, bc, bf, y, scratch};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

int qt__register_dnnl(weft_registrar *reg)
{
    int rc = weft_register_kernel(reg, "quantized_linear", weft_layout_key(qt__affine_layout),
                                  WEFT_DEVICE_TYPE_CPU, linear_kernel, NULL, NULL);
    return rc < 0 ? rc : qt__register_dnnl_conv(reg);
}
