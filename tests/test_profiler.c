/* tests/test_profiler.c — the profiler (issue 19): the Chrome trace of a
 * known program, parsed back as JSON and checked (which operators, how
 * many, nested ranges, shapes, forward-to-backward flows, memory counters
 * that return to their start once the tensors die), the tables' totals
 * against the trace's, profiling from two threads at once (one session
 * each and one shared), a thread that exits while recording, and the
 * errors: started twice, stopped where not started, a pop without a push,
 * an unwritable path (no file left behind), reading a session that still
 * records. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <weft/ops.h>
#include <weft/plugin.h>
#include <weft/profiler.h>
#include <weft/weft.h>

#include "tap.h"
#include "tests/dir_entries.h"
#include "tests/host_device.h"

/* ------------------------------------------------ a small JSON reader */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };
typedef struct jv {
    int type;
    double num;
    char *str;
    struct jv *items; /* array items or object values */
    char **keys;      /* object keys */
    int n;
} jv;

static void jfree(jv *v)
{
    free(v->str);
    for (int i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

static void jws(const char **p)
{
    while (**p == ' ' || **p == '\n' || **p == '\t' || **p == '\r')
        (*p)++;
}

static int jparse(const char **p, jv *out);

static int jstring(const char **p, char **out)
{
    if (**p != '"')
        return -1;
    (*p)++;
    size_t cap = 16, n = 0;
    char *s = malloc(cap);
    while (**p && **p != '"') {
        char c = **p;
        if (c == '\\') {
            (*p)++;
            c = **p;
            if (c == 'u') { /* only what the writer emits: \u00XX */
                unsigned v;
                if (sscanf(*p + 1, "%4x", &v) != 1) {
                    free(s);
                    return -1;
                }
                c = (char)v;
                *p += 4;
            } else if (c == 'n') {
                c = '\n';
            } else if (c != '"' && c != '\\' && c != '/') {
                free(s);
                return -1;
            }
        }
        if (n + 2 > cap)
            s = realloc(s, cap *= 2);
        s[n++] = c;
        (*p)++;
    }
    if (**p != '"') {
        free(s);
        return -1;
    }
    (*p)++;
    s[n] = '\0';
    *out = s;
    return 0;
}

static int jparse(const char **p, jv *out)
{
    memset(out, 0, sizeof *out);
    jws(p);
    if (**p == '{' || **p == '[') {
        bool obj = **p == '{';
        out->type = obj ? J_OBJ : J_ARR;
        (*p)++;
        jws(p);
        int cap = 0;
        if (**p == (obj ? '}' : ']')) {
            (*p)++;
            return 0;
        }
        for (;;) {
            if (out->n == cap) {
                cap = cap ? 2 * cap : 8;
                out->items = realloc(out->items, (size_t)cap * sizeof *out->items);
                if (obj)
                    out->keys = realloc(out->keys, (size_t)cap * sizeof *out->keys);
            }
            jws(p);
            if (obj) {
                if (jstring(p, &out->keys[out->n]) < 0)
                    return -1;
                jws(p);
                if (**p != ':')
                    return -1;
                (*p)++;
            }
            if (jparse(p, &out->items[out->n]) < 0) {
                out->n++;
                return -1;
            }
            out->n++;
            jws(p);
            if (**p == ',') {
                (*p)++;
                continue;
            }
            if (**p == (obj ? '}' : ']')) {
                (*p)++;
                return 0;
            }
            return -1;
        }
    }
    if (**p == '"') {
        out->type = J_STR;
        return jstring(p, &out->str);
    }
    if (strncmp(*p, "true", 4) == 0 || strncmp(*p, "false", 5) == 0) {
        out->type = J_BOOL;
        out->num = **p == 't';
        *p += **p == 't' ? 4 : 5;
        return 0;
    }
    if (strncmp(*p, "null", 4) == 0) {
        *p += 4;
        return 0;
    }
    char *end;
    out->type = J_NUM;
    out->num = strtod(*p, &end);
    if (end == *p)
        return -1;
    *p = end;
    return 0;
}

static const jv *jget(const jv *o, const char *key)
{
    if (!o || o->type != J_OBJ)
        return NULL;
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0)
            return &o->items[i];
    return NULL;
}

static const char *jstr(const jv *o, const char *key)
{
    const jv *v = jget(o, key);
    return v && v->type == J_STR ? v->str : "";
}

static double jnum(const jv *o, const char *key)
{
    const jv *v = jget(o, key);
    return v && v->type == J_NUM ? v->num : -1;
}

/* Reads and parses a whole file; 0 on success. */
static int load_json(const char *path, jv *out)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)len + 1);
    size_t got = fread(text, 1, (size_t)len, f);
    fclose(f);
    text[got] = '\0';
    const char *p = text;
    int rc = jparse(&p, out);
    jws(&p);
    if (rc == 0 && *p)
        rc = -1; /* trailing garbage */
    free(text);
    return rc;
}

/* ------------------------------------------------------------ helpers */

static char tmpdir[] = "/tmp/weft-prof-XXXXXX";

static const char *tpath(const char *name)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

static weft_tensor *full(double v)
{
    weft_tensor *t = NULL;
    weft_full(&t, (int64_t[]){2, 3}, 2, v, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    return t;
}

/* The number of files in tmpdir (a failed export must leave none). */
static int files_in_tmpdir(void)
{
    int n = dir_entries(tmpdir);
    return n > 0 ? n : 0;
}

/* ---------------------------------------------------------------- tests */

static void test_errors(void)
{
    weft_profiler *p = NULL;
    weft_profiler_options bad = {.struct_size = 2};
    is_int(weft_profiler_create(&p, &bad), WEFT_EINVAL, "create: a struct_size too small");
    like(weft_last_error(), "struct_size", "  the message names struct_size");
    ok(p == NULL, "  and gives no profiler");
    is_int(weft_profiler_create(NULL, NULL), WEFT_EINVAL, "create: NULL out");

    is_int(weft_profiler_create(&p, NULL), 0, "create with default options");
    is_int(weft_profiler_stop(p), WEFT_EINVAL, "stop before start");
    like(weft_last_error(), "does not record", "  the message says the thread does not record");
    is_int(weft_profiler_start(p), 0, "start");
    ok(weft_profiler_current() == p, "  the thread records into it");
    is_int(weft_profiler_start(p), WEFT_EBUSY, "start twice");
    like(weft_last_error(), "started twice", "  the message says so");
    weft_profiler *q = NULL;
    weft_profiler_create(&q, NULL);
    is_int(weft_profiler_start(q), WEFT_EBUSY, "start a second session on the same thread");
    is_int(weft_profiler_stop(q), WEFT_EINVAL, "stop a session the thread does not record into");
    like(weft_last_error(), "another", "  the message says it records into another");
    is_int(weft_profiler_export_chrome_trace(p, tpath("busy.json")), WEFT_EBUSY,
           "export while recording");
    like(weft_last_error(), "weft_profiler_stop", "  the message says to stop first");
    char *table = NULL;
    is_int(weft_profiler_table(&table, p, NULL, 0, false), WEFT_EBUSY, "table while recording");
    is_int(weft_profiler_destroy(p), WEFT_EBUSY, "destroy while recording");
    is_int(weft_profiler_range_pop(), WEFT_EINVAL, "pop a range never pushed (recording)");
    like(weft_last_error(), "without its push", "  the message says so");
    is_int(weft_profiler_range_push(NULL), WEFT_EINVAL, "push a NULL name");
    is_int(weft_profiler_stop(p), 0, "stop");
    ok(weft_profiler_current() == NULL, "  the thread records no more");
    is_int(weft_profiler_range_pop(), WEFT_EINVAL, "pop a range never pushed (not recording)");
    is_int(weft_profiler_range_push("off"), 0, "push while not recording");
    is_int(weft_profiler_range_pop(), 0, "  and its pop");
    is_int(weft_profiler_range_pop(), WEFT_EINVAL, "  a second pop is refused");

    is_int(weft_profiler_table(&table, p, "bogus", 0, false), WEFT_EINVAL, "an unknown sort key");
    like(weft_last_error(), "self_cpu_time_total", "  the message lists the known ones");
    ok(table == NULL, "  and gives no table");

    int before = files_in_tmpdir();
    is_int(weft_profiler_export_chrome_trace(p, "/nonexistent-weft-dir/trace.json"), WEFT_EIO,
           "export to a directory that does not exist");
    like(weft_last_error(), "/nonexistent-weft-dir/trace.json", "  the message names the path");
    mkdir(tpath("adir"), 0755);
    is_int(weft_profiler_export_chrome_trace(p, tpath("adir")), WEFT_EIO,
           "export over a directory (the rename fails)");
    is_int(files_in_tmpdir(), before + 1, "  no temporary file is left behind");
    rmdir(tpath("adir"));
    is_int(weft_profiler_export_chrome_trace(p, ""), WEFT_EINVAL, "export to an empty path");
    is_int(weft_profiler_destroy(p), 0, "destroy");
    is_int(weft_profiler_destroy(q), 0, "destroy the other");
    is_int(weft_profiler_destroy(NULL), 0, "destroy NULL");
}

/* The X events of a parsed trace named name with category cat (NULL: any). */
static int count_x(const jv *events, const char *name, const char *cat)
{
    int n = 0;
    for (int i = 0; i < events->n; i++) {
        const jv *e = &events->items[i];
        if (strcmp(jstr(e, "ph"), "X") == 0 && strcmp(jstr(e, "name"), name) == 0 &&
            (!cat || strcmp(jstr(e, "cat"), cat) == 0))
            n++;
    }
    return n;
}

static const jv *find_x(const jv *events, const char *name, const char *cat)
{
    for (int i = 0; i < events->n; i++) {
        const jv *e = &events->items[i];
        if (strcmp(jstr(e, "ph"), "X") == 0 && strcmp(jstr(e, "name"), name) == 0 &&
            (!cat || strcmp(jstr(e, "cat"), cat) == 0))
            return e;
    }
    return NULL;
}

static void test_known_program(void)
{
    weft_profiler *p = NULL;
    weft_profiler_options o = {sizeof o, true, true};
    weft_profiler_create(&p, &o);
    is_int(weft_profiler_start(p), 0, "known program: start (shapes, memory)");
    weft_profiler_range_push("step");
    weft_tensor *x = full(1), *y = full(2), *z = NULL, *s = NULL;
    weft_tensor_set_requires_grad(x, true);
    weft_mul(&z, x, y);
    weft_sum(&s, z, NULL, 0, false);
    is_int(weft_profiler_range_pop(), 0, "  the range pops");
    weft_profiler_range_push("backward");
    is_int(weft_backward(&s, 1, NULL, false, false), 0, "  backward runs");
    weft_profiler_range_pop();
    weft_tensor_release(z);
    weft_tensor_release(s);
    weft_tensor_release(x);
    weft_tensor_release(y);
    is_int(weft_profiler_stop(p), 0, "  stop");
    is_int(weft_profiler_export_chrome_trace(p, tpath("known.json")), 0, "  export");
    jv root;
    int prc = load_json(tpath("known.json"), &root);
    is_int(prc, 0, "  the trace parses as JSON");
    if (prc < 0) {
        weft_profiler_destroy(p);
        return;
    }
    const jv *ev = jget(&root, "traceEvents");
    ok(ev && ev->type == J_ARR, "  it has a traceEvents array");

    /* which operators, how many */
    is_int(count_x(ev, "step", "user_annotation"), 1, "  one range 'step'");
    is_int(count_x(ev, "backward", "user_annotation"), 1, "  one range 'backward'");
    is_int(count_x(ev, "sum", "cpu_op"), 1, "  one sum");
    is_int(count_x(ev, "MulBackward", "backward"), 1, "  one MulBackward");
    is_int(count_x(ev, "SumBackward", "backward"), 1, "  one SumBackward");
    const jv *step = find_x(ev, "step", NULL), *bwd = find_x(ev, "backward", NULL);
    /* the forward mul is the one inside 'step'; backward multiplies too */
    int fwd_mul = 0, bwd_mul = 0;
    const jv *mul = NULL, *sum = find_x(ev, "sum", "cpu_op");
    double s0 = jnum(step, "ts"), s1 = s0 + jnum(step, "dur");
    double b0 = jnum(bwd, "ts"), b1 = b0 + jnum(bwd, "dur");
    for (int i = 0; i < ev->n; i++) {
        const jv *e = &ev->items[i];
        if (strcmp(jstr(e, "ph"), "X") || strcmp(jstr(e, "name"), "mul"))
            continue;
        double t = jnum(e, "ts");
        if (t >= s0 && t <= s1) {
            fwd_mul++;
            mul = e;
        } else if (t >= b0 && t <= b1) {
            bwd_mul++;
        }
    }
    is_int(fwd_mul, 1, "  one mul inside 'step'");
    ok(bwd_mul >= 1, "  mul runs inside 'backward' too (%d)", bwd_mul);
    ok(sum && jnum(sum, "ts") >= s0 && jnum(sum, "ts") + jnum(sum, "dur") <= s1 + 0.002,
       "  sum lies inside 'step'");
    is_int((int)jnum(jget(step, "args"), "Depth"), 0, "  'step' is at depth 0");
    is_int(mul ? (int)jnum(jget(mul, "args"), "Depth") : -1, 1, "  its mul at depth 1");
    const jv *mb = find_x(ev, "MulBackward", NULL);
    ok(mb && jnum(mb, "ts") >= b0 && jnum(mb, "ts") <= b1, "  MulBackward inside 'backward'");
    const jv *args = mul ? jget(mul, "args") : NULL;
    const jv *dims = jget(args, "Input Dims"), *types = jget(args, "Input type");
    ok(dims && dims->n == 2 && dims->items[0].n == 2 && dims->items[0].items[0].num == 2 &&
           dims->items[0].items[1].num == 3 && dims->items[1].n == 2,
       "  mul's Input Dims are [[2,3],[2,3]]");
    ok(types && types->n == 2 && strcmp(types->items[0].str, "float32") == 0,
       "  its Input type float32");
    is_str(jstr(args, "Device"), "cpu:0", "  its device cpu:0");

    /* forward -> backward flows: s at the forward op, f at its backward */
    int n_s = 0, n_f = 0, linked = 0;
    for (int i = 0; i < ev->n; i++) {
        const jv *e = &ev->items[i];
        if (strcmp(jstr(e, "ph"), "s"))
            continue;
        n_s++;
        double id = jnum(e, "id");
        for (int j = 0; j < ev->n; j++) {
            const jv *f = &ev->items[j];
            if (strcmp(jstr(f, "ph"), "f") || jnum(f, "id") != id)
                continue;
            n_f++;
            /* the pair joins mul -> MulBackward or sum -> SumBackward */
            const jv *sb = find_x(ev, "SumBackward", NULL);
            if ((mul && jnum(e, "ts") == jnum(mul, "ts") && mb && jnum(f, "ts") == jnum(mb, "ts")) ||
                (sum && jnum(e, "ts") == jnum(sum, "ts") && sb && jnum(f, "ts") == jnum(sb, "ts")))
                linked++;
        }
    }
    is_int(n_s, 2, "  two flow starts (mul, sum; not the leaf's accumulator)");
    is_int(n_f, 2, "  two flow ends");
    is_int(linked, 2, "  each joins a forward operator to its own backward");

    /* memory: the live total returns to where it started */
    double first_before = 0, last = -1;
    int n_mem = 0, n_counter = 0;
    for (int i = 0; i < ev->n; i++) {
        const jv *e = &ev->items[i];
        if (strcmp(jstr(e, "name"), "[memory]") == 0) {
            const jv *a = jget(e, "args");
            if (n_mem++ == 0)
                first_before = jnum(a, "Total Allocated") - jnum(a, "Bytes");
            last = jnum(a, "Total Allocated");
        }
        if (strcmp(jstr(e, "ph"), "C") == 0)
            n_counter++;
    }
    ok(n_mem >= 6, "  memory events recorded (%d)", n_mem);
    is_int(n_counter, n_mem, "  one counter event per memory event");
    is_double(last, first_before, 0, "  the live bytes return to their start");

    /* the tables' totals equal the trace's */
    weft_profiler_stat *st = NULL;
    int n = 0;
    is_int(weft_profiler_key_averages(&st, &n, p, false), 0, "  key averages");
    int agree = 0, rows = 0;
    double self_sum = 0, top_sum = 0;
    for (int i = 0; i < n; i++) {
        double dur = 0;
        int calls = 0;
        for (int j = 0; j < ev->n; j++) {
            const jv *e = &ev->items[j];
            if (strcmp(jstr(e, "ph"), "X") == 0 && strcmp(jstr(e, "name"), st[i].name) == 0) {
                dur += jnum(e, "dur");
                calls++;
            }
        }
        rows++;
        if (calls == st[i].calls && fabs(dur - st[i].total_us) <= 0.001 * calls + 1e-9)
            agree++;
        else
            diag("%s: trace %d calls %.3f us, table %lld calls %.3f us", st[i].name, calls, dur,
                 (long long)st[i].calls, st[i].total_us);
        self_sum += st[i].self_us;
    }
    for (int j = 0; j < ev->n; j++) {
        const jv *e = &ev->items[j];
        if (strcmp(jstr(e, "ph"), "X") == 0 && jnum(jget(e, "args"), "Depth") == 0)
            top_sum += jnum(e, "dur");
    }
    is_int(agree, rows, "  every row's calls and total time equal the trace's (%d rows)", rows);
    is_double(self_sum, top_sum, 1e-3, "  the self times add up to the top-level events' time");
    for (int i = 0; i < n; i++)
        if (strcmp(st[i].name, "step") == 0) {
            is_int(st[i].memory_bytes, 3 * 24 + 4, "  'step' ends holding x, y, z (24 bytes each) and s (4)");
            /* weft_full allocates with weft_empty, which is no operator */
            is_int(st[i].self_memory_bytes, 2 * 24, "  x and y (made outside any operator) "
                                                    "are its own");
        }
    weft_profiler_stats_free(st, n);

    char *table = NULL;
    is_int(weft_profiler_table(&table, p, "self_cpu_time_total", 5, false), 0, "  the table");
    like(table, "Self CPU time total:", "  it ends with the total");
    like(table, "Self CPU Mem", "  it has the memory columns");
    if (table) {
        int lines = 0;
        for (const char *c = table; *c; c++)
            lines += *c == '\n';
        is_int(lines, 5 + 5, "  row_limit 5 shows 5 rows (3 rules, header, total)");
    }
    free(table);
    is_int(weft_profiler_table(&table, p, "count", 0, true), 0, "  the table by input shape");
    like(table, "[[2, 3], [2, 3]]", "  it shows mul's input shapes");
    like(table, "Input Shapes", "  under their own header");
    free(table);
    jfree(&root);
    weft_profiler_destroy(p);
}

/* ------------------------------------------------------------ threads */

enum { N_ADDS = 200 };
static weft_profiler *shared;
static pthread_barrier_t barrier;

static void run_adds(int n)
{
    weft_tensor *a = full(1), *b = full(2);
    for (int i = 0; i < n; i++) {
        weft_tensor *c = NULL;
        weft_add(&c, a, b);
        weft_tensor_release(c);
    }
    weft_tensor_release(a);
    weft_tensor_release(b);
}

static int64_t calls_of(weft_profiler *p, const char *name)
{
    weft_profiler_stat *st = NULL;
    int n = 0;
    int64_t calls = 0;
    if (weft_profiler_key_averages(&st, &n, p, false) < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(st[i].name, name) == 0)
            calls = st[i].calls;
    weft_profiler_stats_free(st, n);
    return calls;
}

static void *own_session(void *arg)
{
    weft_profiler **out = arg;
    weft_profiler_create(out, NULL);
    weft_profiler_start(*out);
    pthread_barrier_wait(&barrier);
    run_adds(N_ADDS);
    weft_profiler_stop(*out);
    return NULL;
}

static void *shared_session(void *arg)
{
    (void)arg;
    weft_profiler_start(shared);
    pthread_barrier_wait(&barrier);
    run_adds(N_ADDS);
    weft_profiler_stop(shared);
    return NULL;
}

static void *unprofiled(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&barrier);
    run_adds(N_ADDS);
    return NULL;
}

static void *exits_recording(void *arg)
{
    weft_profiler_start(arg);
    run_adds(3);
    return NULL; /* no stop */
}

static void test_threads(void)
{
    weft_profiler *p1 = NULL, *p2 = NULL;
    pthread_t t1, t2, t3;
    pthread_barrier_init(&barrier, NULL, 3);
    pthread_create(&t1, NULL, own_session, &p1);
    pthread_create(&t2, NULL, own_session, &p2);
    pthread_create(&t3, NULL, unprofiled, NULL);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pthread_join(t3, NULL);
    pthread_barrier_destroy(&barrier);
    is_int(calls_of(p1, "add"), N_ADDS, "two threads, a session each: the first has its adds");
    is_int(calls_of(p2, "add"), N_ADDS, "  the second its own (not the other's, nor the "
                                        "unprofiled thread's)");
    weft_profiler_destroy(p1);
    weft_profiler_destroy(p2);

    weft_profiler_create(&shared, NULL);
    pthread_barrier_init(&barrier, NULL, 2);
    pthread_create(&t1, NULL, shared_session, NULL);
    pthread_create(&t2, NULL, shared_session, NULL);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pthread_barrier_destroy(&barrier);
    is_int(calls_of(shared, "add"), 2 * N_ADDS, "two threads recording into one session");
    is_int(weft_profiler_export_chrome_trace(shared, tpath("threads.json")), 0, "  export");
    jv root;
    if (load_json(tpath("threads.json"), &root) == 0) {
        const jv *ev = jget(&root, "traceEvents");
        double tid0 = -1;
        int tids = 0;
        for (int i = 0; ev && i < ev->n; i++) {
            const jv *e = &ev->items[i];
            if (strcmp(jstr(e, "name"), "thread_name") == 0) {
                if (jnum(e, "tid") != tid0)
                    tids++;
                tid0 = jnum(e, "tid");
            }
        }
        is_int(tids, 2, "  the trace has two threads");
        is_int(count_x(ev, "add", "cpu_op"), 2 * N_ADDS, "  and every add");
        jfree(&root);
    } else {
        ok(0, "  the trace parses");
    }
    weft_profiler_destroy(shared);

    weft_profiler *p = NULL;
    weft_profiler_create(&p, NULL);
    pthread_create(&t1, NULL, exits_recording, p);
    pthread_join(t1, NULL);
    is_int(weft_profiler_export_chrome_trace(p, tpath("exited.json")), 0,
           "a thread that exits while recording stops: its session exports");
    is_int(calls_of(p, "add"), 3, "  with its operators");
    is_int(weft_profiler_destroy(p), 0, "  and is destroyed");
}

/* ------------------------------------------------ a device with events */

/* A fake device whose memory is host memory from the core's caching
 * allocator and whose events read the host clock: its work is synchronous,
 * so an event's time is when it was recorded. */
typedef struct dev_event {
    int64_t at;
    int recorded;
} dev_event;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int d_count(void *ctx)
{
    (void)ctx;
    return 1;
}
static int de_create(void *ctx, int index, void **out)
{
    (void)ctx;
    (void)index;
    *out = calloc(1, sizeof(dev_event));
    return *out ? 0 : WEFT_ENOMEM;
}
static void de_destroy(void *ctx, int index, void *e)
{
    (void)ctx;
    (void)index;
    free(e);
}
static int de_record(void *ctx, int index, void *e, void *stream)
{
    (void)ctx;
    (void)index;
    (void)stream;
    ((dev_event *)e)->at = mono_ns();
    ((dev_event *)e)->recorded = 1;
    return 0;
}
static int de_query(void *ctx, int index, void *e)
{
    (void)ctx;
    (void)index;
    return ((dev_event *)e)->recorded;
}
static int de_sync(void *ctx, int index, void *e)
{
    (void)ctx;
    (void)index;
    (void)e;
    return 0;
}
static int de_elapsed(void *ctx, int index, void *a, void *b, float *ms)
{
    (void)ctx;
    (void)index;
    *ms = (float)((double)(((dev_event *)b)->at - ((dev_event *)a)->at) / 1e6);
    return 0;
}
static int raw_alloc(void *ctx, int index, size_t n, void **out)
{
    (void)ctx;
    (void)index;
    *out = malloc(n);
    return *out ? 0 : WEFT_ENOMEM;
}
static void raw_free(void *ctx, int index, void *p)
{
    (void)ctx;
    (void)index;
    free(p);
}

enum { KERNEL_NS = 300000 };

/* set: dev_neg pops a range (pushed outside it) and keeps what it got */
static int pop_in_kernel, pop_rc;
static char pop_message[256];

/* neg on the fake device: busy for KERNEL_NS, as a kernel would be */
static int dev_neg(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *t = call->args[0].u.tensor;
    weft_tensor *out;
    int rc = weft_empty(&out, weft_tensor_sizes(t), weft_tensor_ndim(t), WEFT_FLOAT32,
                        weft_tensor_device(t));
    if (rc < 0)
        return rc;
    for (int64_t i = 0; i < weft_tensor_numel(t); i++)
        ((float *)weft_tensor_data_ptr(out))[i] = -((const float *)weft_tensor_data_ptr(t))[i];
    for (int64_t t0 = mono_ns(); mono_ns() - t0 < KERNEL_NS;)
        ;
    if (pop_in_kernel) {
        pop_rc = weft_profiler_range_pop();
        snprintf(pop_message, sizeof pop_message, "%s", weft_last_error());
    }
    return weft_return_tensor(call, 0, out);
}

static void test_device(void)
{
    weft_registrar *reg = NULL;
    weft_registrar_create(&reg, "profdev");
    weft_device_memory mem = {sizeof mem, WEFT_DEVICE_MEMORY_VERSION, NULL, raw_alloc, raw_free};
    weft_caching_allocator *ca = NULL;
    is_int(weft_caching_allocator_create(&ca, "profdev", &mem, 1), 0,
           "device: a fake device over the caching allocator, with events");
    weft_device_interface iface = {
        sizeof iface, WEFT_DEVICE_INTERFACE_VERSION, NULL, d_count, fake_copy, fake_copy,
        fake_copy_device, fake_sync, 0, NULL, NULL, NULL, NULL, de_create,
        de_destroy, de_record, NULL, de_query, de_sync, de_elapsed,
    };
    int type = -1;
    weft_register_device_type(reg, "profdev", &iface, weft_caching_allocator_table(ca), &type);
    weft_register_kernel(reg, "neg", WEFT_KEY_DENSE, type, dev_neg, NULL, NULL);
    weft_device d = {(int16_t)type, 0};
    weft_profiler *p = NULL;
    weft_profiler_options o = {sizeof o, true, true, true};
    weft_profiler_create(&p, &o);
    weft_tensor *x = NULL;
    weft_empty(&x, (int64_t[]){4}, 1, WEFT_FLOAT32, d);
    is_int(weft_profiler_start(p), 0, "  profile with shapes, memory and device time");
    for (int i = 0; i < 3; i++) {
        weft_tensor *y = NULL;
        weft_neg(&y, x);
        weft_tensor_release(y);
    }
    /* a kernel may not pop a range pushed outside its operator */
    weft_profiler_range_push("outer");
    pop_in_kernel = 1;
    weft_tensor *y = NULL;
    is_int(weft_neg(&y, x), 0, "  an operator whose kernel pops a range pushed outside it");
    pop_in_kernel = 0;
    weft_tensor_release(y);
    is_int(pop_rc, WEFT_EINVAL, "  that pop is refused");
    like(pop_message, "'neg', which began after the range", "  naming the operator");
    is_int(weft_profiler_range_pop(), 0, "  the range pops where it was pushed");
    weft_profiler_stop(p);
    weft_tensor_release(x);
    weft_profiler_stat *st = NULL;
    int n = 0;
    weft_profiler_key_averages(&st, &n, p, false);
    const weft_profiler_stat *neg = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(st[i].name, "neg") == 0)
            neg = &st[i];
    is_int(neg ? neg->calls : -1, 4, "  four negs");
    ok(neg && neg->device_us >= 4 * KERNEL_NS / 1000.0 && neg->device_us <= neg->total_us + 1,
       "  their device time covers the kernels and lies within the calls (%.1f of %.1f us)",
       neg ? neg->device_us : -1, neg ? neg->total_us : -1);
    weft_profiler_stats_free(st, n);
    char *table = NULL;
    weft_profiler_table(&table, p, "device_time_total", 0, false);
    like(table, "Device total", "  the table has the device time column");
    free(table);
    is_int(weft_profiler_export_chrome_trace(p, tpath("device.json")), 0, "  export");
    jv root;
    if (load_json(tpath("device.json"), &root) == 0) {
        const jv *ev = jget(&root, "traceEvents");
        is_int(count_x(ev, "neg", "kernel"), 4, "  four kernel events on the device track");
        const jv *k = find_x(ev, "neg", "kernel"), *c = find_x(ev, "neg", "cpu_op");
        /* placed through a reference event whose time is known to the
         * record's latency (a preemption there shifts every kernel): 20 us
         * of slack against 300 us kernels */
        ok(k && c && jnum(k, "ts") >= jnum(c, "ts") - 20 &&
               jnum(k, "ts") + jnum(k, "dur") <= jnum(c, "ts") + jnum(c, "dur") + 20,
           "  the first kernel lies within its operator on the timeline");
        int named = 0, mem_events = 0;
        double first_before = -1, last = -2;
        for (int i = 0; i < ev->n; i++) {
            const jv *e = &ev->items[i];
            const jv *a = jget(e, "args");
            if (strcmp(jstr(e, "name"), "thread_name") == 0 &&
                strcmp(jstr(a, "name"), "profdev:0 (device time)") == 0)
                named++;
            if (strcmp(jstr(e, "name"), "[memory]") == 0 &&
                strcmp(jstr(a, "Device"), "profdev:0") == 0) {
                if (mem_events++ == 0)
                    first_before = jnum(a, "Total Allocated") - jnum(a, "Bytes");
                last = jnum(a, "Total Allocated");
            }
        }
        is_int(named, 1, "  the device track is named");
        is_int(mem_events, 8, "  the caching allocator's allocations and frees (4 each)");
        is_double(last, first_before, 0, "  the device's live bytes return to their start");
        jfree(&root);
    } else {
        ok(0, "  the trace parses");
    }
    if (getenv("KEEP_TRACE") == NULL)
        unlink(tpath("device.json"));
    weft_profiler_destroy(p);
    weft_registrar_destroy(reg);
    is_int(weft_caching_allocator_destroy(ca), 0, "  the allocator is destroyed (nothing leaked)");
}

/* CUDA kernel times through the CUDA plugin's events, where a GPU is. */
static void test_cuda(void)
{
    weft_device d;
    if (weft_device_from_string(&d, "cuda:0") < 0 || weft_device_count(d.type) < 1) {
        skip(4, "no CUDA device");
        return;
    }
    weft_tensor *a = NULL, *c = NULL;
    int64_t n[2] = {1024, 1024};
    weft_full(&a, n, 2, 0.5, WEFT_FLOAT32, d);
    weft_profiler *p = NULL;
    weft_profiler_options o = {sizeof o, false, true, true};
    weft_profiler_create(&p, &o);
    is_int(weft_profiler_start(p), 0, "cuda: profile with device time");
    for (int i = 0; i < 4; i++) {
        weft_mm(&c, a, a);
        weft_tensor_release(c);
    }
    weft_profiler_stop(p);
    weft_tensor_release(a);
    weft_profiler_stat *st = NULL;
    int k = 0;
    weft_profiler_key_averages(&st, &k, p, false);
    const weft_profiler_stat *mm = NULL;
    for (int i = 0; i < k; i++)
        if (strcmp(st[i].name, "mm") == 0)
            mm = &st[i];
    is_int(mm ? mm->calls : -1, 4, "  four mm calls");
    /* 2 GFLOP each: far more than a microsecond on any GPU */
    ok(mm && mm->device_us > 4.0, "  with device time (%.1f us)", mm ? mm->device_us : -1);
    ok(mm && mm->memory_bytes >= 4 * 4 * 1024 * 1024,
       "  their outputs (4 MiB each, freed outside them) count as theirs (%lld bytes)",
       mm ? (long long)mm->memory_bytes : -1);
    weft_profiler_stats_free(st, k);
    weft_profiler_destroy(p);
}

int main(void)
{
    weft_load_default_plugins();
    if (!mkdtemp(tmpdir))
        skip_all("no temporary directory");
    test_errors();
    test_known_program();
    test_threads();
    test_device();
    test_cuda();
    /* clean up the files the tests wrote */
    const char *files[] = {"known.json", "threads.json", "exited.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        unlink(tpath(files[i]));
    if (getenv("KEEP_TRACE") == NULL)
        rmdir(tmpdir);
    return done_testing();
}
