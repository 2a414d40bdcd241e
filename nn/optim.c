/* nn/optim.c — SGD, Adam and AdamW with torch.optim's update rules, as
 * opaque objects over an array of parameters.  A contiguous CPU parameter
 * is updated by the fused one-pass operators (_fused_sgd_, _fused_adam_);
 * any other by a sequence of weft operators run with grad mode off, so it
 * works on any device.  No element is touched here directly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <weft/nn.h>
#include <weft/plugin.h>

#include "nn/optim_internal.h"

static const char *const kind_names[] = {"SGD", "Adam", "AdamW"};

static bool valid_hyper(double x)
{
    return isfinite(x) && x >= 0;
}

/* torch.optim's checks of one group's hyper-parameters. */
int wn__optim_check_hyper(optimizer_kind kind, const weft_optim_group *h)
{
    const char *name = kind_names[kind];
    if (!valid_hyper(h->lr) || !valid_hyper(h->weight_decay))
        return weft_set_error(WEFT_EINVAL, "%s: invalid lr %g or weight_decay %g", name, h->lr,
                              h->weight_decay);
    if (kind == OPTIM_SGD) {
        if (!valid_hyper(h->momentum) || !isfinite(h->dampening) || h->dampening < 0)
            return weft_set_error(WEFT_EINVAL, "SGD: invalid momentum %g or dampening %g",
                                  h->momentum, h->dampening);
        if (h->nesterov && (h->momentum <= 0 || h->dampening != 0))
            return weft_set_error(WEFT_EINVAL,
                                  "SGD: nesterov momentum requires a momentum and zero dampening "
                                  "(momentum %g, dampening %g)",
                                  h->momentum, h->dampening);
    } else if (!(h->beta1 >= 0 && h->beta1 < 1) || !(h->beta2 >= 0 && h->beta2 < 1) ||
               !valid_hyper(h->eps)) {
        return weft_set_error(WEFT_EINVAL, "%s: invalid betas (%g, %g) or eps %g", name, h->beta1,
                              h->beta2, h->eps);
    }
    return 0;
}

/* Checks params[0..n) as new parameters of opt (opt NULL: none yet). */
static int check_params(const weft_optimizer *opt, optimizer_kind kind,
                        weft_tensor *const *params, int n)
{
    const char *name = kind_names[kind];
    if (n < 0 || (n > 0 && !params))
        return weft_set_error(WEFT_EINVAL, "%s: %d parameters at %p", name, n,
                              (const void *)params);
    for (int i = 0; i < n; i++) {
        const weft_tensor *p = params[i];
        if (!p)
            return weft_set_error(WEFT_EINVAL, "%s: parameter %d is NULL", name, i);
        if (!weft_dtype_is_floating(weft_tensor_dtype(p)))
            return weft_set_error(WEFT_EDTYPE, "%s: parameter %d has dtype %s, not floating",
                                  name, i, weft_dtype_name(weft_tensor_dtype(p)));
        if (!weft_tensor_is_leaf(p))
            return weft_set_error(WEFT_EINVAL, "%s: can't optimize a non-leaf tensor (parameter %d)",
                                  name, i);
        for (int j = 0; j < i; j++)
            if (params[j] == p)
                return weft_set_error(WEFT_EINVAL, "%s: parameter %d appears twice (also at %d)",
                                      name, i, j);
        for (int j = 0; opt && j < opt->n; j++)
            if (opt->state[j].param == p)
                return weft_set_error(WEFT_EINVAL,
                                      "%s: parameter %d is already in parameter group %d", name, i,
                                      opt->state[j].group);
    }
    return 0;
}

/* Appends a group (all or nothing). */
static int append_group(weft_optimizer *opt, weft_tensor *const *params, int n,
                        const weft_optim_group *h)
{
    if (opt->ngroups == opt->capgroups) {
        int cap = opt->capgroups ? 2 * opt->capgroups : 4;
        weft_optim_group *grown = weft_realloc(opt->groups, (size_t)cap * sizeof *grown);
        if (!grown)
            return weft_set_error(WEFT_ENOMEM, "%s: out of memory", kind_names[opt->kind]);
        opt->groups = grown;
        opt->capgroups = cap;
    }
    if (opt->n + n > opt->cap) {
        int cap = opt->cap ? opt->cap : 8;
        while (cap < opt->n + n)
            cap *= 2;
        param_state *grown = weft_realloc(opt->state, (size_t)cap * sizeof *grown);
        if (!grown)
            return weft_set_error(WEFT_ENOMEM, "%s: out of memory", kind_names[opt->kind]);
        opt->state = grown;
        opt->cap = cap;
    }
    opt->groups[opt->ngroups] = *h;
    for (int i = 0; i < n; i++)
        opt->state[opt->n + i] =
            (param_state){weft_tensor_retain(params[i]), NULL, NULL, 0, opt->ngroups};
    opt->n += n;
    opt->ngroups++;
    return 0;
}

static int optimizer_create(weft_optimizer **out, weft_tensor *const *params, int n,
                            optimizer_kind kind, const weft_optim_group *h)
{
    if (!out)
        return weft_set_error(WEFT_EINVAL, "%s: NULL out", kind_names[kind]);
    *out = NULL;
    int rc = wn__optim_check_hyper(kind, h);
    if (rc == 0)
        rc = check_params(NULL, kind, params, n);
    if (rc < 0)
        return rc;
    weft_optimizer *opt = weft_calloc(1, sizeof *opt);
    if (!opt)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", kind_names[kind]);
    opt->kind = kind;
    opt->defaults = *h;
    rc = append_group(opt, params, n, h);
    if (rc < 0) {
        weft_optimizer_destroy(opt);
        return rc;
    }
    *out = opt;
    return 0;
}

int weft_optimizer_sgd(weft_optimizer **out, weft_tensor *const *params, int n, double lr,
                       double momentum, double dampening, double weight_decay, bool nesterov)
{
    weft_optim_group h = {.lr = lr,
                          .weight_decay = weight_decay,
                          .momentum = momentum,
                          .dampening = dampening,
                          .nesterov = nesterov};
    return optimizer_create(out, params, n, OPTIM_SGD, &h);
}

int weft_optimizer_adam(weft_optimizer **out, weft_tensor *const *params, int n, double lr,
                        double beta1, double beta2, double eps, double weight_decay)
{
    weft_optim_group h = {
        .lr = lr, .weight_decay = weight_decay, .beta1 = beta1, .beta2 = beta2, .eps = eps};
    return optimizer_create(out, params, n, OPTIM_ADAM, &h);
}

int weft_optimizer_adamw(weft_optimizer **out, weft_tensor *const *params, int n, double lr,
                         double beta1, double beta2, double eps, double weight_decay)
{
    weft_optim_group h = {
        .lr = lr, .weight_decay = weight_decay, .beta1 = beta1, .beta2 = beta2, .eps = eps};
    return optimizer_create(out, params, n, OPTIM_ADAMW, &h);
}

int weft_optimizer_add_param_group(weft_optimizer *opt, weft_tensor *const *params, int n,
                                   const weft_optim_group *hyper)
{
    if (!opt)
        return weft_set_error(WEFT_EINVAL, "weft_optimizer_add_param_group: NULL optimizer");
    const weft_optim_group *h = hyper ? hyper : &opt->defaults;
    int rc = wn__optim_check_hyper(opt->kind, h);
    if (rc == 0)
        rc = check_params(opt, opt->kind, params, n);
    return rc < 0 ? rc : append_group(opt, params, n, h);
}

int weft_optimizer_num_groups(const weft_optimizer *opt)
{
    return opt ? opt->ngroups : 0;
}

int weft_optimizer_get_group(const weft_optimizer *opt, int group, weft_optim_group *out)
{
    if (!opt || !out || group < 0 || group >= opt->ngroups)
        return weft_set_error(WEFT_EINVAL, "weft_optimizer_get_group: no group %d (of %d)", group,
                              opt ? opt->ngroups : 0);
    *out = opt->groups[group];
    return 0;
}

int weft_optimizer_set_group(weft_optimizer *opt, int group, const weft_optim_group *hyper)
{
    if (!opt || !hyper || group < 0 || group >= opt->ngroups)
        return weft_set_error(WEFT_EINVAL, "weft_optimizer_set_group: no group %d (of %d)", group,
                              opt ? opt->ngroups : 0);
    int rc = wn__optim_check_hyper(opt->kind, hyper);
    if (rc == 0)
        opt->groups[group] = *hyper;
    return rc;
}

/* A new tensor of like's shape, dtype and device holding src (or zeros). */
static int new_state(weft_tensor **out, const weft_tensor *like, const weft_tensor *src)
{
    int rc = weft_empty_like(out, like);
    if (rc == 0)
        rc = src ? weft_copy_(*out, src) : weft_fill_(*out, 0.0);
    if (rc < 0) {
        weft_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

/* Adam's and AdamW's exp_avg and exp_avg_sq, zeros, made at the
 * parameter's first step (both or neither: on an error the next step
 * starts afresh). */
static int adam_state(param_state *s)
{
    if (s->first)
        return 0;
    int rc = new_state(&s->first, s->param, NULL);
    if (rc == 0)
        rc = new_state(&s->second, s->param, NULL);
    if (rc < 0) {
        weft_tensor_release(s->first);
        s->first = NULL;
    }
    return rc;
}

/* torch.optim.SGD's _single_tensor_sgd for one parameter. */
/* t through its layout's coalesce operator (a plugin operator, found by
 * name: the core knows no sparse layout) */
static int coalesce_of(weft_tensor **out, const weft_tensor *t)
{
    const weft_op *op = NULL;
    weft_value arg = {.tag = WEFT_VALUE_TENSOR, .u.tensor = (weft_tensor *)t}, ret = {0};
    int rc = weft_op_find(&op, "coalesce");
    if (rc < 0)
        return weft_set_error(rc, "SGD: momentum on a '%s' gradient needs its layout's coalesce "
                                  "operator, which is not loaded",
                              weft_layout_name(weft_tensor_layout(t)));
    rc = weft_call_boxed(op, &arg, 1, &ret, 1);
    *out = rc == 0 ? ret.u.tensor : NULL;
    return rc;
}

/* torch 1.13's SGD momentum on a sparse gradient d: the buffer is sparse
 * too, a copy of the first gradient, then momentum * buf + (1 - dampening)
 * * d, so only the rows gradients have touched are ever written; it is
 * coalesced each step so that it holds one entry per row seen instead of
 * growing by the gradient's entries every step.  A buffer made dense by
 * an earlier dense gradient stays dense (updated in place). */
static int sparse_momentum(const weft_optim_group *opt, param_state *s, const weft_tensor *d)
{
    weft_tensor *scaled = NULL, *sum = NULL, *buf = NULL;
    int rc;
    if (s->first && weft_tensor_layout(s->first) == WEFT_LAYOUT_STRIDED) {
        rc = weft_mul_scalar_(s->first, opt->momentum);
        return rc < 0 ? rc : weft_add_ex_(s->first, d, 1.0 - opt->dampening);
    }
    if (!s->first) /* a new tensor (the gradient itself may be emptied by zero_grad) */
        rc = weft_mul_scalar(&sum, d, 1.0);
    else if ((rc = weft_mul_scalar(&scaled, s->first, opt->momentum)) == 0)
        rc = weft_add_ex(&sum, scaled, d, 1.0 - opt->dampening);
    if (rc == 0)
        rc = coalesce_of(&buf, sum);
    if (rc == 0) {
        weft_tensor_release(s->first);
        s->first = buf;
    }
    weft_tensor_release(scaled);
    weft_tensor_release(sum);
    return rc;
}

static int sgd_update(const weft_optim_group *opt, param_state *s, weft_tensor *grad)
{
    weft_tensor *d = NULL, *nesterov = NULL;
    int rc = 0;
    if (opt->weight_decay != 0)
        rc = weft_add_ex(&d, grad, s->param, opt->weight_decay);
    else
        d = weft_tensor_retain(grad);
    if (rc == 0 && opt->momentum != 0) {
        if (weft_tensor_layout(d) != WEFT_LAYOUT_STRIDED) {
            rc = sparse_momentum(opt, s, d);
        } else if (!s->first) {
            rc = new_state(&s->first, d, d);
        } else if (opt->dampening == 0) {
            /* buf = momentum * buf + d in one pass over buf instead of two:
             * the optimizer's step is memory-bound */
            rc = weft_add_out_ex(s->first, d, s->first, opt->momentum);
        } else {
            rc = weft_mul_scalar_(s->first, opt->momentum);
            if (rc == 0)
                rc = weft_add_ex_(s->first, d, 1.0 - opt->dampening);
        }
        if (rc == 0 && opt->nesterov)
            rc = weft_add_ex(&nesterov, d, s->first, opt->momentum);
    }
    if (rc == 0) {
        const weft_tensor *direction = nesterov ? nesterov : opt->momentum != 0 ? s->first : d;
        rc = weft_add_ex_(s->param, direction, -opt->lr);
    }
    weft_tensor_release(d);
    weft_tensor_release(nesterov);
    return rc;
}

/* torch.optim.Adam's and AdamW's _single_tensor_adam for one parameter. */
static int adam_update(const weft_optim_group *opt, bool decoupled, param_state *s,
                       weft_tensor *grad)
{
    weft_tensor *g = NULL, *denom = NULL;
    int rc = 0;
    if ((rc = adam_state(s)) < 0)
        return rc;
    s->step++;
    if (opt->weight_decay != 0 && decoupled)
        rc = weft_mul_scalar_(s->param, 1.0 - opt->lr * opt->weight_decay);
    if (rc == 0 && opt->weight_decay != 0 && !decoupled)
        rc = weft_add_ex(&g, grad, s->param, opt->weight_decay);
    else if (rc == 0)
        g = weft_tensor_retain(grad);
    if (rc == 0)
        rc = weft_lerp_scalar_(s->first, g, 1.0 - opt->beta1);
    if (rc == 0)
        rc = weft_mul_scalar_(s->second, opt->beta2);
    if (rc == 0)
        rc = weft_addcmul_ex_(s->second, g, g, 1.0 - opt->beta2);
    double correction1 = 1.0 - pow(opt->beta1, (double)s->step);
    double correction2 = 1.0 - pow(opt->beta2, (double)s->step);
    if (rc == 0)
        rc = weft_sqrt(&denom, s->second);
    if (rc == 0)
        rc = weft_div_scalar_(denom, sqrt(correction2));
    if (rc == 0)
        rc = weft_add_scalar_(denom, opt->eps);
    if (rc == 0)
        rc = weft_addcdiv_ex_(s->param, s->first, denom, -opt->lr / correction1);
    weft_tensor_release(g);
    weft_tensor_release(denom);
    return rc;
}

/* Whether param's update can be the fused one-pass operator: a CPU
 * plugin kernel exists for it (other devices take the composed update, a
 * sequence of their own kernels, rather than the CPU fallback's copies),
 * and the operator's operands are what it takes: contiguous, strided,
 * one dtype. */
static bool fusable(const weft_tensor *param, const weft_tensor *grad)
{
    return weft_tensor_device(param).type == WEFT_DEVICE_TYPE_CPU &&
           weft_tensor_device(grad).type == WEFT_DEVICE_TYPE_CPU &&
           weft_tensor_layout(param) == WEFT_LAYOUT_STRIDED &&
           weft_tensor_layout(grad) == WEFT_LAYOUT_STRIDED &&
           weft_tensor_dtype(param) == weft_tensor_dtype(grad) &&
           weft_tensor_is_contiguous(param) && weft_tensor_is_contiguous(grad) &&
           weft_tensor_ndim(param) == weft_tensor_ndim(grad) &&
           memcmp(weft_tensor_sizes(param), weft_tensor_sizes(grad),
                  (size_t)weft_tensor_ndim(param) * sizeof(int64_t)) == 0;
}

/* The same updates as sgd_update and adam_update, each one pass over the
 * parameter, its gradient and its state (backends/cpu/optim.c): the
 * composed forms read and write the parameter's size two (SGD) to nine
 * (Adam) times, and a training step's update is memory-bound. */
static int fused_update(const weft_optimizer *opt, const weft_optim_group *h, param_state *s,
                        weft_tensor *grad)
{
    int rc = 0;
    if (opt->kind == OPTIM_SGD) {
        bool first = false;
        if (h->momentum != 0 && !s->first) {
            /* the first step writes the whole buffer (buf = d) */
            rc = weft_empty_like(&s->first, s->param);
            first = true;
        }
        if (rc == 0)
            rc = weft__fused_sgd_(s->param, grad, h->momentum != 0 ? s->first : NULL, h->lr,
                                  h->momentum, h->dampening, h->weight_decay, h->nesterov,
                                  false, first);
        if (rc < 0 && first) { /* all or nothing: the next step starts afresh */
            weft_tensor_release(s->first);
            s->first = NULL;
        }
        return rc;
    }
    if ((rc = adam_state(s)) < 0)
        return rc;
    rc = weft__fused_adam_(s->param, grad, s->first, s->second, NULL, h->lr, h->beta1, h->beta2,
                           h->eps, h->weight_decay, s->step + 1, opt->kind == OPTIM_ADAMW, false);
    if (rc == 0)
        s->step++;
    return rc;
}

/* A gradient of a plugin layout (sparse) is applied row-wise by SGD (p.add_
 * of it touches its rows only; momentum keeps a sparse buffer, as torch
 * 1.13); Adam's dense moments would be written whole, materialising the
 * parameter's size the sparse gradient exists to avoid, and weight_decay
 * would add the whole parameter to the gradient (torch refuses both):
 * refused, naming the option. */
static int sparse_grad_check(const weft_optimizer *opt, const weft_optim_group *h, int i,
                             const weft_tensor *grad)
{
    if (weft_tensor_layout(grad) == WEFT_LAYOUT_STRIDED)
        return 0;
    const char *layout = weft_layout_name(weft_tensor_layout(grad));
    if (opt->kind != OPTIM_SGD)
        return weft_set_error(WEFT_ENOTSUP,
                              "weft_optimizer_step: parameter %d has a '%s' gradient, which "
                              "%s does not take (its moments are dense); use SGD, or the "
                              "row-wise SparseAdam/Adagrad of weft.optim",
                              i, layout, opt->kind == OPTIM_ADAMW ? "AdamW" : "Adam");
    if (h->weight_decay != 0)
        return weft_set_error(WEFT_ENOTSUP,
                              "weft_optimizer_step: parameter %d has a '%s' gradient: SGD takes "
                              "it without weight_decay only (here %g), as torch's SGD",
                              i, layout, h->weight_decay);
    return 0;
}

int weft_optimizer_step(weft_optimizer *opt)
{
    if (!opt)
        return weft_set_error(WEFT_EINVAL, "weft_optimizer_step: NULL optimizer");
    bool mode = weft_set_grad_enabled(false);
    int rc = 0;
    for (int i = 0; i < opt->n && rc == 0; i++) {
        param_state *s = &opt->state[i];
        weft_tensor *grad = NULL;
        rc = weft_tensor_grad(&grad, s->param);
        if (rc < 0 || !grad)
            continue;
        const weft_optim_group *h = &opt->groups[s->group];
        rc = sparse_grad_check(opt, h, i, grad);
        if (rc == 0 && fusable(s->param, grad))
            rc = fused_update(opt, h, s, grad);
        else if (rc == 0)
            rc = opt->kind == OPTIM_SGD ? sgd_update(h, s, grad)
                                        : adam_update(h, opt->kind == OPTIM_ADAMW, s, grad);
        weft_tensor_release(grad);
    }
    weft_set_grad_enabled(mode);
    return rc;
}

int weft_optimizer_zero_grad(weft_optimizer *opt)
{
    if (!opt)
        return weft_set_error(WEFT_EINVAL, "weft_optimizer_zero_grad: NULL optimizer");
    for (int i = 0; i < opt->n; i++) {
        int rc = weft_tensor_set_grad(opt->state[i].param, NULL);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int weft_optimizer_set_lr(weft_optimizer *opt, double lr)
{
    if (!opt || !valid_hyper(lr))
        return weft_set_error(WEFT_EINVAL, "weft_optimizer_set_lr: %s",
                              opt ? "lr must be finite and not negative" : "NULL optimizer");
    for (int g = 0; g < opt->ngroups; g++)
        opt->groups[g].lr = lr;
    return 0;
}

double weft_optimizer_get_lr(const weft_optimizer *opt)
{
    return opt && opt->ngroups > 0 ? opt->groups[0].lr : NAN;
}

void weft_optimizer_destroy(weft_optimizer *opt)
{
    if (!opt)
        return;
    for (int i = 0; i < opt->n; i++) {
        weft_tensor_release(opt->state[i].param);
        weft_tensor_release(opt->state[i].first);
        weft_tensor_release(opt->state[i].second);
    }
    free(opt->state);
    free(opt->groups);
    free(opt);
}
