/* tests/test_nn_optim.c — the nn library (issue 4): each optimizer's
 * first three steps against updates computed here by hand (scalar loops and
 * a few literal values), zero_grad and set_lr, the initialisers' bounds and
 * statistics, the learning-rate schedules, and parameter files: a round
 * trip, the documented layout and checksum (checked with zlib's crc32), and
 * damaged or mismatched files that must fail without touching a tensor. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <weft/nn.h>

#include "tests/tap.h"
#include "tests/keep.h"

/* ---------------------------------------------------------------- helpers */

/* Whether param() makes non-contiguous parameters: a contiguous CPU
 * parameter takes the fused one-pass update (_fused_sgd_, _fused_adam_),
 * any other the composed sequence of operators that devices without the
 * fused kernels run; the optimizer tests run once each way. */
static bool strided_params;

/* a float64 vector leaf that requires grad (kept); with strided_params,
 * column 0 of an [n, 2] tensor, detached (a leaf of stride 2) */
static weft_tensor *param(const double *values, int n)
{
    /* one element is contiguous whatever its stride */
    bool strided = strided_params && n > 1;
    int64_t sizes[2] = {n, 2};
    weft_tensor *t = NULL;
    if (weft_empty(&t, sizes, strided ? 2 : 1, WEFT_FLOAT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    double *data = weft_tensor_data_ptr(t);
    for (int i = 0; i < n; i++) {
        if (strided) {
            data[2 * i] = values[i];
            data[2 * i + 1] = NAN; /* never read: a step that did would show */
        } else {
            data[i] = values[i];
        }
    }
    if (strided) {
        weft_tensor *column = NULL, *leaf = NULL;
        weft_select(&column, t, 1, 0);
        weft_detach(&leaf, column);
        weft_tensor_release(column);
        weft_tensor_release(t);
        t = leaf;
        if (!t || weft_tensor_is_contiguous(t))
            return NULL;
    }
    weft_tensor_set_requires_grad(t, true);
    return keep(t);
}

static void set_grad(weft_tensor *p, const double *values, int n)
{
    int64_t size = n;
    weft_tensor *g = NULL;
    weft_empty(&g, &size, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    memcpy(weft_tensor_data_ptr(g), values, (size_t)n * sizeof(double));
    weft_tensor_set_grad(p, g);
    weft_tensor_release(g);
}

static void check_values(const weft_tensor *t, const double *want, int n, double tol,
                         const char *what)
{
    weft_tensor *dense = NULL;
    const double *got = weft_contiguous(&dense, t) == 0 ? values_of(keep(dense)) : NULL;
    double worst = 0;
    int at = 0;
    for (int i = 0; got && i < n; i++) {
        double err = fabs(got[i] - want[i]) / (1.0 + fabs(want[i]));
        if (err > worst)
            worst = err, at = i;
    }
    if (!ok(got && worst <= tol, "%s", what))
        diag("element %d: got %.17g, expected %.17g", at, got ? got[at] : NAN, want[at]);
}

/* the gradients of three steps, one row per step */
static const double grads[3][4] = {
    {0.5, -1.0, 2.0, 0.0}, {0.25, 0.75, -1.5, 1.0}, {-0.5, 0.1, 3.0, -2.0}};
static const double start[4] = {1.0, -2.0, 0.5, 3.0};

/* ------------------------------------------------------------------- SGD */

/* torch.optim.SGD written out per element */
static void sgd_reference(double *p, double lr, double mu, double damp, double wd, bool nesterov)
{
    double buf[4];
    for (int step = 0; step < 3; step++)
        for (int i = 0; i < 4; i++) {
            double d = grads[step][i] + wd * p[i];
            if (mu != 0) {
                buf[i] = step == 0 ? d : mu * buf[i] + (1 - damp) * d;
                d = nesterov ? d + mu * buf[i] : buf[i];
            }
            p[i] -= lr * d;
        }
}

static void run_three_steps(weft_optimizer *opt, weft_tensor *p)
{
    for (int step = 0; step < 3; step++) {
        set_grad(p, grads[step], 4);
        weft_optimizer_step(opt);
        weft_optimizer_zero_grad(opt);
    }
}

static void test_sgd_case(double lr, double mu, double damp, double wd, bool nesterov,
                          const char *what)
{
    weft_tensor *p = param(start, 4);
    weft_optimizer *opt = NULL;
    int rc = weft_optimizer_sgd(&opt, &p, 1, lr, mu, damp, wd, nesterov);
    is_int(rc, 0, "SGD (%s) is created", what);
    run_three_steps(opt, p);
    double want[4];
    memcpy(want, start, sizeof want);
    sgd_reference(want, lr, mu, damp, wd, nesterov);
    check_values(p, want, 4, 1e-14, what);
    weft_optimizer_destroy(opt);
}

static void test_sgd(void)
{
    test_sgd_case(0.1, 0, 0, 0, false, "plain SGD: p -= lr * g");
    test_sgd_case(0.1, 0.9, 0, 0, false, "SGD with momentum 0.9");
    test_sgd_case(0.05, 0.9, 0.1, 0.01, false, "SGD with momentum, dampening and weight decay");
    test_sgd_case(0.05, 0.8, 0, 0.1, true, "SGD with nesterov momentum and weight decay");
    test_sgd_case(0.1, 0, 0, 0.5, false, "SGD with weight decay only");

    /* the literal numbers: a constant gradient of 1, lr 0.1, momentum 0.9
     * gives buffers 1, 1.9, 2.71 and parameters 0.9, 0.71, 0.439 */
    double one = 1.0, unit = 1.0;
    weft_tensor *p = param(&one, 1);
    weft_optimizer *opt = NULL;
    weft_optimizer_sgd(&opt, &p, 1, 0.1, 0.9, 0, 0, false);
    const double want[3] = {0.9, 0.71, 0.439};
    for (int step = 0; step < 3; step++) {
        set_grad(p, &unit, 1);
        weft_optimizer_step(opt);
        is_double(values_of(p)[0], want[step], 1e-15, "momentum by hand, step %d: %g", step + 1,
                  want[step]);
    }
    /* nesterov on the same: d = g + mu * buf -> 0.1 * 1.9, 0.1 * 2.71 */
    weft_optimizer_destroy(opt);
    p = param(&one, 1);
    weft_optimizer_sgd(&opt, &p, 1, 0.1, 0.9, 0, 0, true);
    const double nesterov[3] = {1 - 0.19, 1 - 0.19 - 0.271, 1 - 0.19 - 0.271 - 0.3439};
    for (int step = 0; step < 3; step++) {
        set_grad(p, &unit, 1);
        weft_optimizer_step(opt);
        is_double(values_of(p)[0], nesterov[step], 1e-15, "nesterov by hand, step %d",
                  step + 1);
    }
    weft_optimizer_destroy(opt);
}

/* ------------------------------------------------------------------ Adam */

/* torch.optim.Adam / AdamW written out per element; steps[i] says which of
 * the three steps give parameter element i a gradient (all, here) */
static void adam_reference(double *p, double lr, double b1, double b2, double eps, double wd,
                           bool decoupled)
{
    double m[4] = {0}, v[4] = {0};
    for (int step = 1; step <= 3; step++)
        for (int i = 0; i < 4; i++) {
            double g = grads[step - 1][i];
            if (decoupled)
                p[i] *= 1 - lr * wd;
            else
                g += wd * p[i];
            m[i] = b1 * m[i] + (1 - b1) * g;
            v[i] = b2 * v[i] + (1 - b2) * g * g;
            double mhat = m[i] / (1 - pow(b1, step));
            double vhat = v[i] / (1 - pow(b2, step));
            p[i] -= lr * mhat / (sqrt(vhat) + eps);
        }
}

static void test_adam_case(bool adamw, double lr, double b1, double b2, double eps, double wd,
                           const char *what)
{
    weft_tensor *p = param(start, 4);
    weft_optimizer *opt = NULL;
    int rc = adamw ? weft_optimizer_adamw(&opt, &p, 1, lr, b1, b2, eps, wd)
                   : weft_optimizer_adam(&opt, &p, 1, lr, b1, b2, eps, wd);
    is_int(rc, 0, "%s is created", what);
    run_three_steps(opt, p);
    double want[4];
    memcpy(want, start, sizeof want);
    adam_reference(want, lr, b1, b2, eps, wd, adamw);
    check_values(p, want, 4, 1e-12, what);
    weft_optimizer_destroy(opt);
}

static void test_adam(void)
{
    test_adam_case(false, 0.01, 0.9, 0.999, 1e-8, 0, "Adam with bias correction");
    test_adam_case(false, 0.1, 0.5, 0.75, 1e-3, 0, "Adam with other betas and a large eps");
    test_adam_case(false, 0.01, 0.9, 0.999, 1e-8, 0.1, "Adam with L2 weight decay in the gradient");
    test_adam_case(true, 0.01, 0.9, 0.999, 1e-8, 0.1, "AdamW with decoupled weight decay");
    test_adam_case(true, 0.05, 0.8, 0.9, 1e-6, 0.5, "AdamW with a strong decay");

    /* by hand: bias correction makes the first steps of a constant gradient
     * exactly lr * g / (|g| + eps) */
    double one = 1.0, two = 2.0;
    weft_tensor *p = param(&one, 1);
    weft_optimizer *opt = NULL;
    weft_optimizer_adam(&opt, &p, 1, 0.1, 0.9, 0.999, 1e-8, 0);
    for (int step = 1; step <= 3; step++) {
        set_grad(p, &two, 1);
        weft_optimizer_step(opt);
        is_double(values_of(p)[0], 1 - step * 0.1 * 2 / (2 + 1e-8), 1e-14,
                  "Adam by hand, step %d: the bias-corrected step is lr", step);
    }
    weft_optimizer_destroy(opt);

    /* AdamW by hand, zero gradient: only the decay, p *= 1 - lr * wd */
    double zero = 0.0;
    p = param(&one, 1);
    weft_optimizer_adamw(&opt, &p, 1, 0.1, 0.9, 0.999, 1e-8, 0.5);
    for (int step = 1; step <= 3; step++) {
        set_grad(p, &zero, 1);
        weft_optimizer_step(opt);
    }
    is_double(values_of(p)[0], pow(0.95, 3), 1e-15, "AdamW by hand: decay 0.95^3 with no gradient");
    weft_optimizer_destroy(opt);

    /* a parameter without a gradient is skipped: its step count stays, so
     * its first real step is corrected as a first step */
    weft_tensor *ps[2] = {param(&one, 1), param(&one, 1)};
    weft_optimizer_adam(&opt, ps, 2, 0.1, 0.9, 0.999, 1e-8, 0);
    set_grad(ps[0], &two, 1);
    weft_optimizer_step(opt);
    is_double(values_of(ps[1])[0], 1.0, 0, "a parameter with no gradient is not touched");
    weft_optimizer_zero_grad(opt);
    set_grad(ps[1], &two, 1);
    weft_optimizer_step(opt);
    is_double(values_of(ps[1])[0], 1 - 0.1 * 2 / (2 + 1e-8), 1e-14,
              "its first step later is bias-corrected as step 1");
    is_double(values_of(ps[0])[0], 1 - 0.1 * 2 / (2 + 1e-8), 1e-14,
              "and the other parameter, without a gradient now, did not move");
    weft_optimizer_destroy(opt);
}

/* ----------------------------------------------- zero_grad, lr, errors */

static void test_optimizer_api(void)
{
    double one = 1.0, g = 1.0;
    weft_tensor *p = param(&one, 1), *grad = NULL;
    weft_optimizer *opt = NULL;
    weft_optimizer_sgd(&opt, &p, 1, 0.5, 0, 0, 0, false);
    set_grad(p, &g, 1);
    is_int(weft_optimizer_zero_grad(opt), 0, "zero_grad succeeds");
    weft_tensor_grad(&grad, p);
    ok(grad == NULL, "zero_grad sets the gradient to NULL");
    is_int(weft_optimizer_step(opt), 0, "a step with no gradient succeeds");
    is_double(values_of(p)[0], 1.0, 0, "and changes nothing");
    is_double(weft_optimizer_get_lr(opt), 0.5, 0, "get_lr gives the lr it was made with");
    is_int(weft_optimizer_set_lr(opt, weft_lr_step(0.5, 1, 0.1, 1)), 0, "set_lr");
    is_double(weft_optimizer_get_lr(opt), 0.05, 1e-15, "get_lr gives the new lr");
    set_grad(p, &g, 1);
    weft_optimizer_step(opt);
    is_double(values_of(p)[0], 0.95, 1e-15, "the step uses the new lr");
    is_int(weft_optimizer_set_lr(opt, -1), WEFT_EINVAL, "a negative lr is refused");
    weft_optimizer_destroy(opt);
    weft_optimizer_destroy(NULL);

    weft_optimizer *bad = (weft_optimizer *)&one;
    is_int(weft_optimizer_sgd(&bad, &p, 1, 0.1, 0.9, 0.5, 0, true), WEFT_EINVAL,
           "nesterov with dampening is refused");
    ok(bad == NULL, "and the out-pointer is NULL");
    like(weft_last_error(), "nesterov", "the message says why");
    is_int(weft_optimizer_sgd(&bad, &p, 1, -0.1, 0, 0, 0, false), WEFT_EINVAL, "negative lr");
    is_int(weft_optimizer_adam(&bad, &p, 1, 0.1, 1.0, 0.999, 1e-8, 0), WEFT_EINVAL, "beta1 = 1");
    is_int(weft_optimizer_adamw(&bad, &p, 1, 0.1, 0.9, 0.999, -1, 0), WEFT_EINVAL, "negative eps");
    weft_tensor *twice[2] = {p, p};
    is_int(weft_optimizer_adam(&bad, twice, 2, 0.1, 0.9, 0.999, 1e-8, 0), WEFT_EINVAL,
           "a parameter given twice");
    weft_tensor *y = NULL;
    weft_mul_scalar(&y, p, 2.0);
    keep(y);
    is_int(weft_optimizer_sgd(&bad, &y, 1, 0.1, 0, 0, 0, false), WEFT_EINVAL, "a non-leaf tensor");
    like(weft_last_error(), "non-leaf", "the message says non-leaf");
    int64_t size = 2;
    weft_tensor *ints = NULL;
    weft_zeros(&ints, &size, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    keep(ints);
    is_int(weft_optimizer_sgd(&bad, &ints, 1, 0.1, 0, 0, 0, false), WEFT_EDTYPE,
           "an integer parameter");
}

/* ------------------------------------------------------------------- init */

static void stats(const weft_tensor *t, double *mean, double *std, double *lo, double *hi)
{
    const double *v = values_of(t);
    int64_t n = weft_tensor_numel(t);
    double s = 0, s2 = 0;
    *lo = INFINITY, *hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        s += v[i];
        s2 += v[i] * v[i];
        *lo = fmin(*lo, v[i]);
        *hi = fmax(*hi, v[i]);
    }
    *mean = s / (double)n;
    *std = sqrt(s2 / (double)n - *mean * *mean);
}

/* got within a relative tolerance of want (statistics of small values) */
#define is_rel(got, want, rel, ...)                                                   \
    do {                                                                              \
        double g_ = (got), w_ = (want);                                               \
        if (!ok(fabs(g_ - w_) <= (rel) * fabs(w_), __VA_ARGS__))                      \
            diag("     got: %.17g\n#   expected: %.17g (within %g)", g_, w_, (double)(rel)); \
    } while (0)

static weft_tensor *empty_f32(const int64_t *sizes, int ndim)
{
    weft_tensor *t = NULL;
    weft_empty(&t, sizes, ndim, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    return keep(t);
}

static void test_init(void)
{
    weft_generator *g = NULL;
    weft_generator_create(&g, 42);
    const int64_t conv[4] = {256, 128, 3, 3}, fc[2] = {512, 1024};
    int64_t fan_in, fan_out;
    double mean, std, lo, hi, gain;

    weft_tensor *w = empty_f32(conv, 4);
    is_int(weft_init_fans(w, &fan_in, &fan_out), 0, "fans of a conv weight");
    is_int(fan_in, 128 * 9, "fan_in = size(1) * receptive field");
    is_int(fan_out, 256 * 9, "fan_out = size(0) * receptive field");

    weft_init_calculate_gain(&gain, "leaky_relu", NAN);
    is_double(gain, sqrt(2 / (1 + 0.0001)), 1e-15, "leaky_relu's default gain");
    weft_init_calculate_gain(&gain, "tanh", 0);
    is_double(gain, 5.0 / 3, 1e-15, "tanh's gain");
    is_int(weft_init_calculate_gain(&gain, "swish", 0), WEFT_EINVAL, "an unknown nonlinearity");

    /* kaiming uniform, nn.Conv2d's default: a = sqrt(5) -> bound 1/sqrt(fan_in) */
    weft_tensor_set_requires_grad(w, true);
    is_int(weft_init_kaiming_uniform_(w, sqrt(5), WEFT_FAN_IN, NULL, g), 0,
           "kaiming_uniform_ on a leaf that requires grad");
    stats(w, &mean, &std, &lo, &hi);
    double bound = 1 / sqrt(1152.0);
    ok(lo >= -bound && hi <= bound && hi > 0.99 * bound && lo < -0.99 * bound,
       "kaiming_uniform_ fills [-1/sqrt(fan_in), 1/sqrt(fan_in)] (%g..%g, bound %g)", lo, hi,
       bound);
    is_rel(std, bound / sqrt(3), 0.01, "its std is bound/sqrt(3)");
    ok(weft_tensor_grad_fn_name(w) == NULL, "no graph was recorded");

    /* kaiming uniform, relu, fan_out */
    weft_init_kaiming_uniform_(w, 0, WEFT_FAN_OUT, "relu", g);
    stats(w, &mean, &std, &lo, &hi);
    bound = sqrt(2.0) * sqrt(3.0 / 2304);
    ok(lo >= -bound && hi <= bound && hi > 0.99 * bound, "kaiming_uniform_ relu fan_out bound %g",
       bound);

    /* kaiming normal, relu */
    weft_tensor *f = empty_f32(fc, 2);
    is_int(weft_init_kaiming_normal_(f, 0, WEFT_FAN_IN, "relu", g), 0, "kaiming_normal_");
    stats(f, &mean, &std, &lo, &hi);
    is_rel(std, sqrt(2.0 / 1024), 0.01, "kaiming_normal_ std is sqrt(2 / fan_in)");
    ok(fabs(mean) < 0.01 * std * 10, "and its mean is near 0 (%g)", mean);

    /* xavier */
    is_int(weft_init_xavier_uniform_(f, 2.0, g), 0, "xavier_uniform_");
    stats(f, &mean, &std, &lo, &hi);
    bound = 2.0 * sqrt(6.0 / (512 + 1024));
    ok(lo >= -bound && hi <= bound && hi > 0.99 * bound, "xavier_uniform_ bound gain*sqrt(6/(fi+fo)) = %g",
       bound);
    is_int(weft_init_xavier_normal_(f, 1.0, g), 0, "xavier_normal_");
    stats(f, &mean, &std, &lo, &hi);
    is_rel(std, sqrt(2.0 / (512 + 1024)), 0.01, "xavier_normal_ std is sqrt(2/(fi+fo))");

    /* the same seed gives the same numbers */
    weft_tensor *a = empty_f32(fc, 2), *b = empty_f32(fc, 2);
    weft_generator_set_seed(g, 7);
    weft_init_xavier_normal_(a, 1.0, g);
    weft_generator_set_seed(g, 7);
    weft_init_xavier_normal_(b, 1.0, g);
    ok(memcmp(weft_tensor_data_ptr(a), weft_tensor_data_ptr(b), 512 * 1024 * 4) == 0,
       "the same generator seed gives the same initialisation");

    int64_t one_dim = 10;
    weft_tensor *bias = empty_f32(&one_dim, 1);
    is_int(weft_init_xavier_uniform_(bias, 1.0, NULL), WEFT_EINVAL, "a 1-d tensor has no fans");
    like(weft_last_error(), "fewer than 2 dimensions", "the message says why");
    is_int(weft_init_kaiming_normal_(f, 0, WEFT_FAN_IN, "swish", NULL), WEFT_EINVAL,
           "an unknown nonlinearity is refused");
    weft_generator_destroy(g);
}

/* ------------------------------------------------------------- schedules */

static void test_schedules(void)
{
    is_double(weft_lr_step(0.1, 30, 0.1, 0), 0.1, 1e-15, "StepLR epoch 0");
    is_double(weft_lr_step(0.1, 30, 0.1, 29), 0.1, 1e-15, "StepLR epoch 29");
    is_double(weft_lr_step(0.1, 30, 0.1, 30), 0.01, 1e-15, "StepLR epoch 30");
    is_double(weft_lr_step(0.1, 30, 0.1, 65), 0.001, 1e-15, "StepLR epoch 65");
    is_double(weft_lr_step(0.5, 2, 0.5, 5), 0.125, 1e-15, "StepLR gamma 0.5, step 2, epoch 5: 0.5 * 0.5^2");
    ok(isnan(weft_lr_step(0.1, 0, 0.1, 3)), "StepLR step_size 0 is NaN");
    is_double(weft_lr_cosine(0.1, 0, 10, 0), 0.1, 1e-15, "cosine epoch 0 is base_lr");
    is_double(weft_lr_cosine(0.1, 0, 10, 5), 0.05, 1e-15, "cosine half-way is the middle");
    is_double(weft_lr_cosine(0.1, 0, 10, 10), 0.0, 1e-15, "cosine at T_max is eta_min");
    is_double(weft_lr_cosine(0.1, 0.001, 100, 25), 0.001 + 0.099 * (1 + sqrt(0.5)) / 2, 1e-15,
              "cosine with eta_min at a quarter");
    is_double(weft_lr_cosine(0.1, 0.001, 10, 15), 0.001 + 0.099 * (1 + cos(M_PI * 1.5)) / 2,
              1e-15, "cosine past T_max follows the closed form");
}

/* ---------------------------------------------------------- save / load */

static char dir[] = "/tmp/weft-nn-XXXXXX";
static char path[256];

static unsigned char *read_file(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = malloc(1 << 20);
    *len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

static void write_file(const char *p, const unsigned char *data, size_t len)
{
    FILE *f = fopen(p, "wb");
    fwrite(data, 1, len, f);
    fclose(f);
}

static uint32_t le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static weft_tensor *filled(const int64_t *sizes, int ndim, weft_dtype dtype, double value)
{
    weft_tensor *t = NULL;
    weft_full(&t, sizes, ndim, value, dtype, WEFT_DEVICE_CPU);
    return keep(t);
}

static bool all_equal(const weft_tensor *t, double value)
{
    const double *v = values_of(t);
    for (int64_t i = 0; v && i < weft_tensor_numel(t); i++)
        if (v[i] != value)
            return false;
    return v != NULL;
}

static bool same_values(const weft_tensor *a, const weft_tensor *b)
{
    int64_t n = weft_tensor_numel(a);
    const double *x = values_of(a), *y = values_of(b);
    if (!x || !y || n != weft_tensor_numel(b))
        return false;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&x[i], &y[i], sizeof x[i]) != 0)
            return false;
    return true;
}

#define NSAVED 5
static const char *const names[NSAVED] = {"fc1.weight", "fc1.bias", "steps", "scale", "mask"};
static const int64_t weight_sizes[2] = {3, 4}, bias_sizes[1] = {3}, steps_sizes[2] = {2, 2},
                     mask_sizes[1] = {5};

/* targets of the saved tensors' shapes and dtypes, filled with 7 (kept) */
static void make_targets(weft_tensor **t)
{
    t[0] = filled(weight_sizes, 2, WEFT_FLOAT32, 7);
    t[1] = filled(bias_sizes, 1, WEFT_FLOAT64, 7);
    t[2] = filled(steps_sizes, 2, WEFT_INT64, 7);
    t[3] = filled(NULL, 0, WEFT_BFLOAT16, 7);
    t[4] = filled(mask_sizes, 1, WEFT_BOOL, 1);
}

static bool targets_untouched(weft_tensor **t)
{
    for (int i = 0; i < NSAVED; i++)
        if (!all_equal(t[i], i == 4 ? 1 : 7))
            return false;
    return true;
}

/* Writes data into the FIFO fifo from a child process, so that a load
 * reads a file that is not a regular one; returns the child's pid. */
static pid_t feed_fifo(const char *fifo, const unsigned char *data, size_t len)
{
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = fopen(fifo, "wb");
        if (f) {
            fwrite(data, 1, len, f);
            fclose(f);
        }
        _exit(0);
    }
    return pid;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

/* Files whose length is not what the loader may read: a device that never
 * ends, headers that announce more than the file holds, and a good file
 * through a pipe (where fstat gives no length). */
static void test_unbounded_files(weft_tensor **t)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = weft_load_parameters("/dev/zero", t, names, NSAVED);
    double secs = seconds_since(&t0);
    ok(rc == WEFT_EIO && secs < 2, "/dev/zero is refused at once with WEFT_EIO (%s, %.2f s)",
       weft_error_name(rc), secs);
    like(weft_last_error(), "/dev/zero: not a weft parameter file", "the message names the file");

    /* a header announcing four billion tensors in 20 bytes, and one whose
     * only tensor announces 2^40 float32 elements */
    unsigned char many[20] = "WEFTPARM\1\0\0\0\xff\xff\xff\xff";
    write_file(path, many, sizeof many);
    make_targets(t);
    is_int(weft_load_parameters(path, t, names, NSAVED), WEFT_EIO,
           "a header announcing 2^32-1 tensors in 20 bytes");
    like(weft_last_error(), "cannot fit in 20 bytes", "  the message says so");
    unsigned char huge[16 + 4 + 1 + 8 + 8 + 4] = "WEFTPARM\1\0\0\0\1\0\0\0"
                                                 "\1\0\0\0w\x08\0\0\0\1\0\0\0"
                                                 "\0\0\0\0\0\1\0\0";
    write_file(path, huge, sizeof huge);
    is_int(weft_load_parameters(path, t, names, NSAVED), WEFT_EIO,
           "a tensor announcing 2^40 elements in a 41-byte file");
    like(weft_last_error(), "inside tensor 0's elements", "  the message says where it ends");
    ok(targets_untouched(t), "no tensor changed");

    /* a good file through a FIFO loads; /dev/zero's zeros through one do not */
    char fifo[300];
    snprintf(fifo, sizeof fifo, "%s/params.fifo", dir);
    size_t len = 0;
    unsigned char *bytes = NULL;
    weft_save_parameters(path, (weft_tensor *const *)t, names, NSAVED);
    bytes = read_file(path, &len);
    if (!bytes || mkfifo(fifo, 0600) != 0) {
        skip(2, "no FIFO");
        free(bytes);
        return;
    }
    weft_tensor *u[NSAVED]; /* loaded from t's values, all 7 (the mask 1) */
    make_targets(u);
    weft_fill_(u[0], 3);
    pid_t child = feed_fifo(fifo, bytes, len);
    rc = weft_load_parameters(fifo, u, names, NSAVED);
    waitpid(child, NULL, 0);
    ok(rc == 0 && targets_untouched(u), "a good file through a FIFO loads (%s)",
       rc ? weft_last_error() : "");
    unsigned char zeros[4096] = {0};
    child = feed_fifo(fifo, zeros, sizeof zeros);
    rc = weft_load_parameters(fifo, u, names, NSAVED);
    waitpid(child, NULL, 0);
    ok(rc == WEFT_EIO && strstr(weft_last_error(), "not a weft parameter file"),
       "zeros through a FIFO: not a weft parameter file");
    unlink(fifo);
    free(bytes);
}

static void test_save_load(void)
{
    if (!mkdtemp(dir)) {
        skip(1, "no temporary directory");
        return;
    }
    snprintf(path, sizeof path, "%s/params.weft", dir);

    /* the saved tensors: a weight saved through a transposed (strided) view
     * that requires grad, a float64 bias, int64, a 0-d bfloat16, bool */
    weft_generator *g = NULL;
    weft_generator_create(&g, 3);
    int64_t wt_sizes[2] = {4, 3};
    weft_tensor *wt = NULL, *w = NULL, *saved[NSAVED];
    weft_rand(&wt, wt_sizes, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, g);
    keep(wt);
    weft_tensor_set_requires_grad(wt, true);
    weft_t(&w, wt);
    saved[0] = keep(w);
    weft_randn(&saved[1], bias_sizes, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU, g);
    keep(saved[1]);
    weft_arange(&saved[2], -2, 2, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    weft_tensor *steps = NULL;
    weft_view(&steps, keep(saved[2]), steps_sizes, 2);
    saved[2] = keep(steps);
    saved[3] = filled(NULL, 0, WEFT_BFLOAT16, 0.375);
    weft_tensor *mask = filled(mask_sizes, 1, WEFT_BOOL, 0);
    ((bool *)weft_tensor_data_ptr(mask))[1] = ((bool *)weft_tensor_data_ptr(mask))[3] = true;
    saved[4] = mask;
    weft_generator_destroy(g);

    is_int(weft_save_parameters(path, saved, names, NSAVED), 0, "save five tensors");
    ok(access(path, F_OK) == 0, "the file exists");
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ok(access(tmp, F_OK) != 0, "and no temporary file is left");

    weft_tensor *t[NSAVED];
    make_targets(t);
    /* in another order: matched by name */
    weft_tensor *shuffled[NSAVED] = {t[3], t[0], t[4], t[2], t[1]};
    const char *shuffled_names[NSAVED] = {names[3], names[0], names[4], names[2], names[1]};
    is_int(weft_load_parameters(path, shuffled, shuffled_names, NSAVED), 0,
           "load them back, asked for in another order");
    for (int i = 0; i < NSAVED; i++)
        ok(same_values(t[i], saved[i]), "'%s' round-trips exactly", names[i]);

    /* the documented layout */
    size_t len = 0;
    unsigned char *bytes = read_file(path, &len);
    ok(bytes && len > 20 && memcmp(bytes, "WEFTPARM", 8) == 0, "the file starts with WEFTPARM");
    is_int(le32(bytes + 8), 1, "version 1");
    is_int(le32(bytes + 12), NSAVED, "count");
    is_int(le32(bytes + 16), strlen("fc1.weight"), "first name length");
    ok(memcmp(bytes + 20, "fc1.weight", 10) == 0, "first name");
    is_int(le32(bytes + 30), WEFT_FLOAT32, "first dtype");
    is_int(le32(bytes + 34), 2, "first ndim");
    is_int(le32(bytes + 38), 3, "first size");
    is_int(le32(bytes + 46), 4, "second size");
    float first;
    memcpy(&first, bytes + 54, 4);
    is_double(first, values_of(saved[0])[0], 0, "first element, row-major");
    size_t expected = 16 + 4 + 10 + 8 + 16 + 12 * 4 /* fc1.weight */
                      + 4 + 8 + 8 + 8 + 3 * 8      /* fc1.bias */
                      + 4 + 5 + 8 + 16 + 4 * 8     /* steps */
                      + 4 + 5 + 8 + 0 + 2          /* scale */
                      + 4 + 4 + 8 + 8 + 5          /* mask */
                      + 4;
    is_int(len, expected, "the file is exactly as long as the format says");
    is_int(le32(bytes + len - 4), crc32(0, bytes, (uInt)(len - 4)),
           "the trailer is zlib's CRC-32 of everything before it");

    /* damaged files: every one fails and no tensor changes */
    make_targets(t);
    size_t cuts[] = {0, 5, 8, 14, 18, 25, 40, 60, len / 2, len - 5, len - 4, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_file(path, bytes, cuts[i]);
        int rc = weft_load_parameters(path, t, names, NSAVED);
        ok(rc == WEFT_EIO && targets_untouched(t), "truncated at %zu bytes: WEFT_EIO (%s)",
           cuts[i], weft_last_error());
    }
    write_file(path, bytes, len);
    bytes[60] ^= 0x10;
    write_file(path, bytes, len);
    is_int(weft_load_parameters(path, t, names, NSAVED), WEFT_EIO, "a flipped data byte");
    like(weft_last_error(), "checksum", "is a checksum mismatch");
    ok(targets_untouched(t), "and nothing was loaded");
    bytes[60] ^= 0x10;
    bytes[len - 1] ^= 0x01;
    write_file(path, bytes, len);
    is_int(weft_load_parameters(path, t, names, NSAVED), WEFT_EIO, "a flipped checksum byte");
    bytes[len - 1] ^= 0x01;
    bytes[0] = 'X';
    write_file(path, bytes, len);
    is_int(weft_load_parameters(path, t, names, NSAVED), WEFT_EIO, "bad magic");
    like(weft_last_error(), "magic", "names the magic");
    bytes[0] = 'W';
    bytes[8] = 2;
    uint32_t crc = (uint32_t)crc32(0, bytes, (uInt)(len - 4));
    memcpy(bytes + len - 4, (unsigned char[4]){crc, crc >> 8, crc >> 16, crc >> 24}, 4);
    write_file(path, bytes, len);
    is_int(weft_load_parameters(path, t, names, NSAVED), WEFT_EIO, "version 2");
    like(weft_last_error(), "version 2", "names the version");
    bytes[8] = 1;
    crc = (uint32_t)crc32(0, bytes, (uInt)(len - 4));
    memcpy(bytes + len - 4, (unsigned char[4]){crc, crc >> 8, crc >> 16, crc >> 24}, 4);
    unsigned char *longer = calloc(1, len + 3);
    memcpy(longer, bytes, len);
    write_file(path, longer, len + 3);
    free(longer);
    is_int(weft_load_parameters(path, t, names, NSAVED), WEFT_EIO, "trailing bytes");
    /* a NUL inside a name ("fc1\0weight"), with a right checksum: damaged,
     * not a tensor named "fc1" (found by tests/fuzz/fuzz_parameters.c) */
    bytes[23] = 0;
    crc = (uint32_t)crc32(0, bytes, (uInt)(len - 4));
    memcpy(bytes + len - 4, (unsigned char[4]){crc, crc >> 8, crc >> 16, crc >> 24}, 4);
    write_file(path, bytes, len);
    is_int(weft_load_parameters(path, t, names, NSAVED), WEFT_EIO, "a NUL byte inside a name");
    like(weft_last_error(), "name has a NUL byte", "says so");
    bytes[23] = '.';
    crc = (uint32_t)crc32(0, bytes, (uInt)(len - 4));
    memcpy(bytes + len - 4, (unsigned char[4]){crc, crc >> 8, crc >> 16, crc >> 24}, 4);
    ok(targets_untouched(t), "no tensor changed by any damaged file");

    /* mismatches */
    write_file(path, bytes, len);
    free(bytes);
    weft_tensor *wrong[NSAVED];
    memcpy(wrong, t, sizeof wrong);
    wrong[0] = filled(wt_sizes, 2, WEFT_FLOAT32, 7);
    is_int(weft_load_parameters(path, wrong, names, NSAVED), WEFT_ESHAPE, "a wrong shape");
    like(weft_last_error(), "'fc1.weight' has shape [3, 4] in the file but [4, 3] in memory",
         "the message names the tensor and both shapes");
    ok(targets_untouched(t) && all_equal(wrong[0], 7), "and no tensor changed");
    wrong[0] = filled(weight_sizes, 2, WEFT_FLOAT64, 7);
    is_int(weft_load_parameters(path, wrong, names, NSAVED), WEFT_EDTYPE, "a wrong dtype");
    like(weft_last_error(), "'fc1.weight' is float32 in the file but float64",
         "the message names the tensor and both dtypes");
    is_int(weft_load_parameters(path, t, names, NSAVED - 1), WEFT_ENOTFOUND,
           "asking for fewer tensors than the file holds");
    like(weft_last_error(), "'mask'", "names the tensor not asked for");
    const char *renamed[NSAVED] = {"fc1.weight", "fc2.bias", "steps", "scale", "mask"};
    is_int(weft_load_parameters(path, t, renamed, NSAVED), WEFT_ENOTFOUND, "a missing name");
    like(weft_last_error(), "'fc2.bias'", "names it");
    ok(targets_untouched(t), "still no tensor changed");
    char missing[300];
    snprintf(missing, sizeof missing, "%s/nothing-here", dir);
    is_int(weft_load_parameters(missing, t, names, NSAVED), WEFT_EIO, "a missing file");
    snprintf(missing, sizeof missing, "%s/no/such/dir/p.weft", dir);
    is_int(weft_save_parameters(missing, saved, names, NSAVED), WEFT_EIO,
           "saving into a missing directory");
    const char *dup[2] = {"a", "a"};
    is_int(weft_save_parameters(path, saved, dup, 2), WEFT_EINVAL, "a name given twice");

    /* the good file still loads after all that */
    is_int(weft_load_parameters(path, t, names, NSAVED), 0, "the undamaged file loads");
    ok(same_values(t[0], saved[0]), "with the right values");
    test_unbounded_files(t);
    unlink(path);
    rmdir(dir);
}

/* weft_save_safetensors: the header the format specifies (length, JSON,
 * 8-aligned data), the elements row-major even from a transposed view, a
 * name that needs JSON escaping, and the errors (no file is left). */
static void test_save_safetensors(void)
{
    char dir[] = "/tmp/weft-safetensors-XXXXXX";
    if (!mkdtemp(dir)) {
        ok(false, "mkdtemp");
        return;
    }
    char path[300];
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    int64_t sizes[2] = {2, 3};
    weft_tensor *base = NULL, *tr = NULL, *ids = NULL, *cplx = NULL;
    weft_arange(&base, 0, 6, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    weft_tensor *m = NULL;
    weft_view(&m, keep(base), sizes, 2);
    weft_t(&tr, keep(m)); /* [[0, 3], [1, 4], [2, 5]] */
    keep(tr);
    weft_arange(&ids, 7, 9, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    keep(ids);
    weft_zeros(&cplx, sizes, 1, WEFT_COMPLEX64, WEFT_DEVICE_CPU);
    keep(cplx);
    weft_tensor *both[2] = {tr, ids};
    const char *names[2] = {"w\"t", "ids"};
    is_int(weft_save_safetensors(path, both, names, 2), 0, "safetensors: save a view and an int64 tensor");
    FILE *f = fopen(path, "rb");
    unsigned char buf[512];
    size_t len = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0 && len >= 8; i--)
        hlen = hlen << 8 | buf[i];
    ok(len > 8 && hlen % 8 == 0 && 8 + hlen + 6 * 4 + 2 * 8 == len,
       "the header length is 8-aligned and the data follows it exactly (%zu bytes)", len);
    char header[512] = "";
    if (hlen < sizeof header && 8 + hlen <= len)
        memcpy(header, buf + 8, hlen);
    like(header, "\"w\\\"t\":{\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,24]}",
         "the float entry: escaped name, dtype, shape, offsets");
    like(header, "\"ids\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[24,40]}",
         "the int64 entry follows it");
    float first[6];
    int64_t second[2];
    if (8 + hlen + 40 <= len) {
        memcpy(first, buf + 8 + hlen, sizeof first);
        memcpy(second, buf + 8 + hlen + 24, sizeof second);
    }
    ok(first[0] == 0 && first[1] == 3 && first[2] == 1 && first[5] == 5 && second[0] == 7 &&
           second[1] == 8,
       "the elements are row-major in the view's order");
    char other[300];
    snprintf(other, sizeof other, "%s/c.safetensors", dir);
    weft_tensor *with_complex[2] = {ids, cplx};
    const char *cnames[2] = {"ids", "z"};
    is_int(weft_save_safetensors(other, with_complex, cnames, 2), WEFT_EDTYPE, "a complex tensor");
    like(weft_last_error(), "'z' is complex64", "names it and its dtype");
    ok(access(other, F_OK) != 0, "and writes nothing");
    const char *dup[2] = {"a", "a"};
    is_int(weft_save_safetensors(other, both, dup, 2), WEFT_EINVAL, "a name given twice");
    like(weft_last_error(), "weft_save_safetensors: name 'a' given twice", "says so");
    snprintf(other, sizeof other, "%s/no/such/dir/m.safetensors", dir);
    is_int(weft_save_safetensors(other, both, names, 2), WEFT_EIO, "a missing directory");
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    if (weft_load_default_plugins() < 0)
        skip_all("no plugins: %s", weft_last_error());
    /* the fused updates (contiguous parameters), then the composed ones
     * on the same cases */
    for (int composed = 0; composed < 2; composed++) {
        strided_params = composed;
        test_sgd();
        drop_all();
        test_adam();
        drop_all();
    }
    strided_params = false;
    drop_all();
    test_optimizer_api();
    drop_all();
    test_init();
    drop_all();
    test_schedules();
    test_save_load();
    drop_all();
    test_save_safetensors();
    drop_all();
    return done_testing();
}
