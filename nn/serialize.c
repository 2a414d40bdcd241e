/* nn/serialize.c — saving and loading parameters in weft's own file format
 * (documented in <weft/nn.h> and docs/design.md), with a CRC-32 so that a
 * damaged file is an error, never silently wrong weights; and saving in the
 * safetensors format, which other frameworks read.  A load checks the
 * whole file before it writes any tensor.  libc only: the CRC is our own. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <weft/nn.h>
#include <weft/plugin.h>

#include "nn/parameter_file.h"

#define FILE_MAGIC "WEFTPARM"
#define FILE_VERSION 1u
#define MAX_NAME 4096u

/* ---------------------------------------------------------------- CRC-32 */

/* The reflected polynomial 0xEDB88320 with pre- and post-inversion: the
 * CRC of zlib, gzip and PNG.  The table is built per use (1 KiB, a few
 * microseconds), which keeps this thread-safe without a once-flag. */
typedef struct crc32_state {
    uint32_t table[256];
    uint32_t crc;
} crc32_state;

static void crc32_init(crc32_state *c)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t r = i;
        for (int k = 0; k < 8; k++)
            r = (r >> 1) ^ (0xEDB88320u & (0u - (r & 1u)));
        c->table[i] = r;
    }
    c->crc = 0xFFFFFFFFu;
}

static void crc32_update(crc32_state *c, const void *data, size_t len)
{
    const unsigned char *p = data;
    uint32_t r = c->crc;
    for (size_t i = 0; i < len; i++)
        r = c->table[(r ^ p[i]) & 0xFFu] ^ (r >> 8);
    c->crc = r;
}

static uint32_t crc32_final(const crc32_state *c)
{
    return c->crc ^ 0xFFFFFFFFu;
}

/* ------------------------------------------------------------ byte order */

static bool host_is_little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* The unit whose bytes are swapped on a big-endian host: the element, or
 * each half of a complex element. */
static size_t swap_unit(weft_dtype dtype)
{
    size_t size = weft_dtype_size(dtype);
    return weft_dtype_is_complex(dtype) ? size / 2 : size;
}

/* Reverses the bytes of every unit-sized group of data[0..len). */
static void swap_bytes(unsigned char *data, size_t len, size_t unit)
{
    for (size_t at = 0; unit > 1 && at + unit <= len; at += unit)
        for (size_t i = 0, j = unit - 1; i < j; i++, j--) {
            unsigned char t = data[at + i];
            data[at + i] = data[at + j];
            data[at + j] = t;
        }
}

static void format_shape(char *buf, size_t size, const int64_t *sizes, int ndim)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "",
                                 (long long)sizes[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
}

/* ----------------------------------------------------------------- save */

typedef struct writer {
    FILE *f;
    crc32_state crc;
    bool failed;
} writer;

static void write_bytes(writer *w, const void *data, size_t len)
{
    if (w->failed || len == 0)
        return;
    crc32_update(&w->crc, data, len);
    if (fwrite(data, 1, len, w->f) != len)
        w->failed = true;
}

static void write_u32(writer *w, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    write_bytes(w, b, 4);
}

static void write_i64(writer *w, int64_t v)
{
    write_u32(w, (uint32_t)((uint64_t)v & 0xFFFFFFFFu));
    write_u32(w, (uint32_t)((uint64_t)v >> 32));
}

/* The elements of a host contiguous tensor, little-endian. */
static void write_elements(writer *w, const weft_tensor *host)
{
    weft_dtype dtype = weft_tensor_dtype(host);
    size_t len = (size_t)weft_tensor_numel(host) * weft_dtype_size(dtype);
    const unsigned char *data = weft_tensor_data_ptr(host);
    if (host_is_little_endian() || swap_unit(dtype) == 1) {
        write_bytes(w, data, len);
        return;
    }
    unsigned char chunk[4096]; /* a multiple of every element size */
    for (size_t at = 0; at < len; at += sizeof chunk) {
        size_t part = len - at < sizeof chunk ? len - at : sizeof chunk;
        memcpy(chunk, data + at, part);
        swap_bytes(chunk, part, swap_unit(dtype));
        write_bytes(w, chunk, part);
    }
}

static int check_save_args(const char *who, weft_tensor *const *tensors, const char *const *names,
                           int n)
{
    if (n < 0 || (n > 0 && (!tensors || !names)))
        return weft_set_error(WEFT_EINVAL, "%s: %d tensors, tensors %p, names %p", who, n,
                              (const void *)tensors, (const void *)names);
    for (int i = 0; i < n; i++) {
        if (!tensors[i] || !names[i] || !names[i][0] || strlen(names[i]) > MAX_NAME)
            return weft_set_error(WEFT_EINVAL,
                                  "%s: entry %d needs a tensor and a name of 1 to %u bytes", who,
                                  i, MAX_NAME);
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return weft_set_error(WEFT_EINVAL, "%s: name '%s' given twice", who, names[i]);
    }
    return 0;
}

/* One tensor's record: name, dtype, shape, elements. */
static int write_tensor(writer *w, const weft_tensor *t, const char *name)
{
    weft_tensor *host = NULL, *dense = NULL;
    int rc = weft_to_device(&host, t, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_contiguous(&dense, host);
    if (rc == 0) {
        int ndim = weft_tensor_ndim(dense);
        write_u32(w, (uint32_t)strlen(name));
        write_bytes(w, name, strlen(name));
        write_u32(w, (uint32_t)weft_tensor_dtype(dense));
        write_u32(w, (uint32_t)ndim);
        for (int d = 0; d < ndim; d++)
            write_i64(w, weft_tensor_sizes(dense)[d]);
        write_elements(w, dense);
    }
    weft_tensor_release(host);
    weft_tensor_release(dense);
    return rc;
}

/* What a file's content is written by: the entries, already checked. */
typedef struct save_job {
    weft_tensor *const *tensors;
    const char *const *names;
    int n;
} save_job;

/* Writes a file through body beside path and renames it over path, so that
 * path is never left half-written; grad mode is off meanwhile (the host
 * copies record nothing).  who names the public function in errors. */
static int save_atomically(const char *path, const char *who, const save_job *job,
                           int (*body)(writer *w, const save_job *job))
{
    if (!path)
        return weft_set_error(WEFT_EINVAL, "%s: NULL path", who);
    int rc = check_save_args(who, job->tensors, job->names, job->n);
    if (rc < 0)
        return rc;
    size_t len = strlen(path);
    char *tmp = weft_malloc(len + 5);
    if (!tmp)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", who);
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp", 5);
    writer w = {.f = fopen(tmp, "wb")};
    if (!w.f) {
        rc = weft_set_error(WEFT_EIO, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    crc32_init(&w.crc);
    bool mode = weft_set_grad_enabled(false);
    rc = body(&w, job);
    weft_set_grad_enabled(mode);
    int write_errno = errno;
    if (fclose(w.f) != 0) {
        w.failed = true;
        write_errno = errno;
    }
    if (rc == 0 && w.failed)
        rc = weft_set_error(WEFT_EIO, "cannot write %s: %s", tmp, strerror(write_errno));
    if (rc == 0 && rename(tmp, path) != 0)
        rc = weft_set_error(WEFT_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (rc < 0)
        remove(tmp);
    free(tmp);
    return rc;
}

static int parameter_file_body(writer *w, const save_job *job)
{
    int rc = 0;
    write_bytes(w, FILE_MAGIC, 8);
    write_u32(w, FILE_VERSION);
    write_u32(w, (uint32_t)job->n);
    for (int i = 0; i < job->n && rc == 0; i++)
        rc = write_tensor(w, job->tensors[i], job->names[i]);
    write_u32(w, crc32_final(&w->crc));
    return rc;
}

int weft_save_parameters(const char *path, weft_tensor *const *tensors, const char *const *names,
                         int n)
{
    save_job job = {tensors, names, n};
    return save_atomically(path, "weft_save_parameters", &job, parameter_file_body);
}

/* ----------------------------------------------------------- safetensors */

/* safetensors' dtype names; NULL where the format has none */
static const char *const safetensors_dtypes[WEFT_NUM_DTYPES] = {
    [WEFT_BOOL] = "BOOL", [WEFT_UINT8] = "U8",     [WEFT_INT8] = "I8",     [WEFT_INT16] = "I16",
    [WEFT_INT32] = "I32", [WEFT_INT64] = "I64",    [WEFT_FLOAT16] = "F16", [WEFT_BFLOAT16] = "BF16",
    [WEFT_FLOAT32] = "F32", [WEFT_FLOAT64] = "F64"};

/* name as a JSON string: quotes and backslashes escaped, control bytes as
 * \u00XX; other bytes (UTF-8) as they are */
static void json_string(FILE *f, const char *name)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

/* The JSON header: one entry per tensor, its elements laid out in the
 * given order from offset 0; spaces pad it to a multiple of 8 bytes so
 * that the data is aligned, as the format recommends. */
static int safetensors_header(const save_job *job, char **text, size_t *len)
{
    FILE *f = open_memstream(text, len);
    if (!f)
        return weft_set_error(WEFT_ENOMEM, "weft_save_safetensors: out of memory");
    uint64_t offset = 0;
    fputc('{', f);
    for (int i = 0; i < job->n; i++) {
        const weft_tensor *t = job->tensors[i];
        weft_dtype dtype = weft_tensor_dtype(t);
        uint64_t bytes = (uint64_t)weft_tensor_numel(t) * weft_dtype_size(dtype);
        if (i > 0)
            fputc(',', f);
        json_string(f, job->names[i]);
        fprintf(f, ":{\"dtype\":\"%s\",\"shape\":[", safetensors_dtypes[dtype]);
        for (int d = 0; d < weft_tensor_ndim(t); d++)
            fprintf(f, "%s%" PRId64, d ? "," : "", weft_tensor_sizes(t)[d]);
        fprintf(f, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", offset, offset + bytes);
        offset += bytes;
    }
    fputc('}', f);
    while (ftell(f) % 8 != 0)
        fputc(' ', f);
    if (fclose(f) != 0) {
        free(*text);
        *text = NULL;
        return weft_set_error(WEFT_ENOMEM, "weft_save_safetensors: out of memory");
    }
    return 0;
}

static int safetensors_body(writer *w, const save_job *job)
{
    char *header = NULL;
    size_t len = 0;
    int rc = safetensors_header(job, &header, &len);
    if (rc < 0)
        return rc;
    write_u32(w, (uint32_t)((uint64_t)len & 0xFFFFFFFFu));
    write_u32(w, (uint32_t)((uint64_t)len >> 32));
    write_bytes(w, header, len);
    free(header);
    for (int i = 0; i < job->n && rc == 0; i++) {
        weft_tensor *host = NULL, *dense = NULL;
        rc = weft_to_device(&host, job->tensors[i], WEFT_DEVICE_CPU);
        if (rc == 0)
            rc = weft_contiguous(&dense, host);
        if (rc == 0)
            write_elements(w, dense);
        weft_tensor_release(host);
        weft_tensor_release(dense);
    }
    return rc;
}

int weft_save_safetensors(const char *path, weft_tensor *const *tensors, const char *const *names,
                          int n)
{
    save_job job = {tensors, names, n};
    int rc = check_save_args("weft_save_safetensors", tensors, names, n);
    for (int i = 0; rc == 0 && i < n; i++) {
        weft_dtype dtype = weft_tensor_dtype(tensors[i]);
        if (!safetensors_dtypes[dtype])
            rc = weft_set_error(WEFT_EDTYPE, "weft_save_safetensors: '%s' is %s, which safetensors "
                                "has no dtype for", names[i], weft_dtype_name(dtype));
    }
    if (rc < 0)
        return rc;
    return save_atomically(path, "weft_save_safetensors", &job, safetensors_body);
}

/* ----------------------------------------------------------------- load */

/* One tensor as the file describes it; pointers into the file's bytes. */
typedef struct record {
    const char *name;
    uint32_t name_len;
    weft_dtype dtype;
    int ndim;
    int64_t sizes[WEFT_MAX_DIMS];
    const unsigned char *data;
    size_t nbytes;
} record;

typedef struct reader {
    const char *path;
    const unsigned char *bytes;
    size_t len, pos;
} reader;

static int truncated(const reader *r, uint32_t index, const char *what)
{
    return weft_set_error(WEFT_EIO,
                          "%s: truncated or damaged: it ends (at %zu bytes) inside tensor %u's %s",
                          r->path, r->len, index, what);
}

static bool take(reader *r, size_t n, const unsigned char **at)
{
    if (r->len - r->pos < n)
        return false;
    *at = r->bytes + r->pos;
    r->pos += n;
    return true;
}

static bool take_u32(reader *r, uint32_t *v)
{
    const unsigned char *b;
    if (!take(r, 4, &b))
        return false;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return true;
}

static bool take_i64(reader *r, int64_t *v)
{
    uint32_t lo, hi;
    if (!take_u32(r, &lo) || !take_u32(r, &hi))
        return false;
    *v = (int64_t)((uint64_t)hi << 32 | lo);
    return true;
}

/* Parses record `index` at r's position, checking every length against the
 * bytes that are there. */
static int parse_record(reader *r, uint32_t index, record *rec)
{
    uint32_t name_len, dtype, ndim;
    const unsigned char *name;
    if (!take_u32(r, &name_len))
        return truncated(r, index, "name length");
    if (name_len == 0 || name_len > MAX_NAME)
        return weft_set_error(WEFT_EIO, "%s: damaged: tensor %u has a name of %u bytes", r->path,
                              index, name_len);
    if (!take(r, name_len, &name))
        return truncated(r, index, "name");
    /* names are C strings: one with a NUL inside would be read as a shorter
     * name by the optimizer-state reader (and never match in a load) */
    if (memchr(name, '\0', name_len))
        return weft_set_error(WEFT_EIO, "%s: damaged: tensor %u's name has a NUL byte", r->path,
                              index);
    if (!take_u32(r, &dtype) || !take_u32(r, &ndim))
        return truncated(r, index, "dtype and rank");
    if (dtype >= WEFT_NUM_DTYPES || ndim > WEFT_MAX_DIMS)
        return weft_set_error(WEFT_EIO, "%s: damaged: tensor %u has dtype %u and %u dimensions",
                              r->path, index, dtype, ndim);
    rec->name = (const char *)name;
    rec->name_len = name_len;
    rec->dtype = (weft_dtype)dtype;
    rec->ndim = (int)ndim;
    uint64_t numel = 1;
    bool overflow = false;
    for (int d = 0; d < rec->ndim; d++) {
        if (!take_i64(r, &rec->sizes[d]))
            return truncated(r, index, "sizes");
        if (rec->sizes[d] < 0)
            return weft_set_error(WEFT_EIO, "%s: damaged: tensor %u has a negative size", r->path,
                                  index);
        overflow |= __builtin_mul_overflow(numel, (uint64_t)rec->sizes[d], &numel);
    }
    overflow |= __builtin_mul_overflow(numel, (uint64_t)weft_dtype_size(rec->dtype), &numel);
    if (overflow || numel > SIZE_MAX)
        return weft_set_error(WEFT_EIO, "%s: damaged: tensor %u's size overflows", r->path, index);
    rec->nbytes = (size_t)numel;
    if (!take(r, rec->nbytes, &rec->data))
        return truncated(r, index, "elements");
    return 0;
}

/* Reads the whole file; checks magic, version, structure and checksum.
 * On success *records holds *count parsed records. */
static int parse_file(reader *r, record **records, uint32_t *count)
{
    const unsigned char *magic;
    uint32_t version = 0;
    *records = NULL;
    if (r->len < 16)
        return weft_set_error(WEFT_EIO, "%s: truncated: %zu bytes, shorter than the 16-byte header",
                              r->path, r->len);
    if (!take(r, 8, &magic) || memcmp(magic, FILE_MAGIC, 8) != 0)
        return weft_set_error(WEFT_EIO, "%s: not a weft parameter file (no \"%s\" magic)",
                              r->path, FILE_MAGIC);
    take_u32(r, &version);
    take_u32(r, count);
    if (version != FILE_VERSION)
        return weft_set_error(WEFT_EIO, "%s: unsupported format version %u (this library reads %u)",
                              r->path, version, FILE_VERSION);
    /* every record takes at least 13 bytes: no huge allocation from a
     * damaged count */
    if (*count > (r->len - r->pos) / 13)
        return weft_set_error(WEFT_EIO, "%s: truncated or damaged: %u tensors cannot fit in %zu bytes",
                              r->path, *count, r->len);
    *records = weft_calloc(*count ? *count : 1, sizeof **records);
    if (!*records)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", r->path);
    for (uint32_t i = 0; i < *count; i++) {
        int rc = parse_record(r, i, &(*records)[i]);
        if (rc < 0)
            return rc;
    }
    size_t body = r->pos;
    uint32_t stored;
    if (!take_u32(r, &stored))
        return weft_set_error(WEFT_EIO, "%s: truncated: the checksum is missing", r->path);
    if (r->pos != r->len)
        return weft_set_error(WEFT_EIO, "%s: damaged: %zu unexpected bytes after the checksum",
                              r->path, r->len - r->pos);
    crc32_state crc;
    crc32_init(&crc);
    crc32_update(&crc, r->bytes, body);
    if (crc32_final(&crc) != stored)
        return weft_set_error(WEFT_EIO, "%s: checksum mismatch (stored %08x, computed %08x): the "
                              "file is damaged",
                              r->path, stored, crc32_final(&crc));
    return 0;
}

/* The most read from a file that is not a regular one (a pipe, a device),
 * whose length fstat cannot tell: without a limit /dev/zero would be read
 * until the allocator gives up. */
#define STREAM_LIMIT ((size_t)1 << 30)

/* Reads up to want bytes into buf; *got is how many came (fewer at the end
 * of the file). */
static int read_up_to(FILE *f, const char *path, unsigned char *buf, size_t want, size_t *got)
{
    *got = fread(buf, 1, want, f);
    if (*got < want && ferror(f))
        return weft_set_error(WEFT_EIO, "cannot read %s: %s", path, strerror(errno));
    return 0;
}

/* A regular file is read up to the size fstat gives (one byte more tells
 * that it grew meanwhile); anything else must start with the magic, so that
 * /dev/zero or /dev/urandom is refused after 16 bytes, and may then be read
 * up to STREAM_LIMIT. */
static int read_stream(FILE *f, const char *path, bool regular, size_t expected,
                       unsigned char **bytes, size_t *len)
{
    size_t cap = regular ? expected + 1 : 16, used = 0, got;
    unsigned char *buf = weft_malloc(cap);
    if (!buf)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory for its %zu bytes", path, cap);
    int rc = read_up_to(f, path, buf, cap, &used);
    if (rc == 0 && regular && used > expected)
        rc = weft_set_error(WEFT_EIO, "%s: it grew past its %zu bytes while being read", path,
                            expected);
    if (rc == 0 && !regular && used == cap && memcmp(buf, FILE_MAGIC, 8) != 0)
        rc = weft_set_error(WEFT_EIO, "%s: not a weft parameter file (no \"%s\" magic)", path,
                            FILE_MAGIC);
    while (rc == 0 && !regular && used == cap) {
        if (cap >= STREAM_LIMIT) {
            rc = weft_set_error(WEFT_EIO, "%s: not a regular file, and longer than the %zu MiB "
                                "read from one: save it to a regular file", path,
                                STREAM_LIMIT >> 20);
            break;
        }
        size_t grown_cap = cap < (1 << 16) ? 1 << 16 : 2 * cap;
        unsigned char *grown = weft_realloc(buf, grown_cap);
        if (!grown) {
            rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory after %zu bytes", path, used);
            break;
        }
        buf = grown;
        cap = grown_cap;
        rc = read_up_to(f, path, buf + used, cap - used, &got);
        used += got;
    }
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *bytes = buf;
    *len = used;
    return 0;
}

static int read_whole_file(const char *path, unsigned char **bytes, size_t *len)
{
    *bytes = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return weft_set_error(WEFT_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fileno(f), &st) != 0)
        rc = weft_set_error(WEFT_EIO, "cannot stat %s: %s", path, strerror(errno));
    else if (S_ISDIR(st.st_mode))
        rc = weft_set_error(WEFT_EIO, "cannot read %s: it is a directory", path);
    else if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size >= SIZE_MAX)
        rc = weft_set_error(WEFT_ENOMEM, "%s: its %jd bytes do not fit in memory", path,
                            (intmax_t)st.st_size);
    else
        rc = read_stream(f, path, S_ISREG(st.st_mode), (size_t)st.st_size, bytes, len);
    fclose(f);
    return rc;
}

static const record *find_record(const record *records, uint32_t count, const char *name)
{
    size_t len = strlen(name);
    for (uint32_t i = 0; i < count; i++)
        if (records[i].name_len == len && memcmp(records[i].name, name, len) == 0)
            return &records[i];
    return NULL;
}

/* Checks that record rec fits tensor t (dtype and shape). */
static int check_match(const char *path, const char *name, const record *rec, const weft_tensor *t)
{
    if (rec->dtype != weft_tensor_dtype(t))
        return weft_set_error(WEFT_EDTYPE, "%s: tensor '%s' is %s in the file but %s in memory",
                              path, name, weft_dtype_name(rec->dtype),
                              weft_dtype_name(weft_tensor_dtype(t)));
    int ndim = weft_tensor_ndim(t);
    bool same = ndim == rec->ndim;
    for (int d = 0; same && d < ndim; d++)
        same = weft_tensor_sizes(t)[d] == rec->sizes[d];
    if (!same) {
        char want[512], got[512];
        format_shape(got, sizeof got, rec->sizes, rec->ndim);
        format_shape(want, sizeof want, weft_tensor_sizes(t), ndim);
        return weft_set_error(WEFT_ESHAPE, "%s: tensor '%s' has shape %s in the file but %s in memory",
                              path, name, got, want);
    }
    if (weft_tensor_is_read_only(t))
        return weft_set_error(WEFT_EINVAL, "tensor '%s' is read-only", name);
    return 0;
}

/* Matches the file's records with the requested names: exactly the same
 * set, each with the right dtype and shape. */
static int match_records(const char *path, const record *records, uint32_t count,
                         weft_tensor *const *tensors, const char *const *names, int n,
                         const record **matched)
{
    for (int i = 0; i < n; i++) {
        if (!tensors[i] || !names[i])
            return weft_set_error(WEFT_EINVAL, "weft_load_parameters: entry %d is NULL", i);
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return weft_set_error(WEFT_EINVAL, "weft_load_parameters: name '%s' given twice",
                                      names[i]);
        matched[i] = find_record(records, count, names[i]);
        if (!matched[i])
            return weft_set_error(WEFT_ENOTFOUND, "%s: has no tensor '%s'", path, names[i]);
        int rc = check_match(path, names[i], matched[i], tensors[i]);
        if (rc < 0)
            return rc;
    }
    if (count != (uint32_t)n) {
        /* every name was found, so some record was not asked for */
        for (uint32_t k = 0; k < count; k++) {
            bool wanted = false;
            for (int i = 0; i < n && !wanted; i++)
                wanted = matched[i] == &records[k];
            if (!wanted)
                return weft_set_error(WEFT_ENOTFOUND,
                                      "%s: holds %u tensors but %d were asked for; '%.*s' was not",
                                      path, count, n, (int)records[k].name_len, records[k].name);
        }
    }
    return 0;
}

/* A tensor on t's device holding rec's elements. */
static int stage_record(weft_tensor **out, const record *rec, const weft_tensor *t)
{
    weft_tensor *host = NULL;
    int rc = weft_empty(&host, rec->sizes, rec->ndim, rec->dtype, WEFT_DEVICE_CPU);
    if (rc < 0)
        return rc;
    if (rec->nbytes) {
        memcpy(weft_tensor_data_ptr(host), rec->data, rec->nbytes);
        if (!host_is_little_endian())
            swap_bytes(weft_tensor_data_ptr(host), rec->nbytes, swap_unit(rec->dtype));
    }
    rc = weft_to_device(out, host, weft_tensor_device(t));
    weft_tensor_release(host);
    return rc;
}

int weft_load_parameters(const char *path, weft_tensor *const *tensors, const char *const *names,
                         int n)
{
    if (!path || n < 0 || (n > 0 && (!tensors || !names)))
        return weft_set_error(WEFT_EINVAL, "weft_load_parameters: NULL path or arrays, or n %d", n);
    reader r = {.path = path};
    unsigned char *bytes;
    int rc = read_whole_file(path, &bytes, &r.len);
    if (rc < 0)
        return rc;
    r.bytes = bytes;
    record *records = NULL;
    uint32_t count = 0;
    const record **matched = weft_calloc((size_t)n + 1, sizeof *matched);
    weft_tensor **staged = weft_calloc((size_t)n + 1, sizeof *staged);
    if (!matched || !staged)
        rc = weft_set_error(WEFT_ENOMEM, "weft_load_parameters: out of memory");
    if (rc == 0)
        rc = parse_file(&r, &records, &count);
    if (rc == 0)
        rc = match_records(path, records, count, tensors, names, n, matched);
    /* every copy is made before the first tensor is written */
    for (int i = 0; i < n && rc == 0; i++)
        rc = stage_record(&staged[i], matched[i], tensors[i]);
    bool mode = weft_set_grad_enabled(false);
    for (int i = 0; i < n && rc == 0; i++)
        rc = weft_copy_(tensors[i], staged[i]);
    weft_set_grad_enabled(mode);
    for (int i = 0; staged && i < n; i++)
        weft_tensor_release(staged[i]);
    free(staged);
    free(matched);
    free(records);
    free(bytes);
    return rc;
}

void wn__named_tensors_free(wf_named_tensor *list, int n)
{
    for (int i = 0; list && i < n; i++) {
        free(list[i].name);
        weft_tensor_release(list[i].tensor);
    }
    free(list);
}

int wn__read_parameter_file(const char *path, wf_named_tensor **out, int *n)
{
    *out = NULL;
    *n = 0;
    reader r = {.path = path};
    unsigned char *bytes;
    int rc = read_whole_file(path, &bytes, &r.len);
    if (rc < 0)
        return rc;
    r.bytes = bytes;
    record *records = NULL;
    uint32_t count = 0;
    rc = parse_file(&r, &records, &count);
    wf_named_tensor *list = rc == 0 ? weft_calloc(count ? count : 1, sizeof *list) : NULL;
    if (rc == 0 && !list)
        rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory", path);
    weft_tensor *host_like = NULL;
    for (uint32_t i = 0; i < count && rc == 0; i++) {
        list[i].name = weft_malloc(records[i].name_len + 1);
        if (!list[i].name) {
            rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory", path);
            break;
        }
        memcpy(list[i].name, records[i].name, records[i].name_len);
        list[i].name[records[i].name_len] = '\0';
        /* staged against a host tensor, so the copy stays on the host */
        if (!host_like)
            rc = weft_empty(&host_like, NULL, 0, WEFT_FLOAT32, WEFT_DEVICE_CPU);
        if (rc == 0)
            rc = stage_record(&list[i].tensor, &records[i], host_like);
    }
    weft_tensor_release(host_like);
    free(records);
    free(bytes);
    if (rc < 0) {
        wn__named_tensors_free(list, (int)count);
        return rc;
    }
    *out = list;
    *n = (int)count;
    return 0;
}
