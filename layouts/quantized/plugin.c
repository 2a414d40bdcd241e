/* layouts/quantized/plugin.c — the entry of libweft-quantized.so: defines
 * the plugin's operators from its table (layouts/quantized/operators.def,
 * made into schemas.h by the build), registers the "quantized" layout
 * (affine quantizers, affine.c) with its kernels and views (views.c), and
 * the weight-block layouts "q8_0" and "q4_0" (blocks.c) after choosing
 * their dot-product kernels for this CPU (block_kernels.c).  Every
 * registration goes through the registrar, so a failing init is rolled
 * back whole and unloading takes it all away. */
#include <pthread.h>
#include <string.h>

#include "quantized.h"

static const char *const schemas[] = {
#include "layouts/quantized/schemas.h"
};

void qt__prepacked_free(qt_prepacked *p)
{
    if (p)
        p->release(p);
}

qt_prepacked *qt__prepacked_get(qt_affine *w, void (*release)(qt_prepacked *),
                                qt_prepacked *(*make)(void))
{
    /* one lock for making caches: two threads with one weight make one */
    static pthread_mutex_t make_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&make_lock);
    if (w->prepacked && w->prepacked->release != release) {
        qt__prepacked_free(w->prepacked);
        w->prepacked = NULL;
    }
    if (!w->prepacked)
        w->prepacked = make();
    qt_prepacked *p = w->prepacked;
    pthread_mutex_unlock(&make_lock);
    return p;
}

#if !QT_HAVE_DNNL
/* Built without oneDNN: the int8 operators exist (their schemas are in the
 * table) and say why they cannot run. */

static int no_dnnl_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    return weft_set_error(WEFT_ENOTSUP, "%s: this libweft-quantized.so was built without oneDNN "
                                        "(configure --with-dnnl; Debian: libdnnl-dev)",
                          weft_op_name(call->op));
}

int qt__register_dnnl(weft_registrar *reg)
{
    int key = weft_layout_key(qt__affine_layout);
    int rc = weft_register_kernel(reg, "quantized_linear", key, WEFT_DEVICE_TYPE_CPU,
                                  no_dnnl_kernel, NULL, NULL);
    return rc < 0 ? rc
                  : weft_register_kernel(reg, "quantized_conv2d", key, WEFT_DEVICE_TYPE_CPU,
                                         no_dnnl_kernel, NULL, NULL);
}

void qt__dnnl_fini(void)
{
}
#endif

/* The operator a schema string defines: its name, up to '(', into buf. */
static const char *schema_name(const char *schema, char *buf, size_t size)
{
    size_t n = strcspn(schema, "(");
    if (n >= size)
        n = size - 1;
    memcpy(buf, schema, n);
    buf[n] = '\0';
    return buf;
}

static int quantized_init(weft_registrar *reg)
{
    int rc = qt__choose_kernels();
    if (rc == 0)
        rc = qt__choose_igemm();
    /* none of the plugin's operators has a gradient formula (quantized
     * tensors carry no gradients, as in PyTorch): each refuses an input
     * that requires grad instead of returning a result without history */
    char name[128];
    for (size_t i = 0; rc == 0 && i < sizeof schemas / sizeof *schemas; i++) {
        rc = weft_register_op(reg, schemas[i], NULL);
        if (rc == 0)
            rc = weft_register_kernel(reg, schema_name(schemas[i], name, sizeof name),
                                      WEFT_KEY_AUTOGRAD, WEFT_ALL_BACKENDS,
                                      weft_not_differentiable_kernel, NULL, NULL);
    }
    if (rc < 0 || (rc = qt__register_affine(reg)) < 0 || (rc = qt__register_views(reg)) < 0 ||
        (rc = qt__register_ops(reg)) < 0 ||
        (rc = qt__register_blocks(reg)) < 0 || (rc = qt__register_dnnl(reg)) < 0)
        return rc;
    return 0;
}

/* Before the plugin unloads: no operator of it runs any more */
static void quantized_fini(void)
{
    qt__dnnl_fini();
}

WEFT_PLUGIN_DEFINE("quantized", "baseline", "1.0", NULL, quantized_init, quantized_fini);
