/* tests/fuzz/fuzz_call_boxed.c — libFuzzer harness for the boxed call path
 * (weft_call_boxed: the dispatcher's argument checks, the key computation,
 * autograd's wrappers, the CPU backend's kernels behind them).
 *
 * The input picks an operator of the table and builds its arguments: mostly
 * values of the tag its schema asks for (so that calls get past the tag
 * checks and into the kernels), sometimes any tag, a wrong count, NULL
 * tensors and lists; ints from small to INT64_MIN/MAX, doubles with NaN and
 * infinities, strings from the schemas' vocabulary and random ones, and
 * small tensors of every dtype and rank 0..3 (0-size included, numel <= 64),
 * contiguous or strided views, some requiring grad.  Mode bits add a backward
 * pass through a result and an allocation failure injected into the call.
 *
 * Invariants, on every input: the call returns 0 or a negative code with a
 * non-empty message; every result is released; AddressSanitizer's leak
 * check and UBSan see nothing.  The CPU plugin comes from WEFT_PLUGIN_PATH
 * (tests/fuzz.sh builds one instrumented like the core).
 *
 * WEFT_FUZZ_WRITE_SEEDS=DIR: writes the seed corpus (one input calling each
 * of a few common operators with well-formed arguments) into DIR and exits. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "fuzz_common.h"

/* ---------------------------------------------------------------- schemas */

/* The argument kinds of the schema grammar (dispatch/schema.c's list). */
enum kind {
    K_TENSOR, K_TENSOR_OPT, K_TENSOR_LIST, K_TENSOR_LIST_OPT, K_SCALAR, K_FLOAT, K_INT, K_BOOL,
    K_INT_LIST, K_INT_LIST_OPT, K_DTYPE_OPT, K_GENERATOR_OPT, K_SCALAR_OPT, K_FLOAT_OPT,
    K_INT_OPT, K_STRING, K_STRING_OPT, K_FLOAT_LIST, K_FLOAT_LIST_OPT, K_UNKNOWN
};

static const struct {
    const char *text;
    enum kind kind;
} kinds[] = {
    {"Tensor(a!)", K_TENSOR},         {"Tensor[]", K_TENSOR_LIST},     {"Tensor?[]", K_TENSOR_LIST_OPT},
    {"Tensor?", K_TENSOR_OPT},        {"Tensor", K_TENSOR},            {"Scalar?", K_SCALAR_OPT},
    {"Scalar", K_SCALAR},             {"float[]?", K_FLOAT_LIST_OPT},  {"float[]", K_FLOAT_LIST},
    {"float?", K_FLOAT_OPT},          {"float", K_FLOAT},              {"int[]?", K_INT_LIST_OPT},
    {"int[]", K_INT_LIST},            {"int?", K_INT_OPT},             {"int", K_INT},
    {"bool", K_BOOL},                 {"ScalarType?", K_DTYPE_OPT},    {"Generator?", K_GENERATOR_OPT},
    {"str?", K_STRING_OPT},           {"str", K_STRING},
};

#define MAX_ARGS 32
#define MAX_RETS 8

typedef struct op_info {
    const weft_op *op;
    int nargs, nrets;
    enum kind arg[MAX_ARGS];
} op_info;

static op_info *ops;
static int n_ops;
static bool verbose;

/* Reads the argument kinds and the result count from the schema text. */
static void parse_schema(op_info *info, const char *text)
{
    const char *open = strchr(text, '('), *arrow = strstr(text, "->");
    CHECK(open && arrow);
    const char *close = arrow;
    while (close > open && *close != ')')
        close--;
    for (const char *a = open + 1; a < close;) {
        while (a < close && (*a == ' ' || *a == ','))
            a++;
        const char *end = a;
        while (end < close && *end != ',')
            end++;
        size_t len = (size_t)(end - a);
        if (len && !(len == 1 && *a == '*') && info->nargs < MAX_ARGS) {
            enum kind k = K_UNKNOWN;
            for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
                size_t tl = strlen(kinds[i].text);
                if (len > tl && strncmp(a, kinds[i].text, tl) == 0 && a[tl] == ' ') {
                    k = kinds[i].kind;
                    break;
                }
            }
            info->arg[info->nargs++] = k;
        }
        a = end;
    }
    const char *r = arrow + 2;
    while (*r == ' ')
        r++;
    if (*r == '(' && r[1] != ')')
        for (const char *q = r; (q = strstr(q, "Tensor")) != NULL; q += 6)
            info->nrets++;
    else if (strncmp(r, "Tensor", 6) == 0)
        info->nrets = 1;
}

/* ------------------------------------------------------------- the values */

/* Everything one call allocates, freed after it. */
typedef struct arena {
    weft_tensor *tensors[64];
    int n_tensors;
    void *blocks[64];
    int n_blocks;
} arena;

static void *arena_alloc(arena *a, size_t size)
{
    if (a->n_blocks == 64)
        return NULL;
    void *p = calloc(1, size ? size : 1);
    CHECK(p);
    a->blocks[a->n_blocks++] = p;
    return p;
}

static weft_generator *generator;

static int64_t take_int(reader *r)
{
    static const int64_t special[] = {
        0, 1, -1, 2, 3, -2, INT64_MAX, INT64_MIN, INT32_MAX, INT32_MIN, (int64_t)1 << 40,
        -((int64_t)1 << 40), (int64_t)1 << 62, 64, 4, -3,
    };
    uint8_t k = (uint8_t)take(r, 1);
    if (k < 160)
        return (int64_t)(k % 11) - 3; /* -3..7: dims, sizes, small counts */
    if (k < 240)
        return special[k % 16];
    /* anything at all: at least 2^40 in size or small, so that no size the
     * library allocates from it is large yet still possible */
    int64_t v = (int64_t)take(r, 8);
    return (v > -64 && v < 64) || v >= ((int64_t)1 << 40) || v <= -((int64_t)1 << 40)
               ? v
               : v | ((int64_t)1 << 50);
}

static double take_double(reader *r)
{
    static const double special[] = {
        0.0, 1.0, -1.0, 0.5, 2.0, -0.0, NAN, INFINITY, -INFINITY, 1e308, -1e308, 5e-324,
        1e-7, 3.0, 0.1, 1e20,
    };
    uint8_t k = (uint8_t)take(r, 1);
    if (k < 128)
        return special[k % 16];
    if (k < 224)
        return (double)((int)(k % 16) - 4) * 0.25;
    uint64_t bits = take(r, 8);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static const char *take_string(reader *r, arena *a)
{
    static const char *const words[] = {
        "mean", "sum", "none", "tanh", "nearest", "bilinear", "linear", "bicubic", "constant",
        "reflect", "replicate", "circular", "floor", "trunc", "prod", "amax", "amin", "ij,jk->ik",
        "ii->i", "i,i->", "...ij->...ji", "bij,bjk->bik", "", "i->", "ab,ab", "nearest-exact",
        "area", "->", "iij", "...", "a...,...a->", "zz",
    };
    uint8_t k = (uint8_t)take(r, 1);
    if (k < 224)
        return words[k % (sizeof words / sizeof words[0])];
    size_t len = (size_t)(take(r, 1) % 12);
    char *s = arena_alloc(a, len + 1);
    for (size_t i = 0; i < len; i++)
        s[i] = (char)take(r, 1);
    return s; /* NUL-terminated at the first zero byte or at len */
}

static weft_dtype take_dtype(reader *r)
{
    uint8_t k = (uint8_t)take(r, 1);
    if (k < 240)
        return (weft_dtype)(k % WEFT_NUM_DTYPES);
    static const int bad[] = {WEFT_DTYPE_UNSET, WEFT_NUM_DTYPES, 100, -7, INT32_MAX, INT32_MIN,
                              13, 255};
    return (weft_dtype)bad[k % 8];
}

static weft_device take_device(reader *r)
{
    uint8_t k = (uint8_t)take(r, 1);
    if (k < 224)
        return WEFT_DEVICE_CPU;
    static const weft_device bad[] = {{0, 1}, {1, 0}, {2, 0}, {39, 0}, {40, 0}, {-1, 0},
                                      {0, -1}, {INT16_MAX, INT16_MIN}};
    return bad[k % 8];
}

/* A small tensor: any dtype, rank 0..3 with sizes 0..4, the elements from
 * the input (floating bytes as they come: NaN, infinities, subnormals),
 * maybe a view (transposed, expanded, every other element), maybe requiring
 * grad. */
static weft_tensor *take_tensor(reader *r, arena *a)
{
    /* reuse one made for this call: aliasing arguments (x.add_(x)) */
    uint8_t pick = (uint8_t)take(r, 1);
    if (a->n_tensors && pick >= 200)
        return a->tensors[pick % a->n_tensors];
    if (a->n_tensors >= 60)
        return a->tensors[0];
    weft_dtype dtype = (weft_dtype)(take(r, 1) % WEFT_NUM_DTYPES);
    int ndim = (int)(take(r, 1) % 4);
    uint8_t layout = (uint8_t)take(r, 1);
    int64_t sizes[4] = {1, 1, 1, 1};
    for (int d = 0; d < ndim; d++)
        sizes[d] = (int64_t)(take(r, 1) % 5); /* 0..4: numel <= 64 */
    /* the stride-2 layout allocates twice the last size, then slices */
    int64_t alloc_sizes[4];
    memcpy(alloc_sizes, sizes, sizeof sizes);
    bool stepped = (layout % 4) == 2 && ndim > 0;
    if (stepped)
        alloc_sizes[ndim - 1] *= 2;
    weft_tensor *t = NULL;
    if (weft_empty(&t, alloc_sizes, ndim, dtype, WEFT_DEVICE_CPU) < 0)
        return NULL; /* only under injected allocation failure */
    size_t item = weft_dtype_size(dtype);
    unsigned char *data = weft_tensor_data_ptr(t);
    int64_t alloc_numel = weft_tensor_numel(t);
    for (int64_t i = 0; i < alloc_numel; i++) {
        if (dtype == WEFT_BOOL) {
            data[i] = (unsigned char)(take(r, 1) & 1);
            continue;
        }
        /* mostly small integers: the bytes of one small value, else raw */
        uint8_t b = (uint8_t)take(r, 1);
        if (b < 192) {
            double v = (double)((int)(b % 9) - 3);
            switch (dtype) {
            case WEFT_UINT8: data[i] = (unsigned char)(b % 9); break;
            case WEFT_INT8: ((int8_t *)data)[i] = (int8_t)v; break;
            case WEFT_INT16: ((int16_t *)data)[i] = (int16_t)v; break;
            case WEFT_INT32: ((int32_t *)data)[i] = (int32_t)v; break;
            case WEFT_INT64: ((int64_t *)data)[i] = (int64_t)v; break;
            case WEFT_FLOAT32: ((float *)data)[i] = (float)v * 0.5f; break;
            case WEFT_FLOAT64: ((double *)data)[i] = v * 0.5; break;
            case WEFT_COMPLEX64: ((float *)data)[2 * i] = (float)v; ((float *)data)[2 * i + 1] = 0.5f; break;
            case WEFT_COMPLEX128: ((double *)data)[2 * i] = v; ((double *)data)[2 * i + 1] = -0.5; break;
            default: /* float16, bfloat16: raw halves of a small float32 */
                memset(data + (size_t)i * item, 0, item);
                data[(size_t)i * item + 1] = (unsigned char)(0x3c + (b % 4));
                break;
            }
        } else {
            for (size_t k = 0; k < item; k++)
                data[(size_t)i * item + k] = (unsigned char)take(r, 1);
        }
    }
    weft_tensor *view = NULL;
    int rc = 0;
    if (stepped) {
        rc = weft_slice(&view, t, ndim - 1, 0, alloc_sizes[ndim - 1], 2);
    } else if ((layout % 4) == 1 && ndim >= 2) {
        rc = weft_transpose(&view, t, 0, ndim - 1);
    } else if ((layout % 4) == 3 && ndim < 4) {
        /* a broadcast view: a new leading dimension of stride 0 */
        int64_t ex[4];
        ex[0] = 2;
        memcpy(ex + 1, sizes, (size_t)ndim * sizeof *ex);
        rc = weft_expand(&view, t, ex, ndim + 1);
    }
    if (rc < 0) {
        weft_tensor_release(t);
        return NULL;
    }
    if (view) {
        weft_tensor_release(t);
        t = view;
    }
    if ((layout & 0x30) == 0x30 && (weft_dtype_is_floating(dtype) || weft_dtype_is_complex(dtype)) &&
        weft_tensor_is_leaf(t))
        (void)weft_tensor_set_requires_grad(t, true);
    a->tensors[a->n_tensors++] = t;
    return t;
}

static weft_value take_list(reader *r, arena *a, int tag)
{
    weft_value v = {.tag = tag};
    uint8_t k = (uint8_t)take(r, 1);
    int len = (int)(k % 5);
    if (k >= 250) { /* malformed lists: the checks must catch them */
        v.len = k == 250 ? -1 : 3;
        return v; /* a NULL pointer */
    }
    v.len = len;
    if (tag == WEFT_VALUE_INT_LIST) {
        int64_t *ints = arena_alloc(a, (size_t)len * sizeof *ints);
        for (int i = 0; i < len; i++)
            ints[i] = take_int(r);
        v.u.ints = ints;
    } else if (tag == WEFT_VALUE_DOUBLE_LIST) {
        double *ds = arena_alloc(a, (size_t)len * sizeof *ds);
        for (int i = 0; i < len; i++)
            ds[i] = take_double(r);
        v.u.doubles = ds;
    } else {
        weft_tensor **ts = arena_alloc(a, (size_t)len * sizeof *ts);
        for (int i = 0; i < len; i++)
            ts[i] = take(r, 1) < 16 ? NULL : take_tensor(r, a);
        v.u.tensors = ts;
    }
    return v;
}

/* A value with tag `tag` (any, even out of range). */
static weft_value value_of_tag(reader *r, arena *a, int tag)
{
    weft_value v = {.tag = tag};
    switch (tag) {
    case WEFT_VALUE_TENSOR:
        v.u.tensor = take(r, 1) < 8 ? NULL : take_tensor(r, a);
        break;
    case WEFT_VALUE_INT: v.u.i = take_int(r); break;
    case WEFT_VALUE_DOUBLE: v.u.d = take_double(r); break;
    case WEFT_VALUE_BOOL: v.u.b = take(r, 1) & 1; break;
    case WEFT_VALUE_INT_LIST:
    case WEFT_VALUE_TENSOR_LIST:
    case WEFT_VALUE_DOUBLE_LIST:
        v = take_list(r, a, tag);
        break;
    case WEFT_VALUE_DTYPE: v.u.dtype = take_dtype(r); break;
    case WEFT_VALUE_DEVICE: v.u.device = take_device(r); break;
    case WEFT_VALUE_GENERATOR: v.u.generator = take(r, 1) & 1 ? generator : NULL; break;
    case WEFT_VALUE_STRING: v.u.string = take(r, 1) < 8 ? NULL : take_string(r, a); break;
    default: v.u.i = (int64_t)take(r, 8); break; /* NONE, or a tag that does not exist */
    }
    return v;
}

/* A value of the kind the schema asks for, or now and then anything. */
static weft_value value_for(reader *r, arena *a, enum kind k)
{
    uint8_t wild = (uint8_t)take(r, 1);
    if (wild >= 248 || k == K_UNKNOWN) {
        int tag = wild == 255 ? (int)(take(r, 1) % 16) - 2 : (int)(take(r, 1) % 12);
        return value_of_tag(r, a, tag);
    }
    bool none = (wild & 7) == 0; /* for the optional kinds */
    switch (k) {
    case K_TENSOR: return value_of_tag(r, a, WEFT_VALUE_TENSOR);
    case K_TENSOR_OPT: return value_of_tag(r, a, none ? WEFT_VALUE_NONE : WEFT_VALUE_TENSOR);
    case K_TENSOR_LIST:
    case K_TENSOR_LIST_OPT: return take_list(r, a, WEFT_VALUE_TENSOR_LIST);
    case K_SCALAR_OPT:
        if (none)
            return (weft_value){.tag = WEFT_VALUE_NONE};
        /* fall through */
    case K_SCALAR: {
        static const int tags[] = {WEFT_VALUE_INT, WEFT_VALUE_DOUBLE, WEFT_VALUE_BOOL};
        return value_of_tag(r, a, tags[wild % 3]);
    }
    case K_FLOAT_OPT:
        if (none)
            return (weft_value){.tag = WEFT_VALUE_NONE};
        /* fall through */
    case K_FLOAT: return value_of_tag(r, a, wild & 8 ? WEFT_VALUE_INT : WEFT_VALUE_DOUBLE);
    case K_INT_OPT:
        if (none)
            return (weft_value){.tag = WEFT_VALUE_NONE};
        /* fall through */
    case K_INT: return value_of_tag(r, a, WEFT_VALUE_INT);
    case K_BOOL: return value_of_tag(r, a, WEFT_VALUE_BOOL);
    case K_INT_LIST_OPT:
        if (none)
            return (weft_value){.tag = WEFT_VALUE_NONE};
        /* fall through */
    case K_INT_LIST: return take_list(r, a, WEFT_VALUE_INT_LIST);
    case K_DTYPE_OPT: return value_of_tag(r, a, none ? WEFT_VALUE_NONE : WEFT_VALUE_DTYPE);
    case K_GENERATOR_OPT: return value_of_tag(r, a, none ? WEFT_VALUE_NONE : WEFT_VALUE_GENERATOR);
    case K_STRING_OPT:
        if (none)
            return (weft_value){.tag = WEFT_VALUE_NONE};
        /* fall through */
    case K_STRING: return (weft_value){.tag = WEFT_VALUE_STRING, .u.string = take_string(r, a)};
    case K_FLOAT_LIST_OPT:
        if (none)
            return (weft_value){.tag = WEFT_VALUE_NONE};
        /* fall through */
    case K_FLOAT_LIST: return take_list(r, a, WEFT_VALUE_DOUBLE_LIST);
    case K_UNKNOWN: break;
    }
    return (weft_value){.tag = WEFT_VALUE_NONE};
}

static void release_results(weft_value *rets, int n)
{
    for (int i = 0; i < n; i++) {
        if (rets[i].tag == WEFT_VALUE_TENSOR)
            weft_tensor_release(rets[i].u.tensor);
        else if (rets[i].tag == WEFT_VALUE_TENSOR_LIST)
            weft_tensor_list_free((weft_tensor **)rets[i].u.tensors, rets[i].len);
        else
            CHECK(rets[i].tag == WEFT_VALUE_NONE);
    }
}

/* backward through the first result that requires grad, with a gradient
 * of ones (through the result's own dtype and shape) */
static void backward_through(const weft_value *rets, int n)
{
    for (int i = 0; i < n; i++) {
        if (rets[i].tag != WEFT_VALUE_TENSOR || !weft_tensor_requires_grad(rets[i].u.tensor))
            continue;
        weft_tensor *out = rets[i].u.tensor, *grad = NULL;
        int rc = weft_ones(&grad, weft_tensor_sizes(out), weft_tensor_ndim(out),
                           weft_tensor_dtype(out), weft_tensor_device(out));
        if (rc == 0)
            rc = weft_backward(&out, 1, &grad, false, false);
        CHECK(rc <= 0);
        CHECK(rc == 0 || weft_last_error()[0] != '\0');
        weft_tensor_release(grad);
        return;
    }
}

/* ----------------------------------------------------------------- seeds */

static void write_seeds(const char *dir)
{
    /* well-formed calls of common operators: the first two bytes pick the
     * operator, then for each argument: "no wildcard" (1), then the kind's
     * bytes; mostly zeros below read as small, regular values */
    static const char *const names[] = {"add", "mul_", "sum", "matmul", "softmax", "cat",
                                        "index_select", "reshape", "max_dim", "where",
                                        "interpolate", "einsum"};
    for (size_t s = 0; s < sizeof names / sizeof names[0]; s++) {
        int index = -1;
        for (int i = 0; i < n_ops; i++)
            if (strcmp(weft_op_name(ops[i].op), names[s]) == 0)
                index = i;
        if (index < 0)
            continue;
        unsigned char buf[256];
        memset(buf, 0x21, sizeof buf); /* 0x21: every choice's small, regular branch */
        buf[0] = 0;                    /* mode: a plain call */
        buf[1] = (unsigned char)(index & 0xff);
        buf[2] = (unsigned char)(index >> 8);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[s]);
        FILE *f = fopen(path, "wb");
        CHECK(f);
        CHECK(fwrite(buf, 1, sizeof buf, f) == sizeof buf);
        CHECK(fclose(f) == 0);
    }
}

/* ----------------------------------------------------------- the harness */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    int loaded = weft_load_default_plugins();
    if (loaded < 1 || weft_device_count(WEFT_DEVICE_TYPE_CPU) < 1) {
        char *report = NULL;
        weft_plugin_report_string(&report);
        fprintf(stderr, "fuzz_call_boxed: the CPU plugin did not load (WEFT_PLUGIN_PATH=%s):\n%s\n",
                getenv("WEFT_PLUGIN_PATH") ? getenv("WEFT_PLUGIN_PATH") : "(unset)",
                report ? report : weft_last_error());
        free(report);
        exit(1);
    }
    verbose = getenv("WEFT_FUZZ_VERBOSE") != NULL;
    weft_set_num_threads(1); /* the calls are tiny; a pool only adds noise */
    CHECK(weft_generator_create(&generator, 42) == 0);
    n_ops = weft_op_count();
    ops = calloc((size_t)n_ops, sizeof *ops);
    CHECK(ops);
    for (int i = 0; i < n_ops; i++) {
        ops[i].op = weft_op_at(i);
        parse_schema(&ops[i], weft_op_schema(ops[i].op));
    }
    const char *seeds = getenv("WEFT_FUZZ_WRITE_SEEDS");
    if (seeds) {
        write_seeds(seeds);
        exit(0);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size};
    uint8_t mode = (uint8_t)take(&r, 1);
    op_info *info = &ops[take(&r, 2) % (uint64_t)n_ops];
    arena a = {.n_tensors = 0};
    int nargs = info->nargs;
    if ((mode & 0xc0) == 0xc0) /* a wrong count now and then */
        nargs = (mode & 0x20) ? nargs + 1 : nargs - 1;
    if (nargs < 0)
        nargs = 0;
    if (nargs > MAX_ARGS)
        nargs = MAX_ARGS;
    weft_value args[MAX_ARGS];
    for (int i = 0; i < nargs; i++)
        args[i] = value_for(&r, &a, i < info->nargs ? info->arg[i] : K_UNKNOWN);
    bool grad_mode = !(mode & 2);
    bool prev = weft_set_grad_enabled(grad_mode);

    weft_value rets[MAX_RETS];
    for (int i = 0; i < MAX_RETS; i++)
        rets[i] = (weft_value){.tag = WEFT_VALUE_NONE};
    int nrets = (mode & 0x10) ? (int)(take(&r, 1) % 3) : MAX_RETS; /* too little room, now and then */
    if (mode & 8) /* fail the k-th allocation of the call (and, with bit 4, every later one) */
        weft_fault_inject_alloc((long)(take(&r, 1) % 32), (mode & 4) != 0);
    weft_clear_error();
    int rc = weft_call_boxed(info->op, nargs ? args : NULL, nargs, rets, nrets);
    if (mode & 8)
        weft_fault_inject_alloc(-1, 0);
    CHECK(rc <= 0);
    if (verbose) /* what the inputs reach: WEFT_FUZZ_VERBOSE=1 */
        fprintf(stderr, "%s: %s\n", weft_op_name(info->op), rc < 0 ? weft_last_error() : "ok");
    if (rc < 0) {
        if (weft_last_error()[0] == '\0')
            fprintf(stderr, "%s returned %d (%s) without a message\n", weft_op_name(info->op), rc,
                    weft_error_name(rc));
        CHECK(weft_last_error()[0] != '\0');
    } else {
        if (mode & 1)
            backward_through(rets, info->nrets < MAX_RETS ? info->nrets : MAX_RETS);
        /* only on success: the generated entry points ignore the results of
         * a failed call, so a result left there would leak (LeakSanitizer
         * reports it) */
        release_results(rets, MAX_RETS);
    }
    weft_set_grad_enabled(prev);
    for (int i = 0; i < a.n_tensors; i++)
        weft_tensor_release(a.tensors[i]);
    for (int i = 0; i < a.n_blocks; i++)
        free(a.blocks[i]);
    return 0;
}
