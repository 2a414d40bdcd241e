/* nn/optim_foreach.c — one optimizer step over lists of parameters,
 * gradients and state (weft_sgd_step ... weft_adagrad_step): checks the
 * whole call, creates the state a parameter has not got yet, then runs the
 * _fused_*_ operator once per parameter through the dispatcher (so a
 * device without the kernel gets the CPU fallback).  Nothing here touches
 * an element. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <weft/nn.h>
#include <weft/ops.h>
#include <weft/plugin.h>

/* One list of the call: its name for the messages, the caller's array,
 * and what a NULL entry is created as. */
typedef enum state_init { STATE_NONE, STATE_ZEROS, STATE_FILL, STATE_STEP } state_init;
typedef struct tensor_list {
    const char *name;
    weft_tensor **entries;
    state_init init; /* STATE_NONE: entries are given, never created */
} tensor_list;

enum { MAX_LISTS = 6 };

static bool valid_number(double x)
{
    return isfinite(x) && x >= 0;
}

static bool same_shape(const weft_tensor *a, const weft_tensor *b)
{
    int nd = weft_tensor_ndim(a);
    return nd == weft_tensor_ndim(b) &&
           memcmp(weft_tensor_sizes(a), weft_tensor_sizes(b), (size_t)nd * sizeof(int64_t)) == 0;
}

/* Entry i of a list, which must match params[i] (a step count must be a
 * 0-d float32 CPU tensor instead). */
static int check_entry(const char *fn, const tensor_list *l, int i, const weft_tensor *p)
{
    const weft_tensor *t = l->entries[i];
    if (l->init == STATE_STEP) {
        if (weft_tensor_ndim(t) != 0 || weft_tensor_dtype(t) != WEFT_FLOAT32 ||
            weft_tensor_device(t).type != WEFT_DEVICE_TYPE_CPU)
            return weft_set_error(WEFT_EINVAL, "%s: %s[%d] must be a 0-d float32 CPU tensor "
                                  "(a step count), got %d-d %s", fn, l->name, i,
                                  weft_tensor_ndim(t), weft_dtype_name(weft_tensor_dtype(t)));
        return 0;
    }
    /* a sparse gradient is refused rather than densified: the fused step
     * would write every row of the state, which the sparse gradient exists
     * to avoid; the Python optimizers apply it row-wise */
    if (weft_tensor_layout(t) != WEFT_LAYOUT_STRIDED)
        return weft_set_error(WEFT_EINVAL,
                              "%s: %s[%d] has layout '%s'; the fused step takes strided (dense) "
                              "tensors only: apply a sparse gradient row-wise (weft.optim's SGD, "
                              "Adagrad or SparseAdam) or densify it with weft_to_strided",
                              fn, l->name, i, weft_layout_name(weft_tensor_layout(t)));
    if (weft_tensor_dtype(t) != weft_tensor_dtype(p))
        return weft_set_error(WEFT_EDTYPE, "%s: %s[%d] has dtype %s, params[%d] has %s", fn,
                              l->name, i, weft_dtype_name(weft_tensor_dtype(t)), i,
                              weft_dtype_name(weft_tensor_dtype(p)));
    if (!same_shape(t, p))
        return weft_set_error(WEFT_ESHAPE,
                              "%s: %s[%d] has %d dims and %lld elements, params[%d] %d dims and "
                              "%lld elements: the shapes differ", fn, l->name, i,
                              weft_tensor_ndim(t), (long long)weft_tensor_numel(t), i,
                              weft_tensor_ndim(p), (long long)weft_tensor_numel(p));
    weft_device dt = weft_tensor_device(t), dp = weft_tensor_device(p);
    if (!weft_device_equal(dt, dp))
        return weft_set_error(WEFT_EDEVICE, "%s: %s[%d] is on %s:%d, params[%d] on %s:%d", fn,
                              l->name, i, weft_device_type_name(dt.type), dt.index, i,
                              weft_device_type_name(dp.type), dp.index);
    if (!weft_tensor_is_contiguous(t))
        return weft_set_error(WEFT_EINVAL, "%s: %s[%d] is not contiguous", fn, l->name, i);
    if (weft_tensor_numel(t) > 0 && weft_tensor_data_ptr(t) &&
        weft_tensor_data_ptr(t) == weft_tensor_data_ptr(p))
        return weft_set_error(WEFT_EINVAL, "%s: %s[%d] shares params[%d]'s memory", fn, l->name,
                              i, i);
    if (l->init != STATE_NONE && weft_tensor_is_read_only(t))
        return weft_set_error(WEFT_EINVAL, "%s: %s[%d] is read-only", fn, l->name, i);
    return 0;
}

/* The whole call's checks: lists[0] is params, lists[1] grads, the rest
 * state.  Nothing is written. */
static int check_call(const char *fn, const tensor_list *lists, int nlists, int n)
{
    if (n < 0)
        return weft_set_error(WEFT_EINVAL, "%s: n is %d", fn, n);
    for (int l = 0; l < nlists; l++)
        if (!lists[l].entries && n > 0)
            return weft_set_error(WEFT_EINVAL, "%s: %s is NULL (%d parameters)", fn,
                                  lists[l].name, n);
    for (int i = 0; i < n; i++) {
        const weft_tensor *p = lists[0].entries[i];
        if (!p)
            return weft_set_error(WEFT_EINVAL, "%s: params[%d] is NULL", fn, i);
        if (!weft_tensor_data_ptr(p) && weft_tensor_numel(p) > 0)
            return weft_set_error(WEFT_EINVAL, "%s: params[%d] is not a strided tensor", fn, i);
        if (!weft_dtype_is_floating(weft_tensor_dtype(p)))
            return weft_set_error(WEFT_EDTYPE, "%s: params[%d] has dtype %s, not floating", fn, i,
                                  weft_dtype_name(weft_tensor_dtype(p)));
        if (!weft_tensor_is_contiguous(p))
            return weft_set_error(WEFT_EINVAL, "%s: params[%d] is not contiguous", fn, i);
        if (weft_tensor_is_read_only(p))
            return weft_set_error(WEFT_EINVAL, "%s: params[%d] is read-only", fn, i);
        for (int j = 0; j < i; j++)
            if (lists[0].entries[j] == p)
                return weft_set_error(WEFT_EINVAL, "%s: params[%d] is params[%d] again", fn, i, j);
        if (!lists[1].entries[i])
            return weft_set_error(WEFT_EINVAL, "%s: grads[%d] is NULL (leave a parameter without "
                                  "a gradient out of the lists)", fn, i);
        for (int l = 1; l < nlists; l++) {
            if (!lists[l].entries[i])
                continue; /* state to create */
            int rc = check_entry(fn, &lists[l], i, p);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* Creates every NULL state entry, noting made[l * n + i] for each; on
 * error releases what it made and sets those entries back to NULL, so the
 * caller's arrays are as they were. */
static int create_state(tensor_list *lists, int nlists, int n, double fill, bool *made)
{
    int rc = 0;
    for (int l = 2; l < nlists && rc == 0; l++)
        for (int i = 0; i < n && rc == 0; i++) {
            weft_tensor **slot = &lists[l].entries[i];
            if (*slot)
                continue;
            const weft_tensor *p = lists[0].entries[i];
            if (lists[l].init == STATE_STEP)
                rc = weft_zeros(slot, NULL, 0, WEFT_FLOAT32, WEFT_DEVICE_CPU);
            else if (lists[l].init == STATE_FILL)
                rc = weft_full(slot, weft_tensor_sizes(p), weft_tensor_ndim(p), fill,
                               weft_tensor_dtype(p), weft_tensor_device(p));
            else /* zeros; SGD's first step overwrites its buffer whole */
                rc = weft_zeros(slot, weft_tensor_sizes(p), weft_tensor_ndim(p),
                                weft_tensor_dtype(p), weft_tensor_device(p));
            if (rc < 0)
                *slot = NULL;
            else
                made[(size_t)l * (size_t)n + (size_t)i] = true;
        }
    for (int l = 2; rc < 0 && l < nlists; l++)
        for (int i = 0; i < n; i++)
            if (made[(size_t)l * (size_t)n + (size_t)i]) {
                weft_tensor_release(lists[l].entries[i]);
                lists[l].entries[i] = NULL;
            }
    return rc;
}

/* The step count after this step (incremented in place). */
static int next_step(weft_tensor *step, int64_t *out)
{
    double value = 0;
    int rc = weft_tensor_item(step, &value);
    if (rc == 0)
        rc = weft_fill_(step, value + 1);
    *out = (int64_t)value + 1;
    return rc;
}

/* The per-parameter part of a step: the fused operator for parameter i,
 * t its step count after this step, fresh whether its first state entry
 * was made on this call. */
typedef int (*step_fn)(const void *options, tensor_list *lists, int i, int64_t t, bool fresh);

/* Checks, creates state, runs step for each parameter with grad mode off.
 * steps_list is the index of the step counts' list (-1: none). */
static int foreach_step(const char *fn, tensor_list *lists, int nlists, int n, double fill,
                        int steps_list, const void *options, step_fn step)
{
    int rc = check_call(fn, lists, nlists, n);
    if (rc < 0 || n == 0)
        return rc;
    bool *made = weft_calloc((size_t)nlists * (size_t)n, sizeof *made);
    if (!made)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", fn);
    rc = create_state(lists, nlists, n, fill, made);
    bool mode = weft_set_grad_enabled(false);
    for (int i = 0; i < n && rc == 0; i++) {
        int64_t t = 0;
        if (steps_list >= 0)
            rc = next_step(lists[steps_list].entries[i], &t);
        /* fresh: the first state list's entry was made now (SGD's buffer) */
        if (rc == 0)
            rc = step(options, lists, i, t, nlists > 2 && made[2 * (size_t)n + (size_t)i]);
    }
    weft_set_grad_enabled(mode);
    free(made);
    return rc;
}

/* ------------------------------------------------------------------ SGD */

static int sgd_one(const void *options, tensor_list *lists, int i, int64_t t, bool fresh)
{
    (void)t;
    const weft_sgd_options *o = options;
    weft_tensor *buf = o->momentum != 0 ? lists[2].entries[i] : NULL;
    /* a buffer made on this call is torch's first step: buf = d */
    bool first = buf && fresh;
    return weft__fused_sgd_(lists[0].entries[i], lists[1].entries[i], buf, o->lr, o->momentum,
                            o->dampening, o->weight_decay, o->nesterov, o->maximize, first);
}

int weft_sgd_step(weft_tensor *const *params, weft_tensor *const *grads,
                  weft_tensor **momentum_bufs, int n, const weft_sgd_options *o)
{
    const char *fn = "weft_sgd_step";
    if (!o)
        return weft_set_error(WEFT_EINVAL, "%s: NULL options", fn);
    if (!valid_number(o->lr) || !valid_number(o->momentum) || !valid_number(o->weight_decay) ||
        !isfinite(o->dampening) || o->dampening < 0)
        return weft_set_error(WEFT_EINVAL, "%s: invalid lr %g, momentum %g, dampening %g or "
                              "weight_decay %g", fn, o->lr, o->momentum, o->dampening,
                              o->weight_decay);
    if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
        return weft_set_error(WEFT_EINVAL, "%s: nesterov momentum requires a momentum and zero "
                              "dampening (momentum %g, dampening %g)", fn, o->momentum,
                              o->dampening);
    tensor_list lists[MAX_LISTS] = {{"params", (weft_tensor **)params, STATE_NONE},
                                    {"grads", (weft_tensor **)grads, STATE_NONE},
                                    {"momentum_bufs", momentum_bufs, STATE_ZEROS}};
    int nlists = o->momentum != 0 ? 3 : 2;
    return foreach_step(fn, lists, nlists, n, 0.0, -1, o, sgd_one);
}

/* ----------------------------------------------------------- Adam, AdamW */

typedef struct adam_call {
    const weft_adam_options *o;
    bool decoupled;
} adam_call;

static int adam_one(const void *options, tensor_list *lists, int i, int64_t t, bool fresh)
{
    (void)fresh;
    const adam_call *c = options;
    const weft_adam_options *o = c->o;
    return weft__fused_adam_(lists[0].entries[i], lists[1].entries[i], lists[2].entries[i],
                             lists[3].entries[i], o->amsgrad ? lists[5].entries[i] : NULL, o->lr,
                             o->beta1, o->beta2, o->eps, o->weight_decay, t, c->decoupled,
                             o->maximize);
}

static int adam_family(const char *fn, bool decoupled, weft_tensor *const *params,
                       weft_tensor *const *grads, weft_tensor **exp_avgs,
                       weft_tensor **exp_avg_sqs, weft_tensor **max_exp_avg_sqs,
                       weft_tensor **steps, int n, const weft_adam_options *o)
{
    if (!o)
        return weft_set_error(WEFT_EINVAL, "%s: NULL options", fn);
    if (!valid_number(o->lr) || !valid_number(o->eps) || !valid_number(o->weight_decay) ||
        !(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1))
        return weft_set_error(WEFT_EINVAL, "%s: invalid lr %g, betas (%g, %g), eps %g or "
                              "weight_decay %g", fn, o->lr, o->beta1, o->beta2, o->eps,
                              o->weight_decay);
    tensor_list lists[MAX_LISTS] = {{"params", (weft_tensor **)params, STATE_NONE},
                                    {"grads", (weft_tensor **)grads, STATE_NONE},
                                    {"exp_avgs", exp_avgs, STATE_ZEROS},
                                    {"exp_avg_sqs", exp_avg_sqs, STATE_ZEROS},
                                    {"steps", steps, STATE_STEP},
                                    {"max_exp_avg_sqs", max_exp_avg_sqs, STATE_ZEROS}};
    adam_call c = {o, decoupled};
    return foreach_step(fn, lists, o->amsgrad ? 6 : 5, n, 0.0, 4, &c, adam_one);
}

int weft_adam_step(weft_tensor *const *params, weft_tensor *const *grads, weft_tensor **exp_avgs,
                   weft_tensor **exp_avg_sqs, weft_tensor **max_exp_avg_sqs, weft_tensor **steps,
                   int n, const weft_adam_options *o)
{
    return adam_family("weft_adam_step", false, params, grads, exp_avgs, exp_avg_sqs,
                       max_exp_avg_sqs, steps, n, o);
}

int weft_adamw_step(weft_tensor *const *params, weft_tensor *const *grads,
                    weft_tensor **exp_avgs, weft_tensor **exp_avg_sqs,
                    weft_tensor **max_exp_avg_sqs, weft_tensor **steps, int n,
                    const weft_adam_options *o)
{
    return adam_family("weft_adamw_step", true, params, grads, exp_avgs, exp_avg_sqs,
                       max_exp_avg_sqs, steps, n, o);
}

/* -------------------------------------------------------------- RMSprop */

/* lists: params, grads, square_avgs, steps, then momentum_bufs and
 * grad_avgs at the indices the options switch on. */
typedef struct rmsprop_call {
    const weft_rmsprop_options *o;
    int momentum_list, grad_avg_list; /* -1: off */
} rmsprop_call;

static int rmsprop_one(const void *options, tensor_list *lists, int i, int64_t t, bool fresh)
{
    (void)t;
    (void)fresh;
    const rmsprop_call *c = options;
    const weft_rmsprop_options *o = c->o;
    return weft__fused_rmsprop_(
        lists[0].entries[i], lists[1].entries[i], lists[2].entries[i],
        c->momentum_list >= 0 ? lists[c->momentum_list].entries[i] : NULL,
        c->grad_avg_list >= 0 ? lists[c->grad_avg_list].entries[i] : NULL, o->lr, o->alpha,
        o->eps, o->weight_decay, o->momentum, o->maximize);
}

int weft_rmsprop_step(weft_tensor *const *params, weft_tensor *const *grads,
                      weft_tensor **square_avgs, weft_tensor **momentum_bufs,
                      weft_tensor **grad_avgs, weft_tensor **steps, int n,
                      const weft_rmsprop_options *o)
{
    const char *fn = "weft_rmsprop_step";
    if (!o)
        return weft_set_error(WEFT_EINVAL, "%s: NULL options", fn);
    if (!valid_number(o->lr) || !valid_number(o->alpha) || !valid_number(o->eps) ||
        !valid_number(o->weight_decay) || !valid_number(o->momentum))
        return weft_set_error(WEFT_EINVAL, "%s: invalid lr %g, alpha %g, eps %g, weight_decay "
                              "%g or momentum %g", fn, o->lr, o->alpha, o->eps, o->weight_decay,
                              o->momentum);
    tensor_list lists[MAX_LISTS] = {{"params", (weft_tensor **)params, STATE_NONE},
                                    {"grads", (weft_tensor **)grads, STATE_NONE},
                                    {"square_avgs", square_avgs, STATE_ZEROS},
                                    {"steps", steps, STATE_STEP}};
    int nlists = 4;
    rmsprop_call c = {o, -1, -1};
    if (o->momentum > 0) {
        c.momentum_list = nlists;
        lists[nlists++] = (tensor_list){"momentum_bufs", momentum_bufs, STATE_ZEROS};
    }
    if (o->centered) {
        c.grad_avg_list = nlists;
        lists[nlists++] = (tensor_list){"grad_avgs", grad_avgs, STATE_ZEROS};
    }
    return foreach_step(fn, lists, nlists, n, 0.0, 3, &c, rmsprop_one);
}

/* -------------------------------------------------------------- Adagrad */

static int adagrad_one(const void *options, tensor_list *lists, int i, int64_t t, bool fresh)
{
    (void)fresh;
    const weft_adagrad_options *o = options;
    return weft__fused_adagrad_(lists[0].entries[i], lists[1].entries[i], lists[2].entries[i],
                                o->lr, o->lr_decay, o->eps, o->weight_decay, t, o->maximize);
}

int weft_adagrad_step(weft_tensor *const *params, weft_tensor *const *grads,
                      weft_tensor **state_sums, weft_tensor **steps, int n,
                      const weft_adagrad_options *o)
{
    const char *fn = "weft_adagrad_step";
    if (!o)
        return weft_set_error(WEFT_EINVAL, "%s: NULL options", fn);
    if (!valid_number(o->lr) || !valid_number(o->lr_decay) || !valid_number(o->eps) ||
        !valid_number(o->weight_decay) || !valid_number(o->initial_accumulator_value))
        return weft_set_error(WEFT_EINVAL, "%s: invalid lr %g, lr_decay %g, eps %g, weight_decay "
                              "%g or initial_accumulator_value %g", fn, o->lr, o->lr_decay,
                              o->eps, o->weight_decay, o->initial_accumulator_value);
    tensor_list lists[MAX_LISTS] = {{"params", (weft_tensor **)params, STATE_NONE},
                                    {"grads", (weft_tensor **)grads, STATE_NONE},
                                    {"state_sums", state_sums, STATE_FILL},
                                    {"steps", steps, STATE_STEP}};
    return foreach_step(fn, lists, 4, n, o->initial_accumulator_value, 3, o, adagrad_one);
}
