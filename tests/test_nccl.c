/* tests/test_nccl.c — the nccl collective backend (backends/nccl/, issue
 * 18).  Everywhere: its host-side logic (how each dtype and reduction maps
 * onto NCCL, the launcher's environment, the bootstrap file), compiled in
 * from backends/nccl/host.c.  With a GPU: a world of one rank (no mpirun,
 * no bootstrap file) runs every collective on every dtype at sizes 0, 1
 * and 2^22 against values computed here, non-contiguous tensors, works
 * waited for and tested on a stream of the caller's, a sub-group, and bad
 * input refused by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <weft/distributed.h>
#include <weft/plugin.h>

#include "backends/nccl/nccl_backend.h"
#include "tap.h"

/* ------------------------------------------------------ host-side logic */

static void plan_checks(void)
{
    wnccl_plan p;
    ok(wnccl__plan(&p, WEFT_DIST_ALL_REDUCE, WEFT_REDUCE_SUM, WEFT_FLOAT32, 10) == 0 &&
           p.type == ncclFloat32 && p.count == 10 && p.op == ncclSum && p.block_bytes == 40,
       "plan: float32 sum is ncclFloat32/ncclSum, 10 elements, 40 bytes");
    static const struct {
        weft_dtype dt;
        ncclDataType_t type;
    } native[] = {{WEFT_FLOAT16, ncclFloat16}, {WEFT_BFLOAT16, ncclBfloat16},
                  {WEFT_FLOAT64, ncclFloat64}, {WEFT_INT8, ncclInt8},
                  {WEFT_UINT8, ncclUint8},     {WEFT_INT32, ncclInt32},
                  {WEFT_INT64, ncclInt64}};
    for (size_t i = 0; i < sizeof native / sizeof *native; i++) {
        int rc = wnccl__plan(&p, WEFT_DIST_REDUCE_SCATTER, WEFT_REDUCE_MAX, native[i].dt, 3);
        ok(rc == 0 && p.type == native[i].type && p.count == 3 && p.op == ncclMax,
           "plan: %s max reduces as NCCL type %d (got %d, rc %d)", weft_dtype_name(native[i].dt),
           (int)native[i].type, (int)p.type, rc);
    }
    ok(wnccl__plan(&p, WEFT_DIST_ALL_REDUCE, WEFT_REDUCE_AVG, WEFT_BFLOAT16, 4) == 0 &&
           p.op == ncclAvg, "plan: avg is ncclAvg");
    ok(wnccl__plan(&p, WEFT_DIST_ALL_REDUCE, WEFT_REDUCE_SUM, WEFT_BOOL, 4) == 0 &&
           p.type == ncclUint8 && p.op == ncclMax, "plan: bool sum is uint8 max (any)");
    ok(wnccl__plan(&p, WEFT_DIST_REDUCE, WEFT_REDUCE_PROD, WEFT_BOOL, 4) == 0 && p.op == ncclMin,
       "plan: bool prod is uint8 min (all)");
    ok(wnccl__plan(&p, WEFT_DIST_ALL_REDUCE, WEFT_REDUCE_SUM, WEFT_COMPLEX64, 5) == 0 &&
           p.type == ncclFloat32 && p.count == 10 && p.block_bytes == 40,
       "plan: complex64 sum is 10 float32 sums");
    int rc = wnccl__plan(&p, WEFT_DIST_ALL_REDUCE, WEFT_REDUCE_PROD, WEFT_COMPLEX128, 5);
    is_int(rc, WEFT_EDTYPE, "plan: complex128 prod is refused");
    like(weft_last_error(), "complex128", "  the message names the dtype");
    rc = wnccl__plan(&p, WEFT_DIST_ALL_REDUCE, WEFT_REDUCE_SUM, WEFT_INT16, 5);
    is_int(rc, WEFT_EDTYPE, "plan: int16 sum is refused (NCCL has no int16)");
    like(weft_last_error(), "NCCL has no int16", "  the message says why");
    rc = wnccl__plan(&p, WEFT_DIST_ALL_REDUCE, WEFT_REDUCE_AVG, WEFT_INT32, 5);
    is_int(rc, WEFT_EDTYPE, "plan: int32 avg is refused");
    ok(wnccl__plan(&p, WEFT_DIST_BROADCAST, 0, WEFT_INT16, 5) == 0 && p.type == ncclUint8 &&
           p.count == 10, "plan: an int16 broadcast moves 10 bytes");
    ok(wnccl__plan(&p, WEFT_DIST_ALL_TO_ALL, 0, WEFT_COMPLEX128, 3) == 0 && p.count == 48,
       "plan: a complex128 all_to_all block moves 48 bytes");
    ok(wnccl__plan(&p, WEFT_DIST_SCATTER, 0, WEFT_BOOL, 0) == 0 && p.count == 0,
       "plan: an empty call moves nothing");
    is_int(wnccl__plan(&p, 99, 0, WEFT_FLOAT32, 1), WEFT_EINVAL, "plan: unknown collective");
    is_int(wnccl__plan(&p, WEFT_DIST_ALL_REDUCE, 9, WEFT_FLOAT32, 1), WEFT_EINVAL,
           "plan: unknown reduction");
    is_int(wnccl__plan(&p, WEFT_DIST_ALL_REDUCE, 0, 42, 1), WEFT_EINVAL, "plan: unknown dtype");
}

static const char *const launcher_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "WEFT_NCCL_DEVICE"};

static void clear_launcher(void)
{
    for (size_t i = 0; i < sizeof launcher_vars / sizeof *launcher_vars; i++)
        unsetenv(launcher_vars[i]);
}

static void env_checks(void)
{
    int r = -1, n = -1, local = -1;
    clear_launcher();
    int rc = wnccl__env_world(&r, &n, &local);
    ok(rc == 0 && r == 0 && n == 1 && local == 0,
       "env: no launcher is rank 0 of 1 (got %d of %d, local %d)", r, n, local);
    setenv("RANK", "2", 1);
    setenv("WORLD_SIZE", "4", 1);
    rc = wnccl__env_world(&r, &n, &local);
    ok(rc == 0 && r == 2 && n == 4 && local == 2,
       "env: torchrun's RANK/WORLD_SIZE, local rank = rank without LOCAL_RANK (got %d of %d, %d)",
       r, n, local);
    setenv("LOCAL_RANK", "1", 1);
    rc = wnccl__env_world(&r, &n, &local);
    ok(rc == 0 && local == 1, "env: LOCAL_RANK (got %d)", local);
    setenv("RANK", "4", 1);
    is_int(wnccl__env_world(&r, &n, &local), WEFT_EINVAL, "env: RANK=4 of WORLD_SIZE=4 is refused");
    like(weft_last_error(), "RANK=4", "  naming the variable");
    setenv("RANK", "two", 1);
    is_int(wnccl__env_world(&r, &n, &local), WEFT_EINVAL, "env: RANK=two is refused");
    like(weft_last_error(), "'two'", "  quoting the value");
    unsetenv("WORLD_SIZE");
    setenv("RANK", "1", 1);
    is_int(wnccl__env_world(&r, &n, &local), WEFT_EINVAL, "env: RANK without WORLD_SIZE");
    like(weft_last_error(), "WORLD_SIZE", "  naming what is missing");
    clear_launcher();
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
    rc = wnccl__env_world(&r, &n, &local);
    ok(rc == 0 && r == 1 && n == 3 && local == 0,
       "env: Open MPI's mpirun (got %d of %d, local %d)", r, n, local);
    clear_launcher();
    is_int(wnccl__pick_device(3, 2), 1, "device: local rank 3 on 2 GPUs is cuda:1");
    setenv("WEFT_NCCL_DEVICE", "1", 1);
    is_int(wnccl__pick_device(0, 2), 1, "device: WEFT_NCCL_DEVICE=1");
    setenv("WEFT_NCCL_DEVICE", "2", 1);
    is_int(wnccl__pick_device(0, 2), WEFT_EINVAL, "device: WEFT_NCCL_DEVICE=2 of 2 is refused");
    like(weft_last_error(), "there are 2 devices", "  saying how many there are");
    unsetenv("WEFT_NCCL_DEVICE");
    is_int(wnccl__pick_device(0, 0), WEFT_EDEVICE, "device: none visible");
}

static void id_file_checks(void)
{
    char dir[] = "/tmp/weft-nccl-test-XXXXXX";
    if (!mkdtemp(dir)) {
        ok(0, "mkdtemp");
        return;
    }
    char path[256], other[256];
    snprintf(path, sizeof path, "%s/id", dir);
    snprintf(other, sizeof other, "%s/other", dir);
    unsigned char id[128], back[128];
    for (int i = 0; i < 128; i++)
        id[i] = (unsigned char)(i * 37 + 11);
    is_int(wnccl__id_write(path, 3, id, sizeof id), 0, "id file: rank 0 writes it");
    memset(back, 0, sizeof back);
    is_int(wnccl__id_read(path, 3, back, sizeof back, 1000), 0, "id file: a rank reads it");
    ok(memcmp(id, back, sizeof id) == 0, "id file: the 128 bytes come back unchanged");
    int rc = wnccl__id_read(path, 2, back, sizeof back, 50);
    is_int(rc, WEFT_EIO, "id file: an id for a world of 3 is not taken by a world of 2");
    like(weft_last_error(), "world of 3 ranks, not 2", "  the timeout says what it found");
    rc = wnccl__id_read(other, 2, back, sizeof back, 50);
    is_int(rc, WEFT_EIO, "id file: nothing there times out");
    like(weft_last_error(), other, "  naming the path");
    FILE *f = fopen(other, "w");
    if (f) {
        fputs("hello\n", f);
        fclose(f);
    }
    rc = wnccl__id_read(other, 2, back, sizeof back, 50);
    like(rc == WEFT_EIO ? weft_last_error() : "", "not a weft NCCL id", "id file: garbage is named");
    f = fopen(other, "w");
    if (f) {
        fputs("weft-nccl-id 1 2 abcd\n", f);
        fclose(f);
    }
    rc = wnccl__id_read(other, 2, back, sizeof back, 50);
    like(rc == WEFT_EIO ? weft_last_error() : "", "truncated id (2 of 128", "id file: a short id");
    is_int(wnccl__id_read(NULL, 2, back, sizeof back, 50), WEFT_EINVAL, "id file: no path");
    like(weft_last_error(), "WEFT_NCCL_ID_FILE", "  says which variable to set");
    is_int(wnccl__id_write("/nonexistent-dir/x/id", 2, id, sizeof id), WEFT_EIO,
           "id file: an unwritable path");
    like(weft_last_error(), "/nonexistent-dir/x/id", "  is named");
    remove(path);
    remove(other);
    rmdir(dir);
}

/* ---------------------------------------------------- on the GPU */

static const weft_device CUDA0 = {WEFT_DEVICE_TYPE_CUDA, 0};

/* Exact in every dtype checked (small integers; bool: a 0/1 pattern). */
static double pattern(weft_dtype dt, int64_t i, int salt)
{
    if (dt == WEFT_BOOL)
        return (double)((i + salt) % 3 == 0);
    if (dt == WEFT_UINT8)
        return (double)((i * 5 + salt) % 11);
    return (double)((i * 5 + salt) % 11) - 5;
}

/* A tensor of n elements on dev with pattern(dt, i, salt). */
static weft_tensor *make(weft_dtype dt, int64_t n, int salt, weft_device dev)
{
    weft_tensor *src = NULL, *typed = NULL, *out = NULL;
    if (weft_empty(&src, &n, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU) < 0)
        return NULL;
    double *p = weft_tensor_data_ptr(src);
    for (int64_t i = 0; i < n; i++)
        p[i] = pattern(dt, i, salt);
    if (weft_to_dtype(&typed, src, dt) == 0)
        weft_to_device(&out, typed, dev);
    weft_tensor_release(src);
    weft_tensor_release(typed);
    return out;
}

static weft_tensor *sentinel(weft_dtype dt, int64_t n)
{
    weft_tensor *t = NULL;
    weft_full(&t, &n, 1, dt == WEFT_BOOL ? 1 : 9, dt, CUDA0);
    return t;
}

/* Compares t (any device, any shape, read in order) with
 * pattern(dt, i + shift, salt) for i < n; reports the first difference. */
static int same(const weft_tensor *t, weft_dtype dt, int64_t n, int salt, int64_t shift,
                const char *what)
{
    weft_tensor *h = NULL, *d = NULL, *c = NULL;
    int rc = t ? weft_to_device(&h, t, WEFT_DEVICE_CPU) : -1;
    if (rc == 0)
        rc = weft_to_dtype(&d, h, WEFT_FLOAT64);
    if (rc == 0)
        rc = weft_contiguous(&c, d);
    int good = rc == 0 && weft_tensor_numel(c) == n;
    if (rc == 0 && !good)
        diag("%s: %lld elements, expected %lld", what, (long long)weft_tensor_numel(c),
             (long long)n);
    const double *p = good ? weft_tensor_data_ptr(c) : NULL;
    for (int64_t i = 0; good && i < n; i++)
        if (p[i] != pattern(dt, i + shift, salt)) {
            diag("%s: element %lld is %g, expected %g", what, (long long)i, p[i],
                 pattern(dt, i + shift, salt));
            good = 0;
        }
    if (rc < 0)
        diag("%s: reading the result back failed: %s", what, weft_last_error());
    weft_tensor_release(h);
    weft_tensor_release(d);
    weft_tensor_release(c);
    return good;
}

static const weft_dtype dtypes[] = {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FLOAT32, WEFT_FLOAT64,
                                    WEFT_INT8,    WEFT_UINT8,    WEFT_INT32,   WEFT_INT64,
                                    WEFT_BOOL};

/* Every collective on one dtype and size, in a world of one: every result
 * is the rank's own input, written over a sentinel where the call has an
 * output of its own. */
static void collectives_on(weft_process_group *w, weft_dtype dt, int64_t n)
{
    const char *name = weft_dtype_name(dt);
    char what[128];
    int floating = weft_dtype_is_floating(dt);
    for (int op = 0; op < WEFT_REDUCE_NUM_OPS; op++) {
        if (op == WEFT_REDUCE_AVG && !floating)
            continue;
        weft_tensor *t = make(dt, n, op, CUDA0);
        snprintf(what, sizeof what, "all_reduce %s %s n=%lld", weft_reduce_op_name(op), name,
                 (long long)n);
        int rc = weft_dist_all_reduce(w, t, (weft_reduce_op)op, NULL);
        if (!ok(rc == 0 && same(t, dt, n, op, 0, what), "%s", what))
            diag("rc %d: %s", rc, weft_last_error());
        weft_tensor_release(t);
        t = make(dt, n, op + 1, CUDA0);
        snprintf(what, sizeof what, "reduce %s %s n=%lld", weft_reduce_op_name(op), name,
                 (long long)n);
        rc = weft_dist_reduce(w, t, 0, (weft_reduce_op)op, NULL);
        if (!ok(rc == 0 && same(t, dt, n, op + 1, 0, what), "%s", what))
            diag("rc %d: %s", rc, weft_last_error());
        weft_tensor_release(t);
        /* reduce_scatter: the list form and the flat one */
        weft_tensor *in = make(dt, n, op + 2, CUDA0), *out = sentinel(dt, n);
        snprintf(what, sizeof what, "reduce_scatter %s %s n=%lld", weft_reduce_op_name(op),
                 name, (long long)n);
        rc = weft_dist_reduce_scatter(w, out, &in, (weft_reduce_op)op, NULL);
        if (!ok(rc == 0 && same(out, dt, n, op + 2, 0, what), "%s", what))
            diag("rc %d: %s", rc, weft_last_error());
        weft_tensor_release(out);
        out = sentinel(dt, n);
        snprintf(what, sizeof what, "reduce_scatter_into %s %s n=%lld",
                 weft_reduce_op_name(op), name, (long long)n);
        rc = weft_dist_reduce_scatter_into(w, out, in, (weft_reduce_op)op, NULL);
        if (!ok(rc == 0 && same(out, dt, n, op + 2, 0, what), "%s", what))
            diag("rc %d: %s", rc, weft_last_error());
        weft_tensor_release(out);
        weft_tensor_release(in);
    }
    weft_tensor *t = make(dt, n, 3, CUDA0);
    snprintf(what, sizeof what, "broadcast %s n=%lld", name, (long long)n);
    int rc = weft_dist_broadcast(w, t, 0, NULL);
    if (!ok(rc == 0 && same(t, dt, n, 3, 0, what), "%s", what))
        diag("rc %d: %s", rc, weft_last_error());
    weft_tensor_release(t);

    weft_tensor *in = make(dt, n, 4, CUDA0), *out = sentinel(dt, n);
    struct {
        const char *name;
        int kind;
    } moves[] = {{"all_gather", 0}, {"all_gather_into", 1}, {"all_to_all", 2},
                 {"gather", 3},     {"scatter", 4}};
    for (size_t k = 0; k < sizeof moves / sizeof *moves; k++) {
        weft_fill_(out, dt == WEFT_BOOL ? 1 : 9);
        switch (moves[k].kind) {
        case 0: rc = weft_dist_all_gather(w, &out, in, NULL); break;
        case 1: rc = weft_dist_all_gather_into(w, out, in, NULL); break;
        case 2: rc = weft_dist_all_to_all(w, out, in, NULL); break;
        case 3: rc = weft_dist_gather(w, &out, in, 0, NULL); break;
        default: rc = weft_dist_scatter(w, out, &in, 0, NULL); break;
        }
        snprintf(what, sizeof what, "%s %s n=%lld", moves[k].name, name, (long long)n);
        if (!ok(rc == 0 && same(out, dt, n, 4, 0, what), "%s", what))
            diag("rc %d: %s", rc, weft_last_error());
    }
    weft_tensor_release(in);
    weft_tensor_release(out);
}

/* complex64 on cuda:0 from n pairs (re = i - 3, im = 2i + 1). */
static weft_tensor *make_complex(int64_t n)
{
    weft_tensor *h = NULL, *c = NULL, *out = NULL;
    if (weft_empty(&h, &n, 1, WEFT_COMPLEX128, WEFT_DEVICE_CPU) < 0)
        return NULL;
    double *p = weft_tensor_data_ptr(h);
    for (int64_t i = 0; i < n; i++) {
        p[2 * i] = (double)i - 3;
        p[2 * i + 1] = 2.0 * (double)i + 1;
    }
    if (weft_to_dtype(&c, h, WEFT_COMPLEX64) == 0)
        weft_to_device(&out, c, CUDA0);
    weft_tensor_release(h);
    weft_tensor_release(c);
    return out;
}

static int complex_same(const weft_tensor *t, int64_t n)
{
    weft_tensor *h = NULL, *c = NULL;
    int good = t && weft_to_device(&h, t, WEFT_DEVICE_CPU) == 0 &&
               weft_to_dtype(&c, h, WEFT_COMPLEX128) == 0;
    const double *p = good ? weft_tensor_data_ptr(c) : NULL;
    for (int64_t i = 0; good && i < n; i++)
        if (p[2 * i] != (double)i - 3 || p[2 * i + 1] != 2.0 * (double)i + 1) {
            diag("element %lld is %g%+gi, expected %g%+gi", (long long)i, p[2 * i], p[2 * i + 1],
                 (double)i - 3, 2.0 * (double)i + 1);
            good = 0;
        }
    weft_tensor_release(h);
    weft_tensor_release(c);
    return good;
}

static void complex_and_int16(weft_process_group *w)
{
    /* complex reduces as pairs of reals (sum, avg); int16 moves as bytes */
    int64_t n = 6;
    weft_tensor *c = make_complex(n);
    int rc = weft_dist_all_reduce(w, c, WEFT_REDUCE_AVG, NULL);
    ok(rc == 0 && complex_same(c, n), "all_reduce avg complex64 (ncclAvg on float pairs): %s",
       rc ? weft_last_error() : "ok");
    rc = weft_dist_all_reduce(w, c, WEFT_REDUCE_PROD, NULL);
    is_int(rc, WEFT_EDTYPE, "all_reduce prod complex64 is refused");
    like(weft_last_error(), "complex64", "  naming the dtype: %s", weft_last_error());
    weft_tensor_release(c);
    weft_tensor *s = make(WEFT_INT16, 1000, 2, CUDA0);
    rc = weft_dist_broadcast(w, s, 0, NULL);
    ok(rc == 0 && same(s, WEFT_INT16, 1000, 2, 0, "broadcast int16"),
       "broadcast int16 (as bytes): %s", rc ? weft_last_error() : "ok");
    rc = weft_dist_all_reduce(w, s, WEFT_REDUCE_SUM, NULL);
    is_int(rc, WEFT_EDTYPE, "all_reduce sum int16 is refused (NCCL has no int16)");
    like(weft_last_error(), "int16", "  naming the dtype: %s", weft_last_error());
    weft_tensor_release(s);
}

static void non_contiguous(weft_process_group *w)
{
    /* a transposed 64x48: the core stages it through a contiguous copy on
     * the GPU and copies the result back */
    weft_tensor *base = make(WEFT_FLOAT32, 64 * 48, 5, CUDA0), *m = NULL, *tr = NULL;
    int64_t shape[2] = {64, 48};
    weft_view(&m, base, shape, 2);
    weft_t(&tr, m);
    ok(tr && !weft_tensor_is_contiguous(tr), "a transposed CUDA tensor is not contiguous");
    weft_tensor *flat = sentinel(WEFT_FLOAT32, 64 * 48), *expect = NULL;
    int rc = weft_dist_all_gather_into(w, flat, tr, NULL);
    weft_contiguous(&expect, tr); /* the elements in the transposed order */
    weft_tensor *e64 = NULL, *f64 = NULL, *eh = NULL, *fh = NULL;
    weft_to_device(&eh, expect, WEFT_DEVICE_CPU);
    weft_to_device(&fh, flat, WEFT_DEVICE_CPU);
    int same_all = eh && fh && weft_to_dtype(&e64, eh, WEFT_FLOAT64) == 0 &&
                   weft_to_dtype(&f64, fh, WEFT_FLOAT64) == 0 &&
                   memcmp(weft_tensor_data_ptr(e64), weft_tensor_data_ptr(f64),
                          64 * 48 * sizeof(double)) == 0;
    ok(rc == 0 && same_all, "all_gather_into of a transposed input gives its elements in its "
                            "own order: %s", rc ? weft_last_error() : "ok");
    /* a non-contiguous output: every other element of 2n */
    weft_tensor *wide = sentinel(WEFT_FLOAT32, 200), *strided = NULL, *src = make(WEFT_FLOAT32, 100, 6, CUDA0);
    int64_t ws[2] = {100, 2};
    weft_tensor *w2 = NULL;
    weft_view(&w2, wide, ws, 2);
    weft_select(&strided, w2, 1, 0);
    rc = strided ? weft_dist_broadcast(w, src, 0, NULL) : -1;
    if (rc == 0)
        rc = weft_dist_all_gather_into(w, strided, src, NULL);
    ok(rc == 0 && same(strided, WEFT_FLOAT32, 100, 6, 0, "strided output"),
       "all_gather_into a strided output (stride 2) writes through the staging copy: %s",
       rc ? weft_last_error() : "ok");
    weft_tensor *other = NULL;
    weft_select(&other, w2, 1, 1);
    weft_tensor *nine = NULL, *nh = NULL;
    weft_to_device(&nh, other, WEFT_DEVICE_CPU);
    weft_to_dtype(&nine, nh, WEFT_FLOAT64);
    int untouched = nine != NULL;
    for (int i = 0; nine && i < 100; i++)
        untouched &= ((double *)weft_tensor_data_ptr(nine))[i] == 9;
    ok(untouched, "  and leaves the elements between untouched");
    weft_tensor *list[] = {base, m, tr, flat, expect, e64, f64, eh, fh, wide, strided, src, w2,
                           other, nine, nh};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++)
        weft_tensor_release(list[i]);
}

static void works(weft_process_group *w)
{
    int64_t n = 1 << 20;
    weft_stream *s = NULL;
    int rc = weft_stream_create(&s, CUDA0);
    ok(rc == 0, "a stream of the caller's: %s", rc ? weft_last_error() : "ok");
    if (s)
        weft_set_current_stream(CUDA0, s);
    weft_tensor *t[4];
    weft_work *wk[4] = {0};
    for (int i = 0; i < 4; i++) {
        t[i] = make(WEFT_FLOAT32, n, 10 + i, CUDA0);
        rc = weft_dist_all_reduce(w, t[i], i % 2 ? WEFT_REDUCE_AVG : WEFT_REDUCE_SUM, &wk[i]);
        ok(rc == 0 && wk[i], "async all_reduce %d started: %s", i, rc ? weft_last_error() : "ok");
    }
    /* waited for in reverse, tested for one */
    for (int i = 3; i >= 1; i--) {
        rc = wk[i] ? weft_work_wait(wk[i]) : -1;
        ok(rc == 0 && same(t[i], WEFT_FLOAT32, n, 10 + i, 0, "async"),
           "work %d waited for (reverse order): its values are there", i);
        ok(wk[i] && weft_work_wait(wk[i]) == 0, "  a second wait says 0 again");
    }
    int got = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        got = wk[0] ? weft_work_test(wk[0]) : -1;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (got == 0 && now.tv_sec - t0.tv_sec < 60);
    ok(got == 1 && same(t[0], WEFT_FLOAT32, n, 10, 0, "tested"),
       "work 0 tested until done (test said %d)", got);
    for (int i = 0; i < 4; i++) {
        weft_work_free(wk[i]);
        weft_tensor_release(t[i]);
    }
    /* a work freed without a wait: freeing waits for it */
    weft_tensor *u = make(WEFT_FLOAT64, 1000, 20, CUDA0);
    weft_work *wu = NULL;
    rc = weft_dist_broadcast(w, u, 0, &wu);
    weft_work_free(wu);
    ok(rc == 0 && same(u, WEFT_FLOAT64, 1000, 20, 0, "freed"), "a work freed before a wait");
    weft_tensor_release(u);
    weft_work *wb = NULL;
    rc = weft_dist_barrier(w, &wb);
    ok(rc == 0 && weft_work_wait(wb) == 0, "async barrier: %s", weft_last_error());
    weft_work_free(wb);
    ok(weft_dist_barrier(w, NULL) == 0, "blocking barrier");
    weft_set_current_stream(CUDA0, NULL);
    weft_stream_destroy(s);
}

static void bad_input(weft_process_group *w)
{
    weft_tensor *cpu = make(WEFT_FLOAT32, 8, 0, WEFT_DEVICE_CPU);
    int rc = weft_dist_all_reduce(w, cpu, WEFT_REDUCE_SUM, NULL);
    is_int(rc, WEFT_EDEVICE, "a CPU tensor given to the nccl backend is refused");
    like(weft_last_error(), "backend nccl moves only cuda tensors", "  saying so: %s",
         weft_last_error());
    weft_tensor *in = make(WEFT_FLOAT32, 8, 0, CUDA0), *small = sentinel(WEFT_FLOAT32, 7);
    rc = weft_dist_all_gather_into(w, small, in, NULL);
    is_int(rc, WEFT_ESHAPE, "all_gather_into an output of 7 elements for 1 rank of 8");
    like(weft_last_error(), "output has 7 elements", "  naming the sizes: %s", weft_last_error());
    rc = weft_dist_reduce_scatter(w, small, &in, WEFT_REDUCE_SUM, NULL);
    is_int(rc, WEFT_ESHAPE, "reduce_scatter with inputs[0] of 8 elements for an output of 7");
    rc = weft_dist_all_to_all(w, small, in, NULL);
    is_int(rc, WEFT_ESHAPE, "all_to_all of 8 into 7");
    weft_tensor *ints = make(WEFT_INT32, 8, 0, CUDA0);
    rc = weft_dist_all_reduce(w, ints, WEFT_REDUCE_AVG, NULL);
    is_int(rc, WEFT_EDTYPE, "avg of int32 is refused");
    rc = weft_dist_all_gather_into(w, ints, in, NULL);
    is_int(rc, WEFT_EDTYPE, "an int32 output for a float32 input is refused");
    rc = weft_dist_broadcast(w, in, 1, NULL);
    is_int(rc, WEFT_EINVAL, "broadcast from root 1 in a world of one");
    like(weft_last_error(), "root rank 1 is outside world", "  naming the root");
    rc = weft_dist_all_reduce(w, in, WEFT_REDUCE_SUM, NULL);
    ok(rc == 0 && same(in, WEFT_FLOAT32, 8, 0, 0, "after errors"),
       "the group still works after those refusals");
    weft_tensor_release(cpu);
    weft_tensor_release(in);
    weft_tensor_release(small);
    weft_tensor_release(ints);
}

static void sub_group(weft_process_group *w)
{
    weft_process_group *g = NULL;
    int rc = weft_dist_group_new(&g, w, (const int[]){0}, 1);
    ok(rc == 0 && weft_dist_size(g) == 1 && weft_dist_rank(g) == 0,
       "a sub-group [0] gets a communicator of its own: %s", rc ? weft_last_error() : "ok");
    weft_tensor *t = make(WEFT_BFLOAT16, 33, 7, CUDA0);
    rc = g ? weft_dist_all_reduce(g, t, WEFT_REDUCE_MAX, NULL) : -1;
    ok(rc == 0 && same(t, WEFT_BFLOAT16, 33, 7, 0, "sub-group"), "all_reduce on the sub-group");
    weft_tensor_release(t);
    weft_dist_group_free(g);
}

int main(void)
{
    plan_checks();
    env_checks();
    id_file_checks();

    weft_load_default_plugins();
    clear_launcher();
    unsetenv("WEFT_NCCL_ID_FILE");
    int n = weft_device_count(WEFT_DEVICE_TYPE_CUDA);
    weft_dist_options opts = {sizeof opts, "nccl", -1, -1, 60000};
    if (n <= 0) {
        /* the backend loads and says why it cannot start */
        weft_process_group *w = NULL;
        int rc = weft_dist_init(&w, &opts);
        ok(rc < 0 && w == NULL && strstr(weft_last_error(), "nccl"),
           "without a GPU the nccl world does not start, with a reason: %s", weft_last_error());
        skip(1, "no CUDA device here (the CUDA plugin reports %d): the collectives run only "
                "with a GPU", n);
        return done_testing();
    }
    weft_process_group *w = NULL;
    int rc = weft_dist_init(&w, &opts);
    if (!ok(rc == 0 && w, "a world of one on nccl, without a launcher: %s",
            rc ? weft_last_error() : "ok"))
        return done_testing();
    is_int(weft_dist_size(w), 1, "  its size");
    is_int(weft_dist_rank(w), 0, "  its rank");
    is_str(weft_dist_backend_name(w), "nccl", "  its backend");

    const int64_t sizes[] = {0, 1, 1 << 22};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++)
            collectives_on(w, dtypes[d], sizes[s]);
    complex_and_int16(w);
    non_contiguous(w);
    works(w);
    bad_input(w);
    sub_group(w);
    is_int(weft_dist_finalize(w), 0, "finalize");
    return done_testing();
}
