/* tests/test_layouts.c — layouts as plugins (issue 13): a plugin registers
 * a layout ("constant", tests/plugins/constlayout.c), its tensors carry the
 * layout's key and no Dense key, conversions to and from strided (with
 * autograd through them), its own kernels, the refusal of every strided
 * path, printing, DLPack's refusal, the opt-in strided fallback, and
 * unloading refused while its tensors live. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/dlpack.h>
#include <weft/ops.h>
#include <weft/plugin.h>
#include <weft/weft.h>

#include "tap.h"

static char plugin_dir[4096];

static const char *tp(const char *file)
{
    static char path[4200];
    snprintf(path, sizeof path, "%s/%s", plugin_dir, file);
    return path;
}

static double item(const weft_tensor *t)
{
    double v = -12345;
    weft_tensor_item(t, &v);
    return v;
}

static weft_tensor *full(double v)
{
    weft_tensor *t = NULL;
    weft_full(&t, (int64_t[]){2, 3}, 2, v, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    return t;
}

/* A layout whose view hook misbehaves on purpose, one way per kind asked:
 * the core must check what a plugin's hook returns before anyone reads it. */
static int badview_id;
static int badview_strided(weft_tensor **out, const weft_tensor *t)
{
    return weft_zeros(out, weft_tensor_sizes(t), weft_tensor_ndim(t), weft_tensor_dtype(t),
                      weft_tensor_device(t));
}
static int bad_view(weft_tensor **out, const weft_tensor *t, const weft_layout_view *v)
{
    (void)t;
    switch (v->kind) {
    case WEFT_LAYOUT_VIEW_SHAPE: /* a tensor of the layout, of the wrong shape */
        return weft_tensor_new_layout(out, badview_id, (int64_t[]){1}, 1, WEFT_FLOAT32,
                                      WEFT_DEVICE_CPU, malloc(1));
    case WEFT_LAYOUT_VIEW_PERMUTE: /* a strided tensor */
        return weft_zeros(out, v->shape, v->ndim, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    case WEFT_LAYOUT_VIEW_SELECT: /* success and nothing */
        *out = NULL;
        return 0;
    default: /* an error of its own passes through */
        return weft_set_error(WEFT_ENOTSUP, "badview: no %s", v->op);
    }
}

static void test_view_hook_checked(void)
{
    weft_registrar *reg = NULL;
    weft_registrar_create(&reg, "badview");
    const weft_layout_interface iface = {.struct_size = sizeof iface, .name = "badview",
                                         .release = free, .to_strided = badview_strided,
                                         .view = bad_view};
    is_int(weft_register_layout(reg, &iface, &badview_id), 0, "a layout with a view hook");
    weft_tensor *t = NULL, *r = NULL;
    weft_tensor_new_layout(&t, badview_id, (int64_t[]){2, 3}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU,
                           malloc(1));
    is_int(weft_view(&r, t, (int64_t[]){3, 2}, 2), WEFT_EINTERNAL, "a view of the wrong shape: refused");
    like(weft_last_error(), "view: layout 'badview''s view returned another shape", "saying so");
    is_int(weft_transpose(&r, t, 0, 1), WEFT_EINTERNAL, "a strided result: refused");
    like(weft_last_error(), "returned a tensor of another layout", "saying so");
    is_int(weft_select(&r, t, 0, 1), WEFT_EINTERNAL, "no result: refused");
    like(weft_last_error(), "select: layout 'badview''s view returned nothing", "saying so");
    is_int(weft_reshape(&r, t, (int64_t[]){6}, 1), WEFT_ENOTSUP, "the hook's own error");
    like(weft_last_error(), "badview: no reshape", "passes through");
    is_int(weft_slice(&r, t, 1, 0, 9, 1), WEFT_ENOTSUP, "slice asks the hook too");
    is_int(weft_select(&r, t, 2, 0), WEFT_ERANGE, "arguments are checked before the hook");
    ok(r == NULL, "nothing came out of any");
    is_int(weft_as_strided(&r, t, (int64_t[]){2}, (int64_t[]){1}, 1, 0), WEFT_EINVAL,
           "as_strided refuses a layout even with a hook");
    weft_tensor_release(t);
    weft_registrar_destroy(reg);
}

int main(void)
{
    const char *dir = getenv("WEFT_TEST_PLUGIN_DIR");
    if (!dir)
        skip_all("WEFT_TEST_PLUGIN_DIR is set by make check");
    snprintf(plugin_dir, sizeof plugin_dir, "%s", dir);
    ok(weft_load_default_plugins() >= 1, "default plugins loaded");

    /* the built-in layout */
    is_int(weft_layout_lookup("strided"), WEFT_LAYOUT_STRIDED, "strided is built in, id 0");
    is_str(weft_layout_plugin(WEFT_LAYOUT_STRIDED), "core", "owned by the core");
    is_int(weft_layout_lookup("constant"), WEFT_ENOTFOUND, "constant is not there yet");
    like(weft_last_error(), "no layout named 'constant' (registered: strided", "the message lists the layouts");
    is_int(weft_layout_key(WEFT_LAYOUT_STRIDED), WEFT_EINVAL, "strided has no plugin key");

    /* a plugin registers one */
    is_int(weft_load_plugin(tp("test-constlayout.so")), 0, "load the constant layout plugin");
    int id = weft_layout_lookup("constant");
    ok(id >= 1 && id <= WEFT_MAX_LAYOUTS, "it has an id (%d)", id);
    is_str(weft_layout_name(id), "constant", "and a name");
    is_str(weft_layout_plugin(id), "constlayout", "and its plugin");
    is_int(weft_layout_flags(id), 0, "it set no flags: its views share memory");
    is_int(weft_layout_flags(WEFT_LAYOUT_STRIDED), 0, "strided has no flags");
    is_int(weft_layout_flags(WEFT_MAX_LAYOUTS + 3), WEFT_EINVAL, "the flags of an unknown id: refused");
    like(weft_last_error(), "no layout has id", "saying so");
    int key = weft_layout_key(id);
    ok(key >= WEFT_KEY_LAYOUT_FIRST && key <= WEFT_KEY_LAYOUT_LAST, "its key is a layout key (%d)", key);
    is_str(weft_dispatch_key_name(key), "constant", "the key is named after the layout");

    /* a second registration of the name is refused, naming the holder */
    weft_registrar *reg = NULL;
    weft_registrar_create(&reg, "second");
    weft_layout_interface copy = {.struct_size = sizeof copy, .name = "constant",
                                  .release = free, .to_strided = NULL};
    int other = 0;
    is_int(weft_register_layout(reg, &copy, &other), WEFT_EINVAL, "no to_strided: refused");
    like(weft_last_error(), "lacks to_strided", "names what is missing");
    copy.to_strided = (int (*)(weft_tensor **, const weft_tensor *))weft_alias;
    is_int(weft_register_layout(reg, &copy, &other), WEFT_EEXIST, "a taken name: refused");
    like(weft_last_error(), "already registered (by constlayout)", "names the holder");
    copy.name = "Bad Name";
    is_int(weft_register_layout(reg, &copy, &other), WEFT_EINVAL, "a bad name: refused");
    copy.name = "strided";
    is_int(weft_register_layout(reg, &copy, &other), WEFT_EEXIST, "strided cannot be taken");
    is_int(weft_register_kernel(reg, "neg", WEFT_KEY_LAYOUT_LAST, WEFT_DEVICE_TYPE_CPU,
                                (weft_kernel_fn)weft_call_cpu_fallback, NULL, NULL),
           id == WEFT_MAX_LAYOUTS ? 0 : WEFT_EINVAL, "a kernel for an unused layout key: refused");
    weft_registrar_destroy(reg);
    test_view_hook_checked();

    /* conversion from strided */
    weft_tensor *dense = full(2.5), *c = NULL, *back = NULL, *r = NULL;
    is_int(weft_to_layout(&c, dense, id), 0, "to_layout(constant)");
    is_int(weft_tensor_layout(c), id, "the result has the layout");
    ok((weft_tensor_keys(c) & WEFT_KEYSET_BIT(key)) && !(weft_tensor_keys(c) & WEFT_KEYSET_BIT(WEFT_KEY_DENSE)),
       "its keys: the layout's, no Dense");
    ok(weft_tensor_keys(c) & WEFT_KEYSET_BIT(WEFT_DEVICE_TYPE_CPU), "and its device's backend bit");
    is_int(weft_tensor_numel(c), 6, "its shape is the logical one");
    ok(weft_tensor_data_ptr(c) == NULL, "no strided data");
    ok(weft_tensor_strides(c) == NULL && weft_tensor_stride(c, 0) == -1, "no strides");
    is_int(weft_tensor_nbytes(c), (int64_t)sizeof(double), "its memory is the plugin's payload");
    is_int(weft_tensor_nbytes(dense), 24, "a strided tensor's is its storage");
    weft_tensor *same = NULL;
    is_int(weft_to_layout(&same, c, id), 0, "to its own layout");
    ok(same == c, "is itself");
    weft_tensor_release(same);
    weft_tensor *bumpy = NULL, *nc = NULL;
    weft_arange(&bumpy, 0, 6, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    is_int(weft_to_layout(&nc, bumpy, id), WEFT_EINVAL, "a non-constant tensor: the plugin refuses");
    like(weft_last_error(), "not a constant tensor", "with its message");
    ok(nc == NULL, "and no result");
    weft_tensor_release(bumpy);
    is_int(weft_to_layout(&nc, dense, 99), WEFT_EINVAL, "an unknown layout id");

    /* back to strided */
    is_int(weft_to_strided(&back, c), 0, "to_strided");
    is_int(weft_tensor_layout(back), WEFT_LAYOUT_STRIDED, "strided");
    weft_tensor *eq = NULL;
    weft_eq(&eq, back, dense);
    weft_tensor *all = NULL;
    weft_all(&all, eq, NULL, 0, false);
    is_double(item(all), 1, 0, "same values");
    weft_tensor_release(eq);
    weft_tensor_release(all);
    is_double(item(c), -12345, 0, "item of 6 elements fails as for strided");
    weft_tensor *one = NULL, *one_c = NULL;
    weft_full(&one, NULL, 0, 4, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    weft_to_layout(&one_c, one, id);
    is_double(item(one_c), 4, 0, "item of a 0-d constant tensor reads through to_strided");
    weft_tensor_release(one);
    weft_tensor_release(one_c);

    /* the plugin's own kernels */
    is_int(weft_neg(&r, c), 0, "neg: the plugin's kernel");
    is_int(weft_tensor_layout(r), id, "keeps the layout");
    weft_tensor *rs = NULL;
    weft_to_strided(&rs, r);
    is_double(weft_tensor_data_ptr(rs) ? ((float *)weft_tensor_data_ptr(rs))[5] : 0, -2.5, 0,
              "holds -2.5");
    weft_tensor_release(rs);
    weft_tensor_release(r);
    r = NULL;
    is_int(weft_sum(&r, c, NULL, 0, false), 0, "sum: the plugin's kernel");
    is_double(item(r), 15, 1e-6, "2.5 * 6");
    weft_tensor_release(r);
    r = NULL;

    /* everything else refuses, naming the operator and the layout */
    is_int(weft_exp(&r, c), WEFT_ENOKERNEL, "exp: no kernel for the layout");
    like(weft_last_error(), "exp: no kernel for layout 'constant' on cpu", "names op and layout");
    like(weft_last_error(), "to_strided", "and the way out");
    is_int(weft_add(&r, c, dense), WEFT_ENOKERNEL, "add with a strided tensor: refused too");
    like(weft_last_error(), "add: no kernel for layout 'constant'", "names add");
    is_int(weft_fill_(c, 1.0), WEFT_ENOKERNEL, "an in-place write: refused");
    is_int(weft_transpose(&r, c, 0, 1), WEFT_EINVAL, "a view: refused");
    like(weft_last_error(), "transpose: expected a strided tensor, got one of layout 'constant'", "names the view and the layout");
    is_int(weft_contiguous(&r, c), WEFT_EINVAL, "contiguous: refused");
    is_int(weft_reshape(&r, c, (int64_t[]){6}, 1), WEFT_EINVAL, "reshape: refused");
    is_int(weft_detach(&r, c), WEFT_EINVAL, "detach: refused (the payload has one owner)");
    double v;
    is_int(weft_tensor_get(c, (int64_t[]){0, 0}, &v), WEFT_EINVAL, "tensor_get: refused");
    is_int(weft_tensor_resize(c, (int64_t[]){3}, 1), WEFT_EINVAL, "resize: refused");
    DLManagedTensor *dl = NULL;
    is_int(weft_to_dlpack(&dl, c), WEFT_EINVAL, "DLPack export: refused");
    like(weft_last_error(), "layout 'constant'", "naming the layout");
    ok(dl == NULL, "and nothing exported");

    /* printing goes through to_strided and says the layout */
    char *text = NULL;
    is_int(weft_tensor_to_string(&text, c), 0, "to_string");
    like(text ? text : "", "layout=constant (value 2.5)", "prints the layout and its description");
    like(text ? text : "", "[[2.5000, 2.5000, 2.5000]", "and the values");
    free(text);

    /* autograd through the conversion */
    weft_tensor *x = full(3.0), *xc = NULL, *xs = NULL, *y = NULL;
    weft_tensor_set_requires_grad(x, true);
    is_int(weft_to_layout(&xc, x, id), 0, "to_layout of a tensor that requires grad");
    ok(weft_tensor_requires_grad(xc), "the result requires grad");
    is_int(weft_to_strided(&xs, xc), 0, "and back to strided");
    weft_tensor *w = full(0.0);
    /* y = sum(xs * 2) → dy/dx = 2 everywhere: a constant gradient, which the
     * layout can carry back */
    weft_tensor *two = NULL;
    weft_mul_scalar(&two, xs, 2.0);
    weft_sum(&y, two, NULL, 0, false);
    is_int(weft_backward(&y, 1, NULL, false, false), 0, "backward through to_strided and to_layout");
    weft_tensor *g = NULL;
    weft_tensor_grad(&g, x);
    ok(g != NULL, "x got a gradient");
    if (g) {
        is_int(weft_tensor_layout(g), WEFT_LAYOUT_STRIDED, "strided, like x");
        is_double(((float *)weft_tensor_data_ptr(g))[4], 2.0, 1e-6, "of 2");
    }
    weft_tensor_release(g);
    weft_tensor_release(w);
    weft_tensor_release(two);
    weft_tensor_release(y);
    weft_tensor_release(xs);

    /* a layout leaf takes a gradient of its layout */
    weft_tensor *leaf = NULL, *ls = NULL, *lsum = NULL;
    weft_to_layout(&leaf, dense, id); /* a leaf: made from a tensor without history */
    weft_tensor_set_requires_grad(leaf, true);
    ok(weft_tensor_requires_grad(leaf), "a constant tensor can require grad");
    weft_to_strided(&ls, leaf);
    weft_sum(&lsum, ls, NULL, 0, false);
    is_int(weft_backward(&lsum, 1, NULL, false, false), 0, "backward to a constant leaf");
    weft_tensor *lg = NULL;
    weft_tensor_grad(&lg, leaf);
    ok(lg && weft_tensor_layout(lg) == id, "its gradient has the constant layout");
    weft_tensor *lgs = NULL;
    if (lg)
        weft_to_strided(&lgs, lg);
    is_double(lgs ? ((float *)weft_tensor_data_ptr(lgs))[0] : 0, 1.0, 0, "of ones");
    weft_tensor_release(lgs);
    weft_tensor_release(lg);
    weft_tensor_release(lsum);
    weft_tensor_release(ls);

    /* unloading is refused while tensors of the layout live */
    is_int(weft_unload_plugin("constlayout"), WEFT_EBUSY, "unload refused");
    like(weft_last_error(), "tensors of its layouts", "says why");
    is_int(weft_layout_lookup("constant"), id, "the layout is still there");
    weft_tensor_release(leaf);
    weft_tensor_release(xc);
    weft_tensor_release(x);
    weft_tensor_release(c);
    weft_tensor_release(back);
    is_int(weft_unload_plugin("constlayout"), 0, "unloaded once they are gone");
    is_int(weft_layout_lookup("constant"), WEFT_ENOTFOUND, "the layout is gone");
    ok(weft_layout_name(id) == NULL, "its id names nothing");

    /* with the strided fallback, an operator without a kernel of the layout
     * runs on strided copies */
    setenv("CONSTLAYOUT_FALLBACK", "1", 1);
    is_int(weft_load_plugin(tp("test-constlayout.so")), 0, "reload, with the fallback");
    is_int(weft_layout_lookup("constant"), id, "the same id again");
    weft_to_layout(&c, dense, id);
    r = NULL;
    is_int(weft_exp(&r, c), 0, "exp through the strided fallback");
    is_int(weft_tensor_layout(r), WEFT_LAYOUT_STRIDED, "a strided result");
    is_double(r ? ((float *)weft_tensor_data_ptr(r))[3] : 0, 12.182494, 1e-4, "exp(2.5)");
    weft_tensor_release(r);
    r = NULL;
    is_int(weft_add(&r, c, dense), 0, "add with a strided tensor");
    is_double(r ? ((float *)weft_tensor_data_ptr(r))[0] : 0, 5.0, 0, "2.5 + 2.5");
    weft_tensor_release(r);
    is_int(weft_fill_(c, 1.0), WEFT_ENOTSUP, "but not an in-place write of the layout");
    like(weft_last_error(), "fill_: writes its argument 'self' of layout 'constant' in place", "named");
    weft_tensor_release(c);
    weft_tensor_release(dense);
    is_int(weft_unload_plugin("constlayout"), 0, "unloaded");

    /* an init that fails while a tensor of its layout is alive: the library
     * stays mapped (the tensor's release is its code), and the message
     * counts the tensor as what it is */
    unsetenv("CONSTLAYOUT_FALLBACK");
    setenv("CONSTLAYOUT_FAIL_KEEPING", "1", 1);
    is_int(weft_load_plugin(tp("test-constlayout.so")), WEFT_EPLUGIN, "an init that fails");
    like(weft_last_error(), "its library stays loaded: 1 tensor of its layouts made while init",
         "names the layout tensor it keeps the library for");
    unsetenv("CONSTLAYOUT_FAIL_KEEPING");
    void *lib = dlopen(tp("test-constlayout.so"), RTLD_NOW | RTLD_NOLOAD);
    ok(lib != NULL, "the library is still mapped");
    weft_tensor **kept = lib ? (weft_tensor **)dlsym(lib, "constlayout_kept") : NULL;
    ok(kept && *kept, "and its tensor alive");
    if (kept && *kept) {
        is_int(weft_tensor_layout(*kept), id, "of the layout its init registered");
        weft_tensor_release(*kept); /* runs the plugin's release: still mapped */
        *kept = NULL;
    }
    if (lib)
        dlclose(lib);
    is_int(weft_layout_lookup("constant"), WEFT_ENOTFOUND, "the failed init left no layout");
    done_testing();
}
