/* tests/test_idx.c — weft_read_idx (nn/idx.c), the IDX reader that
 * weft-train and weft.datasets share: gzip and plain files of 1 and 3
 * dimensions read with their sizes and bytes, and every fault an error
 * with a message naming it and *out left NULL: NULL arguments, a missing
 * file, a corrupt gzip stream, a bad magic, another element type, zero
 * dimensions, a header whose sizes exceed the limit, a truncated payload
 * and bytes past the end.  Files are written here with zlib and stdio,
 * independently of the reader. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <weft/nn.h>

#include "tests/tap.h"

static char dir[] = "/tmp/weft-test-idx-XXXXXX";

/* An IDX file: header (type, sizes) then payload, gzip or plain. */
static const char *write_idx(const char *name, int type, int ndim, const uint32_t *sizes,
                             const unsigned char *payload, size_t len, int gz)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unsigned char head[4 + 4 * 8] = {0, 0, (unsigned char)type, (unsigned char)ndim};
    for (int d = 0; d < ndim; d++)
        for (int b = 0; b < 4; b++)
            head[4 + 4 * d + b] = (unsigned char)(sizes[d] >> (24 - 8 * b));
    size_t hl = 4 + 4 * (size_t)ndim;
    if (gz) {
        gzFile f = gzopen(path, "wb");
        gzwrite(f, head, (unsigned)hl);
        if (len)
            gzwrite(f, payload, (unsigned)len);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(head, 1, hl, f);
        if (len) /* fwrite's buffer must not be NULL, even for 0 bytes */
            fwrite(payload, 1, len, f);
        fclose(f);
    }
    return path;
}

/* Expects an error code and a message containing needle, *out NULL. */
static void refused(const char *path, int code, const char *needle, const char *what)
{
    weft_tensor *t = (weft_tensor *)1;
    int rc = weft_read_idx(&t, path);
    is_int(rc, code, "%s: %s", what, weft_strerror(code));
    ok(t == NULL, "%s: *out is NULL", what);
    like(weft_last_error(), needle, "%s: the message says '%s'", what, needle);
    if (rc == 0)
        weft_tensor_release(t);
}

int main(void)
{
    if (weft_load_default_plugins() < 0)
        skip_all("no plugins: %s", weft_last_error());
    if (!mkdtemp(dir))
        skip_all("cannot make a temporary directory");
    unsigned char pixels[2 * 3 * 4];
    for (int i = 0; i < 24; i++)
        pixels[i] = (unsigned char)(i * 11);
    const uint32_t img[3] = {2, 3, 4}, lab[1] = {5};
    for (int gz = 0; gz < 2; gz++) {
        weft_tensor *t = NULL;
        const char *p = write_idx(gz ? "img.gz" : "img", 0x08, 3, img, pixels, 24, gz);
        is_int(weft_read_idx(&t, p), 0, "%s 3-d file reads", gz ? "gzip" : "plain");
        if (t) {
            is_int(weft_tensor_ndim(t), 3, "3 dimensions");
            ok(weft_tensor_size(t, 0) == 2 && weft_tensor_size(t, 1) == 3 &&
                   weft_tensor_size(t, 2) == 4,
               "sizes [2, 3, 4]");
            is_int(weft_tensor_dtype(t), WEFT_UINT8, "uint8");
            ok(memcmp(weft_tensor_data_ptr(t), pixels, 24) == 0, "the bytes are the file's");
            weft_tensor_release(t);
        }
    }
    weft_tensor *t = NULL;
    const char *p = write_idx("lab.gz", 0x08, 1, lab, (const unsigned char *)"\1\2\3\4\5", 5, 1);
    is_int(weft_read_idx(&t, p), 0, "1-d labels read");
    if (t) {
        ok(weft_tensor_ndim(t) == 1 && weft_tensor_size(t, 0) == 5 &&
               ((unsigned char *)weft_tensor_data_ptr(t))[4] == 5,
           "5 labels, the last 5");
        weft_tensor_release(t);
    }

    is_int(weft_read_idx(NULL, p), WEFT_EINVAL, "NULL out");
    t = (weft_tensor *)1;
    is_int(weft_read_idx(&t, NULL), WEFT_EINVAL, "NULL path");
    ok(t == NULL, "NULL path: *out is NULL");
    char missing[600];
    snprintf(missing, sizeof missing, "%s/absent.gz", dir);
    refused(missing, WEFT_EIO, "cannot open", "a missing file");
    refused(write_idx("short.gz", 0x08, 3, img, pixels, 23, 1), WEFT_EIO, "truncated",
            "a payload one byte short");
    unsigned char more[25];
    memcpy(more, pixels, 24);
    more[24] = 7;
    refused(write_idx("long.gz", 0x08, 3, img, more, 25, 1), WEFT_EIO, "more data",
            "a byte past the payload");
    refused(write_idx("float.gz", 0x0D, 1, lab, pixels, 20, 1), WEFT_ENOTSUP,
            "element type 0x0d", "float32 elements");
    refused(write_idx("zero.gz", 0x08, 0, lab, NULL, 0, 1), WEFT_EIO, "0 dimensions",
            "zero dimensions");
    const uint32_t huge[2] = {0xFFFFFFFFu, 0xFFFFFFFFu};
    refused(write_idx("huge", 0x08, 2, huge, NULL, 0, 0), WEFT_EIO, "damaged file",
            "sizes of 2^64 bytes");
    char bad[600];
    snprintf(bad, sizeof bad, "%s/magic", dir);
    FILE *f = fopen(bad, "wb");
    fputs("PK\3\4 not an idx file", f);
    fclose(f);
    refused(bad, WEFT_EIO, "not an IDX file", "a bad magic");
    snprintf(bad, sizeof bad, "%s/corrupt.gz", dir);
    f = fopen(bad, "wb");
    fwrite("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage, not deflate", 1, 30, f);
    fclose(f);
    refused(bad, WEFT_EIO, "corrupt.gz", "a corrupt gzip stream");

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
    return done_testing();
}
