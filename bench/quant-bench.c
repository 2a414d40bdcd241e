/* bench/quant-bench.c — issue 17's block-format row: the Q4_0 (and Q8_0)
 * 4096 x 4096 matrix-vector product through weft_matmul, as GB/s of weight
 * blocks read, beside the machine's memory bandwidth measured in the same
 * run the way bench/bench.c's reference row does (STREAM's add, c = a + b
 * over 16M floats, one fixed slice per thread, weft's thread count), and
 * beside weft's float32 product with the same weights for scale.  Goal:
 * the Q4_0 product at >= 80% of the STREAM figure.  Run through
 * bench/quant-run (uninstalled build); prints a table, or JSON with --json. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <weft/ops.h>
#include <weft/weft.h>

#define N 4096
/* STREAM's rule: each array at least four times the last-level cache, so
 * that the loop times memory, not the cache.  16M floats (64 MB) was that
 * on the 32 MB L3 of the build machine, not on a server part: a GPU
 * machine's 16 Xeon cores here report a 300 MiB L3, which would hold most
 * of three 64 MB arrays and of 320 MiB of rotated weights.  Set in main
 * from the cache size the system reports. */
static long stream_numel = 16 * 1024 * 1024;
static double rotation_bytes = 320.0 * 1024 * 1024;

/* the last-level cache in bytes as sysfs reports it for this CPU, else as
 * sysconf does (0 if neither says).  sysfs first: it gives the cache this
 * CPU shares (a Zen 3 VM's sysfs says 32 MiB, its CPUID, which sysconf
 * reads, the whole socket's 256 MiB; eight times larger arrays moved the
 * STREAM figure by more than the noise) */
static long llc_bytes(void)
{
    long best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], unit = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        long v = 0;
        if (!f)
            continue;
        if (fscanf(f, "%ld%c", &v, &unit) >= 1) {
            v *= unit == 'K' ? 1024L : unit == 'M' ? 1024L * 1024 : 1;
            best = v > best ? v : best;
        }
        fclose(f);
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (best == 0) {
        long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
        best = l3 > 0 ? l3 : 0;
    }
#endif
    return best;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "quant-bench: %s: %s\n", what, weft_last_error());
    exit(1);
}

static double median(const double *v, int n)
{
    double t[64];
    n = n > 64 ? 64 : n;
    memcpy(t, v, sizeof *t * (size_t)n);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double s = t[j];
            t[j] = t[j - 1];
            t[j - 1] = s;
        }
    return t[n / 2];
}

/* The median of `reps` timings of fn(ctx), each of at least ~20 ms of calls. */
typedef void (*bench_fn)(void *ctx);
static double median_ns(bench_fn fn, void *ctx, int reps)
{
    fn(ctx); /* warm: pages mapped, caches and threads started */
    long calls = 1;
    for (;;) {
        double t0 = now_ns();
        for (long i = 0; i < calls; i++)
            fn(ctx);
        if (now_ns() - t0 > 2e7 || calls > (1L << 20))
            break;
        calls *= 2;
    }
    double t[64];
    reps = reps > 64 ? 64 : reps;
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (long i = 0; i < calls; i++)
            fn(ctx);
        t[r] = (now_ns() - t0) / (double)calls;
    }
    return median(t, reps);
}

/* ------------------------------------------------- the STREAM reference */

typedef float vec8 __attribute__((vector_size(32)));
typedef struct stream {
    float *a, *b, *c;
    int nthreads;
    pthread_barrier_t start, done;
    int stop;
} stream;
typedef struct stream_worker {
    stream *s;
    int t;
} stream_worker;

__attribute__((target_clones("avx2", "default"))) static void add_slice(vec8 *restrict c,
                                                                         const vec8 *restrict a,
                                                                         const vec8 *restrict b,
                                                                         long n)
{
    for (long i = 0; i < n; i++)
        c[i] = a[i] + b[i];
}

static void stream_slice(stream *s, int t)
{
    long lo = stream_numel * t / s->nthreads / 16 * 16;
    long hi = t + 1 == s->nthreads ? stream_numel : stream_numel * (t + 1) / s->nthreads / 16 * 16;
    add_slice((vec8 *)(s->c + lo), (const vec8 *)(s->a + lo), (const vec8 *)(s->b + lo),
              (hi - lo) / 8);
}

static void *stream_thread(void *arg)
{
    stream_worker *w = arg;
    for (;;) {
        pthread_barrier_wait(&w->s->start);
        if (w->s->stop)
            return NULL;
        stream_slice(w->s, w->t);
        pthread_barrier_wait(&w->s->done);
    }
}

static void stream_call(void *ctx)
{
    stream *s = ctx;
    pthread_barrier_wait(&s->start);
    stream_slice(s, 0);
    pthread_barrier_wait(&s->done);
}

static double stream_gbs(int nthreads)
{
    stream s = {.nthreads = nthreads};
    size_t bytes = (size_t)stream_numel * sizeof(float);
    if (posix_memalign((void **)&s.a, 4096, bytes) || posix_memalign((void **)&s.b, 4096, bytes) ||
        posix_memalign((void **)&s.c, 4096, bytes))
        die("out of memory for STREAM");
    pthread_barrier_init(&s.start, NULL, (unsigned)nthreads);
    pthread_barrier_init(&s.done, NULL, (unsigned)nthreads);
    pthread_t tid[256];
    stream_worker w[256];
    for (int t = 1; t < nthreads; t++) {
        w[t] = (stream_worker){&s, t};
        pthread_create(&tid[t], NULL, stream_thread, &w[t]);
    }
    /* touched once before timing, so no page fault is timed (one socket
     * here: which thread touches first does not place the memory) */
    for (long i = 0; i < stream_numel; i++)
        s.a[i] = 1.5f, s.b[i] = 2.25f, s.c[i] = 0;
    double ns = median_ns(stream_call, &s, 11);
    if (s.c[0] != 3.75f || s.c[stream_numel - 1] != 3.75f)
        die("the STREAM loop computed a wrong sum");
    s.stop = 1;
    pthread_barrier_wait(&s.start);
    for (int t = 1; t < nthreads; t++)
        pthread_join(tid[t], NULL);
    free(s.a), free(s.b), free(s.c);
    return 3.0 * (double)bytes / ns;
}

/* ------------------------------------------------------- the products */

/* Each call multiplies the next of `n` copies of one weight, so that the
 * copies together (rotation_bytes: 320 MiB, or four times the last-level
 * cache if more) exceed the cache: a 4096 x 4096 Q4_0 weight is 9.4 MB and
 * fits the build machine's 32 MB L3, so calling one weight back to back
 * would time reads from the cache, not from memory, as an LLM's decoding
 * (each layer's weight once per token) never can. */
#define MAX_COPIES 512

typedef struct product {
    weft_tensor *w[MAX_COPIES], *x;
    int n, next;
} product;

static void product_call(void *ctx)
{
    product *p = ctx;
    weft_tensor *y = NULL;
    if (weft_matmul(&y, p->w[p->next], p->x) < 0)
        die("matmul");
    p->next = (p->next + 1) % p->n;
    weft_tensor_release(y);
}

/* p with enough copies of wf in `layout` (strided: clones) to fill the
 * rotation; the first copy is `first` (borrowed, like the others). */
static void make_copies(product *p, const weft_tensor *wf, int layout, weft_tensor *x)
{
    p->x = x;
    p->next = 0;
    p->n = 0;
    do {
        weft_tensor *c = NULL;
        if ((layout ? weft_to_layout(&c, wf, layout) : weft_clone(&c, wf)) < 0)
            die("a copy of the weight");
        p->w[p->n++] = c;
    } while (p->n < MAX_COPIES && p->n * (double)weft_tensor_nbytes(p->w[0]) < rotation_bytes);
}

static void free_copies(product *p)
{
    for (int i = 0; i < p->n; i++)
        weft_tensor_release(p->w[i]);
}

int main(int argc, char **argv)
{
    bool json = argc > 1 && strcmp(argv[1], "--json") == 0;
    if (weft_load_default_plugins() < 1)
        die("no plugins (run through bench/quant-run)");
    int q4 = weft_layout_lookup("q4_0"), q8 = weft_layout_lookup("q8_0");
    if (q4 < 0 || q8 < 0)
        die("the quantized plugin is not loaded");
    int threads = weft_get_num_threads();
    long llc = llc_bytes();
    if (llc > stream_numel) /* floats: arrays of 4 x llc bytes */
        stream_numel = llc;
    if (4.0 * (double)llc > rotation_bytes)
        rotation_bytes = 4.0 * (double)llc;
    weft_manual_seed(1);
    weft_tensor *wf = NULL, *x = NULL, *w4 = NULL, *w8 = NULL;
    if (weft_randn(&wf, (int64_t[]){N, N}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL) < 0 ||
        weft_randn(&x, (int64_t[]){N}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL) < 0 ||
        weft_to_layout(&w4, wf, q4) < 0 || weft_to_layout(&w8, wf, q8) < 0)
        die("inputs");

    /* one describe line names the kernels the plugin chose */
    char *text = NULL;
    weft_tensor *tiny = NULL, *tq = NULL;
    weft_zeros(&tiny, (int64_t[]){1, 32}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    weft_to_layout(&tq, tiny, q4);
    weft_tensor_to_string(&text, tq);
    const char *kernels = text && strstr(text, "scales, ") ? strstr(text, "scales, ") + 8 : "?";
    char kname[32] = "?";
    sscanf(kernels, "%31s", kname);

    /* On a shared machine the bandwidth a process gets moves from second
     * to second: rounds alternate the STREAM loop and the products, and
     * each product's share of STREAM is taken within its round (the
     * reported share is the median of those ratios, beside the medians
     * of the times). */
    enum { ROUNDS = 5 };
    product p4, p8, pf;
    make_copies(&p4, wf, q4, x);
    make_copies(&p8, wf, q8, x);
    make_copies(&pf, wf, WEFT_LAYOUT_STRIDED, x);
    double rs[ROUNDS], r4[ROUNDS], r8[ROUNDS], rf[ROUNDS], s4[ROUNDS], s8[ROUNDS], sf[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        rs[r] = stream_gbs(threads);
        r4[r] = median_ns(product_call, &p4, 5);
        r8[r] = median_ns(product_call, &p8, 5);
        rf[r] = median_ns(product_call, &pf, 5);
        s4[r] = weft_tensor_nbytes(w4) / r4[r] / rs[r];
        s8[r] = weft_tensor_nbytes(w8) / r8[r] / rs[r];
        sf[r] = weft_tensor_nbytes(wf) / rf[r] / rs[r];
    }
    double stream = median(rs, ROUNDS), t4 = median(r4, ROUNDS), t8 = median(r8, ROUNDS),
           tf = median(rf, ROUNDS);
    double g4 = weft_tensor_nbytes(w4) / t4, g8 = weft_tensor_nbytes(w8) / t8,
           gf = weft_tensor_nbytes(wf) / tf;
    double share4 = median(s4, ROUNDS), share8 = median(s8, ROUNDS), sharef = median(sf, ROUNDS);
    if (json) {
        printf("{\"threads\": %d, \"kernels\": \"%s\", \"llc_bytes\": %ld, "
               "\"stream_floats\": %ld, \"stream_add_gbs\": %.3f, "
               "\"q4_0_matvec_4096_us\": %.2f, \"q4_0_matvec_4096_gbs\": %.3f, "
               "\"q8_0_matvec_4096_us\": %.2f, \"q8_0_matvec_4096_gbs\": %.3f, "
               "\"f32_matvec_4096_us\": %.2f, \"f32_matvec_4096_gbs\": %.3f, "
               "\"q4_0_of_stream\": %.3f, \"q8_0_of_stream\": %.3f, \"f32_of_stream\": %.3f}\n",
               threads, kname, llc, stream_numel, stream, t4 / 1e3, g4, t8 / 1e3, g8, tf / 1e3, gf, share4, share8,
               sharef);
    } else {
        printf("threads %d, block kernels %s, last-level cache %.0f MiB, weights rotated through "
               "%d/%d/%d copies (%.0f MiB of weights each)\n",
               threads, kname, (double)llc / 1048576, p4.n, p8.n, pf.n, rotation_bytes / 1048576);
        char row[64];
        snprintf(row, sizeof row, "memory bandwidth: plain C STREAM add, %ldM floats",
                 stream_numel / (1024 * 1024));
        printf("%-58s %10s %10s %8s\n", "row", "us/call", "GB/s", "of STREAM");
        printf("%-58s %10s %10.2f %8s\n", row, "", stream, "100%");
        printf("%-58s %10.1f %10.2f %7.0f%%  (goal >= 80%%)\n",
               "Q4_0 4096x4096 matvec (weft_matmul), weight bytes read", t4 / 1e3, g4,
               100 * share4);
        printf("%-58s %10.1f %10.2f %7.0f%%\n", "Q8_0 4096x4096 matvec (weft_matmul)", t8 / 1e3, g8,
               100 * share8);
        printf("%-58s %10.1f %10.2f %7.0f%%\n", "float32 4096x4096 matvec (weft_matmul)", tf / 1e3,
               gf, 100 * sharef);
    }
    weft_free(text);
    free_copies(&p4), free_copies(&p8), free_copies(&pf);
    weft_tensor *all[] = {wf, x, w4, w8, tiny, tq};
    for (int i = 0; i < 6; i++)
        weft_tensor_release(all[i]);
    return 0;
}
