/* backends/cpu/nn_softmax.c — softmax and log_softmax over any dim, and
 * their backward operators.  The tensor is seen as [outer, dim, inner]
 * (contiguous): rows (inner == 1) are reduced with vectorisable loops along
 * the row, columns (inner > 1) in blocks of COLUMN_BLOCK along inner so the
 * inner loops stay unit-stride.  Subtracting the maximum keeps exp finite;
 * an all -inf slice gives NaN, as in PyTorch.  float16 and bfloat16 compute
 * in float32. */
#include "nn.h"
#include "vec_math.h"

/* A float32 row (inner == 1) with vectorised exp; false: the row holds a
 * NaN or an infinite maximum, and the scalar loop below takes it. */
static bool softmax_row_float32(const float *x, float *y, int64_t D, bool log)
{
    float mx;
    double sum;
    if (!vec_max_sumexp(x, D, &mx, &sum))
        return false;
    /* (x - max) - log(sum): two roundings of small numbers, not one of
     * max + log(sum) */
    float ls = logf((float)sum), scale = (float)(1 / sum);
    int64_t d = 0;
    for (; d + VLANES <= D; d += VLANES) {
        vec_f32 v = vec_load(x + d) - mx;
        vec_store(y + d, log ? v - ls : vec_exp_nonpositive(v) * scale);
    }
    for (; d < D; d++)
        y[d] = log ? (x[d] - mx) - ls : (x[d] - mx < -87.0f ? 0.0f : expf(x[d] - mx)) * scale;
    return true;
}

static bool softmax_row_float64(const double *x, double *y, int64_t D, bool log)
{
    (void)x, (void)y, (void)D, (void)log;
    return false; /* double rows: libm's exp, already near memory speed */
}

#define COLUMN_BLOCK 64

typedef struct softmax_job {
    const void *x;  /* forward: the input; backward: the grad_output */
    const void *y;  /* backward: the forward's output */
    void *out;
    int64_t dim, inner;
    bool log;
} softmax_job;

/* Forward and backward loops over outer slices [begin, end), per dtype. */
#define DEFINE_SOFTMAX(NAME, T, EXP, LOG, LOWEST)                                        \
    static void softmax_forward_##NAME(int64_t begin, int64_t end, void *ctx)            \
    {                                                                                   \
        const softmax_job *j = ctx;                                                     \
        int64_t D = j->dim, I = j->inner;                                               \
        for (int64_t o = begin; o < end; o++) {                                         \
            const T *x = (const T *)j->x + o * D * I;                                   \
            T *y = (T *)j->out + o * D * I;                                             \
            if (I == 1 && softmax_row_##NAME(x, y, D, j->log))                          \
                continue;                                                               \
            if (I == 1) {                                                               \
                T mx = LOWEST, sum = 0;                                                 \
                for (int64_t d = 0; d < D; d++)                                         \
                    mx = x[d] > mx ? x[d] : mx;                                         \
                for (int64_t d = 0; d < D; d++) {                                       \
                    T e = EXP(x[d] - mx);                                               \
                    sum += e;                                                           \
                    y[d] = j->log ? x[d] - mx : e;                                      \
                }                                                                       \
                if (j->log) {                                                           \
                    T ls = LOG(sum);                                                    \
                    for (int64_t d = 0; d < D; d++)                                     \
                        y[d] -= ls;                                                     \
                } else {                                                                \
                    T inv = 1 / sum;                                                    \
                    for (int64_t d = 0; d < D; d++)                                     \
                        y[d] *= inv;                                                    \
                }                                                                       \
                continue;                                                               \
            }                                                                           \
            for (int64_t i0 = 0; i0 < I; i0 += COLUMN_BLOCK) {                          \
                int64_t w = I - i0 < COLUMN_BLOCK ? I - i0 : COLUMN_BLOCK;              \
                T mx[COLUMN_BLOCK], sum[COLUMN_BLOCK];                                  \
                for (int64_t i = 0; i < w; i++) {                                       \
                    mx[i] = LOWEST;                                                     \
                    sum[i] = 0;                                                         \
                }                                                                       \
                for (int64_t d = 0; d < D; d++)                                         \
                    for (int64_t i = 0; i < w; i++) {                                   \
                        T v = x[d * I + i0 + i];                                        \
                        mx[i] = v > mx[i] ? v : mx[i];                                  \
                    }                                                                   \
                for (int64_t d = 0; d < D; d++)                                         \
                    for (int64_t i = 0; i < w; i++) {                                   \
                        T v = x[d * I + i0 + i] - mx[i], e = EXP(v);                    \
                        sum[i] += e;                                                    \
                        y[d * I + i0 + i] = j->log ? v : e;                             \
                    }                                                                   \
                for (int64_t i = 0; i < w; i++)                                         \
                    sum[i] = j->log ? LOG(sum[i]) : 1 / sum[i];                         \
                for (int64_t d = 0; d < D; d++)                                         \
                    for (int64_t i = 0; i < w; i++) {                                   \
                        T *p = &y[d * I + i0 + i];                                      \
                        *p = j->log ? *p - sum[i] : *p * sum[i];                        \
                    }                                                                   \
            }                                                                           \
        }                                                                               \
    }                                                                                   \
    /* softmax: gx = y (g - sum(g y)); log_softmax: gx = g - exp(y) sum(g) */           \
    static void softmax_backward_##NAME(int64_t begin, int64_t end, void *ctx)           \
    {                                                                                   \
        const softmax_job *j = ctx;                                                     \
        int64_t D = j->dim, I = j->inner;                                               \
        for (int64_t o = begin; o < end; o++) {                                         \
            const T *g = (const T *)j->x + o * D * I, *y = (const T *)j->y + o * D * I; \
            T *gx = (T *)j->out + o * D * I;                                            \
            for (int64_t i0 = 0; i0 < I; i0 += COLUMN_BLOCK) {                          \
                int64_t w = I - i0 < COLUMN_BLOCK ? I - i0 : COLUMN_BLOCK;              \
                T acc[COLUMN_BLOCK];                                                    \
                for (int64_t i = 0; i < w; i++)                                         \
                    acc[i] = 0;                                                         \
                for (int64_t d = 0; d < D; d++)                                         \
                    for (int64_t i = 0; i < w; i++) {                                   \
                        int64_t at = d * I + i0 + i;                                    \
                        acc[i] += j->log ? g[at] : g[at] * y[at];                       \
                    }                                                                   \
                for (int64_t d = 0; d < D; d++)                                         \
                    for (int64_t i = 0; i < w; i++) {                                   \
                        int64_t at = d * I + i0 + i;                                    \
                        gx[at] = j->log ? g[at] - EXP(y[at]) * acc[i]                   \
                                        : y[at] * (g[at] - acc[i]);                     \
                    }                                                                   \
            }                                                                           \
        }                                                                               \
    }
DEFINE_SOFTMAX(float32, float, expf, logf, -INFINITY)
DEFINE_SOFTMAX(float64, double, exp, log, -INFINITY)

typedef void (*softmax_fn)(int64_t begin, int64_t end, void *ctx);
static const softmax_fn forward_loops[WEFT_NUM_DTYPES] = {
    [WEFT_FLOAT32] = softmax_forward_float32, [WEFT_FLOAT64] = softmax_forward_float64};
static const softmax_fn backward_loops[WEFT_NUM_DTYPES] = {
    [WEFT_FLOAT32] = softmax_backward_float32, [WEFT_FLOAT64] = softmax_backward_float64};

typedef struct softmax_form {
    bool log, backward;
} softmax_form;

/* softmax / log_softmax (self, dim); the backward forms (grad_output,
 * output, dim) */
static int softmax_kernel(weft_call *call, void *ctx)
{
    const softmax_form *form = ctx;
    const char *op = weft_op_name(call->op);
    const weft_tensor *a = call->args[0].u.tensor;
    const weft_tensor *b = form->backward ? call->args[1].u.tensor : NULL;
    int64_t dim = call->args[form->backward ? 2 : 1].u.i;
    weft_dtype compute;
    int rc = cpu__check_floating(op, form->backward ? "grad_output" : "self", a, &compute);
    if (rc == 0 && b)
        rc = cpu__check_floating(op, "output", b, &compute);
    if (rc < 0)
        return rc;
    int nd = weft_tensor_ndim(a);
    int wrap = nd > 0 ? nd : 1;
    if (dim < -wrap || dim >= wrap)
        return weft_set_error(WEFT_ERANGE, "%s: dimension out of range (expected to be in range "
                              "of [%d, %d], but got %lld)", op, -wrap, wrap - 1, (long long)dim);
    if (dim < 0)
        dim += wrap;
    if (b) {
        bool same = weft_tensor_ndim(b) == nd;
        for (int d = 0; same && d < nd; d++)
            same = weft_tensor_size(a, d) == weft_tensor_size(b, d);
        if (!same)
            return weft_set_error(WEFT_ESHAPE, "%s: grad_output and output must have the same "
                                  "shape", op);
    }
    weft_dtype dtype = weft_tensor_dtype(a);
    weft_tensor *ca = NULL, *cb = NULL, *out = NULL;
    if ((rc = cpu__operand(&ca, a, compute)) == 0 && b)
        rc = cpu__operand(&cb, b, compute);
    if (rc == 0)
        rc = weft_empty(&out, weft_tensor_sizes(a), nd, compute, WEFT_DEVICE_CPU);
    if (rc == 0 && weft_tensor_numel(a) > 0) {
        softmax_job job = {weft_tensor_data_ptr(ca), cb ? weft_tensor_data_ptr(cb) : NULL,
                           weft_tensor_data_ptr(out), nd ? weft_tensor_size(a, (int)dim) : 1, 1,
                           form->log};
        int64_t outer = 1;
        for (int d = 0; d < nd; d++) {
            if (d < dim)
                outer *= weft_tensor_size(a, d);
            else if (d > dim)
                job.inner *= weft_tensor_size(a, d);
        }
        softmax_fn fn = (form->backward ? backward_loops : forward_loops)[compute];
        cpu__parallel_for(0, outer, CPU_GRAIN / (job.dim * job.inner) + 1, fn, &job);
    }
    weft_tensor_release(ca);
    weft_tensor_release(cb);
    if (rc < 0) {
        weft_tensor_release(out);
        return rc;
    }
    return cpu__set_result(call, 0, out, dtype);
}

static const softmax_form softmax_form_ = {false, false}, log_softmax_form = {true, false};
static const softmax_form softmax_backward_form = {false, true};
static const softmax_form log_softmax_backward_form = {true, true};
static const weft_kernel_entry softmax_entries[] = {
    {"softmax", softmax_kernel, &softmax_form_},
    {"log_softmax", softmax_kernel, &log_softmax_form},
    {"_softmax_backward_data", softmax_kernel, &softmax_backward_form},
    {"_log_softmax_backward_data", softmax_kernel, &log_softmax_backward_form},
};

int cpu__register_nn_softmax(weft_registrar *reg)
{
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, softmax_entries, sizeof softmax_entries / sizeof *softmax_entries);
}
