/* tests/test_dist.c — process groups and collectives on the mpi backend
 * (issue 18), run by tests/dist.sh under mpirun with 2 and 3 ranks.  Each
 * rank writes its own TAP file into the directory given as argv[1]; every
 * expected value is computed by hand here from the formula each rank used
 * to fill its tensor.  With argv[2] = "die", rank 1 stops in the middle of
 * an all_reduce and rank 0 checks that the timeout names the collective. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/distributed.h>

#include "tap.h"

static int rank, size;

/* A 1-D tensor of dtype from n values (re, and im for complex). */
static weft_tensor *make(weft_dtype dt, const double *re, const double *im, int64_t n)
{
    weft_tensor *src = NULL, *out = NULL;
    bool cplx = weft_dtype_is_complex(dt);
    if (weft_empty(&src, &n, 1, cplx ? WEFT_COMPLEX128 : WEFT_FLOAT64, WEFT_DEVICE_CPU) < 0)
        return NULL;
    double *p = weft_tensor_data_ptr(src);
    for (int64_t i = 0; i < n; i++) {
        if (cplx) {
            p[2 * i] = re[i];
            p[2 * i + 1] = im ? im[i] : 0;
        } else {
            p[i] = re[i];
        }
    }
    weft_to_dtype(&out, src, dt);
    weft_tensor_release(src);
    return out;
}

/* t's elements as complex128 pairs into re/im (n of them). */
static void read_values(const weft_tensor *t, double *re, double *im, int64_t n)
{
    weft_tensor *c = NULL, *cc = NULL;
    weft_to_dtype(&c, t, WEFT_COMPLEX128);
    weft_contiguous(&cc, c);
    const double *p = weft_tensor_data_ptr(cc);
    for (int64_t i = 0; i < n; i++) {
        re[i] = p[2 * i];
        im[i] = p[2 * i + 1];
    }
    weft_tensor_release(cc);
    weft_tensor_release(c);
}

/* What rank r holds at i for dtype dt: small integers (and halves for
 * floating dtypes), so that every sum and product is exact in every dtype. */
static void value(weft_dtype dt, int r, int i, double *re, double *im)
{
    *im = 0;
    if (dt == WEFT_BOOL)
        *re = (r + i) % 2;
    else if (dt == WEFT_UINT8)
        *re = (r + 2 * i) % 4 + 1;
    else
        *re = (r + 2 * i) % 5 - 2;
    if (weft_dtype_is_floating(dt) || weft_dtype_is_complex(dt))
        *re += 0.5;
    if (weft_dtype_is_complex(dt))
        *im = (r + i) % 3 - 1;
}

static void combine(int op, weft_dtype dt, double *re, double *im, double bre, double bim)
{
    if (dt == WEFT_BOOL) { /* sum and max: any; prod and min: all */
        int any = (*re != 0) || (bre != 0), all = (*re != 0) && (bre != 0);
        *re = op == WEFT_REDUCE_SUM || op == WEFT_REDUCE_MAX ? any : all;
        return;
    }
    switch (op) {
    case WEFT_REDUCE_SUM:
    case WEFT_REDUCE_AVG:
        *re += bre;
        *im += bim;
        break;
    case WEFT_REDUCE_PROD: {
        double r = *re * bre - *im * bim, i = *re * bim + *im * bre;
        *re = r;
        *im = i;
        break;
    }
    case WEFT_REDUCE_MAX:
        *re = *re > bre ? *re : bre;
        break;
    case WEFT_REDUCE_MIN:
        *re = *re < bre ? *re : bre;
        break;
    }
}

static bool op_allowed(int op, weft_dtype dt)
{
    if ((op == WEFT_REDUCE_MAX || op == WEFT_REDUCE_MIN) && weft_dtype_is_complex(dt))
        return false;
    if (op == WEFT_REDUCE_AVG && !weft_dtype_is_floating(dt) && !weft_dtype_is_complex(dt))
        return false;
    return true;
}

/* all_reduce with op of every step-th of n * step elements of dtype dt
 * (rank r's element i is value(dt, r, i)): the reduced elements against
 * values computed here, the others untouched.  Refused pairs are checked
 * to be refused by name. */
static void check_all_reduce(weft_process_group *world, weft_dtype dt, int op, int64_t n, int step)
{
    int64_t all = n * step;
    size_t bytes = (size_t)(all + 1) * sizeof(double);
    double *re = malloc(bytes), *im = malloc(bytes), *got_re = malloc(bytes), *got_im = malloc(bytes);
    for (int64_t i = 0; i < all; i++)
        value(dt, rank, (int)i, &re[i], &im[i]);
    weft_tensor *t = make(dt, re, im, all), *view = NULL;
    weft_slice(&view, t, 0, 0, all, step);
    int rc = weft_dist_all_reduce(world, view, op, NULL);
    const char *dn = weft_dtype_name(dt), *on = weft_reduce_op_name(op);
    if (!op_allowed(op, dt)) {
        is_int(rc, WEFT_EDTYPE, "all_reduce %s on %s is refused", on, dn);
        ok(strstr(weft_last_error(), on) != NULL, "... naming %s: %s", on, weft_last_error());
        goto out;
    }
    read_values(t, got_re, got_im, all);
    double tol = dt == WEFT_FLOAT16 || dt == WEFT_BFLOAT16 ? 1e-2 : 1e-6;
    int64_t bad = -1;
    double wre = 0, wim = 0;
    for (int64_t i = 0; i < all && bad < 0; i++) {
        if (i % step) { /* not in the view: this rank's own value */
            value(dt, rank, (int)i, &wre, &wim);
        } else {
            value(dt, 0, (int)i, &wre, &wim);
            for (int r = 1; r < size; r++) {
                double b, c;
                value(dt, r, (int)i, &b, &c);
                combine(op, dt, &wre, &wim, b, c);
            }
            if (op == WEFT_REDUCE_AVG) {
                wre /= size;
                wim /= size;
            }
        }
        if (fabs(got_re[i] - wre) > tol * (1 + fabs(wre)) ||
            fabs(got_im[i] - wim) > tol * (1 + fabs(wim)))
            bad = i;
    }
    if (!ok(rc == 0 && bad < 0, "all_reduce %s on %s, %lld elements%s", on, dn, (long long)n,
            step > 1 ? ", strided" : ""))
        diag("rc %d (%s); element %lld got %g%+gi, want %g%+gi", rc, weft_last_error(),
             (long long)bad, bad < 0 ? 0 : got_re[bad], bad < 0 ? 0 : got_im[bad], wre, wim);
out:
    weft_tensor_release(view);
    weft_tensor_release(t);
    free(re);
    free(im);
    free(got_re);
    free(got_im);
}

static void test_all_reduce_every_dtype(weft_process_group *world)
{
    for (int dt = 0; dt < WEFT_NUM_DTYPES; dt++)
        for (int op = 0; op < WEFT_REDUCE_NUM_OPS; op++)
            check_all_reduce(world, dt, op, 5, 1);
}

/* Every other collective on every dtype: rank r's element i is
 * value(dt, r, i); each result is checked element by element. */
static int same_as(weft_dtype dt, const weft_tensor *t, int64_t n, int (*rank_of)(int64_t),
                   int (*index_of)(int64_t))
{
    double *re = calloc((size_t)n + 1, sizeof *re), *im = calloc((size_t)n + 1, sizeof *im);
    read_values(t, re, im, n);
    int good = 1;
    for (int64_t k = 0; k < n && good; k++) {
        double wr, wi;
        value(dt, rank_of(k), index_of(k), &wr, &wi);
        good = fabs(re[k] - wr) < 1e-9 && fabs(im[k] - wi) < 1e-9;
    }
    free(re);
    free(im);
    return good;
}

enum { B = 3 }; /* elements per rank block */
static int root_rank(int64_t k) { (void)k; return size - 1; }
static int block_rank(int64_t k) { return (int)(k / B); }
static int in_block(int64_t k) { return (int)(k % B); }
static int plain(int64_t k) { return (int)k; }
static int mine(int64_t k) { (void)k; return rank; }
static int prev_rank(int64_t k) { (void)k; return (rank + size - 1) % size; }
/* all_to_all: output block j holds rank j's block `rank`, i.e. its
 * elements rank*B .. rank*B+B-1 */
static int a2a_index(int64_t k) { return rank * B + (int)(k % B); }
/* scatter: root's block `rank` */
static int scatter_index(int64_t k) { return rank * B + (int)k; }

static weft_tensor *filled(weft_dtype dt, int r, int64_t n)
{
    double *re = malloc((size_t)(n + 1) * sizeof *re), *im = malloc((size_t)(n + 1) * sizeof *im);
    for (int64_t i = 0; i < n; i++)
        value(dt, r, (int)i, &re[i], &im[i]);
    weft_tensor *t = make(dt, re, im, n);
    free(re);
    free(im);
    return t;
}

static void test_every_dtype(weft_process_group *world)
{
    for (int d = 0; d < WEFT_NUM_DTYPES; d++) {
        weft_dtype dt = (weft_dtype)d;
        const char *dn = weft_dtype_name(dt);
        int64_t all = (int64_t)B * size;
        /* broadcast from the last rank */
        weft_tensor *t = filled(dt, rank, B);
        int rc = weft_dist_broadcast(world, t, size - 1, NULL);
        ok(rc == 0 && same_as(dt, t, B, root_rank, plain), "broadcast of %s", dn);
        weft_tensor_release(t);
        /* all_gather_into, gather */
        weft_tensor *in = filled(dt, rank, B), *out = filled(dt, 0, all);
        rc = weft_dist_all_gather_into(world, out, in, NULL);
        ok(rc == 0 && same_as(dt, out, all, block_rank, in_block), "all_gather_into of %s", dn);
        weft_tensor **list = calloc((size_t)size, sizeof *list);
        for (int k = 0; k < size; k++)
            list[k] = filled(dt, 0, B);
        rc = weft_dist_all_gather(world, list, in, NULL);
        int good = rc == 0;
        for (int k = 0; k < size && good; k++) {
            weft_tensor *v = NULL;
            weft_narrow(&v, out, 0, (int64_t)k * B, B);
            double a[B], ai[B], b[B], bi[B];
            read_values(v, a, ai, B);
            read_values(list[k], b, bi, B);
            good = memcmp(a, b, sizeof a) == 0 && memcmp(ai, bi, sizeof ai) == 0;
            weft_tensor_release(v);
        }
        ok(good, "all_gather (list) of %s", dn);
        /* all_to_all: the source holds value(dt, rank, i) for i < size*B */
        weft_tensor *src = filled(dt, rank, all), *dst = filled(dt, 0, all);
        rc = weft_dist_all_to_all(world, dst, src, NULL);
        ok(rc == 0 && same_as(dt, dst, all, block_rank, a2a_index), "all_to_all of %s", dn);
        /* scatter from the last rank: block `rank` of its source */
        weft_tensor *part = filled(dt, 0, B);
        for (int k = 0; k < size; k++) { /* src's blocks, as tensors of their own */
            weft_tensor_release(list[k]);
            double bre[B], bim[B];
            for (int i = 0; i < B; i++)
                value(dt, rank, k * B + i, &bre[i], &bim[i]);
            list[k] = make(dt, bre, bim, B);
        }
        rc = weft_dist_scatter(world, part, rank == size - 1 ? list : NULL, size - 1, NULL);
        ok(rc == 0 && same_as(dt, part, B, root_rank, scatter_index), "scatter of %s", dn);
        /* gather to rank 0 */
        rc = weft_dist_gather(world, rank == 0 ? list : NULL, in, 0, NULL);
        good = rc == 0;
        for (int k = 0; rank == 0 && k < size && good; k++) {
            double a[B], ai[B], w, wi;
            read_values(list[k], a, ai, B);
            for (int i = 0; i < B && good; i++) {
                value(dt, k, i, &w, &wi);
                good = a[i] == w && ai[i] == wi;
            }
        }
        ok(good, "gather of %s", dn);
        /* reduce_scatter_into with max (sum for complex): block `rank` */
        int op = weft_dtype_is_complex(dt) ? WEFT_REDUCE_SUM : WEFT_REDUCE_MAX;
        rc = weft_dist_reduce_scatter_into(world, part, src, op, NULL);
        double re[B], im[B];
        read_values(part, re, im, B);
        good = rc == 0;
        for (int i = 0; i < B && good; i++) {
            double wr, wi;
            value(dt, 0, rank * B + i, &wr, &wi);
            for (int r = 1; r < size; r++) {
                double b, c;
                value(dt, r, rank * B + i, &b, &c);
                combine(op, dt, &wr, &wi, b, c);
            }
            good = fabs(re[i] - wr) < 1e-9 && fabs(im[i] - wi) < 1e-9;
        }
        if (!ok(good, "reduce_scatter_into (%s) of %s", weft_reduce_op_name(op), dn))
            diag("rc %d (%s): got %g%+gi %g%+gi %g%+gi", rc, rc ? weft_last_error() : "", re[0], im[0],
                 re[1], im[1], re[2], im[2]);
        /* reduce (sum) to rank 0; the others keep theirs */
        weft_tensor *red = filled(dt, rank, B);
        rc = weft_dist_reduce(world, red, 0, WEFT_REDUCE_SUM, NULL);
        read_values(red, re, im, B);
        good = rc == 0;
        for (int i = 0; i < B && good; i++) {
            double wr, wi;
            value(dt, rank == 0 ? 0 : rank, i, &wr, &wi);
            for (int r = 1; rank == 0 && r < size; r++) {
                double b, c;
                value(dt, r, i, &b, &c);
                combine(WEFT_REDUCE_SUM, dt, &wr, &wi, b, c);
            }
            good = fabs(re[i] - wr) < 1e-2 * (1 + fabs(wr)) && fabs(im[i] - wi) < 1e-9 + 1e-2 * fabs(wi);
        }
        ok(good, "reduce (sum) of %s", dn);
        /* send/recv around the ring */
        weft_tensor *got = filled(dt, 0, B);
        weft_work *sw = NULL;
        int s1 = weft_dist_send(world, in, (rank + 1) % size, 11, &sw);
        int s2 = weft_dist_recv(world, got, (rank + size - 1) % size, 11, NULL);
        int s3 = weft_work_wait(sw);
        weft_work_free(sw);
        ok(s1 == 0 && s2 == 0 && s3 == 0 && same_as(dt, got, B, prev_rank, plain), "send/recv of %s", dn);
        weft_tensor_release(got);
        weft_tensor_release(red);
        for (int k = 0; k < size; k++)
            weft_tensor_release(list[k]);
        free(list);
        weft_tensor_release(part);
        weft_tensor_release(src);
        weft_tensor_release(dst);
        weft_tensor_release(in);
        weft_tensor_release(out);
    }
    (void)mine;
}

/* A float32 tensor 0..n-1 scaled by a, plus b. */
static weft_tensor *ramp(int64_t n, double a, double b)
{
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = a * (double)i + b;
    weft_tensor *t = make(WEFT_FLOAT32, v, NULL, n);
    free(v);
    return t;
}

static double at(const weft_tensor *t, int64_t i)
{
    double v = NAN;
    weft_tensor_get(t, &i, &v);
    return v;
}

static void test_sizes_and_strides(weft_process_group *world)
{
    /* sizes 0 and 1 */
    weft_tensor *e = ramp(0, 1, 0);
    is_int(weft_dist_all_reduce(world, e, WEFT_REDUCE_SUM, NULL), 0, "all_reduce of 0 elements");
    weft_tensor_release(e);
    weft_tensor *one = ramp(1, 0, rank + 1);
    weft_dist_all_reduce(world, one, WEFT_REDUCE_SUM, NULL);
    is_double(at(one, 0), size * (size + 1) / 2.0, 0, "all_reduce of 1 element");
    weft_tensor_release(one);
    /* large: 2^22 floats (16 MiB) */
    int64_t n = 1 << 22;
    weft_tensor *big = ramp(n, 1.0 / 1024, rank);
    int rc = weft_dist_all_reduce(world, big, WEFT_REDUCE_SUM, NULL);
    double base = size * (size - 1) / 2.0;
    int good = rc == 0;
    for (int64_t i = 0; i < n && good; i += 4099)
        good = at(big, i) == (float)(size * ((float)i / 1024) + base);
    ok(good && at(big, n - 1) == (float)(size * ((float)(n - 1) / 1024) + base),
       "all_reduce of 2^22 float32 (rc %d)", rc);
    weft_tensor_release(big);
    /* non-contiguous: every other element of 10; the others untouched */
    weft_tensor *base10 = ramp(10, 1, 100 * rank), *even = NULL;
    weft_slice(&even, base10, 0, 0, 10, 2);
    rc = weft_dist_all_reduce(world, even, WEFT_REDUCE_MAX, NULL);
    good = rc == 0;
    for (int i = 0; i < 10 && good; i++)
        good = at(base10, i) == (i % 2 ? 100 * rank + i : 100 * (size - 1) + i);
    ok(good, "all_reduce max of a strided view writes its elements only (rc %d)", rc);
    weft_tensor_release(even);
    weft_tensor_release(base10);
    /* non-contiguous 2-D: a transposed 3x4 */
    double v[12];
    for (int i = 0; i < 12; i++)
        v[i] = i + rank;
    weft_tensor *m = make(WEFT_FLOAT64, v, NULL, 12), *m2 = NULL, *tr = NULL;
    int64_t shape[2] = {3, 4};
    weft_view(&m2, m, shape, 2);
    weft_transpose(&tr, m2, 0, 1);
    rc = weft_dist_all_reduce(world, tr, WEFT_REDUCE_SUM, NULL);
    good = rc == 0;
    for (int i = 0; i < 12 && good; i++)
        good = at(m, i) == size * i + base;
    ok(good, "all_reduce of a transposed view (rc %d)", rc);
    weft_tensor_release(tr);
    weft_tensor_release(m2);
    weft_tensor_release(m);
}

/* all_gather_into's expected element k: block k / gather_block */
static int64_t gather_block = 1;
static int gathered_rank(int64_t k) { return (int)(k / gather_block); }
static int gathered_index(int64_t k) { return (int)(k % gather_block); }

/* The mpi backend's shared-memory path moves buffers in chunks of
 * WEFT_MPI_SHM_CHUNK bytes (256 KiB unless set; tests/dist.sh also runs
 * with 1 KiB): every dtype and op one element under, at and over one
 * chunk and over two, a strided view over a chunk, and a broadcast and
 * an all_gather over a chunk.  Without the path (WEFT_MPI_SHM=0) the same
 * runs through MPI. */
static void test_chunk_boundaries(weft_process_group *world)
{
    const char *env = getenv("WEFT_MPI_SHM_CHUNK");
    /* rounded as shm.c rounds it */
    int64_t chunk = env && *env ? strtoll(env, NULL, 10) / 128 * 128 : 256 << 10;
    /* without the path, MPI's calls move at most WEFT_MPI_MAX_PIECE
     * elements, and all_gather is not split (test_pieces) */
    const char *piece = getenv("WEFT_MPI_MAX_PIECE"), *path = getenv("WEFT_MPI_SHM");
    int64_t mpi_piece =
        piece && path && strcmp(path, "0") == 0 ? strtoll(piece, NULL, 10) : INT64_MAX;
    for (int dt = 0; dt < WEFT_NUM_DTYPES; dt++) {
        int64_t c = chunk / (int64_t)weft_dtype_size(dt);
        for (int op = 0; op < WEFT_REDUCE_NUM_OPS; op++) {
            if (!op_allowed(op, dt))
                continue;
            const int64_t sizes[] = {c - 1, c, c + 1, 2 * c + 1};
            for (int k = 0; k < 4; k++)
                check_all_reduce(world, dt, op, sizes[k], 1);
            check_all_reduce(world, dt, op, c + 1, 3);
        }
        weft_tensor *t = filled(dt, rank, c + 1);
        int rc = weft_dist_broadcast(world, t, size - 1, NULL);
        ok(rc == 0 && same_as(dt, t, c + 1, root_rank, plain), "broadcast of %lld %s",
           (long long)(c + 1), weft_dtype_name(dt));
        weft_tensor_release(t);
        /* all_gather_into of c + 1 elements per rank */
        weft_tensor *in = filled(dt, rank, c + 1), *out = NULL;
        int64_t all = (c + 1) * size;
        weft_empty(&out, &all, 1, dt, WEFT_DEVICE_CPU);
        gather_block = c + 1;
        rc = weft_dist_all_gather_into(world, out, in, NULL);
        if (c + 1 > mpi_piece)
            is_int(rc, WEFT_ENOTSUP, "all_gather_into of %lld %s per rank through MPI calls of at "
                   "most %lld elements is refused", (long long)(c + 1), weft_dtype_name(dt),
                   (long long)mpi_piece);
        else
            ok(rc == 0 && same_as(dt, out, all, gathered_rank, gathered_index),
               "all_gather_into of %lld %s per rank", (long long)(c + 1), weft_dtype_name(dt));
        weft_tensor_release(out);
        weft_tensor_release(in);
    }
}

static void test_collectives(weft_process_group *world)
{
    int rc;
    /* broadcast from the last rank, int64, strided */
    double v[6];
    for (int i = 0; i < 6; i++)
        v[i] = rank * 10 + i;
    weft_tensor *b = make(WEFT_INT64, v, NULL, 6), *bs = NULL;
    weft_slice(&bs, b, 0, 1, 6, 2); /* elements 1, 3, 5 */
    rc = weft_dist_broadcast(world, bs, size - 1, NULL);
    ok(rc == 0 && at(b, 1) == (size - 1) * 10 + 1 && at(b, 5) == (size - 1) * 10 + 5 &&
           at(b, 0) == rank * 10,
       "broadcast from rank %d into a strided int64 view (rc %d)", size - 1, rc);
    weft_tensor_release(bs);
    weft_tensor_release(b);

    /* reduce to root 1 with prod (float64); the others keep theirs */
    weft_tensor *r = ramp(3, 0, rank + 2);
    rc = weft_dist_reduce(world, r, 1, WEFT_REDUCE_PROD, NULL);
    double prod = 1;
    for (int k = 0; k < size; k++)
        prod *= k + 2;
    ok(rc == 0 && at(r, 2) == (rank == 1 ? prod : rank + 2), "reduce prod to rank 1 (rc %d)", rc);
    weft_tensor_release(r);

    /* all_gather into a list of 2x2 from 4-element inputs */
    weft_tensor *in = ramp(4, 1, rank * 100);
    weft_tensor **outs = calloc((size_t)size, sizeof *outs);
    int64_t two[2] = {2, 2};
    for (int k = 0; k < size; k++)
        weft_zeros(&outs[k], two, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    rc = weft_dist_all_gather(world, outs, in, NULL);
    int good = rc == 0;
    for (int k = 0; k < size && good; k++) {
        int64_t idx[2] = {1, 1};
        double got;
        weft_tensor_get(outs[k], idx, &got);
        good = got == k * 100 + 3;
    }
    ok(good, "all_gather into a list (rc %d)", rc);

    /* all_gather_into one tensor */
    weft_tensor *flat = NULL;
    int64_t total = 4 * size;
    weft_zeros(&flat, &total, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    rc = weft_dist_all_gather_into(world, flat, in, NULL);
    ok(rc == 0 && at(flat, 4 * (size - 1) + 2) == (size - 1) * 100 + 2,
       "all_gather_into one tensor (rc %d)", rc);

    /* reduce_scatter (list): output = sum over ranks of inputs[my rank] */
    weft_tensor *o = NULL;
    int64_t four = 4;
    weft_zeros(&o, &four, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    for (int k = 0; k < size; k++) {
        weft_tensor_release(outs[k]);
        outs[k] = ramp(4, 1, 10 * k + rank);
    }
    rc = weft_dist_reduce_scatter(world, o, outs, WEFT_REDUCE_SUM, NULL);
    double base = size * (size - 1) / 2.0;
    ok(rc == 0 && at(o, 3) == size * (10 * rank + 3) + base, "reduce_scatter from a list (rc %d)", rc);
    /* reduce_scatter_into with avg */
    weft_tensor *whole = ramp(4 * size, 1, rank);
    rc = weft_dist_reduce_scatter_into(world, o, whole, WEFT_REDUCE_AVG, NULL);
    is_double(rc == 0 ? at(o, 1) : NAN, 4 * rank + 1 + base / size, 1e-6,
              "reduce_scatter_into with avg");
    /* all_to_all: output block j = rank j's block my-rank */
    weft_tensor *a2a = NULL;
    weft_zeros(&a2a, &total, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    weft_tensor *src = ramp(4 * size, 1, 1000 * rank);
    rc = weft_dist_all_to_all(world, a2a, src, NULL);
    good = rc == 0;
    for (int j = 0; j < size && good; j++)
        good = at(a2a, 4 * j + 1) == 1000 * j + 4 * rank + 1;
    ok(good, "all_to_all (rc %d)", rc);
    /* gather to root 0 */
    for (int k = 0; k < size; k++)
        weft_fill_(outs[k], -1);
    rc = weft_dist_gather(world, rank == 0 ? outs : NULL, in, 0, NULL);
    ok(rc == 0 && (rank != 0 || at(outs[size - 1], 2) == (size - 1) * 100 + 2),
       "gather to rank 0 (rc %d)", rc);
    /* scatter from root 0 */
    for (int k = 0; k < size; k++)
        weft_fill_(outs[k], 7 * k);
    rc = weft_dist_scatter(world, o, rank == 0 ? outs : NULL, 0, NULL);
    ok(rc == 0 && at(o, 0) == 7 * rank, "scatter from rank 0 (rc %d)", rc);
    is_int(weft_dist_barrier(world, NULL), 0, "barrier");

    /* send/recv in a ring: async send, blocking receive */
    weft_tensor *msg = ramp(5, 1, rank * 10), *got = NULL;
    int64_t five = 5;
    weft_zeros(&got, &five, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    weft_work *sw = NULL;
    rc = weft_dist_send(world, msg, (rank + 1) % size, 3, &sw);
    int rrc = weft_dist_recv(world, got, (rank + size - 1) % size, 3, NULL);
    int wrc = weft_work_wait(sw);
    ok(rc == 0 && rrc == 0 && wrc == 0 && at(got, 4) == ((rank + size - 1) % size) * 10 + 4,
       "send/recv around a ring (rc %d %d %d)", rc, rrc, wrc);
    weft_work_free(sw);

    /* two async all_reduces, waited for in reverse order */
    weft_tensor *x = ramp(1000, 1, rank), *y = ramp(10, 2, rank);
    weft_work *wx = NULL, *wy = NULL;
    int rx = weft_dist_all_reduce(world, x, WEFT_REDUCE_SUM, &wx);
    int ry = weft_dist_all_reduce(world, y, WEFT_REDUCE_MIN, &wy);
    int t0 = weft_work_test(wx);
    int ey = weft_work_wait(wy), ex = weft_work_wait(wx);
    ok(rx == 0 && ry == 0 && t0 >= 0 && ey == 0 && ex == 0 && weft_work_test(wx) == 1 &&
           at(x, 999) == size * 999 + base && at(y, 9) == 18,
       "async all_reduces waited for out of order (test %d)", t0);
    weft_work_free(wx);
    weft_work_free(wy);

    for (int k = 0; k < size; k++)
        weft_tensor_release(outs[k]);
    free(outs);
    weft_tensor_release(x);
    weft_tensor_release(y);
    weft_tensor_release(msg);
    weft_tensor_release(got);
    weft_tensor_release(src);
    weft_tensor_release(a2a);
    weft_tensor_release(whole);
    weft_tensor_release(o);
    weft_tensor_release(flat);
    weft_tensor_release(in);
}

static void test_subgroups(weft_process_group *world)
{
    /* the world's last two ranks, in reverse order */
    int members[2] = {size - 1, size - 2};
    weft_process_group *g = NULL;
    int rc = weft_dist_group_new(&g, world, members, 2);
    is_int(rc, 0, "group_new of ranks [%d, %d]", size - 1, size - 2);
    int mine = rank == size - 1 ? 0 : rank == size - 2 ? 1 : -1;
    is_int(weft_dist_rank(g), mine, "rank in %s", weft_dist_group_name(g));
    is_int(weft_dist_world_rank(g, 0), size - 1, "group rank 0 is world rank %d", size - 1);
    weft_tensor *t = ramp(2, 0, rank);
    rc = weft_dist_all_reduce(g, t, WEFT_REDUCE_SUM, NULL);
    if (mine >= 0)
        ok(rc == 0 && at(t, 1) == 2 * size - 3, "all_reduce in the sub-group (rc %d)", rc);
    else
        ok(rc == WEFT_EINVAL && strstr(weft_last_error(), "not a member"),
           "a rank outside the group is refused: %s", weft_last_error());
    /* the group's rank 0 (world rank size-1) broadcasts */
    weft_fill_(t, rank);
    rc = weft_dist_broadcast(g, t, 0, NULL);
    if (mine >= 0)
        ok(rc == 0 && at(t, 0) == size - 1, "broadcast from group rank 0 (rc %d)", rc);
    else
        ok(rc == WEFT_EINVAL, "broadcast outside the group is refused");
    /* freeing a group with a work in flight finishes the work first */
    weft_work *late = NULL;
    weft_fill_(t, 1);
    rc = mine >= 0 ? weft_dist_all_reduce(g, t, WEFT_REDUCE_SUM, &late) : 0;
    weft_dist_group_free(g);
    if (mine >= 0)
        ok(rc == 0 && weft_work_test(late) == 1 && weft_work_wait(late) == 0 && at(t, 0) == 2,
           "a group freed with a work in flight: the work completed first");
    else
        skip(1, "rank %d is not in the group", rank);
    weft_work_free(late);
    weft_tensor_release(t);
    int bad[2] = {0, size};
    is_int(weft_dist_group_new(&g, world, bad, 2), WEFT_EINVAL, "group_new with rank %d: %s", size,
           weft_last_error());
    int twice[2] = {0, 0};
    is_int(weft_dist_group_new(&g, world, twice, 2), WEFT_EINVAL, "group_new with a rank twice");
}

static void test_bad_input(weft_process_group *world)
{
    /* dtypes that differ across ranks */
    double v[3] = {1, 2, 3};
    weft_tensor *t = make(rank == 0 ? WEFT_FLOAT32 : WEFT_FLOAT64, v, NULL, 3);
    int rc = weft_dist_all_reduce(world, t, WEFT_REDUCE_SUM, NULL);
    ok(rc == WEFT_EINVAL && strstr(weft_last_error(), "rank 0 passed float32 but rank 1 passed float64"),
       "dtypes that differ are an error on every rank: %s", weft_last_error());
    ok(at(t, 2) == 3, "... and the tensor is untouched");
    weft_tensor_release(t);
    /* element counts that differ */
    t = make(WEFT_FLOAT32, v, NULL, rank == size - 1 ? 2 : 3);
    rc = weft_dist_all_reduce(world, t, WEFT_REDUCE_SUM, NULL);
    ok(rc == WEFT_EINVAL && strstr(weft_last_error(), "elements per rank"),
       "element counts that differ: %s", weft_last_error());
    weft_tensor_release(t);
    /* one rank names a root outside the group: every rank fails with it */
    t = make(WEFT_FLOAT32, v, NULL, 3);
    rc = weft_dist_broadcast(world, t, rank == 0 ? size : 0, NULL);
    ok(rc == WEFT_EINVAL && (rank == 0 ? strstr(weft_last_error(), "outside")
                                       : strstr(weft_last_error(), "rank 0 refused")),
       "a root outside the group on rank 0 fails everywhere: %s", weft_last_error());
    /* different collectives at the same point */
    if (rank == 0)
        rc = weft_dist_broadcast(world, t, 0, NULL);
    else
        rc = weft_dist_all_reduce(world, t, WEFT_REDUCE_SUM, NULL);
    ok(rc == WEFT_EINVAL && strstr(weft_last_error(), "rank 0 called broadcast"),
       "different collectives at one point: %s", weft_last_error());
    /* a receive whose count differs from the send */
    if (rank == 0) {
        rc = weft_dist_send(world, t, 1, 9, NULL);
        is_int(rc, 0, "send of 3 elements");
    } else if (rank == 1) {
        weft_tensor *four = make(WEFT_FLOAT32, (double[]){0, 0, 0, 0}, NULL, 4);
        rc = weft_dist_recv(world, four, 0, 9, NULL);
        ok(rc == WEFT_ESHAPE && strstr(weft_last_error(), "sent 3 elements"),
           "recv of 4 from a send of 3: %s", weft_last_error());
        weft_tensor_release(four);
    } else {
        skip(1, "rank %d stays out of the send/recv", rank);
    }
    is_int(weft_dist_send(world, t, rank, 0, NULL), WEFT_EINVAL, "send to oneself is refused");
    is_int(weft_dist_send(world, t, (rank + 1) % size, -1, NULL), WEFT_EINVAL, "a negative tag");
    is_int(weft_dist_all_reduce(world, t, (weft_reduce_op)99, NULL), WEFT_EINVAL,
           "an unknown reduction (every rank)");
    /* the world still works after all that */
    weft_fill_(t, 1);
    rc = weft_dist_all_reduce(world, t, WEFT_REDUCE_SUM, NULL);
    ok(rc == 0 && at(t, 0) == size, "the world still works after the errors (rc %d)", rc);
    weft_tensor_release(t);
}

/* With WEFT_MPI_MAX_PIECE set (tests/dist.sh's worker run: 1000), MPI
 * calls move at most that many elements: all_reduce, broadcast and reduce
 * of more are split, the others refused with a clear error. */
static void test_pieces(weft_process_group *world)
{
    const char *piece = getenv("WEFT_MPI_MAX_PIECE");
    if (!piece) {
        skip(3, "WEFT_MPI_MAX_PIECE is not set");
        return;
    }
    int64_t n = atoll(piece) * 3 + 7;
    weft_tensor *t = ramp(n, 1, rank);
    int rc = weft_dist_all_reduce(world, t, WEFT_REDUCE_SUM, NULL);
    double base = size * (size - 1) / 2.0;
    ok(rc == 0 && at(t, 0) == base && at(t, n - 1) == size * (double)(n - 1) + base,
       "all_reduce of %lld elements in pieces of %s (rc %d)", (long long)n, piece, rc);
    weft_fill_(t, rank);
    rc = weft_dist_broadcast(world, t, size - 1, NULL);
    ok(rc == 0 && at(t, n - 1) == size - 1, "broadcast in pieces (rc %d)", rc);
    weft_tensor *all = NULL;
    int64_t total = n * size;
    weft_empty(&all, &total, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    rc = weft_dist_all_gather_into(world, all, t, NULL);
    ok(rc == WEFT_ENOTSUP && strstr(weft_last_error(), "at most"),
       "all_gather of more than a piece is refused: %s", weft_last_error());
    weft_tensor_release(all);
    weft_tensor_release(t);
}

/* Tensors of another device are staged through the host: the test plugin
 * "hostdev" (tests/plugins/hostdev.c, an allocator and copies only). */
static void test_other_device(weft_process_group *world)
{
    const char *dir = getenv("WEFT_TEST_PLUGIN_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/test-hostdev.so", dir ? dir : ".");
    weft_device dev;
    if (!dir || weft_load_plugin(path) < 0 || weft_device_from_string(&dev, "hostdev") < 0) {
        skip(4, "the hostdev test plugin is not there (%s)", path);
        return;
    }
    weft_tensor *cpu = ramp(6, 1, 10 * rank), *t = NULL, *back = NULL;
    weft_to_device(&t, cpu, dev);
    int rc = weft_dist_all_reduce(world, t, WEFT_REDUCE_SUM, NULL);
    weft_to_device(&back, t, WEFT_DEVICE_CPU);
    double base = 10.0 * size * (size - 1) / 2;
    ok(rc == 0 && weft_tensor_device(t).type == dev.type && at(back, 5) == size * 5 + base,
       "all_reduce of a hostdev tensor, staged through the host (rc %d)", rc);
    weft_tensor_release(back);
    /* all_gather into hostdev outputs */
    weft_tensor **outs = calloc((size_t)size, sizeof *outs);
    for (int k = 0; k < size; k++) {
        weft_tensor *z = ramp(6, 0, -1);
        weft_to_device(&outs[k], z, dev);
        weft_tensor_release(z);
    }
    rc = weft_dist_all_gather(world, outs, t, NULL);
    weft_to_device(&back, outs[size - 1], WEFT_DEVICE_CPU);
    ok(rc == 0 && at(back, 2) == size * 2 + base, "all_gather into hostdev tensors (rc %d)", rc);
    weft_tensor_release(back);
    /* send/recv of a hostdev tensor */
    weft_work *sw = NULL;
    int s1 = weft_dist_send(world, t, (rank + 1) % size, 4, &sw);
    int s2 = weft_dist_recv(world, outs[0], (rank + size - 1) % size, 4, NULL);
    weft_work_wait(sw);
    weft_work_free(sw);
    weft_to_device(&back, outs[0], WEFT_DEVICE_CPU);
    ok(s1 == 0 && s2 == 0 && at(back, 1) == size + base, "send/recv of hostdev tensors");
    weft_tensor_release(back);
    /* two devices in one call */
    rc = weft_dist_all_gather(world, outs, cpu, NULL);
    ok(rc == WEFT_EDEVICE && strstr(weft_last_error(), "hostdev") && strstr(weft_last_error(), "cpu"),
       "tensors of two devices in one call: %s", weft_last_error());
    for (int k = 0; k < size; k++)
        weft_tensor_release(outs[k]);
    free(outs);
    weft_tensor_release(t);
    weft_tensor_release(cpu);
}

/* A rank that never calls: the others fail at the timeout, naming it.  On a
 * group of its own, since a timeout leaves its group unusable. */
static void test_timeout(weft_process_group *world)
{
    int all[8];
    for (int i = 0; i < size; i++)
        all[i] = i;
    weft_process_group *g = NULL;
    weft_dist_group_new(&g, world, all, size);
    weft_dist_set_timeout(g, 1000);
    weft_tensor *t = ramp(4, 1, 0);
    if (rank != size - 1) {
        int rc = weft_dist_all_reduce(g, t, WEFT_REDUCE_SUM, NULL);
        char want[64];
        snprintf(want, sizeof want, "rank %d did not answer", size - 1);
        ok(rc == WEFT_EIO && strstr(weft_last_error(), want) &&
               strstr(weft_last_error(), "all_reduce") && strstr(weft_last_error(), "1000 ms"),
           "a rank that never calls: %s", weft_last_error());
        rc = weft_dist_barrier(g, NULL);
        ok(rc == WEFT_EIO && strstr(weft_last_error(), "unusable"),
           "the group is unusable afterwards: %s", weft_last_error());
    } else {
        skip(2, "rank %d is the one that never calls", rank);
    }
    weft_tensor_release(t);
    is_int(weft_dist_barrier(world, NULL), 0, "the world is unaffected");
}

/* Rank 1 stops (SIGSTOP) in the middle of an all_reduce of 4M floats;
 * rank 0 gets the timeout's error, then kills it. */
static int run_die(weft_process_group *world)
{
    int64_t pids_n = size;
    weft_tensor *mine = make(WEFT_INT64, (double[]){(double)getpid()}, NULL, 1), *pids = NULL;
    weft_empty(&pids, &pids_n, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    is_int(weft_dist_all_gather_into(world, pids, mine, NULL), 0, "exchange pids");
    weft_tensor *big = ramp(1 << 22, 1, 0);
    weft_dist_set_timeout(world, 1500);
    if (rank == 1) {
        weft_work *w = NULL;
        weft_dist_all_reduce(world, big, WEFT_REDUCE_SUM, &w);
        raise(SIGSTOP); /* "dies" mid-collective; rank 0 kills it */
        return 0;
    }
    int rc = weft_dist_all_reduce(world, big, WEFT_REDUCE_SUM, NULL);
    ok(rc == WEFT_EIO && strstr(weft_last_error(), "all_reduce on world timed out after 1500 ms"),
       "a rank stopped mid-collective: %s", weft_last_error());
    kill((pid_t)at(pids, 1), SIGKILL);
    done_testing();
    fflush(stdout);
    _exit(0); /* MPI_Finalize would wait for the dead rank */
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s TAP-DIR [die] (run by tests/dist.sh under mpirun)\n", argv[0]);
        return 2;
    }
    if (weft_load_default_plugins() < 0) {
        fprintf(stderr, "loading plugins: %s\n", weft_last_error());
        return 1;
    }
    /* before the real init: an unknown backend, and a world size that
     * is not mpirun's, are clear errors */
    weft_process_group *world = NULL;
    weft_dist_options bad = {sizeof bad, "nope", -1, -1, 0};
    int nope = weft_dist_init(&world, &bad);
    char nope_msg[512], wrong_msg[512];
    snprintf(nope_msg, sizeof nope_msg, "%s", weft_last_error());
    const char *env_size = getenv("OMPI_COMM_WORLD_SIZE");
    int expect_size = env_size ? atoi(env_size) : 1;
    weft_dist_options wrong = {sizeof wrong, "mpi", -1, expect_size + 1, 0};
    int wrong_rc = weft_dist_init(&world, &wrong);
    snprintf(wrong_msg, sizeof wrong_msg, "%s", weft_last_error());
    weft_dist_options opts = {sizeof opts, "mpi", -1, expect_size, 60000};
    int rc = weft_dist_init(&world, &opts);
    if (rc < 0) {
        fprintf(stderr, "dist_init: %s\n", weft_last_error());
        return 1;
    }
    rank = weft_dist_rank(world);
    size = weft_dist_size(world);
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.tap", argv[1], rank);
    if (!freopen(path, "w", stdout)) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    if (argc > 2 && strcmp(argv[2], "die") == 0)
        return run_die(world);
    is_int(nope, WEFT_ENOTFOUND, "an unknown backend: %s", nope_msg);
    ok(strstr(nope_msg, "libweftdist-nope.so") != NULL, "... naming the file it looked for");
    is_int(wrong_rc, WEFT_EINVAL, "a world size other than mpirun's: %s", wrong_msg);
    is_int(size, expect_size, "world size %d", size);
    diag("rank %d of %d on %s", rank, size, weft_dist_backend_name(world));
    is_str(weft_dist_backend_name(world), "mpi", "the backend");
    is_str(weft_dist_group_name(world), "world", "the world's name");
    weft_process_group *again = NULL;
    is_int(weft_dist_init(&again, NULL), WEFT_EEXIST, "a second init is refused");
    test_all_reduce_every_dtype(world);
    test_every_dtype(world);
    test_sizes_and_strides(world);
    test_chunk_boundaries(world);
    test_collectives(world);
    test_subgroups(world);
    test_bad_input(world);
    test_other_device(world);
    test_pieces(world);
    test_timeout(world);
    is_int(weft_dist_finalize(world), 0, "finalize");
    return done_testing();
}
