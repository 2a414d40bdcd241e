/* tests/test_optim_foreach.c — weft_sgd_step ... weft_adagrad_step (issue
 * 15): every algorithm and option over two parameters for four steps,
 * against the torch.optim formulas evaluated here element by element in
 * double (parameters, state and step counts compared after every step),
 * float32 against the same reference, and bad calls (NULL lists and
 * entries, mismatched shapes, dtypes, bad hyper-parameters) refused with a
 * message naming what is wrong and nothing written or created. */
#include <math.h>
#include <string.h>

#include <weft/nn.h>

#include "tests/tap.h"
#include "tests/keep.h"

enum { NP = 2, MAXN = 5, STEPS = 4 };
static const int sizes[NP] = {3, 5};

static weft_tensor *vec(const double *v, int n, weft_dtype dt)
{
    int64_t size = n;
    weft_tensor *t = NULL, *d = NULL;
    weft_empty(&d, &size, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    memcpy(weft_tensor_data_ptr(d), v, (size_t)n * sizeof(double));
    if (dt == WEFT_FLOAT64)
        return keep(d);
    weft_to_dtype(&t, d, dt);
    weft_tensor_release(d);
    return keep(t);
}

static double at(const weft_tensor *t, int i)
{
    weft_tensor *d = NULL;
    weft_to_dtype(&d, t, WEFT_FLOAT64);
    double v = ((const double *)weft_tensor_data_ptr(d))[i];
    weft_tensor_release(d);
    return v;
}

static double grad_value(int step, int p, int i)
{
    return sin(1.3 * step + 0.7 * i + 2.1 * p) * (1 + p);
}

static double start_value(int p, int i)
{
    return 0.5 - 0.3 * i + 0.2 * p;
}

/* The reference state of one parameter. */
typedef struct ref {
    double p[MAXN], s0[MAXN], s1[MAXN], s2[MAXN];
    int t;
} ref;

/* an algorithm: one reference step, one C call, and where the state is */
typedef struct algo {
    const char *name;
    void (*ref_step)(const void *o, ref *r, int n, const double *g, bool first);
    int (*call)(const void *o, weft_tensor **params, weft_tensor **grads, weft_tensor **s0,
                weft_tensor **s1, weft_tensor **s2, weft_tensor **steps);
    int nstate; /* how many of s0, s1, s2 the options use (in order, gaps NULL) */
    bool uses[3];
    bool counts; /* has step counts */
} algo;

static double decayed(double p, double g, double wd, bool maximize)
{
    return (maximize ? -g : g) + wd * p;
}

/* ---------------------------------------------------------- SGD */
static void sgd_ref(const void *options, ref *r, int n, const double *g, bool first)
{
    const weft_sgd_options *o = options;
    for (int i = 0; i < n; i++) {
        double d = decayed(r->p[i], g[i], o->weight_decay, o->maximize);
        if (o->momentum != 0) {
            r->s0[i] = first ? d : o->momentum * r->s0[i] + (1 - o->dampening) * d;
            d = o->nesterov ? d + o->momentum * r->s0[i] : r->s0[i];
        }
        r->p[i] -= o->lr * d;
    }
}
static int sgd_call(const void *o, weft_tensor **p, weft_tensor **g, weft_tensor **s0,
                    weft_tensor **s1, weft_tensor **s2, weft_tensor **steps)
{
    (void)s1, (void)s2, (void)steps;
    return weft_sgd_step(p, g, s0, NP, o);
}

/* ---------------------------------------------------------- Adam */
static bool adam_decoupled;
static void adam_ref(const void *options, ref *r, int n, const double *g, bool first)
{
    (void)first;
    const weft_adam_options *o = options;
    r->t++;
    double bc1 = 1 - pow(o->beta1, r->t), bc2 = 1 - pow(o->beta2, r->t);
    for (int i = 0; i < n; i++) {
        double d = o->maximize ? -g[i] : g[i];
        if (adam_decoupled)
            r->p[i] *= 1 - o->lr * o->weight_decay;
        else
            d += o->weight_decay * r->p[i];
        r->s0[i] = o->beta1 * r->s0[i] + (1 - o->beta1) * d;
        r->s1[i] = o->beta2 * r->s1[i] + (1 - o->beta2) * d * d;
        double v = r->s1[i];
        if (o->amsgrad) {
            r->s2[i] = fmax(r->s2[i], r->s1[i]);
            v = r->s2[i];
        }
        r->p[i] -= o->lr / bc1 * r->s0[i] / (sqrt(v) / sqrt(bc2) + o->eps);
    }
}
static int adam_call(const void *o, weft_tensor **p, weft_tensor **g, weft_tensor **s0,
                     weft_tensor **s1, weft_tensor **s2, weft_tensor **steps)
{
    return (adam_decoupled ? weft_adamw_step : weft_adam_step)(p, g, s0, s1, s2, steps, NP, o);
}

/* ---------------------------------------------------------- RMSprop */
static void rmsprop_ref(const void *options, ref *r, int n, const double *g, bool first)
{
    (void)first;
    const weft_rmsprop_options *o = options;
    r->t++;
    for (int i = 0; i < n; i++) {
        double d = decayed(r->p[i], g[i], o->weight_decay, o->maximize);
        r->s0[i] = o->alpha * r->s0[i] + (1 - o->alpha) * d * d;
        double var = r->s0[i];
        if (o->centered) {
            r->s2[i] = o->alpha * r->s2[i] + (1 - o->alpha) * d;
            var -= r->s2[i] * r->s2[i];
        }
        double avg = sqrt(var) + o->eps;
        if (o->momentum > 0) {
            r->s1[i] = o->momentum * r->s1[i] + d / avg;
            r->p[i] -= o->lr * r->s1[i];
        } else {
            r->p[i] -= o->lr * d / avg;
        }
    }
}
static int rmsprop_call(const void *o, weft_tensor **p, weft_tensor **g, weft_tensor **s0,
                        weft_tensor **s1, weft_tensor **s2, weft_tensor **steps)
{
    return weft_rmsprop_step(p, g, s0, s1, s2, steps, NP, o);
}

/* ---------------------------------------------------------- Adagrad */
static void adagrad_ref(const void *options, ref *r, int n, const double *g, bool first)
{
    const weft_adagrad_options *o = options;
    r->t++;
    double clr = o->lr / (1 + (r->t - 1) * o->lr_decay);
    for (int i = 0; i < n; i++) {
        if (first)
            r->s0[i] = o->initial_accumulator_value;
        double d = decayed(r->p[i], g[i], o->weight_decay, o->maximize);
        r->s0[i] += d * d;
        r->p[i] -= clr * d / (sqrt(r->s0[i]) + o->eps);
    }
}
static int adagrad_call(const void *o, weft_tensor **p, weft_tensor **g, weft_tensor **s0,
                        weft_tensor **s1, weft_tensor **s2, weft_tensor **steps)
{
    (void)s1, (void)s2;
    return weft_adagrad_step(p, g, s0, steps, NP, o);
}

/* Runs STEPS steps of a from the same start as the reference, the state
 * created by the first call, and compares everything after each step. */
static void run_case(const algo *a, const void *o, const char *desc, weft_dtype dt, double tol)
{
    ref r[NP];
    memset(r, 0, sizeof r);
    weft_tensor *params[NP], *s[3][NP], *steps[NP];
    memset(s, 0, sizeof s);
    memset(steps, 0, sizeof steps);
    for (int p = 0; p < NP; p++) {
        double v[MAXN];
        for (int i = 0; i < sizes[p]; i++)
            v[i] = r[p].p[i] = start_value(p, i);
        params[p] = vec(v, sizes[p], dt);
    }
    int bad = 0;
    for (int step = 0; step < STEPS; step++) {
        weft_tensor *grads[NP];
        for (int p = 0; p < NP; p++) {
            double g[MAXN];
            for (int i = 0; i < sizes[p]; i++)
                g[i] = grad_value(step, p, i);
            grads[p] = vec(g, sizes[p], dt);
            a->ref_step(o, &r[p], sizes[p], g, step == 0);
        }
        int rc = a->call(o, params, grads, s[0], s[1], s[2], steps);
        if (rc != 0) {
            ok(0, "%s %s: step %d: %s", a->name, desc, step + 1, weft_last_error());
            return;
        }
        for (int p = 0; p < NP; p++) {
            for (int i = 0; i < sizes[p]; i++) {
                double got = at(params[p], i), want = r[p].p[i];
                if (!(fabs(got - want) <= tol * (1 + fabs(want)))) {
                    if (bad++ < 3)
                        diag("%s %s step %d param %d[%d]: %.10g, want %.10g", a->name, desc,
                             step + 1, p, i, got, want);
                }
                const double *want_state[3] = {r[p].s0, r[p].s1, r[p].s2};
                for (int k = 0; k < 3; k++) {
                    if (!a->uses[k])
                        continue;
                    if (!s[k][p]) {
                        if (bad++ < 3)
                            diag("%s %s: state %d of param %d not created", a->name, desc, k, p);
                        continue;
                    }
                    double sg = at(s[k][p], i), sw = want_state[k][i];
                    if (!(fabs(sg - sw) <= tol * (1 + fabs(sw))) && bad++ < 3)
                        diag("%s %s step %d state %d of param %d[%d]: %.10g, want %.10g",
                             a->name, desc, step + 1, k, p, i, sg, sw);
                }
            }
            if (a->counts) {
                double t = -1;
                if (!steps[p] || weft_tensor_item(steps[p], &t) != 0 || t != step + 1)
                    if (bad++ < 3)
                        diag("%s %s: step count %g after step %d", a->name, desc, t, step + 1);
            }
        }
    }
    ok(bad == 0, "%s %s (%s): %d steps match the formulas", a->name, desc,
       weft_dtype_name(dt), STEPS);
    for (int k = 0; k < 3; k++)
        for (int p = 0; p < NP; p++)
            weft_tensor_release(s[k][p]);
    for (int p = 0; p < NP; p++)
        weft_tensor_release(steps[p]);
}

static const algo SGD = {"SGD", sgd_ref, sgd_call, 1, {true, false, false}, false};
static const algo SGD_PLAIN = {"SGD", sgd_ref, sgd_call, 0, {false, false, false}, false};
static const algo ADAM = {"Adam", adam_ref, adam_call, 2, {true, true, false}, true};
static const algo ADAM_AMS = {"Adam", adam_ref, adam_call, 3, {true, true, true}, true};
static const algo ADAGRAD = {"Adagrad", adagrad_ref, adagrad_call, 1, {true, false, false}, true};

static void test_formulas(void)
{
    weft_dtype dts[2] = {WEFT_FLOAT64, WEFT_FLOAT32};
    double tols[2] = {1e-12, 2e-5};
    for (int d = 0; d < 2; d++) {
        weft_dtype dt = dts[d];
        double tol = tols[d];
        run_case(&SGD_PLAIN, &(weft_sgd_options){.lr = 0.1}, "plain", dt, tol);
        run_case(&SGD, &(weft_sgd_options){.lr = 0.05, .momentum = 0.9, .dampening = 0.1,
                                           .weight_decay = 0.01},
                 "momentum, dampening, weight_decay", dt, tol);
        run_case(&SGD, &(weft_sgd_options){.lr = 0.05, .momentum = 0.8, .nesterov = true,
                                           .maximize = true},
                 "nesterov, maximize", dt, tol);
        weft_adam_options adam = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
        for (int decoupled = 0; decoupled < 2; decoupled++) {
            adam_decoupled = decoupled;
            algo plain = ADAM, ams = ADAM_AMS;
            plain.name = ams.name = decoupled ? "AdamW" : "Adam";
            run_case(&plain, &adam, "defaults", dt, tol);
            weft_adam_options all = {.lr = 0.02, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6,
                                     .weight_decay = 0.1, .amsgrad = true, .maximize = true};
            run_case(&ams, &all, "amsgrad, maximize, weight_decay", dt, tol);
        }
        adam_decoupled = false;
        algo rms = {"RMSprop", rmsprop_ref, rmsprop_call, 1, {true, false, false}, true};
        run_case(&rms, &(weft_rmsprop_options){.lr = 0.01, .alpha = 0.99, .eps = 1e-8},
                 "defaults", dt, tol);
        rms.uses[1] = rms.uses[2] = true;
        run_case(&rms, &(weft_rmsprop_options){.lr = 0.01, .alpha = 0.9, .eps = 1e-6,
                                               .weight_decay = 0.01, .momentum = 0.9,
                                               .centered = true, .maximize = true},
                 "momentum, centered, weight_decay, maximize", dt, tol);
        run_case(&ADAGRAD, &(weft_adagrad_options){.lr = 0.01, .eps = 1e-10}, "defaults", dt,
                 tol);
        run_case(&ADAGRAD, &(weft_adagrad_options){.lr = 0.1, .lr_decay = 0.01,
                                                   .weight_decay = 0.1,
                                                   .initial_accumulator_value = 0.1,
                                                   .eps = 1e-10, .maximize = true},
                 "lr_decay, weight_decay, initial_accumulator_value, maximize", dt, tol);
    }
}

/* A refused call: its code, a message naming the problem, and params[0],
 * the given state and the step count untouched, no state created. */
static void refused(int rc, int code, const char *needle, weft_tensor *param, double before,
                    weft_tensor **created, const char *desc)
{
    is_int(rc, code, "%s is refused", desc);
    like(weft_last_error(), needle, "%s: the message says why", desc);
    is_double(at(param, 0), before, 0, "%s: the parameter is unchanged", desc);
    ok(!created[0] && !created[1], "%s: no state was created", desc);
}

static void test_bad_input(void)
{
    double v[MAXN] = {1, 2, 3, 4, 5};
    weft_tensor *p[NP] = {vec(v, 3, WEFT_FLOAT64), vec(v, 5, WEFT_FLOAT64)};
    weft_tensor *g[NP] = {vec(v, 3, WEFT_FLOAT64), vec(v, 5, WEFT_FLOAT64)};
    weft_tensor *short_g[NP] = {vec(v, 3, WEFT_FLOAT64), vec(v, 4, WEFT_FLOAT64)};
    weft_tensor *f32_g[NP] = {vec(v, 3, WEFT_FLOAT64), vec(v, 5, WEFT_FLOAT32)};
    weft_tensor *null_g[NP] = {vec(v, 3, WEFT_FLOAT64), NULL};
    weft_tensor *same_p[NP] = {p[0], p[0]};
    weft_tensor *s0[NP] = {NULL, NULL}, *s1[NP] = {NULL, NULL}, *steps[NP] = {NULL, NULL};
    weft_sgd_options sgd = {.lr = 0.1, .momentum = 0.9};
    weft_adam_options adam = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};

    refused(weft_sgd_step(p, short_g, s0, NP, &sgd), WEFT_ESHAPE, "grads[1]", p[0], 1, s0,
            "SGD: a gradient of another shape");
    refused(weft_sgd_step(p, f32_g, s0, NP, &sgd), WEFT_EDTYPE, "grads[1] has dtype float32",
            p[0], 1, s0, "SGD: a gradient of another dtype");
    refused(weft_sgd_step(p, null_g, s0, NP, &sgd), WEFT_EINVAL, "grads[1] is NULL", p[0], 1, s0,
            "SGD: a NULL gradient");
    refused(weft_sgd_step(p, NULL, s0, NP, &sgd), WEFT_EINVAL, "grads is NULL", p[0], 1, s0,
            "SGD: a NULL list");
    refused(weft_sgd_step(p, g, NULL, NP, &sgd), WEFT_EINVAL, "momentum_bufs is NULL", p[0], 1,
            s0, "SGD: momentum without buffers");
    refused(weft_sgd_step(same_p, g, s0, NP, &sgd), WEFT_EINVAL, "params[1] is params[0]", p[0],
            1, s0, "SGD: a repeated parameter");
    refused(weft_sgd_step(p, g, s0, -1, &sgd), WEFT_EINVAL, "n is -1", p[0], 1, s0,
            "SGD: a negative count");
    refused(weft_sgd_step(p, g, s0, NP, &(weft_sgd_options){.lr = -1}), WEFT_EINVAL,
            "invalid lr -1", p[0], 1, s0, "SGD: a negative lr");
    refused(weft_sgd_step(p, g, s0, NP, &(weft_sgd_options){.lr = 1, .nesterov = true}),
            WEFT_EINVAL, "nesterov", p[0], 1, s0, "SGD: nesterov without momentum");
    refused(weft_sgd_step(p, g, s0, NP, NULL), WEFT_EINVAL, "NULL options", p[0], 1, s0,
            "SGD: NULL options");
    refused(weft_adam_step(p, g, s0, s1, NULL, steps, NP,
                           &(weft_adam_options){.lr = 0.1, .beta1 = 1.0, .beta2 = 0.9}),
            WEFT_EINVAL, "betas (1, 0.9)", p[0], 1, s0, "Adam: beta1 = 1");
    refused(weft_adam_step(p, short_g, s0, s1, NULL, steps, NP, &adam), WEFT_ESHAPE, "grads[1]",
            p[0], 1, s1, "Adam: a gradient of another shape");
    adam.amsgrad = true;
    refused(weft_adamw_step(p, g, s0, s1, NULL, steps, NP, &adam), WEFT_EINVAL,
            "max_exp_avg_sqs is NULL", p[0], 1, s0, "AdamW: amsgrad without its list");
    adam.amsgrad = false;
    ok(!steps[0] && !steps[1], "no step count was created by a refused call");

    /* given state of the wrong shape, with an existing step count: the
     * count is not incremented, nothing else created */
    weft_tensor *good_sq[NP] = {vec(v, 3, WEFT_FLOAT64), vec(v, 2, WEFT_FLOAT64)};
    weft_tensor *count[NP] = {NULL, NULL};
    weft_zeros(&count[0], NULL, 0, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(count[0]);
    refused(weft_adam_step(p, g, s0, good_sq, NULL, count, NP, &adam), WEFT_ESHAPE,
            "exp_avg_sqs[1]", p[0], 1, s0, "Adam: state of another shape");
    double t = -1;
    weft_tensor_item(count[0], &t);
    is_double(t, 0, 0, "the given step count is not incremented by a refused call");
    ok(!count[1], "the missing step count is not created by a refused call");
    weft_tensor *rms_sq[NP] = {NULL, NULL};
    refused(weft_rmsprop_step(p, g, rms_sq, NULL, NULL, steps, NP,
                              &(weft_rmsprop_options){.lr = 0.1, .alpha = 0.9, .momentum = 0.5}),
            WEFT_EINVAL, "momentum_bufs is NULL", p[0], 1, rms_sq,
            "RMSprop: momentum without buffers");
    refused(weft_adagrad_step(p, g, s0, steps, NP,
                              &(weft_adagrad_options){.lr = 0.1, .lr_decay = -1}),
            WEFT_EINVAL, "lr_decay -1", p[0], 1, s0, "Adagrad: a negative lr_decay");
    weft_tensor *ints[NP] = {NULL, NULL};
    int64_t three = 3;
    weft_zeros(&ints[0], &three, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    keep(ints[0]);
    ints[1] = p[1];
    refused(weft_sgd_step(ints, g, s0, NP, &sgd), WEFT_EDTYPE, "params[0] has dtype int64",
            p[0], 1, s0, "SGD: an integer parameter");
    is_int(weft_sgd_step(p, g, s0, 0, &sgd), 0, "no parameters: nothing to do");
    ok(!s0[0], "an empty call creates nothing");
}

int main(void)
{
    if (weft_load_default_plugins() < 0)
        skip_all("no plugins: %s", weft_last_error());
    test_formulas();
    drop_all();
    test_bad_input();
    drop_all();
    return done_testing();
}
