/* c10/print.c — tensor printing, character for character as PyTorch 1.13's
 * torch/_tensor_str.py prints with its default options (precision 4,
 * threshold 1000, edgeitems 3, linewidth 80).  The structure follows that
 * file (_Formatter, _vector_str, _tensor_str_with_formatter, _add_suffixes)
 * so the two can be compared line by line.  Reads host memory only: other
 * devices' tensors are copied to the host first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c10/core.h"

enum { PRECISION = 4, THRESHOLD = 1000, EDGEITEMS = 3, LINEWIDTH = 80 };

/* ------------------------------------------------------ a growing string */

typedef struct strbuf {
    char *data;
    size_t len, cap;
    bool failed; /* out of memory: later appends do nothing */
} strbuf;

static void sb_append(strbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *data = wf__realloc(b->data, cap);
        if (!data) {
            b->failed = true;
            return;
        }
        b->data = data;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void sb_puts(strbuf *b, const char *s)
{
    sb_append(b, s, strlen(s));
}

static void sb_repeat(strbuf *b, char c, int n)
{
    for (int i = 0; i < n; i++)
        sb_append(b, &c, 1);
}

/* ----------------------------------------------------- reading elements */

/* Which number of an element a formatter looks at. */
typedef enum part { PART_VALUE, PART_REAL, PART_IMAG } part;

static double read_floating(const char *p, weft_dtype dtype, part which)
{
    if (which == PART_IMAG) /* the second half of a complex element */
        return dtype == WEFT_COMPLEX64 ? wf__load_double(p + 4, WEFT_FLOAT32)
                                       : wf__load_double(p + 8, WEFT_FLOAT64);
    return wf__load_double(p, dtype); /* the real part for complex */
}

/* Integers are read as int64, not double, so large values print exactly. */
static int64_t read_integer(const char *p, weft_dtype dtype)
{
    switch (dtype) {
    case WEFT_BOOL: return *(const uint8_t *)p != 0;
    case WEFT_UINT8: return *(const uint8_t *)p;
    case WEFT_INT8: return *(const int8_t *)p;
    case WEFT_INT16: return *(const int16_t *)p;
    case WEFT_INT32: return *(const int32_t *)p;
    default: return *(const int64_t *)p;
    }
}

/* Calls fn for every element PyTorch's get_summarized_data keeps: all of
 * them, or when summarising only the first and last EDGEITEMS of every
 * dimension longer than 2 * EDGEITEMS. */
typedef void (*element_fn)(void *ctx, const char *p);

static void visit(const weft_tensor *t, int dim, const char *p, bool summarize, element_fn fn,
                  void *ctx)
{
    if (dim == t->ndim) {
        fn(ctx, p);
        return;
    }
    int64_t n = t->sizes[dim];
    int64_t step = t->strides[dim] * (int64_t)weft_dtype_size(t->dtype);
    for (int64_t i = 0; i < n; i++) {
        if (summarize && n > 2 * EDGEITEMS && i == EDGEITEMS)
            i = n - EDGEITEMS;
        visit(t, dim + 1, p + i * step, summarize, fn, ctx);
    }
}

/* ------------------------------------------------------------ formatter */

/* _Formatter: how every element of one tensor (or of its real or imaginary
 * parts) is written, and the width they are all padded to. */
typedef struct formatter {
    weft_dtype dtype;
    part which;
    bool floating;
    bool int_mode;
    bool sci_mode;
    int max_width;
} formatter;

/* The value as Python's format would write it, unpadded. */
static int format_floating(char *buf, size_t size, const formatter *f, double v)
{
    /* Python writes nan without a sign, where C may write "-nan" */
    if (isnan(v))
        return snprintf(buf, size, "nan");
    if (isinf(v))
        return snprintf(buf, size, v > 0 ? "inf" : "-inf");
    if (f->sci_mode)
        return snprintf(buf, size, "%.*e", PRECISION, v);
    if (f->int_mode)
        return snprintf(buf, size, "%.0f.", v);
    return snprintf(buf, size, "%.*f", PRECISION, v);
}

static int format_integer(char *buf, size_t size, const formatter *f, int64_t v)
{
    if (f->dtype == WEFT_BOOL)
        return snprintf(buf, size, "%s", v ? "True" : "False");
    return snprintf(buf, size, "%lld", (long long)v);
}

typedef struct scan_state {
    formatter *f;
    int64_t nonzero_finite;
    double min_abs, max_abs;
    bool pass_widths; /* second pass: measure instead of collecting */
} scan_state;

static void scan_element(void *ctx, const char *p)
{
    scan_state *s = ctx;
    formatter *f = s->f;
    char buf[64];
    if (!f->floating) {
        int n = format_integer(buf, sizeof buf, f, read_integer(p, f->dtype));
        if (n > f->max_width)
            f->max_width = n;
        return;
    }
    double v = read_floating(p, f->dtype, f->which);
    if (!isfinite(v) || v == 0)
        return; /* only nonzero finite values decide the format and width */
    if (!s->pass_widths) {
        double a = fabs(v);
        if (s->nonzero_finite++ == 0 || a < s->min_abs)
            s->min_abs = a;
        if (a > s->max_abs)
            s->max_abs = a;
        if (v != ceil(v))
            f->int_mode = false;
        return;
    }
    int n = format_floating(buf, sizeof buf, f, v);
    if (n > f->max_width)
        f->max_width = n;
}

static void formatter_init(formatter *f, const weft_tensor *t, part which, bool summarize)
{
    weft_dtype dtype = (weft_dtype)t->dtype;
    f->dtype = dtype;
    f->which = which;
    f->floating = weft_dtype_is_floating(dtype) || weft_dtype_is_complex(dtype);
    f->int_mode = true;
    f->sci_mode = false;
    f->max_width = 1;
    scan_state s = {f, 0, 0.0, 0.0, false};
    const char *base = weft_tensor_data_ptr(t);
    visit(t, 0, base, summarize, scan_element, &s);
    if (!f->floating || s.nonzero_finite == 0)
        return;
    /* whole numbers go scientific only for a wide range, others also when
     * the smallest would show as 0.0000 */
    bool wide_range = s.max_abs / s.min_abs > 1000.0 || s.max_abs > 1.0e8;
    f->sci_mode = f->int_mode ? wide_range : wide_range || s.min_abs < 1.0e-4;
    s.pass_widths = true;
    visit(t, 0, base, summarize, scan_element, &s);
}

/* Formats the element at p into buf, padded on the left to the width. */
static void format_padded(char *buf, size_t size, const formatter *f, const char *p)
{
    char text[64];
    int n = f->floating
                ? format_floating(text, sizeof text, f, read_floating(p, f->dtype, f->which))
                : format_integer(text, sizeof text, f, read_integer(p, f->dtype));
    int pad = f->max_width > n ? f->max_width - n : 0;
    snprintf(buf, size, "%*s%s", pad, "", text);
}

/* ------------------------------------------------------------- layout */

typedef struct printer {
    const weft_tensor *t;
    size_t item;
    bool summarize;
    formatter real; /* formatter1: the values, or the real parts */
    formatter imag; /* formatter2: imaginary parts of complex tensors */
    bool complex;
    strbuf *out;
} printer;

/* _val_formatter / _scalar_str: one element as text. */
static void element_str(const printer *pr, const char *p)
{
    char real[128], imag[128];
    format_padded(real, sizeof real, &pr->real, p);
    sb_puts(pr->out, real);
    if (!pr->complex)
        return;
    format_padded(imag, sizeof imag, &pr->imag, p);
    const char *trimmed = imag;
    while (*trimmed == ' ')
        trimmed++;
    /* a sign of the imaginary part (also of -0.0) joins the two as it is */
    if (*trimmed != '+' && *trimmed != '-')
        sb_puts(pr->out, "+");
    sb_puts(pr->out, trimmed);
    sb_puts(pr->out, "j");
}

/* How many items a dimension of size n shows: all, or when summarising the
 * first and last EDGEITEMS with a "..." between them. */
static int64_t shown_count(const printer *pr, int64_t n)
{
    return pr->summarize && n > 2 * EDGEITEMS ? 2 * EDGEITEMS + 1 : n;
}

/* The index along the dimension of shown item k, or -1 for the "...". */
static int64_t shown_index(const printer *pr, int64_t n, int64_t k)
{
    if (!(pr->summarize && n > 2 * EDGEITEMS) || k < EDGEITEMS)
        return k;
    return k == EDGEITEMS ? -1 : n - (2 * EDGEITEMS + 1 - k);
}

/* _vector_str */
static void vector_str(const printer *pr, const char *p, int indent)
{
    const weft_tensor *t = pr->t;
    int64_t n = t->sizes[t->ndim - 1];
    int64_t step = t->strides[t->ndim - 1] * (int64_t)pr->item;
    int element_length = pr->real.max_width + 2;
    if (pr->complex)
        element_length += pr->imag.max_width + 1;
    int per_line = (LINEWIDTH - indent) / element_length;
    if (per_line < 1)
        per_line = 1;
    sb_puts(pr->out, "[");
    int64_t count = shown_count(pr, n);
    for (int64_t k = 0; k < count; k++) {
        if (k > 0) {
            if (k % per_line == 0) {
                sb_puts(pr->out, ",\n");
                sb_repeat(pr->out, ' ', indent + 1);
            } else {
                sb_puts(pr->out, ", ");
            }
        }
        int64_t i = shown_index(pr, n, k);
        if (i < 0)
            sb_puts(pr->out, " ...");
        else
            element_str(pr, p + i * step);
    }
    sb_puts(pr->out, "]");
}

/* _tensor_str_with_formatter, from dimension dim on */
static void tensor_str(const printer *pr, const char *p, int dim, int indent)
{
    const weft_tensor *t = pr->t;
    int remaining = t->ndim - dim;
    if (remaining == 0) {
        element_str(pr, p);
        return;
    }
    if (remaining == 1) {
        vector_str(pr, p, indent);
        return;
    }
    int64_t n = t->sizes[dim];
    int64_t step = t->strides[dim] * (int64_t)pr->item;
    sb_puts(pr->out, "[");
    int64_t count = shown_count(pr, n);
    for (int64_t k = 0; k < count; k++) {
        if (k > 0) {
            /* a blank line between blocks for every dimension below two */
            sb_puts(pr->out, ",");
            sb_repeat(pr->out, '\n', remaining - 1);
            sb_repeat(pr->out, ' ', indent + 1);
        }
        int64_t i = shown_index(pr, n, k);
        if (i < 0)
            sb_puts(pr->out, "...");
        else
            tensor_str(pr, p + i * step, dim + 1, indent + 1);
    }
    sb_puts(pr->out, "]");
}

/* _add_suffixes: ", suffix" on the last line while it fits in LINEWIDTH,
 * else on a new line at the prefix's indent. */
static void add_suffixes(strbuf *out, char suffixes[][256], int count, int indent)
{
    const char *newline = strrchr(out->data ? out->data : "", '\n');
    /* Python's len(s) - s.rfind('\n') + 1, with rfind giving -1 for none */
    size_t last_line_len = newline ? out->len - (size_t)(newline - out->data) + 1 : out->len + 2;
    for (int i = 0; i < count; i++) {
        size_t len = strlen(suffixes[i]);
        if (last_line_len + len + 2 > LINEWIDTH) {
            sb_puts(out, ",\n");
            sb_repeat(out, ' ', indent);
            last_line_len = (size_t)indent + len;
        } else {
            sb_puts(out, ", ");
            last_line_len += len + 2;
        }
        sb_puts(out, suffixes[i]);
    }
    sb_puts(out, ")");
}

static bool is_default_dtype(weft_dtype dtype)
{
    return dtype == WEFT_FLOAT32 || dtype == WEFT_INT64 || dtype == WEFT_BOOL ||
           dtype == WEFT_COMPLEX64;
}

/* The whole repr of host tensor h; device is the original tensor's. */
static void tensor_repr(strbuf *out, const weft_tensor *h, weft_device device,
                        const char *layout_suffix)
{
    static const char prefix[] = "tensor(";
    const int indent = (int)sizeof prefix - 1;
    weft_dtype dtype = (weft_dtype)h->dtype;
    char suffixes[4][256]; /* the layout's (see weft_tensor_to_string) */
    int nsuffixes = 0;
    sb_puts(out, prefix);
    if (layout_suffix)
        snprintf(suffixes[nsuffixes++], sizeof suffixes[0], "%s", layout_suffix);
    if (device.type != WEFT_DEVICE_TYPE_CPU) {
        char name[48];
        weft_device_to_string(device, name, sizeof name);
        snprintf(suffixes[nsuffixes++], sizeof suffixes[0], "device='%s'", name);
    }
    if (h->numel == 0) {
        sb_puts(out, "[]");
        if (h->ndim != 1) { /* shown as a Python tuple, as NumPy does */
            int n = snprintf(suffixes[nsuffixes], sizeof suffixes[0], "size=(");
            for (int i = 0; i < h->ndim && n < (int)sizeof suffixes[0]; i++)
                n += snprintf(suffixes[nsuffixes] + n, sizeof suffixes[0] - (size_t)n, "%s%lld",
                              i ? ", " : "", (long long)h->sizes[i]);
            if (n < (int)sizeof suffixes[0])
                snprintf(suffixes[nsuffixes] + n, sizeof suffixes[0] - (size_t)n, ")");
            nsuffixes++;
        }
        /* no element tells the kind, so only float32 goes without a dtype */
        if (dtype != WEFT_FLOAT32)
            snprintf(suffixes[nsuffixes++], sizeof suffixes[0], "dtype=torch.%s",
                     weft_dtype_name(dtype));
    } else {
        if (!is_default_dtype(dtype))
            snprintf(suffixes[nsuffixes++], sizeof suffixes[0], "dtype=torch.%s",
                     weft_dtype_name(dtype));
        printer pr = {.t = h, .item = weft_dtype_size(dtype), .summarize = h->numel > THRESHOLD,
                      .complex = weft_dtype_is_complex(dtype), .out = out};
        formatter_init(&pr.real, h, pr.complex ? PART_REAL : PART_VALUE, pr.summarize);
        if (pr.complex)
            formatter_init(&pr.imag, h, PART_IMAG, pr.summarize);
        tensor_str(&pr, weft_tensor_data_ptr(h), 0, indent);
    }
    add_suffixes(out, suffixes, nsuffixes, indent);
}

WEFT_API int weft_tensor_to_string(char **out, const weft_tensor *t)
{
    if (out)
        *out = NULL;
    if (!out || !t)
        return wf__errorf(WEFT_EINVAL, "tensor_to_string: %s is NULL", !out ? "out" : "the tensor");
    /* a layout tensor prints its values through its strided form, and
     * says its layout and what its plugin tells of the payload */
    char layout_suffix[256]; /* a plugin's description of its payload fits */
    weft_tensor *strided = NULL, *host = NULL;
    int rc = wf__layout_strided(&strided, t, "tensor_to_string");
    if (rc < 0)
        return rc;
    if (t->layout) {
        const wf_layout *l = &wf__layouts[t->layout];
        int n = snprintf(layout_suffix, sizeof layout_suffix, "layout=%s", l->name);
        if (l->iface.describe && n > 0 && n + 3 < (int)sizeof layout_suffix) {
            memcpy(layout_suffix + n, " (", 3);
            int m = l->iface.describe(t, layout_suffix + n + 2, sizeof layout_suffix - (size_t)n - 3);
            if (m > 0)
                strcat(layout_suffix, ")");
            else
                layout_suffix[n] = '\0';
        }
    }
    rc = weft_to_device(&host, strided, WEFT_DEVICE_CPU);
    weft_tensor_release(strided);
    if (rc < 0)
        return rc;
    strbuf b = {NULL, 0, 0, false};
    tensor_repr(&b, host, t->device, t->layout ? layout_suffix : NULL);
    weft_tensor_release(host);
    if (b.failed) {
        free(b.data);
        return wf__errorf(WEFT_ENOMEM, "tensor_to_string: out of memory");
    }
    *out = b.data;
    return 0;
}

WEFT_API int weft_tensor_print(const weft_tensor *t, void *file)
{
    if (!file)
        return wf__errorf(WEFT_EINVAL, "tensor_print: file is NULL");
    char *text;
    int rc = weft_tensor_to_string(&text, t);
    if (rc < 0)
        return rc;
    /* a line of its own, as Python's print() writes it */
    int failed = fputs(text, file) == EOF || fputc('\n', file) == EOF;
    free(text);
    return failed ? wf__errorf(WEFT_EIO, "tensor_print: write failed") : 0;
}
