/* tools/weft-demo.c — a short computation that shows weft working end to
 * end: load the plugins, build tensors, run a few operators (broadcasting,
 * type promotion, a reduction, a matrix product) and print the results the
 * way PyTorch prints them. */
#include <stdio.h>
#include <stdlib.h>

#include <weft/weft.h>

#define CHECK(call)                                                                  \
    do {                                                                             \
        int rc_ = (call);                                                            \
        if (rc_ < 0) {                                                               \
            fprintf(stderr, "weft-demo: %s failed: %s (%s)\n", #call, weft_last_error(), \
                    weft_error_name(rc_));                                           \
            return 1;                                                                \
        }                                                                            \
    } while (0)

static void show(const char *label, const weft_tensor *t)
{
    char *s = NULL;
    if (weft_tensor_to_string(&s, t) == 0) {
        printf("%s = %s\n", label, s);
        free(s);
    }
}

int main(void)
{
    int n = weft_load_default_plugins();
    CHECK(n);
    printf("loaded %d plugin%s\n", n, n == 1 ? "" : "s");
    weft_tensor *a, *b, *c, *s, *m, *x, *w, *y;
    int64_t s23[2] = {2, 3}, s3[1] = {3};
    CHECK(weft_arange(&a, 0, 6, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU));
    weft_tensor *a2;
    CHECK(weft_view(&a2, a, s23, 2));
    CHECK(weft_full(&b, s3, 1, 10, WEFT_INT32, WEFT_DEVICE_CPU));
    CHECK(weft_add(&c, a2, b)); /* broadcast [2,3] + [3], float32 + int32 */
    show("a", a2);
    show("a + b", c);
    int64_t dim = 1;
    CHECK(weft_sum(&s, c, &dim, 1, false));
    show("(a + b).sum(1)", s);
    CHECK(weft_mean(&m, c, NULL, 0, false));
    show("(a + b).mean()", m);
    weft_manual_seed(0);
    int64_t sx[2] = {4, 3}, sw[2] = {3, 2};
    CHECK(weft_randn(&x, sx, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL));
    CHECK(weft_ones(&w, sw, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU));
    CHECK(weft_matmul(&y, x, w));
    weft_tensor *r;
    CHECK(weft_relu(&r, y));
    show("relu(randn(4, 3) @ ones(3, 2))", r);
    weft_tensor *ts[] = {a, a2, b, c, s, m, x, w, y, r};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        weft_tensor_release(ts[i]);
    return 0;
}
