/* backends/cpu/optim.c — the fused optimizer steps (_fused_sgd_,
 * _fused_adam_, _fused_rmsprop_, _fused_adagrad_): one pass over a
 * parameter, its gradient and its state, each element read and written
 * once, with torch.optim 1.13's single-tensor formulas evaluated per
 * element in the dtype's arithmetic type.  The step is memory-bound, so
 * one pass instead of the composed update's five to nine is the point. */
#include <math.h>

#include "cpu.h"

/* One step's operands (contiguous, one dtype) and hyper-parameters; a NULL
 * state pointer is an option that is off (no momentum, no amsgrad, not
 * centered). */
typedef struct optim_job {
    void *param;
    const void *grad;
    void *state0, *state1, *state2;
    double lr, weight_decay, momentum, dampening, beta1, beta2, eps, alpha;
    double bias_correction1, bias_correction2_sqrt;
    bool nesterov, maximize, first_step, decoupled;
} optim_job;

typedef void (*optim_loop)(int64_t begin, int64_t end, void *ctx);

/* d = (maximize ? -grad : grad) + weight_decay * p, as every algorithm
 * starts (torch adds the decay only when it is not 0: so do we, so that
 * 0 * inf stays out of the gradient). */
#define OPTIM_GRADIENT(NAME, C, job, g, p, i)                                   \
    C d = sign * cpu_load_##NAME(g[i]);                                         \
    if (has_wd)                                                                 \
        d += wd * (p);

/* The options as loop-invariant locals (OPTIM_GRADIENT's sign, has_wd and
 * wd): read through job inside the loop they kept it scalar. */
#define OPTIM_OPTIONS(C, job)                                                   \
    const C sign = (job)->maximize ? (C)-1 : (C)1, wd = (C)(job)->weight_decay; \
    const bool has_wd = (job)->weight_decay != 0;

/* torch.optim.SGD: buf = d (first step) or momentum * buf + (1 -
 * dampening) * d; d = nesterov ? d + momentum * buf : buf; p -= lr * d.
 * The options are loop-invariant, but a loop testing them per element did
 * not vectorize (it ran at a third of the composed update's speed): the
 * body is instantiated per combination of the flags, each a straight loop
 * over restrict pointers the compiler vectorizes.  maximize is a sign
 * (multiplying by -1 is exact). */
#define DEFINE_SGD(NAME, DTYPE, T, C, U)                                        \
    static inline __attribute__((always_inline)) void sgd_body_##NAME(         \
        T *restrict param, const T *restrict grad, T *restrict buf, int64_t n,  \
        C sign, C wd, C momentum, C keep, C lr, const bool has_buf,             \
        const bool first, const bool nesterov, const bool has_wd)               \
    {                                                                           \
        for (int64_t i = 0; i < n; i++) {                                       \
            C p = cpu_load_##NAME(param[i]);                                    \
            C d = sign * cpu_load_##NAME(grad[i]);                              \
            if (has_wd)                                                         \
                d += wd * p;                                                    \
            if (has_buf) {                                                      \
                C b = first ? d : momentum * cpu_load_##NAME(buf[i]) + keep * d; \
                buf[i] = cpu_store_##NAME(b);                                   \
                b = cpu_load_##NAME(cpu_store_##NAME(b)); /* as torch reads it */ \
                d = nesterov ? d + momentum * b : b;                            \
            }                                                                   \
            param[i] = cpu_store_##NAME(p - lr * d);                            \
        }                                                                       \
    }                                                                           \
    static void sgd_##NAME(int64_t begin, int64_t end, void *ctx)               \
    {                                                                           \
        const optim_job *job = ctx;                                             \
        T *param = (T *)job->param + begin, *buf = job->state0;                 \
        const T *grad = (const T *)job->grad + begin;                           \
        buf = buf ? buf + begin : NULL;                                         \
        int64_t n = end - begin;                                                \
        const C sign = job->maximize ? (C)-1 : (C)1, wd = (C)job->weight_decay; \
        const C momentum = (C)job->momentum, keep = (C)(1.0 - job->dampening); \
        const C lr = (C)job->lr;                                                \
        const bool has_wd = job->weight_decay != 0;                             \
        if (!buf) {                                                             \
            if (has_wd)                                                         \
                sgd_body_##NAME(param, grad, NULL, n, sign, wd, momentum, keep, lr, \
                                false, false, false, true);                     \
            else                                                                \
                sgd_body_##NAME(param, grad, NULL, n, sign, wd, momentum, keep, lr, \
                                false, false, false, false);                    \
            return;                                                             \
        }                                                                       \
        /* the flags as constants: first step, nesterov, weight decay */        \
        switch ((job->first_step ? 4 : 0) | (job->nesterov ? 2 : 0) | (has_wd ? 1 : 0)) { \
        case 0: sgd_body_##NAME(param, grad, buf, n, sign, wd, momentum, keep, lr, true, false, false, false); break; \
        case 1: sgd_body_##NAME(param, grad, buf, n, sign, wd, momentum, keep, lr, true, false, false, true); break; \
        case 2: sgd_body_##NAME(param, grad, buf, n, sign, wd, momentum, keep, lr, true, false, true, false); break; \
        case 3: sgd_body_##NAME(param, grad, buf, n, sign, wd, momentum, keep, lr, true, false, true, true); break; \
        case 4: sgd_body_##NAME(param, grad, buf, n, sign, wd, momentum, keep, lr, true, true, false, false); break; \
        case 5: sgd_body_##NAME(param, grad, buf, n, sign, wd, momentum, keep, lr, true, true, false, true); break; \
        case 6: sgd_body_##NAME(param, grad, buf, n, sign, wd, momentum, keep, lr, true, true, true, false); break; \
        default: sgd_body_##NAME(param, grad, buf, n, sign, wd, momentum, keep, lr, true, true, true, true); break; \
        }                                                                       \
    }

/* torch.optim.Adam and AdamW (decoupled: p *= 1 - lr * weight_decay and
 * the gradient is left alone): m = beta1 * m + (1 - beta1) * d; v = beta2 *
 * v + (1 - beta2) * d * d; amsgrad: vmax = max(vmax, v), used for v;
 * p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps). */
#define DEFINE_ADAM(NAME, DTYPE, T, C, U)                                       \
    static void adam_##NAME(int64_t begin, int64_t end, void *ctx)              \
    {                                                                           \
        const optim_job *job = ctx;                                             \
        T *restrict param = job->param, *restrict m = job->state0;              \
        T *restrict v = job->state1, *restrict vmax = job->state2;              \
        const T *restrict grad = job->grad;                                     \
        const C beta1 = (C)job->beta1, beta2 = (C)job->beta2;                   \
        const C sign = job->maximize ? (C)-1 : (C)1, wd = (C)job->weight_decay; \
        const bool decay = job->weight_decay != 0, decoupled = job->decoupled;  \
        const C step_size = (C)(job->lr / job->bias_correction1);               \
        const C bc2_sqrt = (C)job->bias_correction2_sqrt, eps = (C)job->eps;    \
        const C shrink = (C)(1.0 - job->lr * job->weight_decay);                \
        for (int64_t i = begin; i < end; i++) {                                 \
            C p = cpu_load_##NAME(param[i]);                                    \
            C d = sign * cpu_load_##NAME(grad[i]);                              \
            if (decay) {                                                        \
                if (decoupled)                                                  \
                    p = cpu_load_##NAME(cpu_store_##NAME(p * shrink));          \
                else                                                            \
                    d += wd * p;                                                \
            }                                                                   \
            C mi = beta1 * cpu_load_##NAME(m[i]) + ((C)1 - beta1) * d;          \
            C vi = beta2 * cpu_load_##NAME(v[i]) + ((C)1 - beta2) * d * d;      \
            m[i] = cpu_store_##NAME(mi);                                        \
            v[i] = cpu_store_##NAME(vi);                                        \
            mi = cpu_load_##NAME(m[i]);                                         \
            vi = cpu_load_##NAME(v[i]);                                         \
            if (vmax) {                                                         \
                C peak = cpu_load_##NAME(vmax[i]);                              \
                /* torch.maximum: a NaN on either side wins */                  \
                vi = (vi > peak || isnan(vi)) ? vi : peak;                      \
                vmax[i] = cpu_store_##NAME(vi);                                 \
            }                                                                   \
            C denom = (C)sqrt((double)vi) / bc2_sqrt + eps;                     \
            param[i] = cpu_store_##NAME(p - step_size * (mi / denom));          \
        }                                                                       \
    }

/* torch.optim.RMSprop: sq = alpha * sq + (1 - alpha) * d * d; centered:
 * ga = alpha * ga + (1 - alpha) * d and avg = sqrt(sq - ga * ga) + eps, else
 * sqrt(sq) + eps; momentum: buf = momentum * buf + d / avg, p -= lr * buf;
 * else p -= lr * d / avg. */
#define DEFINE_RMSPROP(NAME, DTYPE, T, C, U)                                    \
    static void rmsprop_##NAME(int64_t begin, int64_t end, void *ctx)           \
    {                                                                           \
        const optim_job *job = ctx;                                             \
        T *restrict param = job->param, *restrict sq = job->state0;             \
        T *restrict buf = job->state1, *restrict ga = job->state2;              \
        const T *restrict grad = job->grad;                                     \
        const C alpha = (C)job->alpha, eps = (C)job->eps, lr = (C)job->lr;      \
        const C momentum = (C)job->momentum;                                    \
        OPTIM_OPTIONS(C, job)                                                   \
        for (int64_t i = begin; i < end; i++) {                                 \
            C p = cpu_load_##NAME(param[i]);                                    \
            OPTIM_GRADIENT(NAME, C, job, grad, p, i)                            \
            sq[i] = cpu_store_##NAME(alpha * cpu_load_##NAME(sq[i]) + ((C)1 - alpha) * d * d); \
            C var = cpu_load_##NAME(sq[i]);                                     \
            if (ga) {                                                           \
                ga[i] = cpu_store_##NAME(alpha * cpu_load_##NAME(ga[i]) + ((C)1 - alpha) * d); \
                C mean = cpu_load_##NAME(ga[i]);                                \
                var = cpu_load_##NAME(cpu_store_##NAME(var - mean * mean));     \
            }                                                                   \
            C avg = (C)sqrt((double)var) + eps;                                 \
            if (buf) {                                                          \
                buf[i] = cpu_store_##NAME(momentum * cpu_load_##NAME(buf[i]) + d / avg);  \
                param[i] = cpu_store_##NAME(p - lr * cpu_load_##NAME(buf[i]));  \
            } else {                                                            \
                param[i] = cpu_store_##NAME(p - lr * (d / avg));                \
            }                                                                   \
        }                                                                       \
    }

/* torch.optim.Adagrad (dense gradients): sum += d * d; p -= clr * d /
 * (sqrt(sum) + eps), clr the decayed rate the kernel computed into lr. */
#define DEFINE_ADAGRAD(NAME, DTYPE, T, C, U)                                    \
    static void adagrad_##NAME(int64_t begin, int64_t end, void *ctx)           \
    {                                                                           \
        const optim_job *job = ctx;                                             \
        T *restrict param = job->param, *restrict sum = job->state0;            \
        const T *restrict grad = job->grad;                                     \
        const C clr = (C)job->lr, eps = (C)job->eps;                            \
        OPTIM_OPTIONS(C, job)                                                   \
        for (int64_t i = begin; i < end; i++) {                                 \
            C p = cpu_load_##NAME(param[i]);                                    \
            OPTIM_GRADIENT(NAME, C, job, grad, p, i)                            \
            sum[i] = cpu_store_##NAME(cpu_load_##NAME(sum[i]) + d * d);         \
            C std = (C)sqrt((double)cpu_load_##NAME(sum[i])) + eps;             \
            param[i] = cpu_store_##NAME(p - clr * (d / std));                   \
        }                                                                       \
    }

CPU_DTYPES_FLOATING(DEFINE_SGD)
CPU_DTYPES_FLOATING(DEFINE_ADAM)
CPU_DTYPES_FLOATING(DEFINE_RMSPROP)
CPU_DTYPES_FLOATING(DEFINE_ADAGRAD)
static const optim_loop sgd_loops[WEFT_NUM_DTYPES] = {CPU_ENTRIES_FLOATING(sgd)};
static const optim_loop adam_loops[WEFT_NUM_DTYPES] = {CPU_ENTRIES_FLOATING(adam)};
static const optim_loop rmsprop_loops[WEFT_NUM_DTYPES] = {CPU_ENTRIES_FLOATING(rmsprop)};
static const optim_loop adagrad_loops[WEFT_NUM_DTYPES] = {CPU_ENTRIES_FLOATING(adagrad)};

/* Every operand is a contiguous CPU tensor of self's shape and dtype, and
 * none shares self's memory: the loops read each element once, so the
 * checks are what makes them safe.  names[i] is argument i's name, for
 * the messages; a None optional argument is skipped. */
static int check_operands(weft_call *call, const char *const *names, int count,
                          const optim_loop *loops)
{
    const char *op = weft_op_name(call->op);
    const weft_tensor *self = weft_arg_tensor(call, 0);
    weft_dtype dt = weft_tensor_dtype(self);
    if (dt < 0 || dt >= WEFT_NUM_DTYPES || !loops[dt])
        return cpu__unsupported_dtype(op, dt);
    for (int i = 0; i < count; i++) {
        const weft_tensor *t = weft_arg_tensor(call, i);
        if (!t)
            continue;
        const char *name = names[i];
        int rc = cpu__check_cpu(op, name, t);
        if (rc < 0)
            return rc;
        if (weft_tensor_dtype(t) != dt)
            return weft_set_error(WEFT_EDTYPE, "%s: %s has dtype %s, the parameter %s", op, name,
                                  weft_dtype_name(weft_tensor_dtype(t)), weft_dtype_name(dt));
        if (weft_tensor_ndim(t) != weft_tensor_ndim(self) ||
            memcmp(weft_tensor_sizes(t), weft_tensor_sizes(self),
                   (size_t)weft_tensor_ndim(self) * sizeof(int64_t)) != 0)
            return weft_set_error(WEFT_ESHAPE, "%s: %s's shape differs from the parameter's", op,
                                  name);
        if (!weft_tensor_is_contiguous(t))
            return weft_set_error(WEFT_EINVAL, "%s: %s is not contiguous", op, name);
        if (i > 0 && weft_tensor_numel(t) > 0 &&
            weft_tensor_data_ptr(t) == weft_tensor_data_ptr(self))
            return weft_set_error(WEFT_EINVAL, "%s: %s shares the parameter's memory", op, name);
    }
    return 0;
}

/* Runs the loop over self's elements, then marks every state tensor
 * written: the dispatcher bumps self's version only, and the CPU fallback
 * copies back to a device exactly the storages whose version moved. */
static int run_step(weft_call *call, int count, const optim_loop *loops, optim_job *job)
{
    weft_tensor *self = weft_arg_tensor(call, 0);
    int64_t n = weft_tensor_numel(self);
    job->param = weft_tensor_data_ptr(self);
    job->grad = weft_tensor_data_ptr(weft_arg_tensor(call, 1));
    if (n > 0)
        cpu__parallel_for(0, n, CPU_GRAIN, loops[weft_tensor_dtype(self)], job);
    for (int i = 2; i < count; i++)
        if (weft_arg_tensor(call, i))
            weft_tensor_bump_version(weft_arg_tensor(call, i));
    return 0;
}

static void *state_ptr(weft_call *call, int i)
{
    weft_tensor *t = weft_arg_tensor(call, i);
    return t ? weft_tensor_data_ptr(t) : NULL;
}

/* The tensor arguments' names, in schema order, for the messages. */
static const char *const sgd_names[] = {"self", "grad", "momentum_buffer"};
static const char *const adam_names[] = {"self", "grad", "exp_avg", "exp_avg_sq",
                                         "max_exp_avg_sq"};
static const char *const rmsprop_names[] = {"self", "grad", "square_avg", "momentum_buffer",
                                            "grad_avg"};
static const char *const adagrad_names[] = {"self", "grad", "state_sum"};

static bool valid_number(double x)
{
    return isfinite(x) && x >= 0;
}

/* _fused_sgd_(self, grad, momentum_buffer?, lr, momentum, dampening,
 * weight_decay, nesterov, maximize, first_step) */
static int sgd_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    optim_job job = {.lr = weft_arg_double(call, 3),
                     .momentum = weft_arg_double(call, 4),
                     .dampening = weft_arg_double(call, 5),
                     .weight_decay = weft_arg_double(call, 6),
                     .nesterov = weft_arg_bool(call, 7),
                     .maximize = weft_arg_bool(call, 8),
                     .first_step = weft_arg_bool(call, 9)};
    const char *op = weft_op_name(call->op);
    if (!valid_number(job.lr) || !valid_number(job.momentum) || !valid_number(job.weight_decay) ||
        !isfinite(job.dampening))
        return weft_set_error(WEFT_EINVAL, "%s: invalid lr %g, momentum %g, dampening %g or "
                              "weight_decay %g", op, job.lr, job.momentum, job.dampening,
                              job.weight_decay);
    if ((job.momentum != 0) != (weft_arg_tensor(call, 2) != NULL))
        return weft_set_error(WEFT_EINVAL, "%s: momentum %g %s a momentum_buffer", op,
                              job.momentum, job.momentum != 0 ? "needs" : "takes no");
    int rc = check_operands(call, sgd_names, 3, sgd_loops);
    if (rc < 0)
        return rc;
    job.state0 = state_ptr(call, 2);
    return run_step(call, 3, sgd_loops, &job);
}

/* _fused_adam_(self, grad, exp_avg, exp_avg_sq, max_exp_avg_sq?, lr,
 * beta1, beta2, eps, weight_decay, step, decoupled, maximize) */
static int adam_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    optim_job job = {.lr = weft_arg_double(call, 5),
                     .beta1 = weft_arg_double(call, 6),
                     .beta2 = weft_arg_double(call, 7),
                     .eps = weft_arg_double(call, 8),
                     .weight_decay = weft_arg_double(call, 9),
                     .decoupled = weft_arg_bool(call, 11),
                     .maximize = weft_arg_bool(call, 12)};
    int64_t step = weft_arg_int(call, 10);
    const char *op = weft_op_name(call->op);
    if (!valid_number(job.lr) || !valid_number(job.eps) || !valid_number(job.weight_decay) ||
        !(job.beta1 >= 0 && job.beta1 < 1) || !(job.beta2 >= 0 && job.beta2 < 1))
        return weft_set_error(WEFT_EINVAL, "%s: invalid lr %g, betas (%g, %g), eps %g or "
                              "weight_decay %g", op, job.lr, job.beta1, job.beta2, job.eps,
                              job.weight_decay);
    if (step < 1)
        return weft_set_error(WEFT_EINVAL, "%s: step %lld is not a count from 1", op,
                              (long long)step);
    int rc = check_operands(call, adam_names, 5, adam_loops);
    if (rc < 0)
        return rc;
    job.bias_correction1 = 1.0 - pow(job.beta1, (double)step);
    job.bias_correction2_sqrt = sqrt(1.0 - pow(job.beta2, (double)step));
    job.state0 = state_ptr(call, 2);
    job.state1 = state_ptr(call, 3);
    job.state2 = state_ptr(call, 4);
    return run_step(call, 5, adam_loops, &job);
}

/* _fused_rmsprop_(self, grad, square_avg, momentum_buffer?, grad_avg?, lr,
 * alpha, eps, weight_decay, momentum, maximize) */
static int rmsprop_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    optim_job job = {.lr = weft_arg_double(call, 5),
                     .alpha = weft_arg_double(call, 6),
                     .eps = weft_arg_double(call, 7),
                     .weight_decay = weft_arg_double(call, 8),
                     .momentum = weft_arg_double(call, 9),
                     .maximize = weft_arg_bool(call, 10)};
    const char *op = weft_op_name(call->op);
    if (!valid_number(job.lr) || !valid_number(job.alpha) || !valid_number(job.eps) ||
        !valid_number(job.weight_decay) || !valid_number(job.momentum))
        return weft_set_error(WEFT_EINVAL, "%s: invalid lr %g, alpha %g, eps %g, weight_decay %g "
                              "or momentum %g", op, job.lr, job.alpha, job.eps, job.weight_decay,
                              job.momentum);
    if ((job.momentum > 0) != (weft_arg_tensor(call, 3) != NULL))
        return weft_set_error(WEFT_EINVAL, "%s: momentum %g %s a momentum_buffer", op,
                              job.momentum, job.momentum > 0 ? "needs" : "takes no");
    int rc = check_operands(call, rmsprop_names, 5, rmsprop_loops);
    if (rc < 0)
        return rc;
    job.state0 = state_ptr(call, 2);
    job.state1 = state_ptr(call, 3);
    job.state2 = state_ptr(call, 4);
    return run_step(call, 5, rmsprop_loops, &job);
}

/* _fused_adagrad_(self, grad, state_sum, lr, lr_decay, eps, weight_decay,
 * step, maximize) */
static int adagrad_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    double lr = weft_arg_double(call, 3), lr_decay = weft_arg_double(call, 4);
    optim_job job = {.eps = weft_arg_double(call, 5),
                     .weight_decay = weft_arg_double(call, 6),
                     .maximize = weft_arg_bool(call, 8)};
    int64_t step = weft_arg_int(call, 7);
    const char *op = weft_op_name(call->op);
    if (!valid_number(lr) || !valid_number(lr_decay) || !valid_number(job.eps) ||
        !valid_number(job.weight_decay))
        return weft_set_error(WEFT_EINVAL, "%s: invalid lr %g, lr_decay %g, eps %g or "
                              "weight_decay %g", op, lr, lr_decay, job.eps, job.weight_decay);
    if (step < 1)
        return weft_set_error(WEFT_EINVAL, "%s: step %lld is not a count from 1", op,
                              (long long)step);
    int rc = check_operands(call, adagrad_names, 3, adagrad_loops);
    if (rc < 0)
        return rc;
    job.lr = lr / (1.0 + (double)(step - 1) * lr_decay);
    job.state0 = state_ptr(call, 2);
    return run_step(call, 3, adagrad_loops, &job);
}

static const weft_kernel_entry optim_entries[] = {
    {"_fused_sgd_", sgd_kernel, NULL},
    {"_fused_adam_", adam_kernel, NULL},
    {"_fused_rmsprop_", rmsprop_kernel, NULL},
    {"_fused_adagrad_", adagrad_kernel, NULL},
};

int cpu__register_optim(weft_registrar *reg)
{
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, optim_entries,
                                      sizeof optim_entries / sizeof *optim_entries);
}
