/* nn/idx.c — reading the IDX files that MNIST-style datasets ship
 * (Debian's dataset-fashion-mnist installs them gzip-compressed), for
 * weft-train and weft.datasets alike, so there is one decoder.  zlib's
 * gzread reads a plain file as it is, so compressed and uncompressed files
 * take the same path.  The whole file is checked (magic, sizes, length, no
 * bytes past the last element) before the tensor is handed out. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <zlib.h>

#include <weft/nn.h>
#include <weft/plugin.h>

/* An MNIST file holds 70,000 28x28 images (55 MB); 4 GiB leaves room for
 * larger IDX sets while refusing a corrupt header that claims terabytes
 * before any allocation is tried. */
#define MAX_IDX_BYTES ((uint64_t)1 << 32)

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads exactly len bytes; gzread takes an unsigned count, so large
 * payloads go in 1 GiB pieces. */
static int read_exact(gzFile f, void *buf, uint64_t len, const char *path, const char *what)
{
    unsigned char *p = buf;
    uint64_t done = 0;
    while (done < len) {
        uint64_t left = len - done;
        unsigned piece = left > (1u << 30) ? (1u << 30) : (unsigned)left;
        int got = gzread(f, p + done, piece);
        if (got < 0) {
            int zerr = 0;
            const char *msg = gzerror(f, &zerr);
            return weft_set_error(WEFT_EIO, "weft_read_idx: %s: cannot read the %s: %s", path,
                                  what, zerr == Z_ERRNO ? strerror(errno) : msg);
        }
        if (got == 0)
            return weft_set_error(WEFT_EIO,
                                  "weft_read_idx: %s: truncated: the %s needs %" PRIu64
                                  " bytes, the file ends after %" PRIu64,
                                  path, what, len, done);
        done += (uint64_t)got;
    }
    return 0;
}

static int read_file(weft_tensor **out, gzFile f, const char *path)
{
    unsigned char head[4], dims[4 * 255];
    int rc = read_exact(f, head, 4, path, "header");
    if (rc < 0)
        return rc;
    if (head[0] != 0 || head[1] != 0)
        return weft_set_error(WEFT_EIO,
                              "weft_read_idx: %s: not an IDX file (magic %02x %02x %02x %02x; "
                              "an IDX file starts with two zero bytes)",
                              path, head[0], head[1], head[2], head[3]);
    if (head[2] != 0x08)
        return weft_set_error(WEFT_ENOTSUP,
                              "weft_read_idx: %s: element type 0x%02x; only unsigned bytes "
                              "(0x08, as MNIST's images and labels) are read",
                              path, head[2]);
    int ndim = head[3];
    if (ndim < 1 || ndim > WEFT_MAX_DIMS)
        return weft_set_error(WEFT_EIO, "weft_read_idx: %s: %d dimensions (1 to %d are read)",
                              path, ndim, WEFT_MAX_DIMS);
    if ((rc = read_exact(f, dims, 4u * (unsigned)ndim, path, "sizes")) < 0)
        return rc;
    int64_t sizes[WEFT_MAX_DIMS];
    uint64_t bytes = 1;
    for (int d = 0; d < ndim; d++) {
        sizes[d] = be32(dims + 4 * d);
        bytes *= (uint64_t)sizes[d];
        if (bytes > MAX_IDX_BYTES)
            return weft_set_error(WEFT_EIO,
                                  "weft_read_idx: %s: the header's sizes make more than %" PRIu64
                                  " bytes (a damaged file?)",
                                  path, MAX_IDX_BYTES);
    }
    weft_tensor *t = NULL;
    if ((rc = weft_empty(&t, sizes, ndim, WEFT_UINT8, WEFT_DEVICE_CPU)) < 0)
        return rc;
    if ((rc = read_exact(f, weft_tensor_data_ptr(t), bytes, path, "elements")) == 0) {
        unsigned char extra;
        int got = gzread(f, &extra, 1);
        if (got != 0)
            rc = weft_set_error(WEFT_EIO,
                                "weft_read_idx: %s: %s after the %" PRIu64
                                " bytes of elements the header announces",
                                path, got > 0 ? "more data" : "a read error", bytes);
    }
    if (rc < 0) {
        weft_tensor_release(t);
        return rc;
    }
    *out = t;
    return 0;
}

int weft_read_idx(weft_tensor **out, const char *path)
{
    if (out)
        *out = NULL;
    if (!out || !path)
        return weft_set_error(WEFT_EINVAL, "weft_read_idx: NULL %s", out ? "path" : "out");
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return weft_set_error(WEFT_EIO, "weft_read_idx: cannot open %s: %s", path,
                              errno ? strerror(errno) : "out of memory");
    int rc = read_file(out, f, path);
    gzclose(f);
    return rc;
}
