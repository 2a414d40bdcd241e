/* tests/fuzz/fuzz_parameters.c — libFuzzer harness for parameter files
 * (weft_load_parameters, nn/serialize.c; the format is in <weft/nn.h>).
 *
 * Input: one mode byte, then the file's bytes.  The file ends in a CRC-32 of
 * everything before it, so random bytes almost never get past the checksum
 * and the parser behind it would go untested: for inputs whose mode byte is
 * odd the harness overwrites the last four bytes with the right CRC (zlib's
 * crc32, which is what the format names), so half of the inputs reach the
 * record, name, dtype and shape checks.  The file goes to a memfd and is
 * loaded through /proc/self/fd, so no disk file is written per input.
 *
 * It is loaded into a fixed set of tensors (mode bit 1 asks for two of them
 * only; bit 2 also reads the file with the optimizer-state reader, which
 * stages every record, named or not).  Invariants, on every input: a return
 * of 0 or a negative code with a message; on failure no tensor changed (the
 * format's promise: the whole file is checked before the first write); on
 * success each tensor holds the record's bytes.
 *
 * WEFT_FUZZ_WRITE_SEEDS=DIR: writes the seed corpus (real files from
 * weft_save_parameters, and near-valid variants of them) into DIR and exits;
 * tests/fuzz/corpus/parameters/ was made that way. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <weft/nn.h>
#include <weft/weft.h>

#include "fuzz_common.h"

#include "nn/parameter_file.h"

#define NT 5
static const char *const names[NT] = {"weight", "bias", "step", "empty", "z"};
static weft_tensor *tensors[NT];
static unsigned char *before[NT]; /* each tensor's bytes before the load */
static size_t nbytes[NT];
static int memfd = -1;
static char memfd_path[64];

/* The tensors every input is loaded into: a transposed (non-contiguous)
 * view, a leaf that requires grad, a 0-d tensor, a 0-size one, a complex
 * one: the layouts and kinds a load has to write into. */
static void make_tensors(void)
{
    int64_t s32[2] = {3, 2}, s3[1] = {3}, s0[2] = {0, 4}, s2[1] = {2};
    /* made with weft_empty and filled here: fill_ and arange are kernels of
     * the CPU plugin, which this harness does not load (a load only needs
     * the core's copy_) */
    weft_tensor *base = NULL, *t;
    CHECK(weft_empty(&base, s32, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU) == 0);
    for (int i = 0; i < 6; i++)
        ((float *)weft_tensor_data_ptr(base))[i] = (float)i;
    CHECK(weft_transpose(&tensors[0], base, 0, 1) == 0); /* [2, 3], strided */
    weft_tensor_release(base);
    CHECK(weft_empty(&t, s3, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU) == 0);
    for (int i = 0; i < 3; i++)
        ((double *)weft_tensor_data_ptr(t))[i] = 0.5 * i;
    CHECK(weft_tensor_set_requires_grad(t, true) == 0);
    tensors[1] = t;
    CHECK(weft_empty(&t, NULL, 0, WEFT_INT64, WEFT_DEVICE_CPU) == 0);
    *(int64_t *)weft_tensor_data_ptr(t) = 7;
    tensors[2] = t;
    CHECK(weft_empty(&tensors[3], s0, 2, WEFT_INT8, WEFT_DEVICE_CPU) == 0);
    CHECK(weft_empty(&t, s2, 1, WEFT_COMPLEX64, WEFT_DEVICE_CPU) == 0);
    for (int i = 0; i < 4; i++)
        ((float *)weft_tensor_data_ptr(t))[i] = (float)(i + 1);
    tensors[4] = t;
}

/* Tensor i's elements, contiguous, row-major: what the file would hold. */
static unsigned char *tensor_bytes(int i, size_t *len)
{
    weft_tensor *dense = NULL;
    CHECK(weft_contiguous(&dense, tensors[i]) == 0);
    *len = (size_t)weft_tensor_numel(dense) * weft_dtype_size(weft_tensor_dtype(dense));
    unsigned char *copy = malloc(*len ? *len : 1);
    CHECK(copy);
    if (*len)
        memcpy(copy, weft_tensor_data_ptr(dense), *len);
    weft_tensor_release(dense);
    return copy;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Where record `name`'s elements start in a well-formed file, or NULL: to
 * check a successful load against the bytes it read. */
static const unsigned char *record_data(const unsigned char *file, size_t len, const char *name)
{
    if (len < 16)
        return NULL;
    uint32_t count = get_u32(file + 12);
    size_t pos = 16;
    for (uint32_t r = 0; r < count; r++) {
        if (len - pos < 4)
            return NULL;
        uint32_t nl = get_u32(file + pos);
        pos += 4;
        if (len - pos < (size_t)nl + 8)
            return NULL;
        const unsigned char *rname = file + pos;
        pos += nl;
        uint32_t dtype = get_u32(file + pos), ndim = get_u32(file + pos + 4);
        pos += 8;
        if (ndim > 64 || len - pos < (size_t)ndim * 8)
            return NULL;
        uint64_t numel = 1;
        for (uint32_t d = 0; d < ndim; d++) {
            uint64_t s = 0;
            for (int b = 0; b < 8; b++)
                s |= (uint64_t)file[pos + 8 * d + (size_t)b] << (8 * b);
            if (__builtin_mul_overflow(numel, s, &numel))
                return NULL;
        }
        pos += (size_t)ndim * 8;
        size_t item = weft_dtype_size((weft_dtype)dtype);
        if (!item || __builtin_mul_overflow(numel, (uint64_t)item, &numel) || numel > len - pos)
            return NULL;
        if (nl == strlen(name) && memcmp(rname, name, nl) == 0)
            return file + pos;
        pos += (size_t)numel;
    }
    return NULL;
}

/* ------------------------------------------------------------- the seeds */

static void write_seed(const char *dir, const char *tag, uint8_t mode, const unsigned char *file,
                       size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, tag);
    FILE *f = fopen(path, "wb");
    CHECK(f);
    CHECK(fwrite(&mode, 1, 1, f) == 1);
    CHECK(fwrite(file, 1, len, f) == len);
    CHECK(fclose(f) == 0);
}

/* A file weft_save_parameters writes for the first n tensors (order
 * reversed when `reverse`), read back into memory. */
static unsigned char *saved_file(const char *dir, int n, bool reverse, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/.saved", dir);
    weft_tensor *ts[NT];
    const char *ns[NT];
    for (int i = 0; i < n; i++) {
        ts[i] = tensors[reverse ? n - 1 - i : i];
        ns[i] = names[reverse ? n - 1 - i : i];
    }
    CHECK(weft_save_parameters(path, ts, ns, n) == 0);
    FILE *f = fopen(path, "rb");
    CHECK(f);
    unsigned char *buf = malloc(1 << 16);
    CHECK(buf);
    *len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    remove(path);
    return buf;
}

static void write_seeds(const char *dir)
{
    size_t len;
    unsigned char *file = saved_file(dir, NT, false, &len);
    write_seed(dir, "valid", 0, file, len);       /* loads as is */
    write_seed(dir, "valid-recrc", 1, file, len); /* the harness recomputes the CRC */
    unsigned char *two = malloc(len);
    memcpy(two, file, len);
    two[len - 1] ^= 0x5a;
    write_seed(dir, "bad-crc", 0, two, len);
    write_seed(dir, "bad-crc-recrc", 1, two, len);
    write_seed(dir, "truncated", 1, file, len / 2);
    /* tensor 0's dtype (float32 = 8) turned into float64: the CRC is
     * patched by the harness, so the load reaches the dtype check */
    memcpy(two, file, len);
    two[16 + 4 + strlen(names[0])] = (unsigned char)WEFT_FLOAT64;
    write_seed(dir, "wrong-dtype", 1, two, len);
    /* tensor 0's first size 2 → 3 */
    memcpy(two, file, len);
    two[16 + 4 + strlen(names[0]) + 8] = 3;
    write_seed(dir, "wrong-shape", 1, two, len);
    free(two);
    free(file);
    file = saved_file(dir, NT, true, &len);
    write_seed(dir, "reversed", 0, file, len);
    free(file);
    file = saved_file(dir, 2, false, &len);
    write_seed(dir, "subset", 2, file, len); /* mode 2: asks for two tensors */
    write_seed(dir, "subset-all", 0, file, len); /* asks for all five: one missing */
    free(file);
    file = saved_file(dir, 0, false, &len);
    write_seed(dir, "none-state", 4, file, len);
    free(file);
}

/* ------------------------------------------------------------ the harness */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    make_tensors();
    const char *seeds = getenv("WEFT_FUZZ_WRITE_SEEDS");
    if (seeds) {
        write_seeds(seeds);
        exit(0);
    }
    for (int i = 0; i < NT; i++)
        before[i] = tensor_bytes(i, &nbytes[i]);
    memfd = memfd_create("weft-fuzz-parameters", MFD_CLOEXEC);
    CHECK(memfd >= 0);
    snprintf(memfd_path, sizeof memfd_path, "/proc/self/fd/%d", memfd);
    return 0;
}

/* Puts every tensor back to its initial values after a successful load. */
static void restore(int n)
{
    for (int i = 0; i < n; i++) {
        weft_tensor *src = NULL;
        int64_t numel = weft_tensor_numel(tensors[i]);
        CHECK(weft_from_blob(&src, before[i], weft_tensor_sizes(tensors[i]), NULL,
                             weft_tensor_ndim(tensors[i]), weft_tensor_dtype(tensors[i]),
                             WEFT_DEVICE_CPU, NULL, NULL) == 0 || numel == 0);
        if (src) {
            bool mode = weft_set_grad_enabled(false);
            CHECK(weft_copy_(tensors[i], src) == 0);
            weft_set_grad_enabled(mode);
            weft_tensor_release(src);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    size_t len = size - 1;
    unsigned char *file = malloc(len ? len : 1);
    CHECK(file);
    memcpy(file, data + 1, len);
    if ((mode & 1) && len >= 4)
        put_u32(file + len - 4, (uint32_t)crc32(0L, file, (uInt)(len - 4)));
    CHECK(ftruncate(memfd, 0) == 0);
    CHECK(pwrite(memfd, file, len, 0) == (ssize_t)len);

    int n = (mode & 2) ? 2 : NT;
    weft_clear_error();
    int rc = weft_load_parameters(memfd_path, tensors, names, n);
    CHECK(rc <= 0);
    if (rc < 0) {
        CHECK(weft_last_error()[0] != '\0');
        for (int i = 0; i < NT; i++) {
            size_t now_len;
            unsigned char *now = tensor_bytes(i, &now_len);
            CHECK(now_len == nbytes[i] && memcmp(now, before[i], now_len) == 0);
            free(now);
        }
    } else {
        for (int i = 0; i < n; i++) {
            const unsigned char *want = record_data(file, len, names[i]);
            CHECK(want);
            size_t now_len;
            unsigned char *now = tensor_bytes(i, &now_len);
            CHECK(memcmp(now, want, now_len) == 0);
            free(now);
        }
        restore(n);
    }

    if (mode & 4) {
        /* the optimizer-state reader: every record becomes a host tensor */
        wf_named_tensor *list = NULL;
        int count = -1;
        rc = wn__read_parameter_file(memfd_path, &list, &count);
        CHECK(rc <= 0);
        if (rc < 0) {
            CHECK(weft_last_error()[0] != '\0');
            CHECK(list == NULL && count == 0);
        } else {
            for (int i = 0; i < count; i++) {
                CHECK(list[i].name && list[i].tensor);
                const unsigned char *want = record_data(file, len, list[i].name);
                CHECK(want);
                /* names may repeat in a file; the first record is found */
            }
            wn__named_tensors_free(list, count);
        }
    }
    free(file);
    return 0;
}
