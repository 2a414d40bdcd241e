/* backends/cpu/nn_loss.c — the losses.  nll_loss and cross_entropy are fused
 * kernels (cross_entropy computes the log-softmax on the fly, for class
 * indices and for class probabilities, with weights, ignore_index and label
 * smoothing) with backward operators; the elementwise losses are composites
 * of weft operators, which get their derivatives through their parts.
 * Input [N, C, d1...] (or [C]) is seen as [N, C, inner]; per-element losses
 * are summed in double on the calling thread, so results do not depend on
 * the thread count. */
#include <stdlib.h>

#include "nn.h"
#include "vec_math.h"

typedef struct loss_job {
    const void *x;        /* self: logits (cross_entropy) or log-probabilities (nll_loss) */
    const void *probs;    /* probability targets, laid out as x; or NULL */
    const int64_t *target; /* class indices, one per element; or NULL */
    const void *weight;   /* [C] or NULL */
    int64_t C, inner, ignore_index;
    double smoothing;
    bool logits;          /* cross_entropy: x holds logits */
    double *loss, *wsum;  /* forward: per element */
    const void *grad;     /* backward: per element (none) or one value */
    bool grad_per_element;
    double grad_scale;    /* backward: 1/denominator for mean, else 1 */
    void *out;            /* backward: the gradient, laid out as x */
} loss_job;

/* Per dtype: forward losses and backward gradients of elements [begin, end)
 * (element e is sample e / inner at position e % inner). */
#define DEFINE_LOSS(NAME, T, EXP, LOG)                                                     \
    static double weight_##NAME(const loss_job *j, int64_t c)                              \
    {                                                                                      \
        return j->weight ? (double)((const T *)j->weight)[c] : 1.0;                        \
    }                                                                                      \
    /* the row's maximum and log-sum-exp */                                                \
    static double lse_##NAME(const T *row, int64_t C, int64_t I)                           \
    {                                                                                      \
        if (I == 1 && _Generic((row), const float *: true, default: false)) {             \
            float vmx;                                                                     \
            double vsum;                                                                   \
            if (vec_max_sumexp((const float *)(const void *)row, C, &vmx, &vsum))          \
                return (double)vmx + log(vsum);                                            \
        }                                                                                  \
        T mx = -INFINITY;                                                                  \
        for (int64_t c = 0; c < C; c++)                                                    \
            mx = row[c * I] > mx ? row[c * I] : mx;                                        \
        T sum = 0;                                                                         \
        for (int64_t c = 0; c < C; c++)                                                    \
            sum += EXP(row[c * I] - mx);                                                   \
        return (double)mx + (double)LOG(sum);                                              \
    }                                                                                      \
    static void loss_forward_##NAME(int64_t begin, int64_t end, void *ctx)                 \
    {                                                                                      \
        const loss_job *j = ctx;                                                           \
        int64_t C = j->C, I = j->inner;                                                    \
        double eps = j->smoothing;                                                         \
        for (int64_t e = begin; e < end; e++) {                                            \
            const T *row = (const T *)j->x + (e / I) * C * I + e % I;                      \
            double lse = j->logits ? lse_##NAME(row, C, I) : 0.0, loss = 0;                \
            if (j->probs) {                                                                \
                const T *y = (const T *)j->probs + (e / I) * C * I + e % I;                \
                for (int64_t c = 0; c < C; c++)                                            \
                    loss -= weight_##NAME(j, c) * ((double)y[c * I] * (1 - eps) + eps / C) * \
                            ((double)row[c * I] - lse);                                    \
                j->loss[e] = loss;                                                         \
                continue;                                                                  \
            }                                                                              \
            int64_t t = j->target[e];                                                      \
            if (t == j->ignore_index) {                                                    \
                j->loss[e] = j->wsum[e] = 0;                                               \
                continue;                                                                  \
            }                                                                              \
            double wt = weight_##NAME(j, t);                                               \
            loss = -(1 - eps) * wt * ((double)row[t * I] - lse);                           \
            if (eps > 0) {                                                                 \
                double smooth = 0;                                                         \
                for (int64_t c = 0; c < C; c++)                                            \
                    smooth -= weight_##NAME(j, c) * ((double)row[c * I] - lse);            \
                loss += eps / C * smooth;                                                  \
            }                                                                              \
            j->loss[e] = loss;                                                             \
            j->wsum[e] = wt;                                                               \
        }                                                                                  \
    }                                                                                      \
    static void loss_backward_##NAME(int64_t begin, int64_t end, void *ctx)                \
    {                                                                                      \
        const loss_job *j = ctx;                                                           \
        int64_t C = j->C, I = j->inner;                                                    \
        double eps = j->smoothing;                                                         \
        for (int64_t e = begin; e < end; e++) {                                            \
            int64_t base = (e / I) * C * I + e % I;                                        \
            const T *row = (const T *)j->x + base;                                         \
            T *gx = (T *)j->out + base;                                                    \
            double g = (j->grad_per_element ? (double)((const T *)j->grad)[e]              \
                                            : (double)((const T *)j->grad)[0]) *           \
                       j->grad_scale;                                                      \
            int64_t t = j->target ? j->target[e] : -1;                                     \
            if (j->target && t == j->ignore_index) {                                       \
                for (int64_t c = 0; c < C; c++)                                            \
                    gx[c * I] = 0;                                                         \
                continue;                                                                  \
            }                                                                              \
            if (!j->logits) { /* nll_loss: -w_t at the target */                           \
                for (int64_t c = 0; c < C; c++)                                            \
                    gx[c * I] = 0;                                                         \
                gx[t * I] = (T)(-g * weight_##NAME(j, t));                                 \
                continue;                                                                  \
            }                                                                              \
            double lse = lse_##NAME(row, C, I);                                            \
            if (j->probs) { /* p_c S - w_c y'_c, S = sum_c w_c y'_c */                     \
                const T *y = (const T *)j->probs + base;                                   \
                double S = 0;                                                              \
                for (int64_t c = 0; c < C; c++)                                            \
                    S += weight_##NAME(j, c) * ((double)y[c * I] * (1 - eps) + eps / C);   \
                for (int64_t c = 0; c < C; c++) {                                          \
                    double yc = (double)y[c * I] * (1 - eps) + eps / C;                    \
                    gx[c * I] = (T)(g * (exp((double)row[c * I] - lse) * S -               \
                                         weight_##NAME(j, c) * yc));                       \
                }                                                                          \
                continue;                                                                  \
            }                                                                              \
            /* p_c A - (1-eps) w_t [c == t] - eps/C w_c, A = (1-eps) w_t + eps/C W */      \
            double wt = weight_##NAME(j, t), W = 0;                                        \
            for (int64_t c = 0; eps > 0 && c < C; c++)                                     \
                W += weight_##NAME(j, c);                                                  \
            double A = (1 - eps) * wt + eps / C * W;                                       \
            /* p_c in the dtype's precision, like torch's, eight lanes at a    \
             * time for float32 rows (a libm exp per class was most of the     \
             * backward's time) */                                              \
            if (I == 1 && _Generic((row), const float *: true, default: false) &&          \
                isfinite(lse))                                                             \
                vec_exp_shifted((const float *)(const void *)row, C, (float)lse,           \
                                (float *)(void *)gx);                                      \
            else                                                                           \
                for (int64_t c = 0; c < C; c++)                                            \
                    gx[c * I] = EXP((T)((double)row[c * I] - lse));                        \
            for (int64_t c = 0; c < C; c++)                                                \
                gx[c * I] = (T)(g * ((double)gx[c * I] * A -                               \
                                     (eps > 0 ? eps / C * weight_##NAME(j, c) : 0)));      \
            gx[t * I] = (T)((double)gx[t * I] - g * (1 - eps) * wt);                       \
        }                                                                                  \
    }
DEFINE_LOSS(float32, float, expf, logf)
DEFINE_LOSS(float64, double, exp, log)

typedef void (*loss_fn)(int64_t begin, int64_t end, void *ctx);
static const loss_fn forward_loops[WEFT_NUM_DTYPES] = {
    [WEFT_FLOAT32] = loss_forward_float32, [WEFT_FLOAT64] = loss_forward_float64};
static const loss_fn backward_loops[WEFT_NUM_DTYPES] = {
    [WEFT_FLOAT32] = loss_backward_float32, [WEFT_FLOAT64] = loss_backward_float64};

/* The arguments of nll_loss / cross_entropy (and their backward forms),
 * checked and made contiguous in the compute dtype. */
typedef struct loss_args {
    const char *op;
    weft_dtype dtype, compute;
    weft_tensor *x, *probs, *target, *weight; /* owned */
    int64_t N, C, inner;
    nn_reduction reduction;
    int64_t ignore_index;
    double smoothing;
    int out_ndim;            /* the shape of an unreduced loss */
    int64_t out_sizes[WEFT_MAX_DIMS];
} loss_args;

static void loss_args_release(loss_args *a)
{
    weft_tensor_release(a->x);
    weft_tensor_release(a->probs);
    weft_tensor_release(a->target);
    weft_tensor_release(a->weight);
}

static int check_target_shape(loss_args *a, const weft_tensor *self, const weft_tensor *target)
{
    int nd = weft_tensor_ndim(self), tnd = weft_tensor_ndim(target);
    bool same = tnd == (nd == 1 ? 0 : nd - 1);
    for (int d = 0, td = 0; same && d < nd; d++) {
        if (d == (nd == 1 ? 0 : 1))
            continue;
        same = weft_tensor_size(target, td++) == weft_tensor_size(self, d);
    }
    if (!same) {
        char bs[128], bt[128];
        return weft_set_error(WEFT_ESHAPE, "%s: expected target of shape %s without the class "
                              "dim of input %s", a->op,
                              weft_format_shape(bt, sizeof bt, weft_tensor_sizes(target), tnd),
                              weft_format_shape(bs, sizeof bs, weft_tensor_sizes(self), nd));
    }
    return 0;
}

/* args: self, target, weight?, reduction, ignore_index[, label_smoothing],
 * starting at args[first] */
static int loss_args_parse(loss_args *a, const weft_value *args, bool logits)
{
    const weft_tensor *self = args[0].u.tensor, *target = args[1].u.tensor;
    const weft_tensor *weight = args[2].tag == WEFT_VALUE_TENSOR ? args[2].u.tensor : NULL;
    int rc = cpu__check_floating(a->op, "self", self, &a->compute);
    if (rc == 0)
        rc = cpu__check_cpu(a->op, "target", target);
    if (rc == 0 && weight)
        rc = cpu__check_cpu(a->op, "weight", weight);
    if (rc == 0)
        rc = cpu__reduction_arg(a->op, &args[3], &a->reduction);
    if (rc < 0)
        return rc;
    a->dtype = weft_tensor_dtype(self);
    a->ignore_index = args[4].u.i;
    a->smoothing = logits ? args[5].u.d : 0.0;
    if (a->smoothing < 0 || a->smoothing > 1)
        return weft_set_error(WEFT_EINVAL, "%s: label_smoothing must be between 0.0 and 1.0, "
                              "got %g", a->op, a->smoothing);
    int nd = weft_tensor_ndim(self);
    if (nd < 1)
        return weft_set_error(WEFT_ESHAPE, "%s: input must have at least 1 dimension (the "
                              "classes), got a 0-d tensor", a->op);
    a->N = nd == 1 ? 1 : weft_tensor_size(self, 0);
    a->C = weft_tensor_size(self, nd == 1 ? 0 : 1);
    a->inner = 1;
    for (int d = 2; d < nd; d++)
        a->inner *= weft_tensor_size(self, d);
    weft_dtype tdtype = weft_tensor_dtype(target);
    bool prob = logits && cpu__compute_dtype(tdtype) != WEFT_DTYPE_UNSET;
    if (weight && (weft_tensor_ndim(weight) != 1 || weft_tensor_size(weight, 0) != a->C))
        return weft_set_error(WEFT_ESHAPE, "%s: weight must be a 1-D tensor of %lld elements "
                              "(one per class)", a->op, (long long)a->C);
    if (prob) {
        bool same = weft_tensor_ndim(target) == nd;
        for (int d = 0; same && d < nd; d++)
            same = weft_tensor_size(target, d) == weft_tensor_size(self, d);
        if (!same)
            return weft_set_error(WEFT_ESHAPE, "%s: a probability target must have the shape of "
                                  "the input", a->op);
        rc = cpu__operand(&a->probs, target, a->compute);
    } else if (!cpu_integral_or_bool(tdtype) || tdtype == WEFT_BOOL) {
        return weft_set_error(WEFT_EDTYPE, "%s: target must hold class indices (int64)%s, got %s",
                              a->op, logits ? " or class probabilities (floating)" : "",
                              weft_dtype_name(tdtype));
    } else if ((rc = check_target_shape(a, self, target)) == 0) {
        rc = cpu__operand(&a->target, target, WEFT_INT64);
    }
    if (rc == 0)
        rc = cpu__operand(&a->x, self, a->compute);
    if (rc == 0 && weight)
        rc = cpu__operand(&a->weight, weight, a->compute);
    if (rc < 0)
        return rc;
    /* indices are checked before any kernel reads with them */
    const int64_t *t = a->target ? weft_tensor_data_ptr(a->target) : NULL;
    for (int64_t e = 0; t && e < a->N * a->inner; e++)
        if (t[e] != a->ignore_index && (t[e] < 0 || t[e] >= a->C))
            return weft_set_error(WEFT_ERANGE, "%s: target %lld is out of bounds for %lld classes",
                                  a->op, (long long)t[e], (long long)a->C);
    a->out_ndim = 0;
    for (int d = 0; d < nd; d++)
        if (d != (nd == 1 ? 0 : 1))
            a->out_sizes[a->out_ndim++] = weft_tensor_size(self, d);
    return 0;
}

static loss_job job_of(const loss_args *a, bool logits)
{
    loss_job j = {a->x ? weft_tensor_data_ptr(a->x) : NULL,
                  a->probs ? weft_tensor_data_ptr(a->probs) : NULL,
                  a->target ? weft_tensor_data_ptr(a->target) : NULL,
                  a->weight ? weft_tensor_data_ptr(a->weight) : NULL,
                  a->C, a->inner, a->ignore_index, a->smoothing, logits};
    return j;
}

static int64_t grain_of(const loss_args *a)
{
    return CPU_GRAIN / (a->C > 0 ? a->C : 1) + 1;
}

/* nll_loss / cross_entropy (self, target, weight?, reduction, ignore_index
 * [, label_smoothing]) */
static int loss_kernel(weft_call *call, void *ctx)
{
    bool logits = ctx != NULL;
    loss_args a = {weft_op_name(call->op)};
    int rc = loss_args_parse(&a, call->args, logits);
    int64_t count = a.N * a.inner;
    double *buf = NULL;
    weft_tensor *out = NULL;
    if (rc == 0 && !(buf = calloc((size_t)(2 * count + 1), sizeof *buf)))
        rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory", a.op);
    if (rc == 0) {
        loss_job j = job_of(&a, logits);
        j.loss = buf;
        j.wsum = buf + count;
        cpu__parallel_for(0, count, grain_of(&a), forward_loops[a.compute], &j);
        if (a.reduction == NN_NONE) {
            rc = weft_empty(&out, a.out_sizes, a.out_ndim, WEFT_FLOAT64, WEFT_DEVICE_CPU);
            if (rc == 0)
                memcpy(weft_tensor_data_ptr(out), buf, (size_t)count * sizeof *buf);
        } else {
            double loss = 0, wsum = 0;
            for (int64_t e = 0; e < count; e++) {
                loss += buf[e];
                wsum += buf[count + e];
            }
            if (a.reduction == NN_MEAN)
                loss = a.probs ? loss / (double)count : loss / wsum; /* 0/0 is NaN, as in torch */
            rc = weft_full(&out, NULL, 0, loss, WEFT_FLOAT64, WEFT_DEVICE_CPU);
        }
    }
    free(buf);
    weft_dtype dtype = a.dtype;
    loss_args_release(&a);
    return rc < 0 ? rc : cpu__set_result(call, 0, out, dtype);
}

/* nll_loss_backward / cross_entropy_backward (grad_output, self, target,
 * weight?, reduction, ignore_index[, label_smoothing]) */
static int loss_backward_kernel(weft_call *call, void *ctx)
{
    bool logits = ctx != NULL;
    loss_args a = {weft_op_name(call->op)};
    const weft_tensor *grad = call->args[0].u.tensor;
    int rc = loss_args_parse(&a, call->args + 1, logits);
    int64_t count = a.N * a.inner;
    weft_tensor *g = NULL, *out = NULL;
    if (rc == 0 && weft_tensor_numel(grad) != (a.reduction == NN_NONE ? count : 1))
        rc = weft_set_error(WEFT_ESHAPE, "%s: grad_output has %lld elements, expected %lld", a.op,
                            (long long)weft_tensor_numel(grad),
                            (long long)(a.reduction == NN_NONE ? count : 1));
    if (rc == 0)
        rc = cpu__operand(&g, grad, a.compute);
    if (rc == 0)
        rc = weft_empty(&out, weft_tensor_sizes(call->args[1].u.tensor),
                        weft_tensor_ndim(call->args[1].u.tensor), a.compute, WEFT_DEVICE_CPU);
    if (rc == 0) {
        loss_job j = job_of(&a, logits);
        j.grad = weft_tensor_data_ptr(g);
        j.grad_per_element = a.reduction == NN_NONE;
        j.grad_scale = 1.0;
        j.out = weft_tensor_data_ptr(out);
        if (a.reduction == NN_MEAN && a.probs) {
            j.grad_scale = 1.0 / (double)count;
        } else if (a.reduction == NN_MEAN) {
            const int64_t *t = weft_tensor_data_ptr(a.target);
            double wsum = 0;
            for (int64_t e = 0; e < count; e++)
                if (t[e] != a.ignore_index)
                    wsum += a.weight ? (a.compute == WEFT_FLOAT64
                                            ? ((const double *)j.weight)[t[e]]
                                            : ((const float *)j.weight)[t[e]])
                                     : 1.0;
            j.grad_scale = 1.0 / wsum;
        }
        cpu__parallel_for(0, count, grain_of(&a), backward_loops[a.compute], &j);
    }
    weft_tensor_release(g);
    weft_dtype dtype = a.dtype;
    loss_args_release(&a);
    if (rc < 0) {
        weft_tensor_release(out);
        return rc;
    }
    return cpu__set_result(call, 0, out, dtype);
}

/* ------------------------------------------------- composite losses */

static int set_composite_result(weft_call *call, int rc, weft_tensor *loss, nn_reduction red)
{
    weft_tensor *r = NULL;
    if (rc == 0)
        rc = cpu__reduce(&r, loss, red);
    weft_tensor_release(loss);
    if (rc < 0)
        return rc;
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = r;
    return 0;
}

static const weft_tensor *optional_tensor(const weft_value *v)
{
    return v->tag == WEFT_VALUE_TENSOR ? v->u.tensor : NULL;
}

/* mse_loss / l1_loss (self, target, reduction) */
static int mse_loss_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    nn_reduction red;
    int rc = cpu__reduction_arg("mse_loss", &call->args[2], &red);
    if (rc < 0)
        return rc;
    weft_tensor *d = NULL, *loss = NULL;
    rc = weft_sub(&d, call->args[0].u.tensor, call->args[1].u.tensor);
    if (rc == 0)
        rc = weft_mul(&loss, d, d);
    weft_tensor_release(d);
    return set_composite_result(call, rc, loss, red);
}

static int l1_loss_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    nn_reduction red;
    int rc = cpu__reduction_arg("l1_loss", &call->args[2], &red);
    if (rc < 0)
        return rc;
    weft_tensor *d = NULL, *loss = NULL;
    rc = weft_sub(&d, call->args[0].u.tensor, call->args[1].u.tensor);
    if (rc == 0)
        rc = weft_abs(&loss, d);
    weft_tensor_release(d);
    return set_composite_result(call, rc, loss, red);
}

/* smooth_l1_loss (self, target, reduction, beta): with d = |x - y| and
 * m = min(d, beta) = d - relu(d - beta), the loss 0.5 m^2 / beta + (d - m)
 * is 0.5 d^2 / beta below beta and d - beta / 2 above, written with
 * differentiable operators only. */
static int smooth_l1_loss_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    nn_reduction red;
    double beta = call->args[3].u.d;
    int rc = cpu__reduction_arg("smooth_l1_loss", &call->args[2], &red);
    if (rc < 0)
        return rc;
    if (beta < 0)
        return weft_set_error(WEFT_EINVAL, "smooth_l1_loss: beta must be non-negative, got %g",
                              beta);
    weft_tensor *diff = NULL, *d = NULL, *over = NULL, *excess = NULL, *m = NULL, *sq = NULL,
                *quad = NULL, *lin = NULL, *loss = NULL;
    rc = weft_sub(&diff, call->args[0].u.tensor, call->args[1].u.tensor);
    if (rc == 0)
        rc = weft_abs(&d, diff);
    if (rc == 0 && beta == 0) { /* plain l1, as in PyTorch */
        loss = weft_tensor_retain(d);
    } else if (rc == 0) {
        if ((rc = weft_sub_scalar(&over, d, beta)) == 0 && (rc = weft_relu(&excess, over)) == 0 &&
            (rc = weft_sub(&m, d, excess)) == 0 && (rc = weft_mul(&sq, m, m)) == 0 &&
            (rc = weft_mul_scalar(&quad, sq, 0.5 / beta)) == 0 && (rc = weft_sub(&lin, d, m)) == 0)
            rc = weft_add(&loss, quad, lin);
    }
    weft_tensor *temps[] = {diff, d, over, excess, m, sq, quad, lin};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return set_composite_result(call, rc, loss, red);
}

/* multiplies *loss by weight when there is one */
static int apply_weight(weft_tensor **loss, const weft_tensor *weight)
{
    if (!weight)
        return 0;
    weft_tensor *w = NULL;
    int rc = weft_mul(&w, *loss, weight);
    weft_tensor_release(*loss);
    *loss = w;
    return rc;
}

/* binary_cross_entropy (self, target, weight?, reduction):
 * -w (y log x + (1 - y) log(1 - x)), each log clamped at -100 as PyTorch
 * does (max(l, -100) = relu(l + 100) - 100). */
static int clamped_log(weft_tensor **out, const weft_tensor *x)
{
    weft_tensor *l = NULL, *s = NULL, *r = NULL;
    int rc = weft_log(&l, x);
    if (rc == 0)
        rc = weft_add_scalar(&s, l, 100.0);
    if (rc == 0)
        rc = weft_relu(&r, s);
    if (rc == 0)
        rc = weft_sub_scalar(out, r, 100.0);
    weft_tensor_release(l);
    weft_tensor_release(s);
    weft_tensor_release(r);
    return rc;
}

static int binary_cross_entropy_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *x = call->args[0].u.tensor, *y = call->args[1].u.tensor;
    nn_reduction red;
    int rc = cpu__reduction_arg("binary_cross_entropy", &call->args[3], &red);
    if (rc < 0)
        return rc;
    bool same = weft_tensor_ndim(x) == weft_tensor_ndim(y);
    for (int d = 0; same && d < weft_tensor_ndim(x); d++)
        same = weft_tensor_size(x, d) == weft_tensor_size(y, d);
    if (!same)
        return weft_set_error(WEFT_ESHAPE, "binary_cross_entropy: target and input must have the "
                              "same shape");
    weft_tensor *lx = NULL, *one_minus_x = NULL, *l1x = NULL, *one_minus_y = NULL, *a = NULL,
                *b = NULL, *s = NULL, *loss = NULL;
    if ((rc = clamped_log(&lx, x)) == 0 && (rc = weft_neg(&s, x)) == 0 &&
        (rc = weft_add_scalar(&one_minus_x, s, 1.0)) == 0 &&
        (rc = clamped_log(&l1x, one_minus_x)) == 0 && (rc = weft_mul(&a, y, lx)) == 0 &&
        (rc = weft_mul(&b, y, l1x)) == 0) {
        /* y log x + (1 - y) log(1 - x) = y log x + log(1 - x) - y log(1 - x) */
        weft_tensor_release(s);
        s = NULL;
        if ((rc = weft_sub(&one_minus_y, l1x, b)) == 0 && (rc = weft_add(&s, a, one_minus_y)) == 0)
            rc = weft_neg(&loss, s);
    }
    if (rc == 0)
        rc = apply_weight(&loss, optional_tensor(&call->args[2]));
    weft_tensor *temps[] = {lx, one_minus_x, l1x, one_minus_y, a, b, s};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return set_composite_result(call, rc, loss, red);
}

/* binary_cross_entropy_with_logits (self, target, weight?, pos_weight?,
 * reduction), PyTorch's stable form: with lw = (pos_weight - 1) y + 1,
 * (1 - y) x + lw (log1p(exp(-|x|)) + relu(-x)). */
static int bce_with_logits_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *x = call->args[0].u.tensor, *y = call->args[1].u.tensor;
    const weft_tensor *pos_weight = optional_tensor(&call->args[3]);
    nn_reduction red;
    int rc = cpu__reduction_arg("binary_cross_entropy_with_logits", &call->args[4], &red);
    if (rc < 0)
        return rc;
    weft_tensor *ax = NULL, *nax = NULL, *e = NULL, *sp = NULL, *nx = NULL, *rn = NULL,
                *soft = NULL, *xy = NULL, *lin = NULL, *pw = NULL, *lw = NULL, *lw1 = NULL,
                *wsoft = NULL, *loss = NULL;
    if ((rc = weft_abs(&ax, x)) == 0 && (rc = weft_neg(&nax, ax)) == 0 &&
        (rc = weft_exp(&e, nax)) == 0 && (rc = weft_log1p(&sp, e)) == 0 &&
        (rc = weft_neg(&nx, x)) == 0 && (rc = weft_relu(&rn, nx)) == 0 &&
        (rc = weft_add(&soft, sp, rn)) == 0 && (rc = weft_mul(&xy, x, y)) == 0 &&
        (rc = weft_sub(&lin, x, xy)) == 0) {
        if (pos_weight) {
            if ((rc = weft_sub_scalar(&pw, pos_weight, 1.0)) == 0 &&
                (rc = weft_mul(&lw, pw, y)) == 0 && (rc = weft_add_scalar(&lw1, lw, 1.0)) == 0)
                rc = weft_mul(&wsoft, lw1, soft);
        } else {
            wsoft = weft_tensor_retain(soft);
        }
        if (rc == 0)
            rc = weft_add(&loss, lin, wsoft);
    }
    if (rc == 0)
        rc = apply_weight(&loss, optional_tensor(&call->args[2]));
    weft_tensor *temps[] = {ax, nax, e, sp, nx, rn, soft, xy, lin, pw, lw, lw1, wsoft};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return set_composite_result(call, rc, loss, red);
}

static const int logits_flag = 1;
static const weft_kernel_entry loss_entries[] = {
    {"nll_loss", loss_kernel, NULL},
    {"cross_entropy", loss_kernel, &logits_flag},
    {"nll_loss_backward", loss_backward_kernel, NULL},
    {"cross_entropy_backward", loss_backward_kernel, &logits_flag},
};

static const struct {
    const char *op;
    weft_kernel_fn fn;
} loss_composites[] = {
    {"mse_loss", mse_loss_composite},
    {"l1_loss", l1_loss_composite},
    {"smooth_l1_loss", smooth_l1_loss_composite},
    {"binary_cross_entropy", binary_cross_entropy_composite},
    {"binary_cross_entropy_with_logits", bce_with_logits_composite},
};

int cpu__register_nn_loss(weft_registrar *reg)
{
    int rc = weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, loss_entries, sizeof loss_entries / sizeof *loss_entries);
    for (size_t i = 0; rc == 0 && i < sizeof loss_composites / sizeof *loss_composites; i++)
        rc = cpu__register_composite(reg, loss_composites[i].op, loss_composites[i].fn);
    return rc;
}
