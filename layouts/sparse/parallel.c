/* layouts/sparse/parallel.c — the plugin's parallel loop and its stable
 * radix sort.  The CPU plugin's pool is private to that plugin, so this one
 * starts threads per call: every sparse kernel that asks for threads does
 * milliseconds of work, against tens of microseconds to start them, and
 * nothing is left running when the plugin is unloaded. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sparse.h"

typedef struct job {
    sp__chunk_fn fn;
    void *ctx;
    int chunk, nchunks;
} job;

static void *run_job(void *p)
{
    job *j = p;
    j->fn(j->chunk, j->nchunks, j->ctx);
    return NULL;
}

int sp__parallel(int64_t n, int64_t grain, sp__chunk_fn fn, void *ctx)
{
    int threads = weft_get_num_threads();
    if (grain < 1)
        grain = 1;
    int64_t want = (n + grain - 1) / grain;
    int nchunks = threads < 1 ? 1 : threads;
    if (want < nchunks)
        nchunks = want < 1 ? 1 : (int)want;
    return sp__parallel_chunks(nchunks, fn, ctx);
}

int sp__parallel_chunks(int nchunks, sp__chunk_fn fn, void *ctx)
{
    if (nchunks < 1)
        nchunks = 1;
    if (nchunks > 64)
        nchunks = 64;
    job jobs[64];
    pthread_t tid[64];
    bool started[64] = {false};
    for (int c = 1; c < nchunks; c++) {
        jobs[c] = (job){fn, ctx, c, nchunks};
        started[c] = pthread_create(&tid[c], NULL, run_job, &jobs[c]) == 0;
    }
    fn(0, nchunks, ctx);
    /* a chunk whose thread could not start runs here: the result never
     * depends on how many threads there were */
    for (int c = 1; c < nchunks; c++) {
        if (started[c])
            pthread_join(tid[c], NULL);
        else
            fn(c, nchunks, ctx);
    }
    return nchunks;
}

/* ------------------------------------------------------------ radix sort */

#define RADIX_BITS 11
#define RADIX (1 << RADIX_BITS)

typedef struct sort_pass {
    const int64_t *kin, *pin;
    int64_t *kout, *pout;
    int64_t n;
    int shift;
    int64_t *hist; /* [nchunks][RADIX]: counts, then starting offsets */
} sort_pass;

static void count_chunk(int c, int nchunks, void *ctx)
{
    sort_pass *s = ctx;
    int64_t b, e;
    sp__chunk_range(s->n, c, nchunks, &b, &e);
    int64_t *h = s->hist + (int64_t)c * RADIX;
    memset(h, 0, RADIX * sizeof *h);
    for (int64_t i = b; i < e; i++)
        h[(s->kin[i] >> s->shift) & (RADIX - 1)]++;
}

static void scatter_chunk(int c, int nchunks, void *ctx)
{
    sort_pass *s = ctx;
    int64_t b, e;
    sp__chunk_range(s->n, c, nchunks, &b, &e);
    int64_t *h = s->hist + (int64_t)c * RADIX;
    for (int64_t i = b; i < e; i++) {
        int64_t d = (s->kin[i] >> s->shift) & (RADIX - 1);
        int64_t at = h[d]++;
        s->kout[at] = s->kin[i];
        s->pout[at] = s->pin[i];
    }
}

/* LSD radix sort: each pass is stable, chunks are contiguous and their
 * buckets laid out chunk by chunk, so the result is the stable sort of the
 * input whatever the number of chunks. */
int sp__sort_keys(int64_t *keys, int64_t *perm, int64_t n, int64_t limit)
{
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    if (n < 2)
        return 0;
    int bits = 0;
    while (bits < 63 && (limit - 1) >> bits)
        bits++;
    int64_t *k2 = malloc((size_t)n * sizeof *k2), *p2 = malloc((size_t)n * sizeof *p2);
    int nthreads = weft_get_num_threads();
    if (nthreads < 1)
        nthreads = 1;
    if (nthreads > 64)
        nthreads = 64;
    int64_t *hist = malloc((size_t)nthreads * RADIX * sizeof *hist);
    if (!k2 || !p2 || !hist) {
        free(k2);
        free(p2);
        free(hist);
        return weft_set_error(WEFT_ENOMEM, "coalesce: out of memory sorting %lld entries",
                              (long long)n);
    }
    int64_t *kin = keys, *pin = perm, *kout = k2, *pout = p2;
    const int64_t grain = 1 << 16;
    for (int shift = 0; shift < bits; shift += RADIX_BITS) {
        sort_pass s = {kin, pin, kout, pout, n, shift, hist};
        /* the same chunking for counting and scattering: n and grain
         * fix it, and the thread count is read once per pass */
        int want = (int)((n + grain - 1) / grain);
        int nchunks = want < nthreads ? want : nthreads;
        if (nchunks < 1)
            nchunks = 1;
        int used = sp__parallel_chunks(nchunks, count_chunk, &s);
        int64_t at = 0;
        for (int d = 0; d < RADIX; d++)
            for (int c = 0; c < used; c++) {
                int64_t cnt = hist[(int64_t)c * RADIX + d];
                hist[(int64_t)c * RADIX + d] = at;
                at += cnt;
            }
        sp__parallel_chunks(used, scatter_chunk, &s);
        int64_t *t = kin;
        kin = kout;
        kout = t;
        t = pin;
        pin = pout;
        pout = t;
    }
    if (kin != keys) {
        memcpy(keys, kin, (size_t)n * sizeof *keys);
        memcpy(perm, pin, (size_t)n * sizeof *perm);
    }
    free(k2);
    free(p2);
    free(hist);
    return 0;
}
