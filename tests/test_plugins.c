/* tests/test_plugins.c — the loader: default loading, the same file twice,
 * broken plugins (no entry symbol, wrong ABI major, an init that fails after
 * registering, a duplicate device-type name) rolled back completely, the
 * search order (never the current directory), variant choice and its pin
 * (WEFT_PLUGIN_VARIANT), a device plugin's kernels and copies, the load
 * report (relative WEFT_PLUGIN_PATH entries, duplicates found by searching),
 * device type ids and kinds, and unload. */
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/host_device.h"
#include "tests/tap.h"

static char plugin_dir[PATH_MAX];

static const char *tp(const char *name)
{
    static char buf[PATH_MAX + 64];
    snprintf(buf, sizeof buf, "%s/%s", plugin_dir, name);
    return buf;
}

static int report_has(const char *name, weft_plugin_status status, const char *variant)
{
    int n = weft_plugin_report_count();
    for (int i = 0; i < n; i++) {
        weft_plugin_report r;
        weft_plugin_report_get(i, &r);
        if (r.name && strcmp(r.name, name) == 0 && r.status == status &&
            (!variant || (r.variant && strcmp(r.variant, variant) == 0)))
            return 1;
    }
    return 0;
}

static char *table_of(const char *op_name)
{
    const weft_op *op;
    char *dump = NULL;
    if (weft_op_find(&op, op_name) == 0)
        weft_op_dump_table(&dump, op);
    return dump;
}

static void check_neg_still_works(const char *when)
{
    int64_t sz[1] = {2};
    weft_tensor *t = NULL, *n = NULL;
    weft_full(&t, sz, 1, 1.5, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    is_int(weft_neg(&n, t), 0, "neg works %s", when);
    double v = 0;
    int64_t i0 = 0;
    if (n)
        weft_tensor_get(n, &i0, &v);
    is_double(v, -1.5, 0, "neg gives the CPU plugin's value %s", when);
    weft_tensor_release(t);
    weft_tensor_release(n);
}

/* In a fresh run of this program (the loader decides each file once per
 * process), loads the vtest variants from vdir with WEFT_PLUGIN_VARIANT=pin
 * and reads its vtest rows, "status variant reason" a line, into out. */
static bool vtest_rows_pinned(const char *pin, const char *vdir, char *out, size_t size)
{
    char cmd[3 * PATH_MAX], self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return false;
    self[len] = '\0';
    snprintf(cmd, sizeof cmd, "WEFT_PLUGIN_VARIANT='%s' '%s' --vtest-rows '%s'", pin, self, vdir);
    FILE *f = popen(cmd, "r");
    if (!f)
        return false;
    size_t got = fread(out, 1, size - 1, f);
    out[got] = '\0';
    return pclose(f) == 0;
}

static int print_vtest_rows(const char *vdir)
{
    static const char *const status[] = {"loaded", "skipped", "unsupported", "failed"};
    weft_plugin_add_search_path(vdir);
    if (weft_load_default_plugins() < 0)
        return 1;
    for (int i = 0; i < weft_plugin_report_count(); i++) {
        weft_plugin_report r;
        if (weft_plugin_report_get(i, &r) == 0 && r.name && strcmp(r.name, "vtest") == 0)
            printf("%s %s %s\n", status[r.status], r.variant ? r.variant : "-",
                   r.error ? r.error : "");
    }
    return 0;
}

/* WEFT_PLUGIN_VARIANT: a listed name loads only the variant asked for, or
 * nothing when that one cannot run; names not listed choose as usual. */
static void test_variant_pinning(const char *vdir)
{
    char rows[4096];
    const char *why = "not the variant WEFT_PLUGIN_VARIANT asks for";
    ok(vtest_rows_pinned("vtest:low", vdir, rows, sizeof rows), "a run with vtest:low");
    like(rows, "loaded low", "  loads the low variant although high scores better");
    like(rows, "skipped high not the variant WEFT_PLUGIN_VARIANT asks for", "  skips high, saying why");
    like(rows, "unsupported never", "  and still reports never as unsupported");
    ok(vtest_rows_pinned("foo:bar,vtest:low", vdir, rows, sizeof rows) && strstr(rows, "loaded low"),
       "vtest:low second in a list is honoured");
    ok(vtest_rows_pinned("vtest:never", vdir, rows, sizeof rows), "a run with vtest:never");
    like(rows, "unsupported never", "  the variant asked for cannot run: unsupported");
    ok(!strstr(rows, "loaded"), "  and no vtest variant loads");
    ok(strstr(rows, "skipped low ") && strstr(rows, "skipped high ") && strstr(rows, why),
       "  the others are skipped as not asked for");
    ok(vtest_rows_pinned("foo:bar", vdir, rows, sizeof rows) && strstr(rows, "loaded high"),
       "a name not listed chooses its best variant");
}

/* The lowest dynamic device type id no type holds now. */
static int first_free_type(void)
{
    int i = WEFT_DEVICE_TYPE_FIRST_DYNAMIC;
    while (i < WEFT_MAX_DEVICE_TYPES && weft_device_type_name(i))
        i++;
    return i;
}

/* Device kinds: what a plugin says, unknown when it says nothing, and an
 * error for a type no plugin provides. */
static void test_device_kinds(void)
{
    is_int(weft_device_type_kind(WEFT_DEVICE_TYPE_CPU), WEFT_DEVICE_KIND_HOST, "the CPU is the host");
    /* where the HIP plugin is built it was loaded (with no device): unload it,
     * so hip is a reserved name without its plugin on every machine */
    int hip_gone = weft_unload_plugin("hip");
    ok(hip_gone == 0 || hip_gone == WEFT_ENOTFOUND, "the HIP plugin is not loaded (%s)",
       hip_gone == 0 ? "unloaded" : "not built");
    is_int(weft_device_type_kind(WEFT_DEVICE_TYPE_HIP), WEFT_EDEVICE,
           "hip, a reserved name without its plugin, has no kind");
    like(weft_last_error(), "device type 'hip' is provided by no loaded plugin", "and says why");
    is_int(weft_device_type_kind(-1), WEFT_EDEVICE, "nor has id -1");
    is_int(weft_device_type_kind(WEFT_MAX_DEVICE_TYPES), WEFT_EDEVICE, "nor an id past the table");
    like(weft_last_error(), "unknown device type 40", "which the message names");
    static const struct {
        const char *file, *plugin, *type;
        int kind;
    } cases[] = {{"test-hostdev.so", "hostdev", "hostdev", WEFT_DEVICE_KIND_EMULATED},
                 {"test-accdev.so", "accdev", "accdev", WEFT_DEVICE_KIND_ACCELERATOR},
                 {"test-good.so", "testgood", "testdev", WEFT_DEVICE_KIND_UNKNOWN}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        is_int(weft_load_plugin(tp(cases[i].file)), 0, "load %s", cases[i].file);
        is_int(weft_device_type_kind(weft_device_type_from_name(cases[i].type)), cases[i].kind,
               "%s's kind is %d", cases[i].type, cases[i].kind);
        is_int(weft_unload_plugin(cases[i].plugin), 0, "unload %s", cases[i].plugin);
    }
}

/* An id can take another name while a caller still holds the old name's
 * pointer (weft_device_type_name): it must still read the old text. */
static void test_type_id_reuse(void)
{
    weft_registrar *a = NULL, *b = NULL;
    int ta = -1, tb = -1, lowest = first_free_type();
    weft_registrar_create(&a, "reuse-a");
    weft_registrar_create(&b, "reuse-b");
    is_int(weft_register_device_type(a, "reuse_first", &host_device_iface, &host_device_alloc, &ta), 0, "register reuse_first");
    is_int(ta, lowest, "it gets the lowest free id");
    const char *held = weft_device_type_name(ta);
    weft_registrar_destroy(a);
    is_int(weft_register_device_type(b, "reuse_second", &host_device_iface, &host_device_alloc, &tb), 0,
           "register another name after the first is gone");
    is_int(tb, ta, "it gets the freed id: no gap");
    is_str(weft_device_type_name(tb), "reuse_second", "under its own name");
    is_str(held, "reuse_first", "while the old name's pointer still reads the old name");
    weft_registrar_destroy(b);
}

/* A relative directory in WEFT_PLUGIN_PATH is skipped (plugins are never
 * searched relative to the working directory) and said so in the report. */
static void test_relative_path_reported(void)
{
    const char *saved = getenv("WEFT_PLUGIN_PATH");
    char *keep = saved ? strdup(saved) : NULL;
    char value[PATH_MAX + 64];
    snprintf(value, sizeof value, "%s:plugins/here::./there", saved ? saved : "/nonexistent");
    setenv("WEFT_PLUGIN_PATH", value, 1);
    char *text = NULL;
    is_int(weft_plugin_report_string(&text), 0, "the report with relative WEFT_PLUGIN_PATH entries");
    like(text, "ignored: 'plugins/here' from WEFT_PLUGIN_PATH is a relative directory",
         "names the first relative entry as ignored");
    like(text, "ignored: './there' from WEFT_PLUGIN_PATH", "and the second");
    like(text, "never searched relative to the working directory", "and says why");
    ok(text && !strstr(text, "ignored: ''"), "an empty entry is not reported");
    free(text);
    if (keep)
        setenv("WEFT_PLUGIN_PATH", keep, 1);
    else
        unsetenv("WEFT_PLUGIN_PATH");
    free(keep);
    is_int(weft_plugin_report_string(&text), 0, "the report again");
    ok(text && !strstr(text, "ignored:"), "nothing is ignored without relative entries");
    free(text);
}

static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int rc = in && out ? 0 : -1;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            rc = -1;
    if (in)
        fclose(in);
    if (out && fclose(out) != 0)
        rc = -1;
    return rc;
}

/* Two copies of one plugin (two files, same name and variant) in two
 * search directories: the first is loaded, and the other's report row
 * names both files. */
static void test_duplicate_found_by_search(const char *builddir)
{
    char dirs[2][PATH_MAX], files[2][PATH_MAX + 32];
    for (int i = 0; i < 2; i++) {
        snprintf(dirs[i], sizeof dirs[i], "%s/tests/dup-search-%d", builddir, i);
        snprintf(files[i], sizeof files[i], "%s/libweft-dupgood.so", dirs[i]);
        mkdir(dirs[i], 0755);
        ok(copy_file(tp("test-good.so"), files[i]) == 0, "copy test-good.so into %s", dirs[i]);
        weft_plugin_add_search_path(dirs[i]);
    }
    ok(weft_load_default_plugins() >= 1, "load them by searching");
    char *text = NULL;
    weft_plugin_report_string(&text);
    char want[3 * PATH_MAX];
    snprintf(want, sizeof want,
             "a duplicate: plugin 'testgood' variant baseline is already loaded from %s; this "
             "copy, %s, is not used",
             files[0], files[1]);
    like(text, want, "the skipped copy's row names both files");
    free(text);
    is_int(weft_unload_plugin("testgood"), 0, "unload it");
    for (int i = 0; i < 2; i++) {
        unlink(files[i]);
        rmdir(dirs[i]);
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--vtest-rows") == 0)
        return print_vtest_rows(argv[2]);
    const char *dir = getenv("WEFT_TEST_PLUGIN_DIR");
    const char *builddir = getenv("WEFT_BUILDDIR");
    if (!dir || !builddir)
        skip_all("WEFT_TEST_PLUGIN_DIR and WEFT_BUILDDIR are set by make check");
    snprintf(plugin_dir, sizeof plugin_dir, "%s", dir);

    is_int(weft_plugin_report_count(), 0, "nothing loaded before the first call");
    int n = weft_load_default_plugins();
    ok(n >= 1, "default plugins loaded (%d)", n);
    ok(report_has("cpu", WEFT_PLUGIN_LOADED, NULL), "the CPU plugin is in the report as loaded");
    int rows = weft_plugin_report_count();
    is_int(weft_load_default_plugins(), 0, "a second call loads nothing new");
    is_int(weft_plugin_report_count(), rows, "and adds no report rows");
    int ops_before = weft_op_count();

    /* no entry symbol */
    is_int(weft_load_plugin(tp("test-noentry.so")), WEFT_EPLUGIN, "a library without the entry symbol");
    like(weft_last_error(), "no entry symbol 'weft_plugin_entry'", "says what is missing");
    /* wrong ABI major */
    is_int(weft_load_plugin(tp("test-abi.so")), WEFT_EABI, "a plugin for ABI 99");
    like(weft_last_error(), "built for plugin ABI 99.0", "names the plugin's ABI");
    char core_abi[64];
    snprintf(core_abi, sizeof core_abi, "implements ABI %d.%d", WEFT_PLUGIN_ABI_MAJOR,
             WEFT_PLUGIN_ABI_MINOR);
    like(weft_last_error(), core_abi, "and the core's");
    /* an init that fails halfway */
    char *neg_before = table_of("neg");
    int lowest = first_free_type();
    is_int(weft_load_plugin(tp("test-halfinit.so")), WEFT_EPLUGIN, "an init that fails after registering");
    like(weft_last_error(), "simulated failure after four registrations", "carries the plugin's message");
    char halfdev_id[64];
    snprintf(halfdev_id, sizeof halfdev_id, "device type 'halfdev' got id %d", lowest);
    like(weft_last_error(), halfdev_id, "its device type had the lowest free id");
    is_int(weft_device_type_from_name("halfdev"), WEFT_ENOTFOUND, "and is gone");
    const weft_op *op;
    is_int(weft_op_find(&op, "halfinit_op"), WEFT_ENOTFOUND, "its operator is gone");
    char *neg_after = table_of("neg");
    is_str(neg_after, neg_before, "neg's table is exactly as before");
    free(neg_after);
    is_int(weft_op_count(), ops_before, "the operator count is as before");
    check_neg_still_works("after the rollback");
    ok(report_has("halfinit", WEFT_PLUGIN_FAILED, NULL), "the report says it failed");

    /* a good device plugin */
    is_int(weft_load_plugin(tp("test-good.so")), 0, "load the good test plugin");
    is_int(weft_load_plugin(tp("test-good.so")), 0, "loading the same file again is a no-op");
    rows = weft_plugin_report_count();
    char linkpath[PATH_MAX];
    snprintf(linkpath, sizeof linkpath, "%s/tests/good-link.so", builddir);
    unlink(linkpath);
    if (symlink(tp("test-good.so"), linkpath) == 0) {
        is_int(weft_load_plugin(linkpath), 0, "the same file through a symlink is the same plugin");
        unlink(linkpath);
    } else {
        ok(0, "could not make a symlink");
    }
    is_int(weft_plugin_report_count(), rows, "no new report rows for the same file");
    int type = weft_device_type_from_name("testdev");
    is_int(type, lowest, "testdev got the id halfinit's failed init had: no gap");
    is_int(weft_device_count(type), 2, "testdev reports two devices");
    weft_device dev;
    is_int(weft_device_from_string(&dev, "testdev:1"), 0, "parse testdev:1");
    int64_t sz[1] = {3};
    weft_tensor *td = NULL, *cpu = NULL, *twice = NULL, *back = NULL;
    is_int(weft_full(&td, sz, 1, 2.0, WEFT_FLOAT32, dev), 0, "full on testdev (its own fill_)");
    ok(td && weft_tensor_device(td).type == type && weft_tensor_device(td).index == 1, "lives on testdev:1");
    weft_full(&cpu, sz, 1, 2.0, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    const weft_op *tw;
    is_int(weft_op_find(&tw, "test_twice"), 0, "the plugin's operator exists");
    weft_value args[1] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = td}};
    weft_value rets[1];
    is_int(weft_call_boxed(tw, args, 1, rets, 1), 0, "call it on testdev");
    twice = rets[0].u.tensor;
    is_int(weft_to_device(&back, twice, WEFT_DEVICE_CPU), 0, "copy back to the host through the core's copy_");
    double v = 0;
    int64_t i0 = 0;
    if (back)
        weft_tensor_get(back, &i0, &v);
    is_double(v, 6.0, 0, "testdev's kernel ran (factor 3)");
    weft_tensor_release(back);
    weft_tensor_release(twice);
    args[0].u.tensor = cpu;
    weft_call_boxed(tw, args, 1, rets, 1);
    weft_tensor_get(rets[0].u.tensor, &i0, &v);
    is_double(v, 4.0, 0, "the CPU kernel ran for a CPU tensor (factor 2)");
    weft_tensor_release(rets[0].u.tensor);
    weft_tensor *sum = NULL;
    /* an operator testdev lacks: refused with the CPU fallback off, run on
     * the CPU with it on */
    int mode = weft_cpu_fallback_set_mode(WEFT_CPU_FALLBACK_ERROR);
    is_int(weft_add(&sum, td, td), WEFT_ENOKERNEL, "an operator testdev lacks, fallback off");
    like(weft_last_error(), "add: no kernel for dispatch keys {Dense, testdev}", "names the operator and keys");
    like(weft_last_error(), "Dense[cpu] (cpu)", "and where kernels do exist");
    weft_cpu_fallback_set_mode(WEFT_CPU_FALLBACK_SILENT);
    is_int(weft_add(&sum, td, td), 0, "with the CPU fallback on, add runs");
    weft_tensor *sum_host = NULL;
    weft_to_device(&sum_host, sum, WEFT_DEVICE_CPU);
    v = 0;
    if (sum_host)
        weft_tensor_get(sum_host, &i0, &v);
    ok(sum && weft_tensor_device(sum).type == type && v == 4.0, "its result is on testdev: 2 + 2 = %g", v);
    weft_tensor_release(sum_host);
    weft_tensor_release(sum);
    weft_cpu_fallback_set_mode((weft_cpu_fallback_mode)mode);

    /* a duplicate device-type name */
    char *exp_before = table_of("exp");
    is_int(weft_load_plugin(tp("test-dupdev.so")), WEFT_EPLUGIN, "a plugin registering 'testdev' again");
    like(weft_last_error(), "device type 'testdev' is already registered (by testgood)", "names both");
    char *exp_after = table_of("exp");
    is_str(exp_after, exp_before, "exp's table is unchanged (the kernel it registered first is gone)");
    free(exp_before);
    free(exp_after);

    /* unload */
    is_int(weft_unload_plugin("testgood"), WEFT_EBUSY, "unload refused while its memory is alive");
    like(weft_last_error(), "still alive: 1 storage it allocated", "says why");
    weft_tensor_release(td);
    is_int(weft_unload_plugin("testgood"), 0, "unload once the memory is gone");
    is_int(weft_device_type_from_name("testdev"), WEFT_ENOTFOUND, "its device type is gone");
    is_int(weft_op_find(&op, "test_twice"), WEFT_ENOTFOUND, "its operator is gone");
    is_int(weft_unload_plugin("testgood"), WEFT_ENOTFOUND, "unloading twice");
    is_int(weft_load_plugin(tp("test-good.so")), 0, "reload works");
    ok(weft_device_type_from_name("testdev") >= 0, "the device type is back");
    is_int(weft_unload_plugin("testgood"), 0, "unload again");
    weft_tensor_release(cpu);
    free(neg_before);

    /* search order: never the current directory */
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) && chdir(plugin_dir) == 0) {
        is_int(weft_load_plugin("test-good.so"), WEFT_ENOTFOUND, "a bare name is not looked up in the current directory");
        if (chdir(cwd) != 0)
            diag("could not return to %s", cwd);
    } else {
        ok(0, "chdir to the plugin directory");
    }
    is_int(weft_plugin_add_search_path(plugin_dir), 0, "add a search path");
    is_int(weft_load_plugin("test-good.so"), 0, "a bare name is found in an API search path");
    weft_unload_plugin("testgood");

    /* variants: the best score wins, one that cannot run is never initialised */
    char vdir[PATH_MAX];
    snprintf(vdir, sizeof vdir, "%s/tests/variants/.libs", builddir);
    weft_plugin_add_search_path(vdir);
    ok(weft_load_default_plugins() >= 1, "load the vtest variants");
    ok(report_has("vtest", WEFT_PLUGIN_LOADED, "high"), "the high-score variant is loaded");
    ok(report_has("vtest", WEFT_PLUGIN_SKIPPED, "low"), "the low-score variant is skipped");
    ok(report_has("vtest", WEFT_PLUGIN_UNSUPPORTED, "never"), "the variant that cannot run is unsupported");

    char *text = NULL;
    is_int(weft_plugin_report_string(&text), 0, "report as text");
    like(text, "plugin search path:", "lists the search path");
    like(text, "test-noentry.so", "lists the broken plugin");
    like(text, "a better variant was chosen", "explains a skipped variant");
    free(text);
    test_variant_pinning(vdir);
    test_device_kinds();
    test_type_id_reuse();
    test_relative_path_reported();
    test_duplicate_found_by_search(builddir);
    is_int(weft_load_plugin("/nonexistent/libweft-x.so"), WEFT_ENOTFOUND, "a missing file");
    is_int(weft_load_plugin(NULL), WEFT_EINVAL, "NULL path");
    return done_testing();
}
