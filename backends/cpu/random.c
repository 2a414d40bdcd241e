/* backends/cpu/random.c — bernoulli_, bernoulli, random_ (randint's kernel),
 * randperm_out and multinomial, drawn from the core's counter-based Philox
 * generator.  Every value has a fixed place in the Philox stream (value i:
 * block offset + i/4 word i%4 for 32-bit draws, block offset + i/2 words
 * 2(i%2), 2(i%2)+1 for 64-bit ones), so the numbers depend on the seed and
 * never on the thread count or on how the range is split. */
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu.h"

static weft_generator *generator_arg(const weft_call *call, int i)
{
    return call->args[i].tag == WEFT_VALUE_GENERATOR ? call->args[i].u.generator : NULL;
}

/* 64 random bits for value i of a stream reserved in 64-bit draws */
static inline uint64_t draw64(uint64_t seed, uint64_t offset, int64_t i)
{
    uint32_t w[4];
    weft_philox(seed, offset + (uint64_t)(i >> 1), w);
    int k = (int)(i & 1) * 2;
    return (uint64_t)w[k] << 32 | w[k + 1];
}

/* a double uniform in [0, 1) with 53 random bits */
static inline double unit53(uint64_t bits)
{
    return (double)(bits >> 11) * 0x1p-53;
}

/* A contiguous tensor to write self's values into: self itself, or a
 * temporary that finish_target copies back. */
static int begin_target(weft_tensor **dest, weft_tensor *self)
{
    if (weft_tensor_is_contiguous(self)) {
        *dest = weft_tensor_retain(self);
        return 0;
    }
    return weft_empty(dest, weft_tensor_sizes(self), weft_tensor_ndim(self),
                      weft_tensor_dtype(self), WEFT_DEVICE_CPU);
}

static int finish_target(weft_tensor *self, weft_tensor *dest, int rc)
{
    if (rc == 0 && dest != self)
        rc = weft_copy_(self, dest);
    weft_tensor_release(dest);
    return rc;
}

/* ------------------------------------------------------------ bernoulli */

typedef struct bernoulli_job {
    void *out;
    const double *p; /* per element (contiguous, self's shape), or NULL */
    double p_scalar;
    uint64_t seed, offset;
} bernoulli_job;

/* element i is 1 when its 32-bit word, as u in [0, 1), is below p_i */
#define DEFINE_BERNOULLI(NAME, DTYPE, T, C, U)                                          \
    static void bernoulli_##NAME(int64_t begin, int64_t end, void *ctx)                 \
    {                                                                                   \
        const bernoulli_job *job = ctx;                                                 \
        T *o = job->out;                                                                \
        uint32_t w[4];                                                                  \
        for (int64_t i = begin; i < end; i++) {                                         \
            if (i == begin || (i & 3) == 0)                                             \
                weft_philox(job->seed, job->offset + (uint64_t)(i >> 2), w);            \
            double p = job->p ? job->p[i] : job->p_scalar;                              \
            double u = (double)w[i & 3] * 0x1p-32;                                      \
            o[i] = cpu_store_##NAME(cpu_from_double_##NAME(u < p ? 1.0 : 0.0));         \
        }                                                                               \
    }
CPU_DTYPES_BOOL(DEFINE_BERNOULLI)
CPU_DTYPES_INTEGRAL(DEFINE_BERNOULLI)
CPU_DTYPES_FLOATING(DEFINE_BERNOULLI)
typedef void (*range_fn)(int64_t begin, int64_t end, void *ctx);
static const range_fn bernoulli_loops[WEFT_NUM_DTYPES] = {
    CPU_ENTRIES_BOOL(bernoulli) CPU_ENTRIES_INTEGRAL(bernoulli) CPU_ENTRIES_FLOATING(bernoulli)};

/* p broadcast to self's shape, as contiguous float64, every value checked */
static int probabilities(weft_tensor **out, const char *op, const weft_tensor *self,
                         const weft_tensor *p)
{
    *out = NULL;
    int rc = cpu__check_cpu(op, "p", p);
    if (rc < 0)
        return rc;
    if (!weft_dtype_is_floating(weft_tensor_dtype(p)))
        return weft_set_error(WEFT_EDTYPE, "%s: p must have a floating dtype, got %s", op,
                              weft_dtype_name(weft_tensor_dtype(p)));
    weft_tensor *expanded = NULL, *as_double = NULL;
    rc = weft_expand(&expanded, p, weft_tensor_sizes(self), weft_tensor_ndim(self));
    if (rc < 0) {
        char a[128], b[128];
        return weft_set_error(WEFT_ESHAPE, "%s: p of shape %s cannot be broadcast to self's shape %s",
                              op, weft_format_shape(a, sizeof a, weft_tensor_sizes(p), weft_tensor_ndim(p)),
                              weft_format_shape(b, sizeof b, weft_tensor_sizes(self), weft_tensor_ndim(self)));
    }
    rc = weft_to_dtype(&as_double, expanded, WEFT_FLOAT64);
    if (rc == 0)
        rc = weft_contiguous(out, as_double);
    weft_tensor_release(expanded);
    weft_tensor_release(as_double);
    if (rc < 0)
        return rc;
    const double *v = weft_tensor_data_ptr(*out);
    for (int64_t i = 0; i < weft_tensor_numel(*out); i++)
        if (!(v[i] >= 0 && v[i] <= 1)) {
            double bad = v[i];
            weft_tensor_release(*out);
            *out = NULL;
            return weft_set_error(WEFT_EINVAL, "%s: expects all elements of p to be in [0, 1], "
                                  "but found %g", op, bad);
        }
    return 0;
}

/* Writes the draws into self (any layout): p_tensor NULL means p_scalar. */
static int bernoulli_into(const char *op, weft_tensor *self, const weft_tensor *p_tensor,
                          double p_scalar, weft_generator *g)
{
    weft_dtype dt = weft_tensor_dtype(self);
    int rc = cpu__check_cpu(op, "self", self);
    if (rc < 0)
        return rc;
    if (dt < 0 || dt >= WEFT_NUM_DTYPES || !bernoulli_loops[dt])
        return cpu__unsupported_dtype(op, dt);
    if (!p_tensor && !(p_scalar >= 0 && p_scalar <= 1))
        return weft_set_error(WEFT_EINVAL, "%s: expects p to be in [0, 1], but got p=%g", op,
                              p_scalar);
    weft_tensor *p = NULL, *dest = NULL;
    if (p_tensor && (rc = probabilities(&p, op, self, p_tensor)) < 0)
        return rc;
    int64_t n = weft_tensor_numel(self);
    rc = n ? begin_target(&dest, self) : 0;
    if (rc == 0 && n) {
        bernoulli_job job = {weft_tensor_data_ptr(dest), p ? weft_tensor_data_ptr(p) : NULL,
                             p_scalar, 0, 0};
        weft_generator_reserve(g, ((uint64_t)n + 3) / 4, &job.seed, &job.offset);
        cpu__parallel_for(0, n, CPU_GRAIN, bernoulli_loops[dt], &job);
        rc = finish_target(self, dest, rc);
    }
    weft_tensor_release(p);
    return rc;
}

/* bernoulli_(self, p=0.5, *, generator) */
static int bernoulli_scalar_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    return bernoulli_into("bernoulli_", call->args[0].u.tensor, NULL,
                          weft_value_double(&call->args[1]), generator_arg(call, 2));
}

/* bernoulli_tensor_(self, p, *, generator): p broadcasts to self */
static int bernoulli_tensor_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    return bernoulli_into("bernoulli_", call->args[0].u.tensor, call->args[1].u.tensor, 0,
                          generator_arg(call, 2));
}

/* bernoulli(self, *, generator): self holds the probabilities */
static int bernoulli_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    weft_dtype dt = weft_tensor_dtype(self);
    if (!weft_dtype_is_floating(dt))
        return weft_set_error(WEFT_EDTYPE, "bernoulli: expects a floating tensor of "
                              "probabilities, got %s", weft_dtype_name(dt));
    weft_tensor *out = NULL;
    int rc = weft_empty(&out, weft_tensor_sizes(self), weft_tensor_ndim(self), dt,
                        WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = bernoulli_into("bernoulli", out, self, 0, generator_arg(call, 1));
    if (rc < 0) {
        weft_tensor_release(out);
        return rc;
    }
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = out;
    return 0;
}

/* --------------------------------------------------------------- random_ */

typedef struct random_job {
    void *out;
    int64_t from;
    uint64_t range; /* to - from; 0 means all 2^64 values */
    uint64_t seed, offset;
} random_job;

/* from + bits mod range, computed in unsigned so no step overflows */
static inline int64_t random_in_range(const random_job *job, int64_t i)
{
    uint64_t bits = draw64(job->seed, job->offset, i);
    return (int64_t)((uint64_t)job->from + (job->range ? bits % job->range : bits));
}

#define DEFINE_RANDOM_INT(NAME, DTYPE, T, C, U)                                         \
    static void random_##NAME(int64_t begin, int64_t end, void *ctx)                    \
    {                                                                                   \
        const random_job *job = ctx;                                                    \
        T *o = job->out;                                                                \
        for (int64_t i = begin; i < end; i++)                                           \
            o[i] = (T)random_in_range(job, i);                                          \
    }
#define DEFINE_RANDOM_FLOAT(NAME, DTYPE, T, C, U)                                       \
    static void random_##NAME(int64_t begin, int64_t end, void *ctx)                    \
    {                                                                                   \
        const random_job *job = ctx;                                                    \
        T *o = job->out;                                                                \
        for (int64_t i = begin; i < end; i++)                                           \
            o[i] = cpu_store_##NAME(cpu_from_double_##NAME((double)random_in_range(job, i))); \
    }
CPU_DTYPES_BOOL(DEFINE_RANDOM_INT)
CPU_DTYPES_INTEGRAL(DEFINE_RANDOM_INT)
CPU_DTYPES_FLOATING(DEFINE_RANDOM_FLOAT)
static const range_fn random_loops[WEFT_NUM_DTYPES] = {
    CPU_ENTRIES_BOOL(random) CPU_ENTRIES_INTEGRAL(random) CPU_ENTRIES_FLOATING(random)};

/* The values a dtype holds exactly, as [lowest, highest]: the integers of
 * an integral dtype, or those a floating dtype represents without gaps. */
static void exact_range(weft_dtype dt, int64_t *lowest, int64_t *highest)
{
    static const int digits[WEFT_NUM_DTYPES] = {[WEFT_FLOAT16] = 11, [WEFT_BFLOAT16] = 8,
                                                [WEFT_FLOAT32] = 24, [WEFT_FLOAT64] = 53};
    static const int64_t lo[WEFT_NUM_DTYPES] = {[WEFT_BOOL] = 0, [WEFT_UINT8] = 0,
                                                [WEFT_INT8] = INT8_MIN, [WEFT_INT16] = INT16_MIN,
                                                [WEFT_INT32] = INT32_MIN, [WEFT_INT64] = INT64_MIN};
    static const int64_t hi[WEFT_NUM_DTYPES] = {[WEFT_BOOL] = 1, [WEFT_UINT8] = UINT8_MAX,
                                                [WEFT_INT8] = INT8_MAX, [WEFT_INT16] = INT16_MAX,
                                                [WEFT_INT32] = INT32_MAX, [WEFT_INT64] = INT64_MAX};
    if (digits[dt]) {
        *highest = (int64_t)1 << digits[dt];
        *lowest = -*highest;
    } else {
        *lowest = lo[dt];
        *highest = hi[dt];
    }
}

/* random_(self, from, to=None, *, generator): integers uniform in
 * [from, to); to None means up to the dtype's largest exact value. */
static int random_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "random_";
    weft_tensor *self = call->args[0].u.tensor;
    weft_dtype dt = weft_tensor_dtype(self);
    int rc = cpu__check_cpu(op, "self", self);
    if (rc < 0)
        return rc;
    if (dt < 0 || dt >= WEFT_NUM_DTYPES || !random_loops[dt])
        return cpu__unsupported_dtype(op, dt);
    int64_t lowest, highest;
    exact_range(dt, &lowest, &highest);
    int64_t from = call->args[1].u.i;
    bool has_to = call->args[2].tag == WEFT_VALUE_INT;
    int64_t to = has_to ? call->args[2].u.i : 0;
    if (has_to && from >= to)
        return weft_set_error(WEFT_EINVAL, "%s: expects 'from' to be less than 'to', but got "
                              "from=%lld >= to=%lld", op, (long long)from, (long long)to);
    if (from < lowest || from > highest)
        return weft_set_error(WEFT_EINVAL, "%s: from=%lld is out of bounds for %s", op,
                              (long long)from, weft_dtype_name(dt));
    if (has_to && (to - 1 > highest || to - 1 < lowest))
        return weft_set_error(WEFT_EINVAL, "%s: to - 1 = %lld is out of bounds for %s", op,
                              (long long)(to - 1), weft_dtype_name(dt));
    /* [from, highest] when to is None: highest - from + 1 values, 0 for 2^64 */
    uint64_t range = has_to ? (uint64_t)to - (uint64_t)from
                            : (uint64_t)highest - (uint64_t)from + 1;
    int64_t n = weft_tensor_numel(self);
    if (n == 0)
        return 0;
    weft_tensor *dest = NULL;
    if ((rc = begin_target(&dest, self)) < 0)
        return rc;
    random_job job = {weft_tensor_data_ptr(dest), from, range, 0, 0};
    weft_generator_reserve(generator_arg(call, 3), ((uint64_t)n + 1) / 2, &job.seed, &job.offset);
    cpu__parallel_for(0, n, CPU_GRAIN, random_loops[dt], &job);
    return finish_target(self, dest, 0);
}

/* ------------------------------------------------------------- randperm */

/* randperm_out(out, n, *, generator): a Fisher-Yates shuffle of 0..n-1,
 * step i (from n-1 down) swapping with j = bits mod (i+1) drawn from
 * block offset + i.  Sequential: it is one pass and cannot depend on the
 * thread count. */
static int randperm_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "randperm_out";
    weft_tensor *out = call->args[0].u.tensor;
    int64_t n = call->args[1].u.i;
    weft_dtype dt = weft_tensor_dtype(out);
    int rc = cpu__check_cpu(op, "out", out);
    if (rc < 0)
        return rc;
    if (n < 0)
        return weft_set_error(WEFT_EINVAL, "%s: n must be non-negative, got %lld", op,
                              (long long)n);
    if (dt == WEFT_BOOL || weft_dtype_is_complex(dt))
        return cpu__unsupported_dtype(op, dt);
    int64_t lowest, highest;
    exact_range(dt, &lowest, &highest);
    if (n > 0 && n - 1 > highest)
        return weft_set_error(WEFT_EINVAL, "%s: n=%lld is too large for %s (at most %lld)", op,
                              (long long)n, weft_dtype_name(dt), (long long)highest + 1);
    if ((rc = cpu__prepare_target(op, out, true, &n, 1, "requested")) < 0)
        return rc;
    if (n == 0)
        return 0;
    weft_tensor *perm = NULL;
    if ((rc = weft_empty(&perm, &n, 1, WEFT_INT64, WEFT_DEVICE_CPU)) < 0)
        return rc;
    int64_t *p = weft_tensor_data_ptr(perm);
    for (int64_t i = 0; i < n; i++)
        p[i] = i;
    uint64_t seed, offset;
    weft_generator_reserve(generator_arg(call, 2), (uint64_t)n, &seed, &offset);
    for (int64_t i = n - 1; i > 0; i--) {
        uint32_t w[4];
        weft_philox(seed, offset + (uint64_t)i, w);
        int64_t j = (int64_t)(((uint64_t)w[0] << 32 | w[1]) % (uint64_t)(i + 1));
        int64_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    rc = weft_copy_(out, perm);
    weft_tensor_release(perm);
    return rc;
}

/* ----------------------------------------------------------- multinomial */

typedef struct multinomial_job {
    const double *prob; /* rows x categories, checked */
    int64_t *out;       /* rows x samples */
    int64_t categories, samples;
    bool replacement;
    uint64_t seed, offset;
    atomic_bool out_of_memory; /* a worker could not get its scratch */
} multinomial_job;

typedef struct keyed {
    double key;
    int64_t index;
} keyed;

static int by_key(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* With replacement, sample s of row r: u from value r*samples+s, the first
 * category whose running sum exceeds u * total (never a zero-probability
 * one: its running sum equals the previous one).  Without replacement:
 * category k of row r gets E_k / p_k with E_k = -log(1 - u) exponential
 * from value r*categories+k; the samples are the categories with the
 * smallest keys, in order — the same law as drawing one at a time and
 * renormalising. */
static void multinomial_rows(int64_t begin, int64_t end, void *ctx)
{
    const multinomial_job *job = ctx;
    const int64_t K = job->categories, S = job->samples;
    keyed *keys = job->replacement ? NULL : malloc((size_t)K * sizeof *keys);
    double *cdf = job->replacement ? malloc((size_t)K * sizeof *cdf) : NULL;
    if (!keys && !cdf) {
        atomic_store(&((multinomial_job *)job)->out_of_memory, true);
        return;
    }
    for (int64_t r = begin; r < end; r++) {
        const double *p = job->prob + r * K;
        int64_t *o = job->out + r * S;
        if (job->replacement) {
            double sum = 0;
            for (int64_t k = 0; k < K; k++)
                cdf[k] = sum += p[k];
            for (int64_t s = 0; s < S; s++) {
                double x = unit53(draw64(job->seed, job->offset, r * S + s)) * sum;
                int64_t lo = 0, hi = K - 1;
                while (lo < hi) { /* the first k with cdf[k] > x */
                    int64_t mid = lo + (hi - lo) / 2;
                    if (cdf[mid] > x)
                        hi = mid;
                    else
                        lo = mid + 1;
                }
                while (lo > 0 && p[lo] == 0) /* x rounded onto the total */
                    lo--;
                o[s] = lo;
            }
        } else {
            int64_t m = 0;
            for (int64_t k = 0; k < K; k++) {
                if (p[k] == 0)
                    continue;
                double u = unit53(draw64(job->seed, job->offset, r * K + k));
                keys[m].key = -log1p(-u) / p[k];
                keys[m++].index = k;
            }
            qsort(keys, (size_t)m, sizeof *keys, by_key);
            for (int64_t s = 0; s < S; s++)
                o[s] = keys[s].index;
        }
    }
    free(keys);
    free(cdf);
}

/* multinomial(self, num_samples, replacement=False, *, generator) */
static int multinomial_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "multinomial";
    const weft_tensor *self = call->args[0].u.tensor;
    int64_t samples = call->args[1].u.i;
    bool replacement = call->args[2].u.b;
    weft_dtype dt = weft_tensor_dtype(self);
    int nd = weft_tensor_ndim(self);
    int rc = cpu__check_cpu(op, "self", self);
    if (rc < 0)
        return rc;
    if (!weft_dtype_is_floating(dt))
        return weft_set_error(WEFT_EDTYPE, "%s: expects a floating tensor of probabilities, got %s",
                              op, weft_dtype_name(dt));
    if (nd != 1 && nd != 2)
        return weft_set_error(WEFT_ESHAPE, "%s: prob_dist must be 1 or 2 dim, got %d dims", op, nd);
    if (samples <= 0)
        return weft_set_error(WEFT_EINVAL, "%s: cannot sample n_sample <= 0 samples (got %lld)",
                              op, (long long)samples);
    int64_t K = weft_tensor_size(self, -1), rows = nd == 2 ? weft_tensor_size(self, 0) : 1;
    if (!replacement && samples > K)
        return weft_set_error(WEFT_EINVAL, "%s: cannot sample n_sample > prob_dist.size(-1) "
                              "samples without replacement (%lld > %lld)", op,
                              (long long)samples, (long long)K);
    if (K == 0)
        return weft_set_error(WEFT_EINVAL, "%s: the distribution has no categories", op);
    weft_tensor *as_double = NULL, *prob = NULL, *out = NULL;
    rc = weft_to_dtype(&as_double, self, WEFT_FLOAT64);
    if (rc == 0)
        rc = weft_contiguous(&prob, as_double);
    weft_tensor_release(as_double);
    if (rc < 0)
        return rc;
    /* every row is checked before anything is drawn */
    const double *p = weft_tensor_data_ptr(prob);
    for (int64_t r = 0; rc == 0 && r < rows; r++) {
        double sum = 0;
        int64_t positive = 0;
        for (int64_t k = 0; k < K; k++) {
            double v = p[r * K + k];
            if (!(v >= 0) || isinf(v)) {
                rc = weft_set_error(WEFT_EINVAL, "%s: probability tensor contains either inf, "
                                    "nan or element < 0 (%g in row %lld)", op, v, (long long)r);
                break;
            }
            sum += v;
            positive += v > 0;
        }
        if (rc == 0 && !(sum > 0) )
            rc = weft_set_error(WEFT_EINVAL, "%s: invalid multinomial distribution (sum of "
                                "probabilities <= 0) in row %lld", op, (long long)r);
        else if (rc == 0 && !isfinite(sum))
            rc = weft_set_error(WEFT_EINVAL, "%s: the probabilities of row %lld add up to more "
                                "than a double holds", op, (long long)r);
        else if (rc == 0 && !replacement && positive < samples)
            rc = weft_set_error(WEFT_EINVAL, "%s: invalid multinomial distribution (with "
                                "replacement=False, not enough non-negative category to sample): "
                                "row %lld has %lld categories with non-zero probability, %lld "
                                "samples were asked for", op, (long long)r, (long long)positive,
                                (long long)samples);
    }
    int64_t sizes[2] = {rows, samples};
    if (rc == 0)
        rc = weft_empty(&out, nd == 2 ? sizes : sizes + 1, nd, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc == 0) {
        uint64_t draws = (uint64_t)rows * (uint64_t)(replacement ? samples : K);
        multinomial_job job = {p, weft_tensor_data_ptr(out), K, samples, replacement, 0, 0, false};
        weft_generator_reserve(generator_arg(call, 3), (draws + 1) / 2, &job.seed, &job.offset);
        /* saturated: with no rows, any sample count makes an empty
         * result, and K + samples may pass int64 (the fuzzer's finding) */
        int64_t per_row = samples > INT64_MAX - K ? INT64_MAX : K + samples;
        cpu__parallel_for(0, rows, per_row >= CPU_GRAIN ? 1 : CPU_GRAIN / per_row,
                          multinomial_rows, &job);
        if (atomic_load(&job.out_of_memory))
            rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory for the scratch of %lld categories",
                                op, (long long)K);
    }
    weft_tensor_release(prob);
    if (rc < 0) {
        weft_tensor_release(out);
        return rc;
    }
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = out;
    return 0;
}

static const weft_kernel_entry random_entries[] = {
    {"bernoulli_", bernoulli_scalar_kernel, NULL},
    {"bernoulli_tensor_", bernoulli_tensor_kernel, NULL},
    {"bernoulli", bernoulli_kernel, NULL},
    {"random_", random_kernel, NULL},
    {"randperm_out", randperm_kernel, NULL},
    {"multinomial", multinomial_kernel, NULL},
};

int cpu__register_random(weft_registrar *reg)
{
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, random_entries, sizeof random_entries / sizeof *random_entries);
}
