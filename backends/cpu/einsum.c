/* backends/cpu/einsum.c — einsum as a composite of weft operators, so it
 * runs and differentiates wherever they do.  The equation is parsed into
 * labels; repeated labels within an operand become a diagonal view,
 * labels that occur in one operand only (and not in the output) are
 * summed away, and the operands are then contracted left to right, each
 * pair as one bmm over [batch, kept-left, contracted] x [batch, contracted,
 * kept-right] after a permute and a reshape. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nn.h"

/* Labels: 'A'..'Z' are 0..25 and 'a'..'z' 26..51, so that label order is
 * ASCII order (the implicit output's order); the dims an ellipsis covers
 * are 52.., aligned to the right across operands, as broadcasting is. */
#define LETTERS 52
#define MAX_LABELS (LETTERS + WEFT_MAX_DIMS)
#define ELLIPSIS_MARK (-1)
/* The per-operand state lives on the stack. */
#define MAX_OPERANDS 64

/* One term of the equation as written: letters and at most one ellipsis. */
typedef struct term {
    int n;                      /* entries in raw */
    int raw[WEFT_MAX_DIMS + 1]; /* label ids, ELLIPSIS_MARK for '...' */
    bool ellipsis;
} term;

/* An operand on its way through the contraction: a tensor whose dim d
 * carries label labels[d], each label at most once. */
typedef struct operand {
    weft_tensor *t;
    int n;
    int labels[WEFT_MAX_DIMS];
} operand;

typedef struct einsum_ctx {
    const char *eq;
    int count;      /* operands */
    int ellipsis;   /* dims covered by '...' in the widest operand */
    int64_t size[MAX_LABELS];
} einsum_ctx;

static int bad_equation(const einsum_ctx *e, const char *why, ...)
    __attribute__((format(printf, 2, 3)));

static int bad_equation(const einsum_ctx *e, const char *why, ...)
{
    char detail[256];
    va_list ap;
    va_start(ap, why);
    vsnprintf(detail, sizeof detail, why, ap);
    va_end(ap);
    return weft_set_error(WEFT_EINVAL, "einsum: bad equation '%s': %s", e->eq, detail);
}

static int label_of(char c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? 26 + c - 'a' : -1;
}

static char letter_of(int label)
{
    return label < 26 ? (char)('A' + label) : label < LETTERS ? (char)('a' + label - 26) : '.';
}

/* Parses s[0..len) into t; `where` names the term in messages. */
static int parse_term(const einsum_ctx *e, const char *s, size_t len, const char *where, term *t)
{
    t->n = 0;
    t->ellipsis = false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ')
            continue;
        if (s[i] == '.') {
            if (len - i < 3 || s[i + 1] != '.' || s[i + 2] != '.')
                return bad_equation(e, "'.' in %s is not part of '...'", where);
            if (t->ellipsis)
                return bad_equation(e, "%s has more than one '...'", where);
            t->ellipsis = true;
            t->raw[t->n++] = ELLIPSIS_MARK;
            i += 2;
            continue;
        }
        int label = label_of(s[i]);
        if (label < 0)
            return bad_equation(e, "'%c' in %s is not a letter, ',', '->' or '...'", s[i], where);
        if (t->n == WEFT_MAX_DIMS + 1)
            return bad_equation(e, "%s has more than %d subscripts", where, WEFT_MAX_DIMS);
        t->raw[t->n++] = label;
    }
    return 0;
}

/* Parses the whole equation: terms[count] for the operands, *out for the
 * output (*explicit_out false when there is no '->'). */
static int parse_equation(einsum_ctx *e, term *terms, term *out, bool *explicit_out)
{
    const char *arrow = strstr(e->eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - e->eq) : strlen(e->eq);
    if (arrow && strstr(arrow + 2, "->"))
        return bad_equation(e, "more than one '->'");
    int found = 0;
    const char *p = e->eq, *end = e->eq + lhs_len;
    while (true) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        if (found < e->count) {
            char where[32];
            snprintf(where, sizeof where, "operand %d", found);
            int rc = parse_term(e, p, (size_t)(stop - p), where, &terms[found]);
            if (rc < 0)
                return rc;
        }
        found++;
        if (!comma)
            break;
        p = comma + 1;
    }
    if (found != e->count)
        return bad_equation(e, "it names %d operand%s but %d tensor%s given", found,
                            found == 1 ? "" : "s", e->count, e->count == 1 ? " was" : "s were");
    *explicit_out = arrow != NULL;
    return arrow ? parse_term(e, arrow + 2, strlen(arrow + 2), "the output", out) : 0;
}

/* Gives operand i its labels (ellipsis dims numbered from the right) and
 * takes the diagonal of repeated labels, as a strided view. */
static int prepare_operand(einsum_ctx *e, int i, const term *t, const weft_tensor *x, operand *o)
{
    int nd = weft_tensor_ndim(x), letters = t->n - (t->ellipsis ? 1 : 0);
    int covered = nd - letters;
    char b[128];
    if (covered < 0 || (!t->ellipsis && covered != 0))
        return bad_equation(e, "operand %d has %d dimensions (shape %s) but its subscripts name "
                            "%d", i, nd,
                            weft_format_shape(b, sizeof b, weft_tensor_sizes(x), nd), letters);
    int labels[WEFT_MAX_DIMS], d = 0;
    for (int k = 0; k < t->n; k++) {
        if (t->raw[k] != ELLIPSIS_MARK) {
            labels[d++] = t->raw[k];
            continue;
        }
        for (int q = 0; q < covered; q++)
            labels[d++] = LETTERS + (e->ellipsis - covered) + q;
    }
    /* one dim per label: a repeated label's dims become one whose stride
     * is the sum of theirs (the diagonal) */
    const int64_t *sz = weft_tensor_sizes(x), *st = weft_tensor_strides(x);
    int64_t sizes[WEFT_MAX_DIMS], strides[WEFT_MAX_DIMS];
    o->n = 0;
    bool repeated = false;
    for (int k = 0; k < nd; k++) {
        int at = -1;
        for (int q = 0; q < o->n; q++)
            if (o->labels[q] == labels[k])
                at = q;
        if (at < 0) {
            o->labels[o->n] = labels[k];
            sizes[o->n] = sz[k];
            strides[o->n++] = st[k];
        } else if (sizes[at] != sz[k]) {
            return bad_equation(e, "subscript '%c' is repeated in operand %d for dimensions of "
                                "sizes %lld and %lld (shape %s)", letter_of(labels[k]), i,
                                (long long)sizes[at], (long long)sz[k],
                                weft_format_shape(b, sizeof b, sz, nd));
        } else {
            strides[at] += st[k];
            repeated = true;
        }
    }
    if (repeated)
        return weft_as_strided(&o->t, x, sizes, strides, o->n, weft_tensor_storage_offset(x));
    o->t = weft_tensor_retain((weft_tensor *)x);
    return 0;
}

/* Sums o's dims whose label is marked in drop. */
static int sum_labels(operand *o, const bool *drop)
{
    int64_t dims[WEFT_MAX_DIMS];
    int nd = 0, kept = 0;
    for (int d = 0; d < o->n; d++) {
        if (drop[o->labels[d]])
            dims[nd++] = d;
        else
            o->labels[kept++] = o->labels[d];
    }
    if (nd == 0)
        return 0;
    weft_tensor *s = NULL;
    int rc = weft_sum(&s, o->t, dims, nd, false);
    if (rc < 0)
        return rc;
    weft_tensor_release(o->t);
    o->t = s;
    o->n = kept;
    return 0;
}

/* o's dims in the order of labels[0..n), reshaped to the products of the
 * groups' sizes (groups[0..ngroups) counts labels per group). */
static int arrange(const einsum_ctx *e, const operand *o, const int *labels, int n,
                   const int *groups, int ngroups, weft_tensor **out)
{
    int64_t perm[WEFT_MAX_DIMS], full[WEFT_MAX_DIMS], shape[3];
    for (int k = 0; k < n; k++) {
        for (int d = 0; d < o->n; d++)
            if (o->labels[d] == labels[k])
                perm[k] = d;
        full[k] = e->size[labels[k]];
    }
    for (int g = 0, k = 0; g < ngroups; g++) {
        shape[g] = 1;
        for (int q = 0; q < groups[g]; q++, k++)
            shape[g] *= full[k];
    }
    weft_tensor *p = NULL, *x = NULL;
    int rc = weft_permute(&p, o->t, perm, n);
    if (rc == 0) /* size-1 dims of broadcast labels take the common size */
        rc = weft_expand(&x, p, full, n);
    if (rc == 0)
        rc = weft_reshape(out, x, shape, ngroups);
    weft_tensor_release(p);
    weft_tensor_release(x);
    return rc;
}

/* a = a (x) b: labels of both that keep[] does not need are contracted. */
static int contract(const einsum_ctx *e, operand *a, operand *b, const bool *keep)
{
    bool in_a[MAX_LABELS] = {0}, in_b[MAX_LABELS] = {0}, drop_a[MAX_LABELS] = {0};
    bool drop_b[MAX_LABELS] = {0};
    for (int d = 0; d < a->n; d++)
        in_a[a->labels[d]] = true;
    for (int d = 0; d < b->n; d++)
        in_b[b->labels[d]] = true;
    for (int l = 0; l < MAX_LABELS; l++) {
        drop_a[l] = in_a[l] && !in_b[l] && !keep[l];
        drop_b[l] = in_b[l] && !in_a[l] && !keep[l];
    }
    int rc = sum_labels(a, drop_a);
    if (rc == 0)
        rc = sum_labels(b, drop_b);
    if (rc < 0)
        return rc;
    /* batch labels, then a's own, then the contracted ones, then b's own */
    int batch[MAX_LABELS], own_a[MAX_LABELS], summed[MAX_LABELS], own_b[MAX_LABELS];
    int nb = 0, na = 0, ns = 0, nob = 0;
    for (int d = 0; d < a->n; d++) {
        int l = a->labels[d];
        if (!in_b[l])
            own_a[na++] = l;
        else if (keep[l])
            batch[nb++] = l;
        else
            summed[ns++] = l;
    }
    for (int d = 0; d < b->n; d++)
        if (!in_a[b->labels[d]])
            own_b[nob++] = b->labels[d];
    int la[WEFT_MAX_DIMS], lb[WEFT_MAX_DIMS], n = 0;
    memcpy(la, batch, (size_t)nb * sizeof(int));
    memcpy(la + nb, own_a, (size_t)na * sizeof(int));
    memcpy(la + nb + na, summed, (size_t)ns * sizeof(int));
    memcpy(lb, batch, (size_t)nb * sizeof(int));
    memcpy(lb + nb, summed, (size_t)ns * sizeof(int));
    memcpy(lb + nb + ns, own_b, (size_t)nob * sizeof(int));
    if (nb + na + nob > WEFT_MAX_DIMS)
        return weft_set_error(WEFT_EINVAL, "einsum: the product of two operands would have %d "
                              "dimensions, more than %d", nb + na + nob, WEFT_MAX_DIMS);
    int ga[3] = {nb, na, ns}, gb[3] = {nb, ns, nob};
    weft_tensor *ma = NULL, *mb = NULL, *prod = NULL, *r = NULL;
    rc = arrange(e, a, la, nb + na + ns, ga, 3, &ma);
    if (rc == 0)
        rc = arrange(e, b, lb, nb + ns + nob, gb, 3, &mb);
    if (rc == 0)
        rc = weft_bmm(&prod, ma, mb);
    int64_t shape[WEFT_MAX_DIMS];
    operand result = {NULL, 0, {0}};
    for (int k = 0; k < nb + na; k++)
        result.labels[n++] = la[k];
    for (int k = 0; k < nob; k++)
        result.labels[n++] = own_b[k];
    result.n = n;
    for (int k = 0; k < n && rc == 0; k++)
        shape[k] = e->size[result.labels[k]];
    if (rc == 0)
        rc = weft_reshape(&r, prod, shape, n);
    weft_tensor_release(ma);
    weft_tensor_release(mb);
    weft_tensor_release(prod);
    if (rc < 0)
        return rc;
    weft_tensor_release(a->t);
    *a = result;
    a->t = r;
    return 0;
}

/* The sizes of every label, checked across operands (1 broadcasts). */
static int check_sizes(einsum_ctx *e, const operand *ops)
{
    int first[MAX_LABELS];
    for (int l = 0; l < MAX_LABELS; l++)
        e->size[l] = -1, first[l] = -1;
    for (int i = 0; i < e->count; i++)
        for (int d = 0; d < ops[i].n; d++) {
            int l = ops[i].labels[d];
            int64_t s = weft_tensor_size(ops[i].t, d);
            if (e->size[l] < 0 || (e->size[l] == 1 && s != 1)) {
                e->size[l] = s;
                first[l] = i;
            } else if (s != 1 && s != e->size[l]) {
                if (l >= LETTERS)
                    return bad_equation(e, "the dimensions covered by '...' do not broadcast: "
                                        "size %lld in operand %d, %lld in operand %d",
                                        (long long)e->size[l], first[l], (long long)s, i);
                return bad_equation(e, "subscript '%c' has size %lld in operand %d but %lld in "
                                    "operand %d", letter_of(l), (long long)e->size[l], first[l],
                                    (long long)s, i);
            }
        }
    return 0;
}

/* The output's labels: as written, or (implicit) the ellipsis dims then
 * every letter used exactly once, in ASCII order. */
static int output_labels(const einsum_ctx *e, const term *terms, const term *out, bool explicit_out,
                         int *labels, int *n)
{
    int uses[MAX_LABELS] = {0};
    for (int i = 0; i < e->count; i++)
        for (int k = 0; k < terms[i].n; k++)
            if (terms[i].raw[k] != ELLIPSIS_MARK)
                uses[terms[i].raw[k]]++;
    *n = 0;
    if (!explicit_out) {
        for (int q = 0; q < e->ellipsis; q++)
            labels[(*n)++] = LETTERS + q;
        for (int l = 0; l < LETTERS; l++)
            if (uses[l] == 1)
                labels[(*n)++] = l;
        return 0;
    }
    bool seen[MAX_LABELS] = {0};
    for (int k = 0; k < out->n; k++) {
        if (out->raw[k] == ELLIPSIS_MARK) {
            for (int q = 0; q < e->ellipsis; q++)
                labels[(*n)++] = LETTERS + q;
            continue;
        }
        int l = out->raw[k];
        if (!uses[l])
            return bad_equation(e, "output subscript '%c' does not appear in any operand",
                                letter_of(l));
        if (seen[l])
            return bad_equation(e, "output subscript '%c' appears more than once", letter_of(l));
        seen[l] = true;
        labels[(*n)++] = l;
    }
    return 0;
}

static int einsum_run(einsum_ctx *e, weft_tensor *const *tensors, operand *ops, weft_tensor **out)
{
    term terms[e->count], out_term;
    bool explicit_out;
    int rc = parse_equation(e, terms, &out_term, &explicit_out);
    if (rc < 0)
        return rc;
    weft_dtype dtype = weft_tensor_dtype(tensors[0]);
    e->ellipsis = 0;
    for (int i = 0; i < e->count; i++) {
        int covered = weft_tensor_ndim(tensors[i]) - (terms[i].n - (terms[i].ellipsis ? 1 : 0));
        if (terms[i].ellipsis && covered > e->ellipsis)
            e->ellipsis = covered;
        if (weft_tensor_dtype(tensors[i]) != dtype)
            return weft_set_error(WEFT_EDTYPE, "einsum: operands must have one dtype, got %s "
                                  "(operand 0) and %s (operand %d)", weft_dtype_name(dtype),
                                  weft_dtype_name(weft_tensor_dtype(tensors[i])), i);
    }
    int labels[MAX_LABELS], n;
    if ((rc = output_labels(e, terms, &out_term, explicit_out, labels, &n)) < 0)
        return rc;
    for (int i = 0; i < e->count && rc == 0; i++)
        rc = prepare_operand(e, i, &terms[i], tensors[i], &ops[i]);
    if (rc == 0)
        rc = check_sizes(e, ops);
    if (rc < 0)
        return rc;
    bool in_output[MAX_LABELS] = {0};
    for (int k = 0; k < n; k++)
        in_output[labels[k]] = true;
    /* labels of one operand only, not in the output: summed first */
    for (int i = 0; i < e->count && rc == 0; i++) {
        bool drop[MAX_LABELS];
        for (int l = 0; l < MAX_LABELS; l++)
            drop[l] = !in_output[l];
        for (int j = 0; j < e->count; j++)
            for (int d = 0; j != i && d < ops[j].n; d++)
                drop[ops[j].labels[d]] = false;
        rc = sum_labels(&ops[i], drop);
    }
    for (int i = 1; i < e->count && rc == 0; i++) {
        bool keep[MAX_LABELS];
        memcpy(keep, in_output, sizeof keep);
        for (int j = i + 1; j < e->count; j++)
            for (int d = 0; d < ops[j].n; d++)
                keep[ops[j].labels[d]] = true;
        rc = contract(e, &ops[0], &ops[i], keep);
    }
    if (rc < 0)
        return rc;
    /* a single operand broadcast nothing: its sizes are the labels' */
    int64_t perm[WEFT_MAX_DIMS], full[WEFT_MAX_DIMS];
    for (int k = 0; k < n; k++) {
        for (int d = 0; d < ops[0].n; d++)
            if (ops[0].labels[d] == labels[k])
                perm[k] = d;
        full[k] = e->size[labels[k]];
    }
    weft_tensor *p = NULL;
    rc = weft_permute(&p, ops[0].t, perm, n);
    if (rc == 0)
        rc = weft_expand(out, p, full, n);
    weft_tensor_release(p);
    return rc;
}

/* einsum(equation, tensors) */
static int einsum_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    einsum_ctx e = {.eq = call->args[0].u.string ? call->args[0].u.string : "",
                    .count = call->args[1].len};
    weft_tensor *const *tensors = call->args[1].u.tensors;
    if (e.count < 1 || e.count > MAX_OPERANDS)
        return weft_set_error(WEFT_EINVAL, "einsum: expected 1 to %d operands, got %d",
                              MAX_OPERANDS, e.count);
    for (int i = 0; i < e.count; i++)
        if (weft_tensor_ndim(tensors[i]) > WEFT_MAX_DIMS)
            return weft_set_error(WEFT_EINVAL, "einsum: operand %d has too many dims", i);
    operand ops[e.count];
    for (int i = 0; i < e.count; i++)
        ops[i].t = NULL;
    weft_tensor *r = NULL;
    int rc = einsum_run(&e, tensors, ops, &r);
    for (int i = 0; i < e.count; i++)
        weft_tensor_release(ops[i].t);
    if (rc < 0)
        return rc;
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = r;
    return 0;
}

int cpu__register_einsum(weft_registrar *reg)
{
    return weft_register_kernel(reg, "einsum", WEFT_KEY_COMPOSITE, 0, einsum_composite, NULL, NULL);
}
