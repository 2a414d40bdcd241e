/* backends/cpu/dropout.c — dropout and dropout_: element i of the
 * (row-major) input is kept when the 24-bit uniform number drawn from
 * Philox block offset + i/4, word i%4, is below 1 - p, so a seed gives the
 * same mask whatever the thread count, and scaled by 1/(1-p). */
#include "cpu.h"

typedef struct dropout_job {
    const void *in;
    void *out;
    double p, scale;
    uint64_t seed, offset;
} dropout_job;

/* keep(i): u_i < 1 - p, u_i = (word >> 8) * 2^-24 */
#define DEFINE_DROPOUT(NAME, DTYPE, T, C, U)                                              \
    static void dropout_##NAME(int64_t begin, int64_t end, void *ctx)                     \
    {                                                                                     \
        const dropout_job *job = ctx;                                                     \
        const T *x = job->in;                                                             \
        T *o = job->out;                                                                  \
        const double keep = 1.0 - job->p;                                                 \
        const C scale = (C)job->scale;                                                    \
        uint32_t w[4];                                                                    \
        for (int64_t i = begin; i < end; i++) {                                           \
            if (i == begin || (i & 3) == 0)                                               \
                weft_philox(job->seed, job->offset + (uint64_t)(i >> 2), w);              \
            double u = (double)(w[i & 3] >> 8) * 0x1p-24;                                 \
            o[i] = cpu_store_##NAME(u < keep ? cpu_load_##NAME(x[i]) * scale : (C)0);     \
        }                                                                                 \
    }
CPU_DTYPES_FLOATING(DEFINE_DROPOUT)
typedef void (*dropout_fn)(int64_t begin, int64_t end, void *ctx);
static const dropout_fn dropout_loops[WEFT_NUM_DTYPES] = {CPU_ENTRIES_FLOATING(dropout)};

/* dropout(input, p, train, *, generator) and dropout_(self, ...) */
static int dropout_kernel(weft_call *call, void *ctx)
{
    const bool inplace = ctx != NULL;
    const char *op = weft_op_name(call->op);
    weft_tensor *self = call->args[0].u.tensor;
    double p = weft_value_double(&call->args[1]);
    bool train = call->args[2].u.b;
    weft_generator *g =
        call->args[3].tag == WEFT_VALUE_GENERATOR ? call->args[3].u.generator : NULL;
    weft_dtype dt = weft_tensor_dtype(self);
    int rc = cpu__check_cpu(op, "input", self);
    if (rc < 0)
        return rc;
    if (!(p >= 0 && p <= 1))
        return weft_set_error(WEFT_EINVAL, "%s: dropout probability has to be between 0 and 1, "
                              "but got %g", op, p);
    if (dt < 0 || dt >= WEFT_NUM_DTYPES || !dropout_loops[dt])
        return cpu__unsupported_dtype(op, dt);
    if (!train) { /* the identity */
        if (!inplace) {
            call->rets[0].tag = WEFT_VALUE_TENSOR;
            call->rets[0].u.tensor = weft_tensor_retain(self);
        }
        return 0;
    }
    weft_tensor *in = NULL, *out = NULL;
    if ((rc = weft_contiguous(&in, self)) < 0)
        return rc;
    if (inplace && in == self)
        out = weft_tensor_retain(self);
    else
        rc = weft_empty(&out, weft_tensor_sizes(self), weft_tensor_ndim(self), dt,
                        WEFT_DEVICE_CPU);
    int64_t n = weft_tensor_numel(self);
    if (rc == 0 && n > 0) {
        dropout_job job = {weft_tensor_data_ptr(in), weft_tensor_data_ptr(out), p,
                           p < 1 ? 1.0 / (1.0 - p) : 0.0, 0, 0};
        weft_generator_reserve(g, ((uint64_t)n + 3) / 4, &job.seed, &job.offset);
        cpu__parallel_for(0, n, CPU_GRAIN, dropout_loops[dt], &job);
    }
    if (rc == 0 && inplace && out != self)
        rc = weft_copy_(self, out);
    weft_tensor_release(in);
    if (rc == 0 && !inplace) {
        call->rets[0].tag = WEFT_VALUE_TENSOR;
        call->rets[0].u.tensor = out;
    } else {
        weft_tensor_release(out);
    }
    return rc;
}

static const weft_kernel_entry dropout_entries[] = {
    {"dropout", dropout_kernel, NULL},
    {"dropout_", dropout_kernel, &dropout_entries},
};

int cpu__register_dropout(weft_registrar *reg)
{
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, dropout_entries, sizeof dropout_entries / sizeof *dropout_entries);
}
