/* backends/cpu/nn_norm.c — fused batch_norm and layer_norm and their
 * backward operators.  Each statistic is one pass over the data in vector
 * registers (mean, then the squared deviations from it: two reads, no
 * cancellation), and the normalisation one more pass (y = x a + b with a
 * and b per channel or per row); the backward needs one pass for its two
 * sums and one for the gradient.  Work is split over channels (batch_norm)
 * or rows (layer_norm) through the thread pool; each channel or row is
 * reduced by one thread in a fixed order, so results do not depend on the
 * thread count.  float16 and bfloat16 compute in float32.
 *
 * batch_norm and layer_norm are composites over native_batch_norm and
 * native_layer_norm, which also return the statistics backward needs (and
 * carry the derivative formulas, autograd/formulas_nn.c).  Training
 * batch_norm updates the running statistics in place with the unbiased
 * variance, outside the graph, as PyTorch does. */
#include <math.h>
#include <string.h>

#include "nn.h"

/* Lanes of 32 bytes: one AVX register; the baseline build splits them into
 * SSE pairs.  Loads and stores go through memcpy (unaligned). */
/* The helpers taking and returning them are static and inlined: no ABI is
 * crossed, so GCC's note about the baseline ABI of 32-byte vectors does
 * not apply. */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float vec_float32 __attribute__((vector_size(32)));
typedef double vec_float64 __attribute__((vector_size(32)));

typedef struct bn_job {
    const void *x, *g; /* input; backward: grad_output */
    void *y;           /* forward: output; backward: grad_input */
    /* per channel, compute dtype, or NULL; the forward in eval reads the
     * running mean and variance from mean_in and invstd_in */
    const void *weight, *bias, *mean_in, *invstd_in;
    void *mean_out, *invstd_out, *var_out;           /* forward (per channel) */
    void *dweight, *dbias;                           /* backward (per channel) */
    int64_t N, C, S;
    double eps;
    bool training;
} bn_job;

typedef struct ln_job {
    const void *x, *g;
    void *y;
    const void *weight, *bias; /* D elements (ones / zeros when absent) */
    void *mean, *rstd;         /* one per row */
    void *dweight, *dbias;
    int64_t rows, D;
    double eps;
} ln_job;

/* The loops, once per dtype: T the element, V its vector, W = lanes. */
#define DEFINE_NORM(NAME, T)                                                                \
    typedef vec_##NAME vec_t_##NAME;                                                        \
    enum { W_##NAME = sizeof(vec_##NAME) / sizeof(T) };                                     \
    static inline vec_##NAME load_##NAME(const T *p)                                        \
    {                                                                                       \
        vec_##NAME v;                                                                       \
        memcpy(&v, p, sizeof v);                                                            \
        return v;                                                                           \
    }                                                                                       \
    static inline double hsum_##NAME(vec_##NAME v)                                          \
    {                                                                                       \
        double s = 0;                                                                       \
        for (int k = 0; k < W_##NAME; k++)                                                  \
            s += v[k];                                                                      \
        return s;                                                                           \
    }                                                                                       \
    /* sum of x, and of (x - c)^2 when sq */                                                \
    static inline double sum_##NAME(const T *x, int64_t n, bool sq, T c)                    \
    {                                                                                       \
        vec_##NAME a0 = {0}, a1 = {0};                                                      \
        int64_t i = 0;                                                                      \
        for (; i + 2 * W_##NAME <= n; i += 2 * W_##NAME) {                                  \
            vec_##NAME u = load_##NAME(x + i) - c, v = load_##NAME(x + i + W_##NAME) - c;   \
            a0 += sq ? u * u : u;                                                           \
            a1 += sq ? v * v : v;                                                           \
        }                                                                                   \
        double s = hsum_##NAME(a0 + a1);                                                    \
        for (; i < n; i++)                                                                  \
            s += sq ? (double)(x[i] - c) * (x[i] - c) : (double)(x[i] - c);                 \
        return s;                                                                           \
    }                                                                                       \
    /* sum of g, and of g (x - c) */                                                        \
    static inline void sum2_##NAME(const T *g, const T *x, int64_t n, T c, double *sg,      \
                                   double *sgx)                                             \
    {                                                                                       \
        vec_##NAME a = {0}, b = {0};                                                        \
        int64_t i = 0;                                                                      \
        for (; i + W_##NAME <= n; i += W_##NAME) {                                          \
            vec_##NAME gv = load_##NAME(g + i);                                             \
            a += gv;                                                                        \
            b += gv * (load_##NAME(x + i) - c);                                             \
        }                                                                                   \
        double s = hsum_##NAME(a), t = hsum_##NAME(b);                                      \
        for (; i < n; i++) {                                                                \
            s += g[i];                                                                      \
            t += (double)g[i] * (x[i] - c);                                                 \
        }                                                                                   \
        *sg += s;                                                                           \
        *sgx += t;                                                                          \
    }                                                                                       \
    /* y = x a + b (+ g c when g) */                                                        \
    static inline void axpb_##NAME(T *y, const T *x, const T *g, int64_t n, T a, T b, T c)  \
    {                                                                                       \
        int64_t i = 0;                                                                      \
        for (; i + W_##NAME <= n; i += W_##NAME) {                                          \
            vec_##NAME v = load_##NAME(x + i) * a + b;                                      \
            if (g)                                                                          \
                v += load_##NAME(g + i) * c;                                                \
            memcpy(y + i, &v, sizeof v);                                                    \
        }                                                                                   \
        for (; i < n; i++)                                                                  \
            y[i] = x[i] * a + b + (g ? g[i] * c : 0);                                       \
    }                                                                                       \
    static void bn_forward_##NAME(int64_t begin, int64_t end, void *ctx)                    \
    {                                                                                       \
        const bn_job *j = ctx;                                                              \
        const T *x = j->x, *w = j->weight, *bias = j->bias;                                 \
        int64_t N = j->N, C = j->C, S = j->S;                                               \
        for (int64_t c = begin; c < end; c++) {                                             \
            T mean, invstd;                                                                 \
            if (j->training) {                                                              \
                double s = 0, q = 0;                                                        \
                for (int64_t n = 0; n < N; n++)                                             \
                    s += sum_##NAME(x + (n * C + c) * S, S, false, 0);                      \
                mean = (T)(s / (double)(N * S));                                            \
                for (int64_t n = 0; n < N; n++)                                             \
                    q += sum_##NAME(x + (n * C + c) * S, S, true, mean);                    \
                double var = q / (double)(N * S);                                           \
                invstd = (T)(1 / sqrt(var + j->eps));                                       \
                ((T *)j->var_out)[c] = (T)var;                                              \
            } else {                                                                        \
                mean = ((const T *)j->mean_in)[c];                                          \
                invstd = (T)(1 / sqrt((double)((const T *)j->invstd_in)[c] + j->eps));      \
            }                                                                               \
            ((T *)j->mean_out)[c] = mean;                                                   \
            ((T *)j->invstd_out)[c] = invstd;                                               \
            T a = (w ? w[c] : 1) * invstd, b = (bias ? bias[c] : 0) - mean * a;             \
            for (int64_t n = 0; n < N; n++)                                                 \
                axpb_##NAME((T *)j->y + (n * C + c) * S, x + (n * C + c) * S, NULL, S, a,   \
                            b, 0);                                                          \
        }                                                                                   \
    }                                                                                       \
    /* gx = w r (g - mean(g) - xhat mean(g xhat)) in training, w r g in eval;              \
     * as gx = g a + x b + c0 per channel */                                                \
    static void bn_backward_##NAME(int64_t begin, int64_t end, void *ctx)                   \
    {                                                                                       \
        const bn_job *j = ctx;                                                              \
        const T *x = j->x, *g = j->g, *w = j->weight;                                       \
        int64_t N = j->N, C = j->C, S = j->S;                                               \
        double M = (double)(N * S);                                                         \
        for (int64_t c = begin; c < end; c++) {                                             \
            T mu = ((const T *)j->mean_in)[c], r = ((const T *)j->invstd_in)[c];            \
            double sg = 0, sgx = 0;                                                         \
            for (int64_t n = 0; n < N; n++)                                                 \
                sum2_##NAME(g + (n * C + c) * S, x + (n * C + c) * S, S, mu, &sg, &sgx);    \
            ((T *)j->dweight)[c] = (T)(sgx * r);                                            \
            ((T *)j->dbias)[c] = (T)sg;                                                     \
            double wr = (double)(w ? w[c] : 1) * r, a = wr, b = 0, c0 = 0;                  \
            if (j->training) {                                                              \
                b = -wr * r * r * sgx / M;                                                  \
                c0 = -wr * sg / M - b * mu;                                                 \
            }                                                                               \
            for (int64_t n = 0; n < N; n++)                                                 \
                axpb_##NAME((T *)j->y + (n * C + c) * S, x + (n * C + c) * S,               \
                            g + (n * C + c) * S, S, (T)b, (T)c0, (T)a);                     \
        }                                                                                   \
    }                                                                                       \
    static void ln_forward_##NAME(int64_t begin, int64_t end, void *ctx)                    \
    {                                                                                       \
        const ln_job *j = ctx;                                                              \
        const T *w = j->weight, *bias = j->bias;                                            \
        int64_t D = j->D;                                                                   \
        for (int64_t row = begin; row < end; row++) {                                       \
            const T *x = (const T *)j->x + row * D;                                         \
            T *y = (T *)j->y + row * D;                                                     \
            T mean = (T)(sum_##NAME(x, D, false, 0) / (double)D);                           \
            T r = (T)(1 / sqrt(sum_##NAME(x, D, true, mean) / (double)D + j->eps));         \
            ((T *)j->mean)[row] = mean;                                                     \
            ((T *)j->rstd)[row] = r;                                                        \
            int64_t i = 0;                                                                  \
            for (; i + W_##NAME <= D; i += W_##NAME) {                                      \
                vec_##NAME v = (load_##NAME(x + i) - mean) * r * load_##NAME(w + i) +       \
                               load_##NAME(bias + i);                                       \
                memcpy(y + i, &v, sizeof v);                                                \
            }                                                                               \
            for (; i < D; i++)                                                              \
                y[i] = (x[i] - mean) * r * w[i] + bias[i];                                  \
        }                                                                                   \
    }                                                                                       \
    /* per row: gx = r (w g - mean(w g) - xhat mean(w g xhat)) */                           \
    static void ln_backward_##NAME(int64_t begin, int64_t end, void *ctx)                   \
    {                                                                                       \
        const ln_job *j = ctx;                                                              \
        const T *w = j->weight;                                                             \
        int64_t D = j->D;                                                                   \
        for (int64_t row = begin; row < end; row++) {                                       \
            const T *x = (const T *)j->x + row * D, *g = (const T *)j->g + row * D;         \
            T *gx = (T *)j->y + row * D;                                                    \
            T mu = ((const T *)j->mean)[row], r = ((const T *)j->rstd)[row];                \
            vec_##NAME va = {0}, vb = {0};                                                  \
            int64_t i = 0;                                                                  \
            for (; i + W_##NAME <= D; i += W_##NAME) {                                      \
                vec_##NAME wg = load_##NAME(w + i) * load_##NAME(g + i);                    \
                va += wg;                                                                   \
                vb += wg * (load_##NAME(x + i) - mu);                                       \
            }                                                                               \
            double A = hsum_##NAME(va), B = hsum_##NAME(vb);                                \
            for (; i < D; i++) {                                                            \
                A += (double)w[i] * g[i];                                                   \
                B += (double)w[i] * g[i] * (x[i] - mu);                                     \
            }                                                                               \
            T k0 = (T)(-r * A / (double)D), k1 = (T)(-(double)r * r * r * B / (double)D);   \
            for (i = 0; i + W_##NAME <= D; i += W_##NAME) {                                 \
                vec_##NAME v = load_##NAME(w + i) * load_##NAME(g + i) * r +                \
                               (load_##NAME(x + i) - mu) * k1 + k0;                         \
                memcpy(gx + i, &v, sizeof v);                                               \
            }                                                                               \
            for (; i < D; i++)                                                              \
                gx[i] = w[i] * g[i] * r + (x[i] - mu) * k1 + k0;                            \
        }                                                                                   \
    }                                                                                       \
    /* dweight and dbias over columns [begin, end): sums down the rows */                   \
    static void ln_param_grads_##NAME(int64_t begin, int64_t end, void *ctx)                \
    {                                                                                       \
        const ln_job *j = ctx;                                                              \
        int64_t D = j->D;                                                                   \
        T *dw = (T *)j->dweight + begin, *db = (T *)j->dbias + begin;                       \
        int64_t n = end - begin;                                                            \
        for (int64_t i = 0; i < n; i++)                                                     \
            dw[i] = db[i] = 0;                                                              \
        for (int64_t row = 0; row < j->rows; row++) {                                       \
            const T *x = (const T *)j->x + row * D + begin;                                 \
            const T *g = (const T *)j->g + row * D + begin;                                 \
            T mu = ((const T *)j->mean)[row], r = ((const T *)j->rstd)[row];                \
            for (int64_t i = 0; i < n; i++) {                                               \
                dw[i] += g[i] * (x[i] - mu) * r;                                            \
                db[i] += g[i];                                                              \
            }                                                                               \
        }                                                                                   \
    }
DEFINE_NORM(float32, float)
DEFINE_NORM(float64, double)

typedef void (*range_fn)(int64_t begin, int64_t end, void *ctx);
typedef struct norm_loops {
    range_fn bn_forward, bn_backward, ln_forward, ln_backward, ln_param_grads;
} norm_loops;
static const norm_loops loops[WEFT_NUM_DTYPES] = {
    [WEFT_FLOAT32] = {bn_forward_float32, bn_backward_float32, ln_forward_float32,
                      ln_backward_float32, ln_param_grads_float32},
    [WEFT_FLOAT64] = {bn_forward_float64, bn_backward_float64, ln_forward_float64,
                      ln_backward_float64, ln_param_grads_float64},
};

static const weft_tensor *optional_tensor(const weft_value *v)
{
    return v->tag == WEFT_VALUE_TENSOR ? v->u.tensor : NULL;
}

static void release_all(weft_tensor **ts, int n)
{
    for (int i = 0; i < n; i++)
        weft_tensor_release(ts[i]);
}

/* An optional per-channel (or per-element) parameter as a contiguous
 * tensor of the compute dtype with `count` elements; NULL stays NULL. */
static int param_operand(weft_tensor **out, const char *op, const char *name,
                         const weft_tensor *t, int64_t count, weft_dtype compute)
{
    *out = NULL;
    if (!t)
        return 0;
    int rc = cpu__check_cpu(op, name, t);
    if (rc < 0)
        return rc;
    if (weft_tensor_numel(t) != count)
        return weft_set_error(WEFT_ESHAPE, "%s: %s must have %lld elements, got %lld", op, name,
                              (long long)count, (long long)weft_tensor_numel(t));
    if (cpu__compute_dtype(weft_tensor_dtype(t)) == WEFT_DTYPE_UNSET)
        return weft_set_error(WEFT_EDTYPE, "%s: %s must be a floating-point tensor, got %s", op,
                              name, weft_dtype_name(weft_tensor_dtype(t)));
    return cpu__operand(out, t, compute);
}

static int new_vector(weft_tensor **out, int64_t n, weft_dtype dtype)
{
    return weft_empty(out, &n, 1, dtype, WEFT_DEVICE_CPU);
}

/* running = (1 - momentum) running + momentum factor stat, outside the graph */
static int update_running(weft_tensor *running, const weft_tensor *stat, double momentum,
                          double factor)
{
    bool mode = weft_set_grad_enabled(false);
    weft_tensor *flat = NULL, *scaled = NULL;
    int rc = weft_reshape(&flat, stat, weft_tensor_sizes(running), weft_tensor_ndim(running));
    if (rc == 0)
        rc = weft_mul_scalar(&scaled, flat, momentum * factor);
    if (rc == 0)
        rc = weft_mul_scalar_(running, 1 - momentum);
    if (rc == 0)
        rc = weft_add_(running, scaled);
    weft_tensor_release(flat);
    weft_tensor_release(scaled);
    weft_set_grad_enabled(mode);
    return rc;
}

static const char *const bn_param_names[4] = {"weight", "bias", "running_mean", "running_var"};

/* N, C and S (the product of the dims after the channels) of a batch_norm
 * input */
static int bn_shape(const char *op, const weft_tensor *x, int64_t *N, int64_t *C, int64_t *S)
{
    int nd = weft_tensor_ndim(x);
    if (nd < 2)
        return weft_set_error(WEFT_ESHAPE, "%s: expected an input with at least 2 dims "
                              "[N, C, ...], got %d-D", op, nd);
    *N = weft_tensor_size(x, 0);
    *C = weft_tensor_size(x, 1);
    *S = 1;
    for (int d = 2; d < nd; d++)
        *S *= weft_tensor_size(x, d);
    return 0;
}

/* native_batch_norm(input, weight?, bias?, running_mean?, running_var?,
 * training, momentum, eps) -> (output, save_mean, save_invstd); in eval
 * the saved statistics are the running ones (invstd from running_var) */
static int native_batch_norm_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "batch_norm";
    const weft_value *a = call->args;
    const weft_tensor *x = a[0].u.tensor;
    weft_tensor *rm = (weft_tensor *)optional_tensor(&a[3]);
    weft_tensor *rv = (weft_tensor *)optional_tensor(&a[4]);
    bool training = a[5].u.b;
    double momentum = a[6].u.d, eps = a[7].u.d;
    weft_dtype compute;
    int64_t N = 0, C = 0, S = 0;
    int rc = cpu__check_floating(op, "input", x, &compute);
    if (rc == 0)
        rc = bn_shape(op, x, &N, &C, &S);
    if (rc < 0)
        return rc;
    bool use_batch = training || !rm || !rv;
    if (training && N * S <= 1)
        return weft_set_error(WEFT_EINVAL, "%s: expected more than 1 value per channel when "
                              "training, got input of %lld values per channel",
                              op, (long long)(N * S));
    enum { X, W, B, RM, RV, Y, MEAN, INVSTD, VAR, NT };
    weft_tensor *t[NT] = {0};
    for (int i = 0; i < 4 && rc == 0; i++)
        rc = param_operand(&t[W + i], op, bn_param_names[i], optional_tensor(&a[1 + i]), C,
                           compute);
    if (rc == 0)
        rc = cpu__operand(&t[X], x, compute);
    if (rc == 0)
        rc = weft_empty(&t[Y], weft_tensor_sizes(x), weft_tensor_ndim(x), compute,
                        WEFT_DEVICE_CPU);
    if (rc == 0 && (rc = new_vector(&t[MEAN], C, compute)) == 0 &&
        (rc = new_vector(&t[INVSTD], C, compute)) == 0)
        rc = new_vector(&t[VAR], C, compute);
    if (rc == 0 && C > 0) {
        bn_job job = {
            .x = weft_tensor_data_ptr(t[X]), .y = weft_tensor_data_ptr(t[Y]),
            .weight = t[W] ? weft_tensor_data_ptr(t[W]) : NULL,
            .bias = t[B] ? weft_tensor_data_ptr(t[B]) : NULL,
            .mean_in = use_batch ? NULL : weft_tensor_data_ptr(t[RM]),
            .invstd_in = use_batch ? NULL : weft_tensor_data_ptr(t[RV]),
            .mean_out = weft_tensor_data_ptr(t[MEAN]),
            .invstd_out = weft_tensor_data_ptr(t[INVSTD]),
            .var_out = weft_tensor_data_ptr(t[VAR]), .N = N, .C = C, .S = S, .eps = eps,
            .training = use_batch};
        if (N * S > 0 || !use_batch)
            cpu__parallel_for(0, C, CPU_GRAIN / (N * S + 1) + 1, loops[compute].bn_forward, &job);
    }
    if (rc == 0 && C > 0 && N * S == 0 && use_batch) { /* the mean of nothing */
        rc = weft_fill_(t[MEAN], NAN);
        if (rc == 0)
            rc = weft_fill_(t[INVSTD], NAN);
    }
    if (rc == 0 && training && rm)
        rc = update_running(rm, t[MEAN], momentum, 1.0);
    if (rc == 0 && training && rv)
        rc = update_running(rv, t[VAR], momentum, (double)(N * S) / (double)(N * S - 1));
    weft_tensor *y = t[Y], *mean = t[MEAN], *invstd = t[INVSTD];
    t[Y] = t[MEAN] = t[INVSTD] = NULL;
    release_all(t, NT);
    if (rc == 0) {
        rc = cpu__set_result(call, 0, y, weft_tensor_dtype(x));
        y = NULL;
    }
    if (rc == 0) {
        rc = cpu__set_result(call, 1, mean, compute);
        mean = NULL;
    }
    if (rc == 0) {
        rc = cpu__set_result(call, 2, invstd, compute);
        invstd = NULL;
    }
    weft_tensor *left[3] = {y, mean, invstd};
    release_all(left, 3);
    return rc;
}

/* Copies a computed gradient into rets[i] in dtype. */
static int set_grad(weft_call *call, int i, weft_tensor **t, weft_dtype dtype)
{
    weft_tensor *r = *t;
    *t = NULL;
    return cpu__set_result(call, i, r, dtype);
}

static int check_same_shape(const char *op, const weft_tensor *g, const weft_tensor *x)
{
    bool same = weft_tensor_ndim(g) == weft_tensor_ndim(x);
    for (int d = 0; same && d < weft_tensor_ndim(x); d++)
        same = weft_tensor_size(g, d) == weft_tensor_size(x, d);
    if (same)
        return 0;
    char b1[128], b2[128];
    return weft_set_error(WEFT_ESHAPE, "%s: grad_out of shape %s does not match input of "
                          "shape %s", op,
                          weft_format_shape(b1, sizeof b1, weft_tensor_sizes(g), weft_tensor_ndim(g)),
                          weft_format_shape(b2, sizeof b2, weft_tensor_sizes(x), weft_tensor_ndim(x)));
}

/* native_batch_norm_backward(grad_out, input, weight?, save_mean,
 * save_invstd, training) -> (grad_input, grad_weight, grad_bias) */
static int native_batch_norm_backward_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "native_batch_norm_backward";
    const weft_value *a = call->args;
    const weft_tensor *g = a[0].u.tensor, *x = a[1].u.tensor, *w = optional_tensor(&a[2]);
    weft_dtype compute, gc;
    int64_t N = 0, C = 0, S = 0;
    int rc = cpu__check_floating(op, "input", x, &compute);
    if (rc == 0)
        rc = cpu__check_floating(op, "grad_out", g, &gc);
    if (rc == 0)
        rc = bn_shape(op, x, &N, &C, &S);
    if (rc == 0)
        rc = check_same_shape(op, g, x);
    if (rc < 0)
        return rc;
    enum { X, G, W, MEAN, INVSTD, GX, DW, DB, NT };
    weft_tensor *t[NT] = {0};
    if ((rc = cpu__operand(&t[X], x, compute)) == 0)
        rc = cpu__operand(&t[G], g, compute);
    if (rc == 0)
        rc = param_operand(&t[W], op, "weight", w, C, compute);
    if (rc == 0)
        rc = param_operand(&t[MEAN], op, "save_mean", a[3].u.tensor, C, compute);
    if (rc == 0)
        rc = param_operand(&t[INVSTD], op, "save_invstd", a[4].u.tensor, C, compute);
    if (rc == 0)
        rc = weft_empty(&t[GX], weft_tensor_sizes(x), weft_tensor_ndim(x), compute,
                        WEFT_DEVICE_CPU);
    if (rc == 0 && (rc = new_vector(&t[DW], C, compute)) == 0)
        rc = new_vector(&t[DB], C, compute);
    if (rc == 0 && C > 0) {
        bn_job job = {.x = weft_tensor_data_ptr(t[X]), .g = weft_tensor_data_ptr(t[G]),
                      .y = weft_tensor_data_ptr(t[GX]),
                      .weight = t[W] ? weft_tensor_data_ptr(t[W]) : NULL,
                      .mean_in = weft_tensor_data_ptr(t[MEAN]),
                      .invstd_in = weft_tensor_data_ptr(t[INVSTD]),
                      .dweight = weft_tensor_data_ptr(t[DW]), .dbias = weft_tensor_data_ptr(t[DB]),
                      .N = N, .C = C, .S = S, .training = a[5].u.b};
        cpu__parallel_for(0, C, CPU_GRAIN / (N * S + 1) + 1, loops[compute].bn_backward, &job);
    }
    weft_dtype wdtype = w ? weft_tensor_dtype(w) : compute;
    if (rc == 0)
        rc = set_grad(call, 0, &t[GX], weft_tensor_dtype(x));
    if (rc == 0)
        rc = set_grad(call, 1, &t[DW], wdtype);
    if (rc == 0)
        rc = set_grad(call, 2, &t[DB], wdtype);
    release_all(t, NT);
    return rc;
}

/* rows and D of a layer_norm input, after checking normalized_shape */
static int ln_shape(const char *op, const weft_tensor *x, const weft_value *shape, int64_t *rows,
                    int64_t *D)
{
    int nd = weft_tensor_ndim(x), k = shape->len;
    bool fits = k >= 1 && k <= nd;
    for (int i = 0; fits && i < k; i++)
        fits = weft_tensor_size(x, nd - k + i) == shape->u.ints[i];
    if (!fits) {
        char b1[128], b2[128];
        return weft_set_error(WEFT_ESHAPE, "%s: normalized_shape %s does not match the last "
                              "dims of an input of shape %s", op,
                              weft_format_shape(b1, sizeof b1, shape->u.ints, k),
                              weft_format_shape(b2, sizeof b2, weft_tensor_sizes(x), nd));
    }
    *rows = *D = 1;
    for (int d = 0; d < nd; d++)
        *(d < nd - k ? rows : D) *= weft_tensor_size(x, d);
    return 0;
}

/* A per-element parameter, or `fill` (1 or 0) everywhere when absent: one
 * loop body serves all four combinations. */
static int param_or_fill(weft_tensor **out, const char *op, const char *name, const weft_tensor *t,
                         int64_t D, weft_dtype compute, double fill)
{
    if (t)
        return param_operand(out, op, name, t, D, compute);
    return weft_full(out, &D, 1, fill, compute, WEFT_DEVICE_CPU);
}

/* native_layer_norm(input, normalized_shape, weight?, bias?, eps) ->
 * (output, mean, rstd); mean and rstd have input's leading dims and 1 for
 * each normalised dim, as in PyTorch */
static int native_layer_norm_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "layer_norm";
    const weft_value *a = call->args;
    const weft_tensor *x = a[0].u.tensor;
    weft_dtype compute;
    int64_t rows = 0, D = 0;
    int rc = cpu__check_floating(op, "input", x, &compute);
    if (rc == 0)
        rc = ln_shape(op, x, &a[1], &rows, &D);
    if (rc < 0)
        return rc;
    int nd = weft_tensor_ndim(x), k = a[1].len;
    int64_t stat_shape[WEFT_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        stat_shape[d] = d < nd - k ? weft_tensor_size(x, d) : 1;
    enum { X, W, B, Y, MEAN, RSTD, NT };
    weft_tensor *t[NT] = {0};
    rc = param_or_fill(&t[W], op, "weight", optional_tensor(&a[2]), D, compute, 1.0);
    if (rc == 0)
        rc = param_or_fill(&t[B], op, "bias", optional_tensor(&a[3]), D, compute, 0.0);
    if (rc == 0)
        rc = cpu__operand(&t[X], x, compute);
    if (rc == 0)
        rc = weft_empty(&t[Y], weft_tensor_sizes(x), nd, compute, WEFT_DEVICE_CPU);
    if (rc == 0 && (rc = weft_empty(&t[MEAN], stat_shape, nd, compute, WEFT_DEVICE_CPU)) == 0)
        rc = weft_empty(&t[RSTD], stat_shape, nd, compute, WEFT_DEVICE_CPU);
    if (rc == 0 && rows > 0 && D > 0) {
        ln_job job = {.x = weft_tensor_data_ptr(t[X]), .y = weft_tensor_data_ptr(t[Y]),
                      .weight = weft_tensor_data_ptr(t[W]), .bias = weft_tensor_data_ptr(t[B]),
                      .mean = weft_tensor_data_ptr(t[MEAN]), .rstd = weft_tensor_data_ptr(t[RSTD]),
                      .rows = rows, .D = D, .eps = a[4].u.d};
        cpu__parallel_for(0, rows, CPU_GRAIN / D + 1, loops[compute].ln_forward, &job);
    } else if (rc == 0 && rows > 0) { /* D == 0: the mean of nothing */
        rc = weft_fill_(t[MEAN], NAN);
        if (rc == 0)
            rc = weft_fill_(t[RSTD], NAN);
    }
    if (rc == 0)
        rc = set_grad(call, 0, &t[Y], weft_tensor_dtype(x));
    if (rc == 0)
        rc = set_grad(call, 1, &t[MEAN], compute);
    if (rc == 0)
        rc = set_grad(call, 2, &t[RSTD], compute);
    release_all(t, NT);
    return rc;
}

/* native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd,
 * weight?) -> (grad_input, grad_weight, grad_bias), the parameter
 * gradients shaped like normalized_shape */
static int native_layer_norm_backward_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "native_layer_norm_backward";
    const weft_value *a = call->args;
    const weft_tensor *g = a[0].u.tensor, *x = a[1].u.tensor, *w = optional_tensor(&a[5]);
    weft_dtype compute, gc;
    int64_t rows = 0, D = 0;
    int rc = cpu__check_floating(op, "input", x, &compute);
    if (rc == 0)
        rc = cpu__check_floating(op, "grad_out", g, &gc);
    if (rc == 0)
        rc = ln_shape(op, x, &a[2], &rows, &D);
    if (rc == 0)
        rc = check_same_shape(op, g, x);
    if (rc < 0)
        return rc;
    enum { X, G, W, MEAN, RSTD, GX, DW, DB, NT };
    weft_tensor *t[NT] = {0};
    if ((rc = cpu__operand(&t[X], x, compute)) == 0)
        rc = cpu__operand(&t[G], g, compute);
    if (rc == 0)
        rc = param_or_fill(&t[W], op, "weight", w, D, compute, 1.0);
    if (rc == 0)
        rc = param_operand(&t[MEAN], op, "mean", a[3].u.tensor, rows, compute);
    if (rc == 0)
        rc = param_operand(&t[RSTD], op, "rstd", a[4].u.tensor, rows, compute);
    if (rc == 0)
        rc = weft_empty(&t[GX], weft_tensor_sizes(x), weft_tensor_ndim(x), compute,
                        WEFT_DEVICE_CPU);
    if (rc == 0 && (rc = weft_zeros(&t[DW], a[2].u.ints, a[2].len, compute, WEFT_DEVICE_CPU)) == 0)
        rc = weft_zeros(&t[DB], a[2].u.ints, a[2].len, compute, WEFT_DEVICE_CPU);
    if (rc == 0 && rows > 0 && D > 0) {
        ln_job job = {.x = weft_tensor_data_ptr(t[X]), .g = weft_tensor_data_ptr(t[G]),
                      .y = weft_tensor_data_ptr(t[GX]), .weight = weft_tensor_data_ptr(t[W]),
                      .mean = weft_tensor_data_ptr(t[MEAN]), .rstd = weft_tensor_data_ptr(t[RSTD]),
                      .dweight = weft_tensor_data_ptr(t[DW]), .dbias = weft_tensor_data_ptr(t[DB]),
                      .rows = rows, .D = D};
        cpu__parallel_for(0, rows, CPU_GRAIN / D + 1, loops[compute].ln_backward, &job);
        /* columns in blocks of 64: each block's sums run down every row */
        cpu__parallel_for(0, D, D * rows >= CPU_GRAIN ? 64 : D, loops[compute].ln_param_grads,
                          &job);
    }
    weft_dtype wdtype = w ? weft_tensor_dtype(w) : compute;
    if (rc == 0)
        rc = set_grad(call, 0, &t[GX], weft_tensor_dtype(x));
    if (rc == 0)
        rc = set_grad(call, 1, &t[DW], wdtype);
    if (rc == 0)
        rc = set_grad(call, 2, &t[DB], wdtype);
    release_all(t, NT);
    return rc;
}

/* batch_norm and layer_norm: the first result of their native forms */
static int first_of(weft_call *call, int (*native)(weft_tensor **, weft_tensor **,
                                                   weft_tensor **, const weft_value *))
{
    weft_tensor *y = NULL, *s1 = NULL, *s2 = NULL;
    int rc = native(&y, &s1, &s2, call->args);
    weft_tensor_release(s1);
    weft_tensor_release(s2);
    if (rc < 0)
        return rc;
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = y;
    return 0;
}

static int call_native_batch_norm(weft_tensor **y, weft_tensor **m, weft_tensor **s,
                                  const weft_value *a)
{
    return weft_native_batch_norm(y, m, s, a[0].u.tensor, optional_tensor(&a[1]),
                                  optional_tensor(&a[2]), optional_tensor(&a[3]),
                                  optional_tensor(&a[4]), a[5].u.b, a[6].u.d, a[7].u.d);
}

static int call_native_layer_norm(weft_tensor **y, weft_tensor **m, weft_tensor **s,
                                  const weft_value *a)
{
    return weft_native_layer_norm(y, m, s, a[0].u.tensor, a[1].u.ints, a[1].len,
                                  optional_tensor(&a[2]), optional_tensor(&a[3]), a[4].u.d);
}

static int batch_norm_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    return first_of(call, call_native_batch_norm);
}

static int layer_norm_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    return first_of(call, call_native_layer_norm);
}

static const weft_kernel_entry norm_entries[] = {
    {"native_batch_norm", native_batch_norm_kernel, NULL},
    {"native_batch_norm_backward", native_batch_norm_backward_kernel, NULL},
    {"native_layer_norm", native_layer_norm_kernel, NULL},
    {"native_layer_norm_backward", native_layer_norm_backward_kernel, NULL},
};

int cpu__register_nn_norm(weft_registrar *reg)
{
    int rc = weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, norm_entries, sizeof norm_entries / sizeof *norm_entries);
    if (rc == 0)
        rc = cpu__register_composite(reg, "batch_norm", batch_norm_composite);
    if (rc == 0)
        rc = cpu__register_composite(reg, "layer_norm", layer_norm_composite);
    return rc;
}
