/* tests/test_autograd_hooks.c — graph nodes as handles: grad_fn, names,
 * next edges down to the leaves' AccumulateGrad, and node pre- and
 * post-hooks (seeing and replacing gradients, order, removal, errors). */
#include <stdint.h>
#include <stdlib.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

static double at(const weft_tensor *t, int64_t i)
{
    const double *v = values_of(t);
    return v ? v[i] : NAN;
}

static weft_tensor *leaf(const int64_t *sizes, int ndim, double value)
{
    weft_tensor *t = NULL;
    weft_full(&t, sizes, ndim, value, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    weft_tensor_set_requires_grad(t, true);
    return keep(t);
}

static weft_tensor *grad_of(weft_tensor *t)
{
    weft_tensor *g = NULL;
    weft_tensor_grad(&g, t);
    return keep(g);
}

static void test_handles(void)
{
    int64_t s2[1] = {2};
    weft_tensor *a = leaf(s2, 1, 3.0), *b = leaf(s2, 1, 2.0), *c = NULL, *y = NULL;
    weft_full(&c, s2, 1, 5.0, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(c);
    weft_mul(&y, a, b);
    keep(y);
    weft_tensor *z = NULL;
    weft_add(&z, y, c);
    keep(z);
    weft_node *fn = NULL, *next = NULL, *acc = NULL;
    is_int(weft_tensor_grad_fn(&fn, a), 0, "grad_fn of a leaf");
    ok(fn == NULL, "is NULL");
    is_int(weft_tensor_grad_fn(&fn, z), 0, "grad_fn of z");
    is_str(weft_node_name(fn), "AddBackward", "its name");
    is_int(weft_node_num_next(fn), 2, "two next edges");
    is_int(weft_node_num_outputs(fn), 1, "one output");
    int nr = -1;
    is_int(weft_node_next(&next, &nr, fn, 0), 0, "next edge 0");
    is_str(weft_node_name(next), "MulBackward", "leads to MulBackward");
    is_int(nr, 0, "its output 0");
    weft_node *none = (weft_node *)&nr;
    is_int(weft_node_next(&none, NULL, fn, 1), 0, "next edge 1");
    ok(none == NULL, "the constant needs no gradient: NULL");
    is_int(weft_node_next(&none, NULL, fn, 2), WEFT_EINVAL, "index out of range");
    like(weft_last_error(), "AddBackward", "names the node");
    weft_node_release(fn);
    is_int(weft_node_next(&acc, &nr, next, 1), 0, "MulBackward's edge 1");
    is_str(weft_node_name(acc), "AccumulateGrad", "a leaf's accumulator");
    weft_node *acc_b = NULL;
    is_int(weft_tensor_grad_accumulator(&acc_b, b), 0, "the accumulator of b");
    ok(acc_b == acc, "is the same node");
    weft_node_release(acc_b);
    is_int(weft_tensor_grad_accumulator(&acc_b, z), WEFT_EINVAL, "no accumulator for a non-leaf");
    weft_node_release(acc);
    /* a handle keeps the node alive after its tensors are gone */
    drop_all();
    is_str(weft_node_name(next), "MulBackward", "a handle outlives the tensors");
    weft_node_release(next);
}

typedef struct log_ {
    char order[16];
    int n;
    double seen;
    bool fail;
} log_;

static int pre_double(const weft_tensor *const *go, int n, weft_tensor **replace, void *ctx)
{
    log_ *l = ctx;
    l->order[l->n++] = 'p';
    if (n != 1 || !go[0])
        return weft_set_error(WEFT_EINTERNAL, "pre hook: unexpected arguments");
    l->seen = at(go[0], 0);
    if (l->fail)
        return weft_set_error(WEFT_ERANGE, "refused by the hook");
    return weft_mul_scalar(&replace[0], go[0], 2.0);
}

static int post_watch(const weft_tensor *const *gi, int n_in, const weft_tensor *const *go,
                      int n_out, weft_tensor **replace, void *ctx)
{
    log_ *l = ctx;
    l->order[l->n++] = 'q';
    if (n_in != 2 || n_out != 1 || !go[0] || !gi[0])
        return weft_set_error(WEFT_EINTERNAL, "post hook: unexpected arguments");
    l->seen = at(gi[0], 0);
    return weft_add_scalar(&replace[0], gi[0], 100.0);
}

static int post_bad_shape(const weft_tensor *const *gi, int n_in, const weft_tensor *const *go,
                          int n_out, weft_tensor **replace, void *ctx)
{
    (void)gi;
    (void)n_in;
    (void)go;
    (void)n_out;
    (void)ctx;
    int64_t s7[1] = {7};
    return weft_zeros(&replace[0], s7, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
}

static int tensor_hook(const weft_tensor *grad, weft_tensor **replace, void *ctx)
{
    (void)grad;
    (void)replace;
    log_ *l = ctx;
    l->order[l->n++] = 't';
    return 0;
}

static void test_hooks(void)
{
    int64_t s2[1] = {2};
    weft_tensor *a = leaf(s2, 1, 3.0), *b = leaf(s2, 1, 2.0), *y = NULL, *z = NULL;
    log_ l = {0};
    weft_mul(&y, a, b);
    keep(y);
    weft_sum(&z, y, NULL, 0, false);
    keep(z);
    weft_node *mul = NULL;
    weft_tensor_grad_fn(&mul, y);
    uint64_t h_pre = 0, h_post = 0;
    is_int(weft_node_register_pre_hook(mul, pre_double, &l, &h_pre), 0, "pre-hook registered");
    is_int(weft_node_register_post_hook(mul, post_watch, &l, &h_post), 0, "post-hook registered");
    ok(h_pre && h_post && h_pre != h_post, "distinct nonzero handles");
    weft_tensor_register_hook(y, tensor_hook, &l);
    is_int(weft_backward(&z, 1, NULL, true, false), 0, "backward");
    l.order[l.n] = 0;
    is_str(l.order, "tpq", "tensor hook, then pre-hook, then post-hook");
    is_double(l.seen, 4.0, 1e-12, "post-hook sees grad_inputs computed from the doubled gradient (2*b)");
    is_double(at(grad_of(a), 0), 104.0, 1e-12, "pre-hook doubled, post-hook added 100 to a's gradient");
    is_double(at(grad_of(b), 0), 6.0, 1e-12, "b's gradient only doubled");

    is_int(weft_node_remove_hook(mul, h_post), 0, "post-hook removed");
    is_int(weft_node_remove_hook(mul, h_post), WEFT_EINVAL, "removing it twice");
    like(weft_last_error(), "MulBackward", "names the node");
    weft_tensor_set_grad(a, NULL);
    l.n = 0;
    weft_backward(&z, 1, NULL, true, false);
    is_double(at(grad_of(a), 0), 4.0, 1e-12, "only the pre-hook left");
    is_int(weft_node_remove_hook(mul, h_pre), 0, "pre-hook removed");
    weft_tensor_set_grad(a, NULL);
    weft_backward(&z, 1, NULL, true, false);
    is_double(at(grad_of(a), 0), 2.0, 1e-12, "no node hooks left");

    /* errors from hooks */
    l.fail = true;
    weft_node_register_pre_hook(mul, pre_double, &l, &h_pre);
    is_int(weft_backward(&z, 1, NULL, true, false), WEFT_ERANGE, "a failing pre-hook stops backward");
    like(weft_last_error(), "MulBackward", "names the node");
    like(weft_last_error(), "refused by the hook", "and keeps the hook's message");
    weft_node_remove_hook(mul, h_pre);
    weft_node_register_post_hook(mul, post_bad_shape, NULL, &h_post);
    is_int(weft_backward(&z, 1, NULL, true, false), WEFT_ESHAPE, "a replacement of the wrong shape");
    like(weft_last_error(), "post hook", "says which hook");
    weft_node_remove_hook(mul, h_post);

    /* hooks on a leaf's accumulator */
    weft_node *acc = NULL;
    weft_tensor_grad_accumulator(&acc, a);
    l.fail = false;
    l.n = 0;
    weft_node_register_pre_hook(acc, pre_double, &l, NULL);
    weft_tensor_set_grad(a, NULL);
    is_int(weft_backward(&z, 1, NULL, false, false), 0, "backward with a hook on AccumulateGrad");
    is_double(at(grad_of(a), 0), 4.0, 1e-12, "the accumulated gradient was doubled");
    is_int(weft_node_register_pre_hook(NULL, pre_double, &l, NULL), WEFT_EINVAL, "NULL node");
    weft_node_release(acc);
    weft_node_release(mul);
    drop_all();
}

static void count_destroy(void *ctx)
{
    (*(int *)ctx)++;
}

static int noop_hook(const weft_tensor *grad, weft_tensor **replace, void *ctx)
{
    (void)grad;
    (void)replace;
    (void)ctx;
    return 0;
}

/* weft_tensor_register_hook_ex: destroy runs once, when the node goes,
 * not before (the graph outlives the tensor), and never on error */
static void test_hook_destroy(void)
{
    int64_t s2[1] = {2};
    weft_tensor *a = NULL, *y = NULL, *z = NULL; /* released here, not kept */
    weft_full(&a, s2, 1, 3.0, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    weft_tensor_set_requires_grad(a, true);
    int destroyed = 0, refused = 0;
    weft_mul_scalar(&y, a, 2.0);
    weft_sum(&z, y, NULL, 0, false);
    is_int(weft_tensor_register_hook_ex(y, noop_hook, &destroyed, count_destroy), 0,
           "register_hook_ex on a non-leaf");
    weft_tensor_release(y); /* z's graph still holds y's node, and the hook */
    is_int(destroyed, 0, "not destroyed while the graph holds the node");
    is_int(weft_backward(&z, 1, NULL, false, false), 0, "backward runs the hook");
    weft_tensor_release(z);
    is_int(destroyed, 1, "destroyed once when the last graph is gone");
    weft_tensor *plain = NULL;
    weft_zeros(&plain, s2, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    is_int(weft_tensor_register_hook_ex(plain, noop_hook, &refused, count_destroy), WEFT_EINVAL,
           "a tensor that does not require grad");
    is_int(weft_tensor_register_hook_ex(NULL, noop_hook, &refused, count_destroy), WEFT_EINVAL,
           "NULL tensor");
    is_int(refused, 0, "destroy is not called on error");
    weft_tensor_release(plain);
    int on_leaf = 0;
    is_int(weft_tensor_register_hook_ex(a, noop_hook, &on_leaf, count_destroy), 0, "on a leaf");
    weft_tensor_release(a);
    is_int(on_leaf, 1, "destroyed with the leaf's accumulator");
}

int main(void)
{
    weft_load_default_plugins();
    test_handles();
    test_hooks();
    test_hook_destroy();
    return done_testing();
}
