/* tools/info_report.c — the text of weft-info (see info_report.h). */
#include "info_report.h"

#include <stdlib.h>

#include <weft/plugin.h>
#include <weft/weft.h>

static const char *kind_name(int kind)
{
    switch (kind) {
    case WEFT_DEVICE_KIND_HOST:
        return "host";
    case WEFT_DEVICE_KIND_ACCELERATOR:
        return "accelerator";
    case WEFT_DEVICE_KIND_EMULATED:
        return "emulated";
    default:
        return "kind unknown";
    }
}

int info_report(FILE *out, const char *op_name, bool list_ops)
{
    uint32_t major, minor;
    weft_plugin_abi(&major, &minor);
    fprintf(out, "weft %s (plugin ABI %u.%u)\n", weft_version(), major, minor);
    static const char *const bindings[] = {[WEFT_BIND_AUTO] = "auto", [WEFT_BIND_NONE] = "none",
                                           [WEFT_BIND_SPREAD] = "spread"};
    fprintf(out, "intra-op threads: %d, binding %s\n\n", weft_get_num_threads(),
           bindings[weft_get_thread_binding()]);

    char *report = NULL;
    if (weft_plugin_report_string(&report) == 0) {
        fputs(report, out);
        free(report);
    }

    fprintf(out, "\nlayouts:\n");
    for (int id = 0; id <= WEFT_MAX_LAYOUTS; id++)
        if (weft_layout_name(id))
            fprintf(out, "  %-3d %-12s from %s\n", id, weft_layout_name(id), weft_layout_plugin(id));

    /* only types a plugin provides: a reserved name ("hip") without its
     * plugin has no kind, and listing it as "0 devices" read as if its
     * plugin were loaded */
    fprintf(out, "\ndevice types:\n");
    for (int type = 0; type < WEFT_MAX_DEVICE_TYPES; type++) {
        const char *name = weft_device_type_name(type);
        int kind = weft_device_type_kind(type);
        if (name && kind >= 0)
            fprintf(out, "  %-3d %-12s %-12s %d device%s\n", type, name, kind_name(kind),
                   weft_device_count(type), weft_device_count(type) == 1 ? "" : "s");
    }
    /* the memory statistics of every device a plugin provides (the CPU's
     * host allocator follows) */
    for (int type = 1; type < WEFT_MAX_DEVICE_TYPES; type++) {
        const char *name = weft_device_type_name(type);
        for (int i = 0; name && i < weft_device_count(type); i++) {
            weft_allocator_stats ds = {.struct_size = sizeof ds};
            weft_device d = {.type = (int16_t)type, .index = (int16_t)i};
            if (weft_device_memory_stats(d, &ds) == 0)
                fprintf(out, "  %s:%d memory: %llu bytes allocated (peak %llu), %llu reserved, "
                       "%llu cached; %llu allocations (%llu from the cache), %llu device "
                       "allocations, %llu device frees\n",
                       name, i, (unsigned long long)ds.allocated_bytes,
                       (unsigned long long)ds.peak_allocated_bytes,
                       (unsigned long long)ds.reserved_bytes, (unsigned long long)ds.cached_bytes,
                       (unsigned long long)ds.alloc_calls, (unsigned long long)ds.cache_hits,
                       (unsigned long long)ds.system_alloc_calls,
                       (unsigned long long)ds.system_free_calls);
        }
    }

    weft_allocator_stats hs = {.struct_size = sizeof hs};
    if (weft_host_allocator_stats(&hs) == 0)
        fprintf(out, "\nhost allocator (caching): %llu bytes allocated (peak %llu), %llu cached, "
               "limit %llu (WEFT_HOST_CACHE_LIMIT)\n"
               "  %llu allocations, %llu frees, %llu cache hits, %llu system allocations, "
               "%llu system frees\n",
               (unsigned long long)hs.allocated_bytes, (unsigned long long)hs.peak_allocated_bytes,
               (unsigned long long)hs.cached_bytes, (unsigned long long)hs.cache_limit_bytes,
               (unsigned long long)hs.alloc_calls, (unsigned long long)hs.free_calls,
               (unsigned long long)hs.cache_hits, (unsigned long long)hs.system_alloc_calls,
               (unsigned long long)hs.system_free_calls);

    if (op_name) {
        const weft_op *op;
        char *table = NULL;
        int rc;
        if ((rc = weft_op_find(&op, op_name)) < 0 || (rc = weft_op_dump_table(&table, op)) < 0)
            return rc;
        fprintf(out, "\nkernel table of %s:\n%s", op_name, table);
        free(table);
        return 0;
    }
    int n = weft_op_count();
    if (!list_ops) {
        fprintf(out, "\noperators: %d (--ops lists them, --op NAME shows one's kernels)\n", n);
        return 0;
    }
    fprintf(out, "\noperators (%d):\n", n);
    for (int i = 0; i < n; i++)
        fprintf(out, "  %s\n", weft_op_schema(weft_op_at(i)));
    return 0;
}
