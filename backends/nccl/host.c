/* backends/nccl/host.c — the NCCL backend's host-side logic (see
 * nccl_backend.h): the dtype and reduction table, the launcher's
 * environment, and the bootstrap file.  Kept free of CUDA and NCCL calls so
 * that tests/test_nccl.c runs it on machines without a GPU. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <weft/plugin.h>

#include "nccl_backend.h"

/* How NCCL reduces a weft dtype: its type and how many of them one weft
 * element is.  -1: NCCL has no such type (int16; NCCL 2.28 has int8,
 * uint8, int32, uint32, int64, uint64 and the floating types).  Complex
 * values reduce as pairs of reals, which is right for sum and avg only;
 * bool as uint8 0/1, where max is "any" and min is "all". */
static const struct {
    int type;
    int per_element;
} reduce_types[WEFT_NUM_DTYPES] = {
    [WEFT_BOOL] = {ncclUint8, 1},       [WEFT_UINT8] = {ncclUint8, 1},
    [WEFT_INT8] = {ncclInt8, 1},        [WEFT_INT16] = {-1, 0},
    [WEFT_INT32] = {ncclInt32, 1},      [WEFT_INT64] = {ncclInt64, 1},
    [WEFT_FLOAT16] = {ncclFloat16, 1},  [WEFT_BFLOAT16] = {ncclBfloat16, 1},
    [WEFT_FLOAT32] = {ncclFloat32, 1},  [WEFT_FLOAT64] = {ncclFloat64, 1},
    [WEFT_COMPLEX64] = {ncclFloat32, 2}, [WEFT_COMPLEX128] = {ncclFloat64, 2},
};

static const ncclRedOp_t nccl_ops[WEFT_REDUCE_NUM_OPS] = {
    [WEFT_REDUCE_SUM] = ncclSum, [WEFT_REDUCE_AVG] = ncclAvg, [WEFT_REDUCE_MAX] = ncclMax,
    [WEFT_REDUCE_MIN] = ncclMin, [WEFT_REDUCE_PROD] = ncclProd};

static const char *kind_name(int kind)
{
    static const char *const names[WEFT_DIST_NUM_KINDS] = {
        "all_reduce", "broadcast", "reduce",  "all_gather", "reduce_scatter", "all_to_all",
        "gather",     "scatter",   "barrier", "send",       "recv"};
    return kind >= 0 && kind < WEFT_DIST_NUM_KINDS ? names[kind] : "?";
}

int wnccl__is_reduction(int kind)
{
    return kind == WEFT_DIST_ALL_REDUCE || kind == WEFT_DIST_REDUCE ||
           kind == WEFT_DIST_REDUCE_SCATTER;
}

int wnccl__plan(wnccl_plan *out, int kind, int op, int dtype, int64_t count)
{
    if (kind < 0 || kind >= WEFT_DIST_NUM_KINDS)
        return weft_set_error(WEFT_EINVAL, "nccl: unknown collective %d", kind);
    if (dtype < 0 || dtype >= WEFT_NUM_DTYPES)
        return weft_set_error(WEFT_EINVAL, "nccl: %s: unknown dtype %d", kind_name(kind), dtype);
    if (count < 0)
        return weft_set_error(WEFT_EINVAL, "nccl: %s: negative count %lld", kind_name(kind),
                              (long long)count);
    size_t item = weft_dtype_size((weft_dtype)dtype);
    memset(out, 0, sizeof *out);
    out->block_bytes = (size_t)count * item;
    if (!wnccl__is_reduction(kind)) {
        /* moving values needs no arithmetic: bytes serve every dtype */
        out->type = ncclUint8;
        out->count = out->block_bytes;
        out->op = ncclSum;
        return 0;
    }
    if (op < 0 || op >= WEFT_REDUCE_NUM_OPS)
        return weft_set_error(WEFT_EINVAL, "nccl: %s: unknown reduction %d", kind_name(kind), op);
    const char *dt = weft_dtype_name((weft_dtype)dtype);
    if (reduce_types[dtype].type < 0)
        return weft_set_error(WEFT_EDTYPE,
                              "nccl: %s with %s is not supported for %s: NCCL has no %s type "
                              "(convert to int32 first)",
                              kind_name(kind), weft_reduce_op_name(op), dt, dt);
    int complex = reduce_types[dtype].per_element == 2;
    if (complex && op != WEFT_REDUCE_SUM && op != WEFT_REDUCE_AVG)
        return weft_set_error(WEFT_EDTYPE,
                              "nccl: %s with %s is not supported for %s: NCCL reduces complex "
                              "values as pairs of reals, which is right for sum and avg only",
                              kind_name(kind), weft_reduce_op_name(op), dt);
    int floating = dtype == WEFT_FLOAT16 || dtype == WEFT_BFLOAT16 || dtype == WEFT_FLOAT32 ||
                   dtype == WEFT_FLOAT64 || complex;
    if (op == WEFT_REDUCE_AVG && !floating)
        return weft_set_error(WEFT_EDTYPE, "nccl: %s with avg needs a floating dtype, not %s",
                              kind_name(kind), dt);
    out->type = (ncclDataType_t)reduce_types[dtype].type;
    out->count = (size_t)count * (size_t)reduce_types[dtype].per_element;
    out->op = nccl_ops[op];
    if (dtype == WEFT_BOOL)
        /* logical, as the mpi backend: sum and max are "any", prod and min
         * "all" (a uint8 sum of 0/1 would count, and wrap at 256) */
        out->op = op == WEFT_REDUCE_SUM || op == WEFT_REDUCE_MAX ? ncclMax : ncclMin;
    return 0;
}

/* *out = the integer in variable name when it is set; 0 when it is not,
 * 1 when it is, or WEFT_EINVAL naming it when it is not an integer. */
static int env_int(const char *name, long *out)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (*end != '\0' || errno || n < 0 || n > 1 << 24)
        return weft_set_error(WEFT_EINVAL, "nccl: $%s is '%s', not a rank or size", name, v);
    *out = n;
    return 1;
}

int wnccl__env_world(int *rank, int *size, int *local_rank)
{
    static const char *const sets[][3] = {{"RANK", "WORLD_SIZE", "LOCAL_RANK"},
                                          {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                           "OMPI_COMM_WORLD_LOCAL_RANK"},
                                          {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"}};
    *rank = 0;
    *size = 1;
    *local_rank = 0;
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        long r = 0, n = 0, local = -1;
        int has_r = env_int(sets[i][0], &r), has_n = env_int(sets[i][1], &n);
        if (has_r < 0 || has_n < 0)
            return has_r < 0 ? has_r : has_n;
        if (!has_r && !has_n)
            continue;
        if (!has_r || !has_n)
            return weft_set_error(WEFT_EINVAL, "nccl: $%s is set but $%s is not",
                                  has_r ? sets[i][0] : sets[i][1], has_r ? sets[i][1] : sets[i][0]);
        if (n < 1 || r >= n)
            return weft_set_error(WEFT_EINVAL, "nccl: $%s=%ld is not a rank of $%s=%ld",
                                  sets[i][0], r, sets[i][1], n);
        int has_local = env_int(sets[i][2], &local);
        if (has_local < 0)
            return has_local;
        *rank = (int)r;
        *size = (int)n;
        *local_rank = has_local ? (int)local : (int)r;
        return 0;
    }
    return 0;
}

int wnccl__pick_device(int local_rank, int n_devices)
{
    if (n_devices < 1)
        return weft_set_error(WEFT_EDEVICE, "nccl: no CUDA device is visible to this process");
    long d = 0;
    int rc = env_int("WEFT_NCCL_DEVICE", &d);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return local_rank % n_devices;
    if (d >= n_devices)
        return weft_set_error(WEFT_EINVAL, "nccl: $WEFT_NCCL_DEVICE=%ld but there %s %d device%s",
                              d, n_devices == 1 ? "is" : "are", n_devices,
                              n_devices == 1 ? "" : "s");
    return (int)d;
}

int64_t wnccl__timeout_ms(void)
{
    const char *env = getenv("WEFT_DIST_TIMEOUT_MS");
    if (env && *env) {
        char *end;
        long long v = strtoll(env, &end, 10);
        if (*end == '\0' && v > 0)
            return v;
    }
    return 30LL * 60 * 1000;
}

static const char id_magic[] = "weft-nccl-id 1";

int wnccl__id_write(const char *path, int size, const void *id, size_t bytes)
{
    if (!path || !*path)
        return weft_set_error(WEFT_EINVAL, "nccl: no bootstrap file (set WEFT_NCCL_ID_FILE)");
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return weft_set_error(WEFT_EINVAL, "nccl: bootstrap file path too long: %s", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return weft_set_error(WEFT_EIO, "nccl: cannot write the bootstrap file %s: %s", tmp,
                              strerror(errno));
    fprintf(f, "%s %d ", id_magic, size);
    for (size_t i = 0; i < bytes; i++)
        fprintf(f, "%02x", ((const unsigned char *)id)[i]);
    fputc('\n', f);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        int e = errno;
        unlink(tmp);
        return weft_set_error(WEFT_EIO, "nccl: writing the bootstrap file %s failed: %s", tmp,
                              strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return weft_set_error(WEFT_EIO, "nccl: cannot rename %s to %s: %s", tmp, path,
                              strerror(e));
    }
    return 0;
}

/* One look at the file: 1 when it holds an id for a world of size (copied
 * into id), 0 otherwise with what was there in seen. */
static int id_parse(const char *path, int size, void *id, size_t bytes, char *seen, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(seen, n, "no such file (%s)", strerror(errno));
        return 0;
    }
    char line[8192];
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    size_t magic = strlen(id_magic);
    int file_size = 0, used = 0;
    if (!got || strncmp(line, id_magic, magic) != 0 ||
        sscanf(line + magic, " %d %n", &file_size, &used) != 1) {
        snprintf(seen, n, "a file that is not a weft NCCL id");
        return 0;
    }
    if (file_size != size) {
        snprintf(seen, n, "the id of a world of %d ranks, not %d (a stale file?)", file_size, size);
        return 0;
    }
    const char *hex = line + magic + used;
    for (size_t i = 0; i < bytes; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
            snprintf(seen, n, "a truncated id (%zu of %zu bytes)", i, bytes);
            return 0;
        }
        ((unsigned char *)id)[i] = (unsigned char)v;
    }
    return 1;
}

int wnccl__id_read(const char *path, int size, void *id, size_t bytes, int64_t timeout_ms)
{
    if (!path || !*path)
        return weft_set_error(WEFT_EINVAL, "nccl: no bootstrap file (set WEFT_NCCL_ID_FILE)");
    struct timespec t0, now, pause = {0, 10 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char seen[160] = "";
    for (;;) {
        if (id_parse(path, size, id, bytes, seen, sizeof seen))
            return 0;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t ms = (int64_t)(now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
        if (ms >= timeout_ms)
            return weft_set_error(WEFT_EIO,
                                  "nccl: rank 0 did not publish NCCL's id in %s within %lld ms "
                                  "(found %s)",
                                  path, (long long)timeout_ms, seen);
        nanosleep(&pause, NULL);
    }
}
