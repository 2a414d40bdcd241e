/* bench/dist_bench.c — weft's side of bench/dist-compare (issue 18): the
 * time of one float32 all_reduce (sum) of 4 KB, 1 MB and 64 MB on the mpi
 * backend, run under mpirun -np 2, and the bandwidth of a plain copy into
 * shared memory on this machine, the bound the 64 MB case is judged by.
 * Rank 0 prints one line per row: NAME VALUE UNIT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weft/distributed.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median over `reps` loops of `iters` all_reduces, per call. */
static double time_all_reduce(weft_process_group *world, weft_tensor *t, int iters, int reps)
{
    double per[16];
    for (int i = 0; i < iters / 4 + 1; i++) /* warm MPI's paths and the pages */
        weft_dist_all_reduce(world, t, WEFT_REDUCE_SUM, NULL);
    for (int r = 0; r < reps; r++) {
        weft_dist_barrier(world, NULL);
        double t0 = now();
        for (int i = 0; i < iters; i++)
            if (weft_dist_all_reduce(world, t, WEFT_REDUCE_SUM, NULL) < 0) {
                fprintf(stderr, "all_reduce: %s\n", weft_last_error());
                exit(1);
            }
        per[r] = (now() - t0) / iters;
    }
    qsort(per, (size_t)reps, sizeof *per, cmp);
    return per[reps / 2];
}

int main(void)
{
    weft_load_default_plugins();
    weft_process_group *world = NULL;
    if (weft_dist_init(&world, NULL) < 0) {
        fprintf(stderr, "dist_init: %s\n", weft_last_error());
        return 1;
    }
    int rank = weft_dist_rank(world);
    static const struct { const char *name; int64_t bytes; int iters; } rows[] = {
        {"all_reduce_4KB", 4096, 2000}, {"all_reduce_1MB", 1 << 20, 200},
        {"all_reduce_64MB", 64 << 20, 8}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t n = rows[i].bytes / 4;
        weft_tensor *t = NULL;
        weft_ones(&t, &n, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
        double s = time_all_reduce(world, t, rows[i].iters, 5);
        if (rank == 0)
            printf("%s %.1f us\n", rows[i].name, s * 1e6);
        weft_tensor_release(t);
    }
    /* a plain copy of 64 MB into shared memory, on rank 0 while the other
     * rank waits at the barrier */
    if (rank == 0) {
        int64_t n = (64 << 20) / 4;
        weft_tensor *src = NULL, *shm = NULL;
        weft_ones(&src, &n, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
        if (weft_tensor_share_memory(&shm, src) < 0) {
            fprintf(stderr, "share_memory: %s\n", weft_last_error());
            return 1;
        }
        double per[5];
        for (int r = 0; r < 5; r++) {
            double t0 = now();
            for (int k = 0; k < 4; k++)
                memcpy(weft_tensor_data_ptr(shm), weft_tensor_data_ptr(src), (size_t)n * 4);
            per[r] = (now() - t0) / 4;
        }
        qsort(per, 5, sizeof *per, cmp);
        printf("shm_copy_64MB %.1f us\n", per[2] * 1e6);
        weft_tensor_release(shm);
        weft_tensor_release(src);
    }
    weft_dist_barrier(world, NULL);
    weft_dist_finalize(world);
    return 0;
}
