/* profiler/table.c — a session's events summed per name (and per input
 * shapes on request), like torch's key_averages(), and printed as its
 * table().  Self time is an event's duration less its children's (events
 * that began inside it on its thread); memory is what the storages
 * allocated and freed while it ran add up to. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/profiler.h"

void wr__format_shapes(const wr_buffer *b, const wr_event *e, char *buf, size_t size)
{
    size_t n = 0;
#define PUT(...)                                                                          \
    do {                                                                                  \
        if (n < size)                                                                     \
            n += (size_t)snprintf(buf + n, size - n, __VA_ARGS__);                        \
    } while (0)
    buf[0] = '\0';
    if (!e->shapes)
        return;
    const int64_t *s = b->shapes + (e->shapes - 1);
    int64_t count = *s++;
    PUT("[");
    for (int64_t i = 0; i < count; i++) {
        int64_t nd = s[2];
        PUT("%s[", i ? ", " : "");
        for (int64_t d = 0; d < nd; d++)
            PUT("%s%lld", d ? ", " : "", (long long)s[3 + d]);
        PUT("]");
        s += 3 + (nd > 0 ? nd : 0);
    }
    PUT("]");
#undef PUT
    if (n >= size && size > 4)
        memcpy(buf + size - 4, "...", 4); /* truncated: say so */
}

/* The rows being summed, found by key through an open-addressing table. */
typedef struct rows {
    weft_profiler_stat *stat;
    int n, cap;
    int *slots; /* row index + 1, 0 empty */
    int nslots;
} rows;

static uint64_t hash2(const char *a, const char *b)
{
    uint64_t h = 1469598103934665603ull;
    for (; *a; a++)
        h = (h ^ (unsigned char)*a) * 1099511628211ull;
    h = (h ^ 1) * 1099511628211ull;
    for (; *b; b++)
        h = (h ^ (unsigned char)*b) * 1099511628211ull;
    return h;
}

static bool rows_grow_slots(rows *r)
{
    int nslots = r->nslots ? 2 * r->nslots : 64;
    int *slots = wf__calloc((size_t)nslots, sizeof *slots);
    if (!slots)
        return false;
    for (int i = 0; i < r->n; i++) {
        uint64_t h = hash2(r->stat[i].name, r->stat[i].input_shapes);
        int j = (int)(h & (uint64_t)(nslots - 1));
        while (slots[j])
            j = (j + 1) & (nslots - 1);
        slots[j] = i + 1;
    }
    free(r->slots);
    r->slots = slots;
    r->nslots = nslots;
    return true;
}

/* The row of (name, shapes), made when new; NULL when out of memory. */
static weft_profiler_stat *row_of(rows *r, const char *name, const char *shapes)
{
    if (2 * (r->n + 1) > r->nslots && !rows_grow_slots(r))
        return NULL;
    uint64_t h = hash2(name, shapes);
    int j = (int)(h & (uint64_t)(r->nslots - 1));
    while (r->slots[j]) {
        weft_profiler_stat *s = &r->stat[r->slots[j] - 1];
        if (strcmp(s->name, name) == 0 && strcmp(s->input_shapes, shapes) == 0)
            return s;
        j = (j + 1) & (r->nslots - 1);
    }
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 32;
        weft_profiler_stat *grown = wf__realloc(r->stat, (size_t)cap * sizeof *grown);
        if (!grown)
            return NULL;
        r->stat = grown;
        r->cap = cap;
    }
    char *nm = wf__strdup(name), *sh = wf__strdup(shapes);
    if (!nm || !sh) {
        free(nm);
        free(sh);
        return NULL;
    }
    weft_profiler_stat *s = &r->stat[r->n];
    memset(s, 0, sizeof *s);
    s->name = nm;
    s->input_shapes = sh;
    r->slots[j] = ++r->n;
    return s;
}

WEFT_API void weft_profiler_stats_free(weft_profiler_stat *stats, int n)
{
    if (!stats)
        return;
    for (int i = 0; i < n; i++) {
        free((char *)stats[i].name);
        free((char *)stats[i].input_shapes);
    }
    free(stats);
}

/* Adds buffer b's events to r.  Children come after their parent in a
 * buffer, so one backward sweep hands each event's time and memory to its
 * parent before the parent is read. */
static int add_buffer(rows *r, const wr_buffer *b, bool by_shape)
{
    if (b->n == 0)
        return 0;
    int64_t *child_ns = wf__calloc((size_t)b->n, sizeof *child_ns);
    int64_t *mem_self = wf__calloc((size_t)b->n, sizeof *mem_self);
    int64_t *mem_total = wf__calloc((size_t)b->n, sizeof *mem_total);
    int rc = 0;
    if (!child_ns || !mem_self || !mem_total) {
        rc = wf__errorf(WEFT_ENOMEM, "weft_profiler_key_averages: out of memory");
        goto out;
    }
    for (int32_t i = b->n - 1; i >= 0; i--) {
        const wr_event *e = &b->ev[i];
        int32_t p = e->parent;
        if (p < 0)
            continue;
        if (e->kind == WR_MEMORY) {
            mem_self[p] += e->bytes;
            mem_total[p] += e->bytes;
        } else {
            child_ns[p] += e->end - e->start;
            mem_total[p] += mem_total[i];
        }
    }
    char shapes[512];
    for (int32_t i = 0; i < b->n; i++) {
        const wr_event *e = &b->ev[i];
        if (e->kind == WR_MEMORY)
            continue;
        if (by_shape)
            wr__format_shapes(b, e, shapes, sizeof shapes);
        else
            shapes[0] = '\0';
        weft_profiler_stat *s = row_of(r, e->name, shapes);
        if (!s) {
            rc = wf__errorf(WEFT_ENOMEM, "weft_profiler_key_averages: out of memory");
            goto out;
        }
        int64_t dur = e->end - e->start;
        s->calls++;
        s->total_us += (double)dur / 1000.0;
        s->self_us += (double)(dur - child_ns[i]) / 1000.0;
        if (e->device_start >= 0)
            s->device_us += (double)(e->device_end - e->device_start) / 1000.0;
        s->memory_bytes += mem_total[i];
        s->self_memory_bytes += mem_self[i];
    }
out:
    free(child_ns);
    free(mem_self);
    free(mem_total);
    return rc;
}

WEFT_API int weft_profiler_key_averages(weft_profiler_stat **out, int *n, const weft_profiler *p,
                                        bool group_by_input_shape)
{
    if (out)
        *out = NULL;
    if (n)
        *n = 0;
    if (!out || !n || !p)
        return wf__errorf(WEFT_EINVAL, "weft_profiler_key_averages: %s is NULL",
                          !p ? "the profiler" : !out ? "out" : "n");
    int rc = wr__lock_idle(p, "weft_profiler_key_averages");
    if (rc < 0)
        return rc;
    rows r = {0};
    for (int k = 0; k < p->nbuffers && rc == 0; k++)
        rc = add_buffer(&r, p->buffers[k], group_by_input_shape);
    wr__unlock(p);
    free(r.slots);
    if (rc < 0) {
        weft_profiler_stats_free(r.stat, r.n);
        return rc;
    }
    *out = r.stat;
    *n = r.n;
    return 0;
}

/* ---------------------------------------------------------- the table */

static const char *const sort_keys[] = {"self_cpu_time_total", "cpu_time_total", "cpu_time",
                                        "count", "cpu_memory_usage", "self_cpu_memory_usage",
                                        "device_time_total", "cuda_time_total"};
enum { N_SORT_KEYS = sizeof sort_keys / sizeof sort_keys[0] };

typedef struct sort_item {
    const weft_profiler_stat *s;
    double v;
    int order; /* ties keep the order of first occurrence */
} sort_item;

static int cmp_item(const void *x, const void *y)
{
    const sort_item *a = x, *b = y;
    if (a->v != b->v)
        return a->v > b->v ? -1 : 1;
    return a->order - b->order;
}

static void format_time(char *buf, size_t size, double t_us)
{
    if (t_us >= 1e6)
        snprintf(buf, size, "%.3fs", t_us / 1e6);
    else if (t_us >= 1e3)
        snprintf(buf, size, "%.3fms", t_us / 1e3);
    else
        snprintf(buf, size, "%.3fus", t_us);
}

static void format_memory(char *buf, size_t size, int64_t bytes)
{
    double a = (double)(bytes < 0 ? -bytes : bytes);
    if (a >= 1024.0 * 1024 * 1024)
        snprintf(buf, size, "%.2f Gb", (double)bytes / (1024.0 * 1024 * 1024));
    else if (a >= 1024.0 * 1024)
        snprintf(buf, size, "%.2f Mb", (double)bytes / (1024.0 * 1024));
    else if (a >= 1024.0)
        snprintf(buf, size, "%.2f Kb", (double)bytes / 1024.0);
    else
        snprintf(buf, size, "%lld b", (long long)bytes);
}

typedef struct text {
    char *buf;
    size_t n, cap;
    bool failed;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    if (t->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(t->buf + t->n, t->cap - t->n, fmt, ap);
        va_end(ap);
        if (w < 0) {
            t->failed = true;
            return;
        }
        if ((size_t)w < t->cap - t->n) {
            t->n += (size_t)w;
            return;
        }
        size_t cap = 2 * t->cap + (size_t)w + 1;
        char *grown = wf__realloc(t->buf, cap);
        if (!grown) {
            t->failed = true;
            return;
        }
        t->buf = grown;
        t->cap = cap;
    }
}

static void rule(text *t, int name_w, int ncols, bool shapes)
{
    for (int i = 0; i < name_w; i++)
        put(t, "-");
    for (int c = 0; c < ncols; c++)
        put(t, "  ------------");
    if (shapes)
        put(t, "  -----------------------------------");
    put(t, "\n");
}

WEFT_API int weft_profiler_table(char **out, const weft_profiler *p, const char *sort_by,
                                 int row_limit, bool group_by_input_shape)
{
    if (out)
        *out = NULL;
    if (!out || !p)
        return wf__errorf(WEFT_EINVAL, "weft_profiler_table: %s is NULL",
                          !out ? "out" : "the profiler");
    int key = -1;
    const char *want = sort_by ? sort_by : sort_keys[0];
    for (int i = 0; i < N_SORT_KEYS; i++)
        if (strcmp(want, sort_keys[i]) == 0)
            key = i;
    if (key < 0)
        return wf__errorf(WEFT_EINVAL,
                          "weft_profiler_table: unknown sort key '%s' (known: "
                          "self_cpu_time_total, cpu_time_total, cpu_time, count, "
                          "cpu_memory_usage, self_cpu_memory_usage, device_time_total, "
                          "cuda_time_total)",
                          want);
    weft_profiler_stat *stats;
    int n;
    int rc = weft_profiler_key_averages(&stats, &n, p, group_by_input_shape);
    if (rc < 0)
        return rc;
    sort_item *items = wf__malloc((size_t)(n ? n : 1) * sizeof *items);
    text t = {wf__malloc(4096), 0, 4096, false};
    if (!items || !t.buf) {
        free(items);
        free(t.buf);
        weft_profiler_stats_free(stats, n);
        return wf__errorf(WEFT_ENOMEM, "weft_profiler_table: out of memory");
    }
    double self_total = 0;
    int name_w = 4;
    for (int i = 0; i < n; i++) {
        self_total += stats[i].self_us;
        int len = (int)strlen(stats[i].name);
        if (len > name_w)
            name_w = len;
        items[i].s = &stats[i];
        items[i].order = i;
    }
    for (int i = 0; i < n; i++) {
        const weft_profiler_stat *s = items[i].s;
        switch (key) {
        case 0: items[i].v = s->self_us; break;
        case 1: items[i].v = s->total_us; break;
        case 2: items[i].v = s->calls ? s->total_us / (double)s->calls : 0; break;
        case 3: items[i].v = (double)s->calls; break;
        case 4: items[i].v = (double)s->memory_bytes; break;
        case 5: items[i].v = (double)s->self_memory_bytes; break;
        default: items[i].v = s->device_us; break;
        }
    }
    qsort(items, (size_t)n, sizeof *items, cmp_item);
    name_w = name_w + 4 > 55 ? 55 : name_w + 4;
    bool mem = p->opts.profile_memory, dev = p->opts.record_device_time;
    int ncols = 6 + (mem ? 2 : 0) + (dev ? 2 : 0);
    rule(&t, name_w, ncols, group_by_input_shape);
    put(&t, "%-*s  %12s  %12s  %12s  %12s  %12s", name_w, "Name", "Self CPU %", "Self CPU",
        "CPU total %", "CPU total", "CPU time avg");
    if (dev)
        put(&t, "  %12s  %12s", "Device total", "Device avg");
    if (mem)
        put(&t, "  %12s  %12s", "CPU Mem", "Self CPU Mem");
    put(&t, "  %12s", "# of Calls");
    if (group_by_input_shape)
        put(&t, "  %-35s", "Input Shapes");
    put(&t, "\n");
    rule(&t, name_w, ncols, group_by_input_shape);
    int shown = row_limit > 0 && row_limit < n ? row_limit : n;
    for (int i = 0; i < shown; i++) {
        const weft_profiler_stat *s = items[i].s;
        char self[32], total[32], avg[32], m1[32], m2[32];
        format_time(self, sizeof self, s->self_us);
        format_time(total, sizeof total, s->total_us);
        format_time(avg, sizeof avg, s->calls ? s->total_us / (double)s->calls : 0);
        double denom = self_total > 0 ? self_total : 1;
        char name[64];
        /* a name longer than the column is cut, as torch cuts it */
        if ((int)strlen(s->name) > name_w)
            snprintf(name, sizeof name, "%.*s...", name_w - 3, s->name);
        else
            snprintf(name, sizeof name, "%s", s->name);
        put(&t, "%-*s  %11.2f%%  %12s  %11.2f%%  %12s  %12s", name_w, name,
            100.0 * s->self_us / denom, self, 100.0 * s->total_us / denom, total, avg);
        if (dev) {
            char dt[32], da[32];
            format_time(dt, sizeof dt, s->device_us);
            format_time(da, sizeof da, s->calls ? s->device_us / (double)s->calls : 0);
            put(&t, "  %12s  %12s", dt, da);
        }
        if (mem) {
            format_memory(m1, sizeof m1, s->memory_bytes);
            format_memory(m2, sizeof m2, s->self_memory_bytes);
            put(&t, "  %12s  %12s", m1, m2);
        }
        put(&t, "  %12lld", (long long)s->calls);
        if (group_by_input_shape)
            put(&t, "  %-35s", s->input_shapes);
        put(&t, "\n");
    }
    rule(&t, name_w, ncols, group_by_input_shape);
    char total[32];
    format_time(total, sizeof total, self_total);
    put(&t, "Self CPU time total: %s\n", total);
    free(items);
    weft_profiler_stats_free(stats, n);
    if (t.failed) {
        free(t.buf);
        return wf__errorf(WEFT_ENOMEM, "weft_profiler_table: out of memory");
    }
    *out = t.buf;
    return 0;
}
