/* tests/keep.h — tensors a test wants released at the end of a case:
 * keep(t) returns t and remembers it, drop_all() releases everything kept.
 * The list grows as needed, so keep() never drops a tensor still in use. */
#ifndef WEFT_TESTS_KEEP_H
#define WEFT_TESTS_KEEP_H

#include <stdlib.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include <weft/weft.h>

#include "tests/tap.h"

static weft_tensor **kept;
static int nkept, capkept;

static inline weft_tensor *keep(weft_tensor *t)
{
    if (!t)
        return t;
    if (nkept == capkept) {
        int cap = capkept ? 2 * capkept : 256;
        weft_tensor **grown = realloc(kept, (size_t)cap * sizeof *grown);
        if (!grown) {
            fprintf(stderr, "keep: out of memory\n");
            abort(); /* a test program, not the library */
        }
        kept = grown;
        capkept = cap;
    }
    kept[nkept++] = t;
    return t;
}

static inline void drop_all(void)
{
    while (nkept > 0)
        weft_tensor_release(kept[--nkept]);
    free(kept);
    kept = NULL;
    capkept = 0;
}

/* A kept int64 tensor of the given shape holding values (row-major). */
static inline weft_tensor *keep_int64(const int64_t *sizes, int nd, const int64_t *values)
{
    weft_tensor *t = NULL;
    if (weft_empty(&t, sizes, nd, WEFT_INT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    memcpy(weft_tensor_data_ptr(t), values, (size_t)weft_tensor_numel(t) * sizeof(int64_t));
    return keep(t);
}

/* t's values as float64, contiguous, in a kept tensor; returns its data. */
static inline const double *values_of(const weft_tensor *t)
{
    weft_tensor *d = NULL;
    if (!t || weft_to_dtype(&d, t, WEFT_FLOAT64) != 0)
        return NULL;
    keep(d);
    return weft_tensor_data_ptr(d);
}

/* Element i, in row-major order of t's logical shape, as a double (the real
 * part for complex dtypes); NaN if it cannot be read. */
static inline double value_at(const weft_tensor *t, int64_t i)
{
    int nd = weft_tensor_ndim(t);
    int64_t index[WEFT_MAX_DIMS];
    for (int d = nd - 1; d >= 0; d--) {
        int64_t s = weft_tensor_size(t, d);
        index[d] = s > 0 ? i % s : 0;
        i = s > 0 ? i / s : 0;
    }
    double v = NAN;
    weft_tensor_get(t, index, &v);
    return v;
}

/* Checks t's n values against ref (float64, row-major) to a relative
 * tolerance; NaN must meet NaN.  Prints where the worst element is. */
static inline void check_close(const weft_tensor *t, const double *ref, int64_t n, double tol,
                               const char *what)
{
    const double *v = t ? values_of(t) : NULL;
    if (!ok(v && weft_tensor_numel(t) == n, "%s: result has %lld elements", what, (long long)n)) {
        diag("%s", weft_last_error());
        return;
    }
    double worst = 0;
    int64_t where = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(v[i] - ref[i]) / (1 + fabs(ref[i]));
        if (isnan(v[i]) != isnan(ref[i]))
            e = INFINITY;
        if (e > worst) {
            worst = e;
            where = i;
        }
    }
    if (!ok(worst <= tol, "%s matches the reference", what))
        diag("element %lld: got %.10g, expected %.10g", (long long)where, v[where], ref[where]);
}

/* Checks that rc is the error want and, when needle is not NULL, that the
 * message contains it. */
static inline void error_is(int rc, int want, const char *needle, const char *what)
{
    if (!ok(rc == want, "%s fails with %s", what, weft_error_name(want)))
        diag("got %s: %s", weft_error_name(rc), weft_last_error());
    else if (needle)
        like(weft_last_error(), needle, "%s: the message names %s", what, needle);
}

/* Loads the default plugins; false (after a failed TAP line and the load
 * report as a diagnostic) when none loaded, so main can stop early. */
static inline bool default_plugins_loaded(void)
{
    int loaded = weft_load_default_plugins();
    if (ok(loaded >= 1, "the default plugins load (%d)", loaded))
        return true;
    char *report = NULL;
    weft_plugin_report_string(&report);
    diag("%s", report ? report : "no report");
    free(report);
    return false;
}

#endif
