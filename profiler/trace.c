/* profiler/trace.c — a session as Chrome trace JSON (the "Trace Event
 * Format" that chrome://tracing and Perfetto read): complete events ("X")
 * for operators, ranges and backward functions, counter events ("C") for
 * the live bytes of each device, flow events ("s" -> "f") from a forward
 * operator to the backward function of the node it recorded, and thread
 * names ("M").  Written to a temporary file beside the target and renamed,
 * so a reader never sees half a trace. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profiler/profiler.h"

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

static double us(const weft_profiler *p, int64_t t)
{
    return (double)(t - p->t0) / 1000.0;
}

/* The track of a device's work (above any Linux thread id). */
static int device_tid(int type, int index)
{
    return 0x7f000000 + type * 256 + (index & 255);
}

static void put_device(FILE *f, int type, int index)
{
    const char *name = weft_device_type_name(type);
    fprintf(f, "\"%s:%d\"", name ? name : "unknown", index);
}

/* "Input Dims" and "Input type" of an operator recorded with its shapes. */
static void put_inputs(FILE *f, const wr_buffer *b, const wr_event *e)
{
    const int64_t *s = b->shapes + (e->shapes - 1);
    int64_t count = *s++;
    const int64_t *first = s;
    fputs(",\"Input Dims\":[", f);
    for (int64_t i = 0; i < count; i++) {
        int64_t nd = s[2];
        fprintf(f, "%s[", i ? "," : "");
        for (int64_t d = 0; d < nd; d++)
            fprintf(f, "%s%lld", d ? "," : "", (long long)s[3 + d]);
        fputc(']', f);
        s += 3 + (nd > 0 ? nd : 0);
    }
    fputs("],\"Input type\":[", f);
    s = first;
    for (int64_t i = 0; i < count; i++) {
        int64_t nd = s[2];
        const char *dt = nd < 0 ? "" : weft_dtype_name((weft_dtype)s[0]);
        fprintf(f, "%s", i ? "," : "");
        put_string(f, dt ? dt : "?");
        s += 3 + (nd > 0 ? nd : 0);
    }
    fputc(']', f);
}

typedef struct link_ref {
    uint64_t seq;
    const wr_buffer *b;
    int32_t event;
} link_ref;

static int cmp_link(const void *x, const void *y)
{
    uint64_t a = ((const link_ref *)x)->seq, c = ((const link_ref *)y)->seq;
    return a < c ? -1 : a > c;
}

static const link_ref *find_link(const link_ref *links, size_t n, uint64_t seq)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (links[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && links[lo].seq == seq ? &links[lo] : NULL;
}

static void write_trace(FILE *f, const weft_profiler *p, const link_ref *links, size_t nlinks)
{
    int pid = (int)getpid();
    uint64_t dropped = 0;
    for (int k = 0; k < p->nbuffers; k++)
        dropped += p->buffers[k]->dropped;
    fprintf(f, "{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":"
               "\"weft\",\"dropped_events\":%llu},\n\"traceEvents\":[\n",
            (unsigned long long)dropped);
    fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":"
               "\"weft\"}}",
            pid);
    /* a name for each device track */
    uint64_t named[WEFT_MAX_DEVICE_TYPES] = {0}; /* bit per index < 64 */
    for (int k = 0; k < p->nbuffers; k++) {
        const wr_buffer *b = p->buffers[k];
        for (int32_t i = 0; i < b->n; i++) {
            const wr_event *e = &b->ev[i];
            if (e->device_start < 0 || e->device_type < 0 || e->device_index >= 64 ||
                (named[e->device_type] >> e->device_index & 1))
                continue;
            named[e->device_type] |= 1ull << e->device_index;
            fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
                       "\"args\":{\"name\":",
                    pid, device_tid(e->device_type, e->device_index));
            const char *dev = weft_device_type_name(e->device_type);
            fprintf(f, "\"%s:%d (device time)\"}}", dev ? dev : "unknown", e->device_index);
        }
    }
    uint64_t flow_id = 0;
    for (int k = 0; k < p->nbuffers; k++) {
        const wr_buffer *b = p->buffers[k];
        unsigned long long tid = (unsigned long long)b->tid;
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%llu,\"args\":"
                   "{\"name\":\"thread %llu\"}}",
                pid, tid, tid);
        for (int32_t i = 0; i < b->n; i++) {
            const wr_event *e = &b->ev[i];
            if (e->kind == WR_MEMORY) {
                fprintf(f, ",\n{\"ph\":\"C\",\"name\":\"Memory ");
                const char *dev = weft_device_type_name(e->device_type);
                fprintf(f, "%s:%d\",\"pid\":%d,\"tid\":%llu,\"ts\":%.3f,\"args\":{\"Total "
                           "Allocated\":%lld},\"id\":%d}",
                        dev ? dev : "unknown", e->device_index, pid, tid, us(p, e->start),
                        (long long)e->live, e->device_type * 65536 + e->device_index);
                /* and the change itself, as torch's "[memory]" instant events */
                fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"cpu_instant_event\",\"name\":"
                           "\"[memory]\",\"pid\":%d,\"tid\":%llu,\"ts\":%.3f,\"args\":{\"Bytes\":%lld,"
                           "\"Total Allocated\":%lld,\"Device\":",
                        pid, tid, us(p, e->start), (long long)e->bytes, (long long)e->live);
                put_device(f, e->device_type, e->device_index);
                fputs("}}", f);
                continue;
            }
            static const char *const cats[] = {"cpu_op", "user_annotation", "backward"};
            fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", cats[e->kind]);
            put_string(f, e->name);
            fprintf(f, ",\"pid\":%d,\"tid\":%llu,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"Depth\":",
                    pid, tid, us(p, e->start), (double)(e->end - e->start) / 1000.0);
            int depth = 0;
            for (int32_t q = e->parent; q >= 0; q = b->ev[q].parent)
                depth++;
            fprintf(f, "%d", depth);
            if (e->device_type >= 0) {
                fputs(",\"Device\":", f);
                put_device(f, e->device_type, e->device_index);
            }
            if (e->shapes)
                put_inputs(f, b, e);
            if (e->kind == WR_BACKWARD)
                fprintf(f, ",\"Sequence number\":%llu", (unsigned long long)e->seq);
            if (e->device_start >= 0)
                fprintf(f, ",\"Device time us\":%.3f",
                        (double)(e->device_end - e->device_start) / 1000.0);
            fputs("}}", f);
            if (e->device_start >= 0) {
                /* the device's work, on a track of its own per device */
                fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":");
                put_string(f, e->name);
                fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"Device\":",
                        pid, device_tid(e->device_type, e->device_index), us(p, e->device_start),
                        (double)(e->device_end - e->device_start) / 1000.0);
                put_device(f, e->device_type, e->device_index);
                fputs("}}", f);
            }
            if (e->kind == WR_BACKWARD) {
                const link_ref *l = find_link(links, nlinks, e->seq);
                if (l) {
                    const wr_event *fwd = &l->b->ev[l->event];
                    flow_id++;
                    fprintf(f, ",\n{\"ph\":\"s\",\"cat\":\"fwdbwd\",\"name\":\"fwdbwd\",\"id\":"
                               "%llu,\"pid\":%d,\"tid\":%llu,\"ts\":%.3f}",
                            (unsigned long long)flow_id, pid, (unsigned long long)l->b->tid,
                            us(p, fwd->start));
                    fprintf(f, ",\n{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"fwdbwd\",\"name\":"
                               "\"fwdbwd\",\"id\":%llu,\"pid\":%d,\"tid\":%llu,\"ts\":%.3f}",
                            (unsigned long long)flow_id, pid, tid, us(p, e->start));
                }
            }
        }
    }
    fputs("\n]}\n", f);
}

static int export_locked(const weft_profiler *p, const char *path);

WEFT_API int weft_profiler_export_chrome_trace(const weft_profiler *p, const char *path)
{
    if (!p || !path)
        return wf__errorf(WEFT_EINVAL, "weft_profiler_export_chrome_trace: %s is NULL",
                          !p ? "the profiler" : "path");
    if (!*path)
        return wf__errorf(WEFT_EINVAL, "weft_profiler_export_chrome_trace: path is empty");
    int rc = wr__lock_idle(p, "weft_profiler_export_chrome_trace");
    if (rc < 0)
        return rc;
    rc = export_locked(p, path);
    wr__unlock(p);
    return rc;
}

static int export_locked(const weft_profiler *p, const char *path)
{
    /* every node's forward operator, sorted by sequence number */
    size_t nlinks = 0;
    for (int k = 0; k < p->nbuffers; k++)
        nlinks += (size_t)p->buffers[k]->nlinks;
    link_ref *links = nlinks ? wf__malloc(nlinks * sizeof *links) : NULL;
    size_t plen = strlen(path);
    char *tmp = wf__malloc(plen + 8);
    if ((nlinks && !links) || !tmp) {
        free(links);
        free(tmp);
        return wf__errorf(WEFT_ENOMEM, "weft_profiler_export_chrome_trace: out of memory");
    }
    size_t j = 0;
    for (int k = 0; k < p->nbuffers; k++)
        for (int32_t i = 0; i < p->buffers[k]->nlinks; i++)
            links[j++] = (link_ref){p->buffers[k]->links[i].seq, p->buffers[k],
                                    p->buffers[k]->links[i].event};
    if (nlinks)
        qsort(links, nlinks, sizeof *links, cmp_link);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".XXXXXX", 8);
    int fd = mkstemp(tmp);
    /* mkstemp makes the file 0600; a trace is no secret (umask is not
     * read: changing it to read it races with other threads) */
    if (fd >= 0)
        fchmod(fd, 0644);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (!f) {
        int err = errno;
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(links);
        free(tmp);
        return wf__errorf(WEFT_EIO, "weft_profiler_export_chrome_trace: cannot write '%s': %s",
                          path, strerror(err));
    }
    write_trace(f, p, links, nlinks);
    free(links);
    int bad = ferror(f);
    int err = bad ? EIO : 0;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    if (!bad && rename(tmp, path) != 0) {
        bad = 1;
        err = errno;
    }
    if (bad) {
        unlink(tmp);
        free(tmp);
        return wf__errorf(WEFT_EIO, "weft_profiler_export_chrome_trace: cannot write '%s': %s",
                          path, strerror(err));
    }
    free(tmp);
    return 0;
}
