/* nn/optim.c — SGD, Adam and AdamW with torch.optim's update rules, as
 * opaque objects over an array of parameters.  Every update is a sequence
 * of weft operators run with grad mode off, so it works on any device; no
 * element is touched directly. */
#include <math.h>
#include <stdlib.h>

#include <weft/nn.h>
#include <weft/plugin.h>

typedef enum optimizer_kind { OPTIM_SGD, OPTIM_ADAM, OPTIM_ADAMW } optimizer_kind;

/* The state of one parameter: SGD's momentum buffer, or Adam's exp_avg and
 * exp_avg_sq; all NULL until the parameter's first step. */
typedef struct param_state {
    weft_tensor *param;
    weft_tensor *first;  /* momentum_buffer / exp_avg */
    weft_tensor *second; /* exp_avg_sq */
    int64_t step;
} param_state;

struct weft_optimizer {
    optimizer_kind kind;
    int n;
    double lr, weight_decay;
    double momentum, dampening; /* SGD */
    bool nesterov;
    double beta1, beta2, eps; /* Adam, AdamW */
    param_state state[];
};

static bool valid_hyper(double x)
{
    return isfinite(x) && x >= 0;
}

/* Checks the parameters and makes an optimizer holding a reference to each. */
static int optimizer_create(weft_optimizer **out, weft_tensor *const *params, int n,
                            optimizer_kind kind, double lr, double weight_decay)
{
    static const char *const names[] = {"SGD", "Adam", "AdamW"};
    if (!out)
        return weft_set_error(WEFT_EINVAL, "%s: NULL out", names[kind]);
    *out = NULL;
    if (n < 0 || (n > 0 && !params))
        return weft_set_error(WEFT_EINVAL, "%s: %d parameters at %p", names[kind], n,
                              (const void *)params);
    if (!valid_hyper(lr) || !valid_hyper(weight_decay))
        return weft_set_error(WEFT_EINVAL, "%s: invalid lr %g or weight_decay %g", names[kind],
                              lr, weight_decay);
    for (int i = 0; i < n; i++) {
        const weft_tensor *p = params[i];
        if (!p)
            return weft_set_error(WEFT_EINVAL, "%s: parameter %d is NULL", names[kind], i);
        if (!weft_dtype_is_floating(weft_tensor_dtype(p)))
            return weft_set_error(WEFT_EDTYPE, "%s: parameter %d has dtype %s, not floating",
                                  names[kind], i, weft_dtype_name(weft_tensor_dtype(p)));
        if (!weft_tensor_is_leaf(p))
            return weft_set_error(WEFT_EINVAL, "%s: can't optimize a non-leaf tensor (parameter %d)",
                                  names[kind], i);
        for (int j = 0; j < i; j++)
            if (params[j] == p)
                return weft_set_error(WEFT_EINVAL, "%s: parameter %d appears twice (also at %d)",
                                      names[kind], i, j);
    }
    weft_optimizer *opt = calloc(1, sizeof *opt + (size_t)n * sizeof opt->state[0]);
    if (!opt)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", names[kind]);
    opt->kind = kind;
    opt->n = n;
    opt->lr = lr;
    opt->weight_decay = weight_decay;
    for (int i = 0; i < n; i++)
        opt->state[i].param = weft_tensor_retain(params[i]);
    *out = opt;
    return 0;
}

int weft_optimizer_sgd(weft_optimizer **out, weft_tensor *const *params, int n, double lr,
                       double momentum, double dampening, double weight_decay, bool nesterov)
{
    if (out)
        *out = NULL;
    if (!valid_hyper(momentum) || !isfinite(dampening) || dampening < 0)
        return weft_set_error(WEFT_EINVAL, "SGD: invalid momentum %g or dampening %g", momentum,
                              dampening);
    if (nesterov && (momentum <= 0 || dampening != 0))
        return weft_set_error(WEFT_EINVAL,
                              "SGD: nesterov momentum requires a momentum and zero dampening "
                              "(momentum %g, dampening %g)",
                              momentum, dampening);
    int rc = optimizer_create(out, params, n, OPTIM_SGD, lr, weight_decay);
    if (rc == 0) {
        (*out)->momentum = momentum;
        (*out)->dampening = dampening;
        (*out)->nesterov = nesterov;
    }
    return rc;
}

static int adam_create(weft_optimizer **out, weft_tensor *const *params, int n,
                       optimizer_kind kind, double lr, double beta1, double beta2, double eps,
                       double weight_decay)
{
    if (out)
        *out = NULL;
    if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1) || !valid_hyper(eps))
        return weft_set_error(WEFT_EINVAL, "%s: invalid betas (%g, %g) or eps %g",
                              kind == OPTIM_ADAM ? "Adam" : "AdamW", beta1, beta2, eps);
    int rc = optimizer_create(out, params, n, kind, lr, weight_decay);
    if (rc == 0) {
        (*out)->beta1 = beta1;
        (*out)->beta2 = beta2;
        (*out)->eps = eps;
    }
    return rc;
}

int weft_optimizer_adam(weft_optimizer **out, weft_tensor *const *params, int n, double lr,
                        double beta1, double beta2, double eps, double weight_decay)
{
    return adam_create(out, params, n, OPTIM_ADAM, lr, beta1, beta2, eps, weight_decay);
}

int weft_optimizer_adamw(weft_optimizer **out, weft_tensor *const *params, int n, double lr,
                         double beta1, double beta2, double eps, double weight_decay)
{
    return adam_create(out, params, n, OPTIM_ADAMW, lr, beta1, beta2, eps, weight_decay);
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

/* torch.optim.SGD's _single_tensor_sgd for one parameter. */
static int sgd_update(const weft_optimizer *opt, param_state *s, weft_tensor *grad)
{
    weft_tensor *d = NULL, *nesterov = NULL;
    int rc = 0;
    if (opt->weight_decay != 0)
        rc = weft_add_ex(&d, grad, s->param, opt->weight_decay);
    else
        d = weft_tensor_retain(grad);
    if (rc == 0 && opt->momentum != 0) {
        if (!s->first) {
            rc = new_state(&s->first, d, d);
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
static int adam_update(const weft_optimizer *opt, param_state *s, weft_tensor *grad)
{
    weft_tensor *g = NULL, *denom = NULL;
    int rc = 0;
    if (!s->first) {
        rc = new_state(&s->first, s->param, NULL);
        if (rc == 0)
            rc = new_state(&s->second, s->param, NULL);
        if (rc < 0) { /* all or nothing: the next step starts afresh */
            weft_tensor_release(s->first);
            s->first = NULL;
            return rc;
        }
    }
    s->step++;
    if (opt->weight_decay != 0 && opt->kind == OPTIM_ADAMW)
        rc = weft_mul_scalar_(s->param, 1.0 - opt->lr * opt->weight_decay);
    if (rc == 0 && opt->weight_decay != 0 && opt->kind == OPTIM_ADAM)
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
        rc = opt->kind == OPTIM_SGD ? sgd_update(opt, s, grad) : adam_update(opt, s, grad);
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
    opt->lr = lr;
    return 0;
}

double weft_optimizer_get_lr(const weft_optimizer *opt)
{
    return opt ? opt->lr : NAN;
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
    free(opt);
}
