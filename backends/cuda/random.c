/* backends/cuda/random.c — the boxed random kernels: uniform_, normal_,
 * bernoulli_ with a scalar p or a tensor p (bernoulli_tensor_, and
 * bernoulli, whose self is p), dropout and dropout_.  Arguments are checked
 * as the CPU checks them, the generator's counters reserved exactly as the
 * CPU reserves them (one Philox block per four values), and the values
 * written row-major into self or a contiguous temporary copied back, so a
 * seed gives the same numbers on the GPU as on the CPU.  Complex dtypes,
 * operands on two devices and the other random operators go to the CPU
 * fallback. */
#include <math.h>

#include "gpu.h"

#include "cuda.h"

static weft_generator *generator_arg(const weft_call *call, int i)
{
    return i < call->nargs && call->args[i].tag == WEFT_VALUE_GENERATOR ? call->args[i].u.generator
                                                                         : NULL;
}

static int select_device(const char *op, const weft_tensor *t)
{
    int index = weft_tensor_device(t).index;
    if (cudaSetDevice(index) != cudaSuccess)
        return weft_set_error(WEFT_EDEVICE, "%s: cannot select " WFC_BACKEND ":%d", op, index);
    return 0;
}

/* A contiguous tensor to write self's values into: self, or a temporary. */
static int target_of(weft_tensor **dest, weft_tensor *self)
{
    if (weft_tensor_is_contiguous(self)) {
        *dest = weft_tensor_retain(self);
        return 0;
    }
    return weft_new_output(dest, self, weft_tensor_sizes(self), weft_tensor_ndim(self),
                           weft_tensor_dtype(self));
}

/* uniform_(self, from, to, *, generator), normal_(self, mean, std, *,
 * generator), bernoulli_(self, p, *, generator): ctx is the kind. */
static int random_kernel(weft_call *call, void *ctx)
{
    int kind = *(const int *)ctx;
    const char *op = weft_op_name(call->op);
    weft_tensor *self = call->args[0].u.tensor;
    weft_dtype dtype = weft_tensor_dtype(self);
    double a = weft_arg_double(call, 1), b = kind == WFC_RANDOM_BERNOULLI ? 0 : weft_arg_double(call, 2);
    if (!wfc_random_supported(kind, dtype))
        return weft_call_cpu_fallback(call); /* complex, or integers for uniform_/normal_ */
    if (kind == WFC_RANDOM_UNIFORM && !(a <= b))
        return weft_set_error(WEFT_EINVAL, "%s: expects to return a [from, to) range, but found "
                              "from=%g > to=%g", op, a, b);
    if (kind == WFC_RANDOM_NORMAL && !(b >= 0))
        return weft_set_error(WEFT_EINVAL, "%s: expects std >= 0.0, but found std %g", op, b);
    if (kind == WFC_RANDOM_BERNOULLI && !(a >= 0 && a <= 1))
        return weft_set_error(WEFT_EINVAL, "%s: expects p to be in [0, 1], but got p=%g", op, a);
    int64_t n = weft_tensor_numel(self);
    if (n == 0)
        return 0;
    /* the CPU's uniform bits per dtype: what its mantissa can hold */
    int bits = dtype == WEFT_FLOAT16 ? 11 : dtype == WEFT_BFLOAT16 ? 8 : dtype == WEFT_FLOAT32 ? 24 : 32;
    weft_tensor *dest = NULL;
    int rc = target_of(&dest, self);
    if (rc == 0)
        rc = select_device(op, self);
    uint64_t seed = 0, offset = 0;
    if (rc == 0) {
        weft_generator_reserve(generator_arg(call, kind == WFC_RANDOM_BERNOULLI ? 2 : 3),
                               ((uint64_t)n + 3) / 4, &seed, &offset);
        rc = wfc_random_fill(wfc_current_stream(weft_tensor_device(self).index), kind, dtype,
                             weft_tensor_data_ptr(dest), n, seed, offset, a, b, bits);
    }
    if (rc == 0 && dest != self)
        rc = weft_copy_(self, dest);
    weft_tensor_release(dest);
    return rc;
}

/* p broadcast to self's shape as contiguous float64 on the device, every
 * value checked there to lie in [0, 1] (the first one outside reported
 * after one read back, with the CPU backend's message). */
static int probabilities(weft_tensor **out, const char *op, const weft_tensor *self,
                         const weft_tensor *p)
{
    *out = NULL;
    if (!weft_dtype_is_floating(weft_tensor_dtype(p)))
        return weft_set_error(WEFT_EDTYPE, "%s: p must have a floating dtype, got %s", op,
                              weft_dtype_name(weft_tensor_dtype(p)));
    weft_tensor *expanded = NULL, *wide = NULL, *bad = NULL;
    char a[128], b[128];
    if (weft_expand(&expanded, p, weft_tensor_sizes(self), weft_tensor_ndim(self)) < 0)
        return weft_set_error(WEFT_ESHAPE, "%s: p of shape %s cannot be broadcast to self's "
                              "shape %s", op,
                              weft_format_shape(a, sizeof a, weft_tensor_sizes(p), weft_tensor_ndim(p)),
                              weft_format_shape(b, sizeof b, weft_tensor_sizes(self),
                                             weft_tensor_ndim(self)));
    int rc = weft_to_dtype(&wide, expanded, WEFT_FLOAT64);
    if (rc == 0)
        rc = weft_contiguous(out, wide);
    if (rc == 0)
        rc = weft_zeros(&bad, (const int64_t[]){2}, 1, WEFT_INT64, weft_tensor_device(self));
    if (rc == 0)
        rc = select_device(op, self);
    if (rc == 0)
        rc = wfc_check_probabilities(wfc_current_stream(weft_tensor_device(self).index),
                                     weft_tensor_data_ptr(*out), weft_tensor_numel(*out),
                                     weft_tensor_data_ptr(bad));
    int64_t pos = 0;
    double value = 0;
    if (rc == 0 && weft_tensor_numel(*out) > 0)
        rc = wfc_first_bad(bad, &pos);
    if (rc == 1 && (rc = wfc_read_element(*out, pos, &value)) == 0)
        rc = weft_set_error(WEFT_EINVAL, "%s: expects all elements of p to be in [0, 1], but "
                            "found %g", op, value);
    weft_tensor_release(expanded);
    weft_tensor_release(wide);
    weft_tensor_release(bad);
    if (rc < 0) {
        weft_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

/* Draws into self (any layout) with probabilities p: the CPU's counters
 * (one Philox block per four values) and test (word i%4 as u < p[i]). */
static int bernoulli_tensor_into(const char *op, weft_tensor *self, const weft_tensor *p_arg,
                                 weft_generator *generator)
{
    weft_tensor *p = NULL, *dest = NULL;
    int rc = probabilities(&p, op, self, p_arg);
    int64_t n = weft_tensor_numel(self);
    if (rc == 0 && n > 0)
        rc = target_of(&dest, self);
    if (rc == 0 && n > 0) {
        uint64_t seed = 0, offset = 0;
        weft_generator_reserve(generator, ((uint64_t)n + 3) / 4, &seed, &offset);
        rc = wfc_bernoulli_tensor(wfc_current_stream(weft_tensor_device(self).index),
                                  weft_tensor_dtype(self), weft_tensor_data_ptr(dest),
                                  weft_tensor_data_ptr(p), n, seed, offset);
    }
    if (rc == 0 && dest && dest != self)
        rc = weft_copy_(self, dest);
    weft_tensor_release(dest);
    weft_tensor_release(p);
    return rc;
}

/* bernoulli_tensor_(self, p, *, generator): p broadcasts to self */
static int bernoulli_tensor_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *self = call->args[0].u.tensor;
    const weft_tensor *p = call->args[1].u.tensor;
    weft_device a = weft_tensor_device(self), b = weft_tensor_device(p);
    if (a.type != b.type || a.index != b.index ||
        !wfc_random_supported(WFC_RANDOM_BERNOULLI, weft_tensor_dtype(self)))
        return weft_call_cpu_fallback(call);
    return bernoulli_tensor_into("bernoulli_", self, p, generator_arg(call, 2));
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
    int rc = weft_new_output(&out, self, weft_tensor_sizes(self), weft_tensor_ndim(self), dt);
    if (rc == 0)
        rc = bernoulli_tensor_into("bernoulli", out, self, generator_arg(call, 1));
    if (rc < 0) {
        weft_tensor_release(out);
        return rc;
    }
    return weft_return_tensor(call, 0, out);
}

/* dropout(input, p, train, *, generator) and dropout_(self, ...) */
static int dropout_kernel(weft_call *call, void *ctx)
{
    bool inplace = ctx != NULL;
    const char *op = weft_op_name(call->op);
    weft_tensor *self = call->args[0].u.tensor;
    double p = weft_arg_double(call, 1);
    bool train = weft_arg_bool(call, 2);
    weft_dtype dt = weft_tensor_dtype(self);
    if (!(p >= 0 && p <= 1))
        return weft_set_error(WEFT_EINVAL, "%s: dropout probability has to be between 0 and 1, "
                              "but got %g", op, p);
    if (!wfc_random_supported(WFC_RANDOM_DROPOUT, dt))
        return weft_call_cpu_fallback(call);
    if (!train) /* the identity */
        return inplace ? 0 : weft_return_tensor(call, 0, weft_tensor_retain(self));
    weft_tensor *in = NULL, *out = NULL;
    int rc = weft_contiguous(&in, self);
    if (rc < 0)
        return rc;
    if (inplace && in == self)
        out = weft_tensor_retain(self);
    else
        rc = weft_new_output(&out, self, weft_tensor_sizes(self), weft_tensor_ndim(self), dt);
    int64_t n = weft_tensor_numel(self);
    if (rc == 0)
        rc = select_device(op, self);
    if (rc == 0 && n > 0) {
        uint64_t seed, offset;
        weft_generator_reserve(generator_arg(call, 3), ((uint64_t)n + 3) / 4, &seed, &offset);
        rc = wfc_dropout(wfc_current_stream(weft_tensor_device(self).index), dt,
                         weft_tensor_data_ptr(out), weft_tensor_data_ptr(in), n, seed, offset,
                         1.0 - p, p < 1 ? 1.0 / (1.0 - p) : 0.0);
    }
    if (rc == 0 && inplace && out != self)
        rc = weft_copy_(self, out);
    weft_tensor_release(in);
    if (rc == 0 && !inplace)
        return weft_return_tensor(call, 0, out);
    weft_tensor_release(out);
    return rc;
}

static const int uniform = WFC_RANDOM_UNIFORM, normal = WFC_RANDOM_NORMAL,
                 bernoulli = WFC_RANDOM_BERNOULLI, inplace_marker = 1;

int wfc_register_random(weft_registrar *reg)
{
    static const weft_kernel_entry entries[] = {
        {"uniform_", random_kernel, &uniform},     {"normal_", random_kernel, &normal},
        {"bernoulli_", random_kernel, &bernoulli}, {"dropout", dropout_kernel, NULL},
        {"bernoulli_tensor_", bernoulli_tensor_kernel, NULL}, {"bernoulli", bernoulli_kernel, NULL},
        {"dropout_", dropout_kernel, &inplace_marker},
    };
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WFC_DEVICE_TYPE, entries, sizeof entries / sizeof *entries);
}
