/* tests/test_sdk_helpers.c — the plugin SDK's argument readers and result
 * helpers (<weft/plugin.h>), through an operator defined here whose kernel
 * reads every kind of argument and reports what it read. */
#include <math.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"

/* What the kernel last read, for the test to compare. */
static struct {
    bool have_opt, none_opt;
    int64_t n;
    double x, scalar_from_int;
    bool flag;
    int ndims, nlist, nscales;
    int64_t dims[4];
    double scales[4];
    char mode[16];
} seen;

/* probe(Tensor self, Tensor? opt, int n, float x, Scalar s, bool flag,
 *       int[] dims, Tensor[] list, str mode, float[]? scales) -> Tensor:
 * returns self * n on self's device, in a new tensor */
static int probe_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *self = weft_arg_tensor(call, 0);
    seen.have_opt = weft_arg_tensor(call, 1) != NULL;
    seen.none_opt = weft_arg_is_none(call, 1);
    seen.n = weft_arg_int(call, 2);
    seen.x = weft_arg_double(call, 3);
    seen.scalar_from_int = weft_arg_double(call, 4);
    seen.flag = weft_arg_bool(call, 5);
    const int64_t *dims = weft_arg_ints(call, 6, &seen.ndims);
    for (int i = 0; i < seen.ndims && i < 4; i++)
        seen.dims[i] = dims[i];
    weft_arg_tensors(call, 7, &seen.nlist);
    snprintf(seen.mode, sizeof seen.mode, "%s", weft_arg_string(call, 8));
    const double *scales = weft_arg_doubles(call, 9, &seen.nscales);
    for (int i = 0; i < seen.nscales && i < 4; i++)
        seen.scales[i] = scales[i];
    weft_tensor *out = NULL;
    int rc = weft_new_output(&out, self, weft_tensor_sizes(self), weft_tensor_ndim(self),
                             weft_tensor_dtype(self));
    if (rc < 0)
        return rc;
    const float *a = weft_tensor_data_ptr(self);
    float *o = weft_tensor_data_ptr(out);
    for (int64_t i = 0; i < weft_tensor_numel(self); i++)
        o[i] = a[i] * (float)seen.n;
    return weft_return_tensor(call, 0, out);
}

int main(void)
{
    weft_registrar *reg = NULL;
    const weft_op *op = NULL;
    ok(weft_registrar_create(&reg, "sdk-test") == 0, "a registrar");
    ok(weft_register_op(reg,
                        "sdk_probe(Tensor self, Tensor? opt, int n, float x, Scalar s, bool flag, "
                        "int[] dims, Tensor[] list, str mode, float[]? scales) -> Tensor",
                        &op) == 0,
       "an operator taking every kind of argument: %s", weft_last_error());
    ok(weft_register_kernel(reg, "sdk_probe", WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, probe_kernel,
                            NULL, NULL) == 0,
       "its CPU kernel");

    int64_t sizes[1] = {3};
    weft_tensor *t = NULL;
    weft_empty(&t, sizes, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    float *p = weft_tensor_data_ptr(t);
    p[0] = 1, p[1] = 2, p[2] = 3;
    const int64_t dims[3] = {4, -1, 7};
    weft_tensor *list[2] = {t, t};
    const double scales[2] = {1.5, -0.25};
    weft_value args[10] = {
        {.tag = WEFT_VALUE_TENSOR, .u.tensor = t},
        {.tag = WEFT_VALUE_NONE},
        {.tag = WEFT_VALUE_INT, .u.i = 3},
        {.tag = WEFT_VALUE_DOUBLE, .u.d = 0.25},
        {.tag = WEFT_VALUE_INT, .u.i = 5},
        {.tag = WEFT_VALUE_BOOL, .u.b = true},
        {.tag = WEFT_VALUE_INT_LIST, .len = 3, .u.ints = dims},
        {.tag = WEFT_VALUE_TENSOR_LIST, .len = 2, .u.tensors = list},
        {.tag = WEFT_VALUE_STRING, .u.string = "nearest"},
        {.tag = WEFT_VALUE_DOUBLE_LIST, .len = 2, .u.doubles = scales},
    };
    weft_value ret = {0};
    int rc = weft_call_boxed(op, args, 10, &ret, 1);
    ok(rc == 0, "the boxed call runs: %s", rc ? weft_last_error() : "");
    ok(!seen.have_opt && seen.none_opt, "weft_arg_tensor gives NULL for None, weft_arg_is_none true");
    is_int(seen.n, 3, "weft_arg_int");
    ok(seen.x == 0.25, "weft_arg_double of a float");
    ok(seen.scalar_from_int == 5.0, "weft_arg_double of an int Scalar");
    ok(seen.flag, "weft_arg_bool");
    ok(seen.ndims == 3 && seen.dims[0] == 4 && seen.dims[1] == -1 && seen.dims[2] == 7,
       "weft_arg_ints: the entries and their count");
    is_int(seen.nlist, 2, "weft_arg_tensors: the count");
    is_str(seen.mode, "nearest", "weft_arg_string");
    ok(seen.nscales == 2 && seen.scales[0] == 1.5 && seen.scales[1] == -0.25,
       "weft_arg_doubles: the entries and their count");
    weft_tensor *r = rc == 0 ? ret.u.tensor : NULL;
    ok(r && ret.tag == WEFT_VALUE_TENSOR && r != t, "weft_return_tensor delivers a new tensor");
    const float *q = r ? weft_tensor_data_ptr(r) : NULL;
    ok(q && q[0] == 3 && q[1] == 6 && q[2] == 9, "made by weft_new_output, on self's device");

    /* an optional tensor given, and an empty list */
    args[1] = (weft_value){.tag = WEFT_VALUE_TENSOR, .u.tensor = t};
    args[6] = (weft_value){.tag = WEFT_VALUE_INT_LIST, .len = 0, .u.ints = NULL};
    args[9] = (weft_value){.tag = WEFT_VALUE_NONE};
    weft_value ret2 = {0};
    rc = weft_call_boxed(op, args, 10, &ret2, 1);
    ok(rc == 0 && seen.have_opt && !seen.none_opt, "a given Tensor? is read as that tensor");
    ok(seen.ndims == 0, "an empty int[] has no entries");
    ok(seen.nscales == 0, "a float[]? None has no entries");
    weft_tensor_release(rc == 0 ? ret2.u.tensor : NULL);

    /* the dispatcher checks the tag of a float[] argument */
    args[9] = (weft_value){.tag = WEFT_VALUE_INT_LIST, .len = 3, .u.ints = dims};
    weft_value ret3 = {0};
    rc = weft_call_boxed(op, args, 10, &ret3, 1);
    ok(rc == WEFT_EINVAL && strstr(weft_last_error(), "scales"),
       "an int list for float[]? is refused, naming the argument: %s", weft_last_error());
    if (rc == 0)
        weft_tensor_release(ret3.u.tensor);

    /* weft_value_double: every number tag, 0 for the rest */
    weft_value vd = {.tag = WEFT_VALUE_DOUBLE, .u.d = -2.5};
    weft_value vi = {.tag = WEFT_VALUE_INT, .u.i = -7};
    weft_value vb = {.tag = WEFT_VALUE_BOOL, .u.b = true};
    weft_value vn = {.tag = WEFT_VALUE_NONE};
    ok(weft_value_double(&vd) == -2.5 && weft_value_double(&vi) == -7.0 &&
           weft_value_double(&vb) == 1.0 && weft_value_double(&vn) == 0.0,
       "weft_value_double reads double, int and bool values, 0 for None");

    /* weft_register_kernel_table: all rows, or the first error */
    weft_registrar *treg = NULL;
    ok(weft_registrar_create(&treg, "sdk-table") == 0, "a registrar for the table");
    const weft_kernel_entry good_rows[] = {{"sdk_probe", probe_kernel, NULL}};
    rc = weft_register_kernel_table(treg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, good_rows, 1);
    ok(rc == 0, "a table of one kernel registers (%s)", rc ? weft_last_error() : "ok");
    const weft_kernel_entry bad_rows[] = {{"sdk_probe", probe_kernel, NULL},
                                          {"no_such_operator_xyz", probe_kernel, NULL}};
    rc = weft_register_kernel_table(treg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, bad_rows, 2);
    ok(rc == WEFT_ENOTFOUND && strstr(weft_last_error(), "no_such_operator_xyz"),
       "a table with an unknown operator stops there, naming it: %s", weft_last_error());
    weft_registrar_destroy(treg);

    /* weft_format_shape */
    char sbuf[32];
    const int64_t shp[3] = {2, 0, 7};
    is_str(weft_format_shape(sbuf, sizeof sbuf, shp, 3), "[2, 0, 7]", "weft_format_shape of 3 dims");
    is_str(weft_format_shape(sbuf, sizeof sbuf, NULL, 0), "[]", "weft_format_shape of a 0-d shape");
    char tiny[4];
    weft_format_shape(tiny, sizeof tiny, shp, 3);
    ok(strlen(tiny) == 3, "weft_format_shape truncates to the buffer (%s)", tiny);

    weft_tensor_release(r);
    weft_tensor_release(t);
    weft_registrar_destroy(reg);
    /* weft_pool_output_size: torch's pooling_output_shape (values checked
     * against torch 1.13's max_pool2d output sizes) */
    ok(weft_pool_output_size(28, 2, 0, 2, 1, false) == 14 &&
           weft_pool_output_size(7, 2, 0, 2, 1, false) == 3 &&
           weft_pool_output_size(7, 2, 0, 2, 1, true) == 4 &&
           weft_pool_output_size(5, 3, 1, 2, 1, true) == 3 &&
           weft_pool_output_size(5, 2, 0, 3, 1, true) == 2,
       "pool output size: floor, ceil, ceil's last window inside the input");
    ok(weft_pool_output_size(1, 3, 0, 3, 1, true) == 1 &&
           weft_pool_output_size(1, 3, 0, 4, 1, true) == 1 &&
           weft_pool_output_size(2, 3, 1, 3, 1, true) == 1,
       "with ceil_mode a window larger than the input still gives one output, as torch");
    ok(weft_pool_output_size(1, 3, 0, 3, 1, false) == 0 &&
           weft_pool_output_size(1, 3, 0, 2, 1, true) == 0,
       "and 0 where torch finds the output too small");
    /* expected values from Python's unbounded integers */
    ok(weft_pool_output_size(INT64_MAX, 1, 0, 1, 1, true) == INT64_MAX &&
           weft_pool_output_size(INT64_MAX, 1, INT64_MAX, 1, 1, false) == INT64_MAX &&
           weft_pool_output_size(4, INT64_MAX, 0, 1, INT64_MAX, true) == 0 &&
           weft_pool_output_size(INT64_MAX, 2, INT64_MAX / 2, INT64_MAX, 1, true) == 2,
       "sizes near 2^63 give 0, the size or a saturated one, no overflow (UBSan in sanitizers.sh)");
    return done_testing();
}
