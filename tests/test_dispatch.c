/* tests/test_dispatch.c — the dispatcher on its own: operators defined at
 * run time, kernels per key, registration handles that restore the previous
 * kernel, fallthrough, per-key fallbacks, thread-local include/exclude sets,
 * boxed argument checking, missing-kernel errors and the table dump. */
#include <stdlib.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"

static int calls_a, calls_b, calls_wrapper, calls_fallback;

static int ret_input(weft_call *call)
{
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = weft_tensor_retain(call->args[0].u.tensor);
    return 0;
}

static int kernel_a(weft_call *call, void *ctx)
{
    (void)ctx;
    calls_a++;
    return ret_input(call);
}

static int kernel_b(weft_call *call, void *ctx)
{
    is_int(*(int *)ctx, 77, "the kernel receives its registration context");
    calls_b++;
    return ret_input(call);
}

static int wrapper(weft_call *call, void *ctx)
{
    (void)ctx;
    calls_wrapper++;
    return weft_redispatch(call, WEFT_KEYSET_BIT(WEFT_KEY_USER1));
}

static int fallback(weft_call *call, void *ctx)
{
    (void)ctx;
    calls_fallback++;
    return weft_redispatch(call, WEFT_KEYSET_BIT(WEFT_KEY_USER2));
}

static int call_op(const weft_op *op, weft_tensor *t, weft_tensor **res)
{
    weft_value args[1] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = t}};
    weft_value rets[1];
    int rc = weft_call_boxed(op, args, 1, rets, 1);
    *res = rc == 0 ? rets[0].u.tensor : NULL;
    return rc;
}

int main(void)
{
    ok(weft_load_default_plugins() >= 0, "load the default plugins");
    weft_registrar *reg;
    is_int(weft_registrar_create(&reg, "test"), 0, "registrar_create");
    const weft_op *op;
    is_int(weft_register_op(reg, "dtest(Tensor self) -> Tensor", &op), 0, "define an operator");
    is_str(weft_op_name(op), "dtest", "its name");
    const weft_op *found;
    is_int(weft_op_find(&found, "dtest"), 0, "find it by name");
    ok(found == op, "the same handle");
    is_int(weft_register_op(reg, "dtest(Tensor self) -> Tensor", NULL), WEFT_EEXIST, "defining twice fails");
    is_int(weft_register_op(reg, "broken(Tensor self -> Tensor", NULL), WEFT_EINVAL, "malformed schema");
    is_int(weft_register_op(reg, "bad(Foo x) -> Tensor", NULL), WEFT_EINVAL, "unknown argument type");
    like(weft_last_error(), "unknown type 'Foo'", "the message names the type");

    int64_t sz[1] = {3};
    weft_tensor *t, *r;
    weft_empty(&t, sz, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);

    is_int(call_op(op, t, &r), WEFT_ENOKERNEL, "no kernel yet");
    like(weft_last_error(), "dtest: no kernel for dispatch keys {Dense, cpu}", "the message names operator and keys");
    like(weft_last_error(), "loaded plugins", "and the plugins");

    weft_registration *ha, *hb;
    is_int(weft_register_kernel(reg, "dtest", WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, kernel_a, NULL, &ha), 0,
           "register kernel a");
    is_int(call_op(op, t, &r), 0, "call");
    ok(r == t && calls_a == 1, "kernel a ran");
    weft_tensor_release(r);
    static int ctx = 77;
    is_int(weft_register_kernel(reg, "dtest", WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, kernel_b, &ctx, &hb), 0,
           "register kernel b over a");
    call_op(op, t, &r);
    weft_tensor_release(r);
    ok(calls_b == 1 && calls_a == 1, "the newest registration wins");
    char *dump;
    is_int(weft_op_dump_table(&dump, op), 0, "dump the table");
    like(dump, "Dense[cpu]", "dump shows the slot");
    like(dump, "from test", "dump shows the owner");
    free(dump);
    weft_registration_release(hb);
    call_op(op, t, &r);
    weft_tensor_release(r);
    ok(calls_a == 2 && calls_b == 1, "releasing b restores a");

    /* a wrapper layer selected through the thread-local include set */
    is_int(weft_register_kernel(reg, "dtest", WEFT_KEY_USER1, 0, wrapper, NULL, NULL), 0, "wrapper kernel");
    call_op(op, t, &r);
    weft_tensor_release(r);
    is_int(calls_wrapper, 0, "the wrapper key is not on the tensor: not called");
    weft_keyset inc0, exc0;
    weft_dispatch_tls_get(&inc0, &exc0);
    weft_dispatch_tls_set(inc0 | WEFT_KEYSET_BIT(WEFT_KEY_USER1), exc0);
    call_op(op, t, &r);
    weft_tensor_release(r);
    ok(calls_wrapper == 1 && calls_a == 4, "included: the wrapper runs and redispatches to the backend");
    weft_dispatch_tls_set(inc0 | WEFT_KEYSET_BIT(WEFT_KEY_USER1), exc0 | WEFT_KEYSET_BIT(WEFT_KEY_USER1));
    call_op(op, t, &r);
    weft_tensor_release(r);
    ok(calls_wrapper == 1 && calls_a == 5, "excluded beats included");

    /* fallthrough: the layer is skipped */
    weft_dispatch_tls_set(inc0 | WEFT_KEYSET_BIT(WEFT_KEY_USER1), exc0);
    weft_registration *hf;
    is_int(weft_register_fallthrough(reg, "dtest", WEFT_KEY_USER1, 0, &hf), 0, "fallthrough over the wrapper");
    call_op(op, t, &r);
    weft_tensor_release(r);
    ok(calls_wrapper == 1 && calls_a == 6, "fallthrough skips to the backend");
    weft_registration_release(hf);
    call_op(op, t, &r);
    weft_tensor_release(r);
    ok(calls_wrapper == 2, "releasing the fallthrough restores the wrapper");

    /* a per-key fallback serves every operator without its own kernel */
    weft_dispatch_tls_set(inc0 | WEFT_KEYSET_BIT(WEFT_KEY_USER2), exc0);
    weft_registration *hfb;
    is_int(weft_register_fallback(reg, WEFT_KEY_USER2, 0, fallback, NULL, &hfb), 0, "fallback for User2");
    call_op(op, t, &r);
    weft_tensor_release(r);
    ok(calls_fallback == 1 && calls_a == 8, "the fallback ran and redispatched");
    weft_tensor *n = NULL;
    if (weft_neg(&n, t) == 0) {
        ok(calls_fallback == 2, "the fallback also serves a built-in operator");
        weft_tensor_release(n);
    } else {
        diag("neg failed (CPU plugin not loaded?): %s", weft_last_error());
        ok(calls_fallback == 2, "the fallback also serves a built-in operator");
    }
    weft_registration_release(hfb);
    weft_dispatch_tls_set(inc0, exc0);

    /* boxed argument checking */
    weft_value args[2] = {{.tag = WEFT_VALUE_INT, .u.i = 3}};
    weft_value rets[1];
    is_int(weft_call_boxed(op, args, 1, rets, 1), WEFT_EINVAL, "wrong argument tag");
    like(weft_last_error(), "argument 'self' must be Tensor", "the message names the argument");
    args[0].tag = WEFT_VALUE_TENSOR;
    args[0].u.tensor = NULL;
    is_int(weft_call_boxed(op, args, 1, rets, 1), WEFT_EINVAL, "NULL tensor");
    like(weft_last_error(), "argument 'self' is NULL", "NULL message");
    args[0].u.tensor = t;
    is_int(weft_call_boxed(op, args, 2, rets, 1), WEFT_EINVAL, "too many arguments");
    is_int(weft_call_boxed(op, args, 1, rets, 0), WEFT_EINVAL, "no room for the result");
    is_int(weft_call_boxed(NULL, args, 1, rets, 1), WEFT_EINVAL, "NULL op");
    /* int[] and float[] lists are checked as Tensor[] lists are: a NULL
     * list with entries, or a negative length, used to reach the kernel,
     * which read ints[0] (found by tests/fuzz/fuzz_call_boxed.c) */
    const weft_op *sum_op = NULL, *interp_op = NULL;
    is_int(weft_op_find(&sum_op, "sum"), 0, "find sum");
    is_int(weft_op_find(&interp_op, "interpolate"), 0, "find interpolate");
    weft_value sargs[4] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = t},
                           {.tag = WEFT_VALUE_INT_LIST, .len = 2, .u.ints = NULL},
                           {.tag = WEFT_VALUE_BOOL, .u.b = false},
                           {.tag = WEFT_VALUE_NONE}};
    is_int(weft_call_boxed(sum_op, sargs, 4, rets, 1), WEFT_EINVAL, "an int[] of 2 entries at NULL");
    like(weft_last_error(), "argument 'dim' is a NULL list", "the message names the argument");
    static const int64_t zero_dim[1] = {0};
    sargs[1].u.ints = zero_dim;
    sargs[1].len = -1;
    is_int(weft_call_boxed(sum_op, sargs, 4, rets, 1), WEFT_EINVAL, "an int[] of length -1");
    sargs[1].len = 0;
    sargs[1].u.ints = NULL;
    int src = weft_call_boxed(sum_op, sargs, 4, rets, 1);
    is_int(src, 0, "an empty int[] may be NULL");
    if (src == 0)
        weft_tensor_release(rets[0].u.tensor);
    weft_tensor *img = NULL;
    int64_t img_sizes[3] = {1, 1, 2};
    weft_empty(&img, img_sizes, 3, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    weft_value iargs[5] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = img},
                           {.tag = WEFT_VALUE_NONE},
                           {.tag = WEFT_VALUE_DOUBLE_LIST, .len = 1, .u.doubles = NULL},
                           {.tag = WEFT_VALUE_STRING, .u.string = "nearest"},
                           {.tag = WEFT_VALUE_BOOL, .u.b = false}};
    is_int(weft_call_boxed(interp_op, iargs, 5, rets, 1), WEFT_EINVAL, "a float[] of 1 entry at NULL");
    weft_tensor_release(img);
    is_int(weft_register_kernel(reg, "nosuchop", WEFT_KEY_DENSE, 0, kernel_a, NULL, NULL), WEFT_ENOTFOUND,
           "kernel for an unknown operator");
    is_int(weft_register_kernel(reg, "dtest", 7, 0, kernel_a, NULL, NULL), WEFT_EINVAL, "invalid key");
    is_int(weft_register_kernel(reg, "dtest", WEFT_KEY_DENSE, 99, kernel_a, NULL, NULL), WEFT_EINVAL,
           "invalid device type");

    /* key names and sets */
    char buf[128];
    weft_keyset_to_string(WEFT_KEYSET_BIT(WEFT_KEY_AUTOGRAD) | WEFT_KEYSET_BIT(WEFT_KEY_DENSE) | 1, buf, sizeof buf);
    is_str(buf, "{Autograd, Dense, cpu}", "key set to string, highest first");
    is_int(weft_tensor_keys(t), WEFT_KEYSET_BIT(WEFT_KEY_DENSE) | WEFT_KEYSET_BIT(WEFT_DEVICE_TYPE_CPU),
           "a CPU tensor carries Dense and cpu, not Autograd");

    /* destroying the registrar releases everything, the operator included */
    weft_registrar_destroy(reg);
    is_int(weft_op_find(&found, "dtest"), WEFT_ENOTFOUND, "the operator is gone with its registrar");
    is_int(call_op(op, t, &r), WEFT_ENOTFOUND, "a stale handle fails cleanly");
    weft_tensor_release(t);
    return done_testing();
}
