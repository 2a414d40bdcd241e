/* tools/weft-info.c — what this weft installation can do: the plugin load
 * report, the device types that loaded plugins provide with their kinds and
 * device counts, the caching host allocator's statistics, the number of
 * operators (--ops lists them), and with --op NAME the computed kernel
 * table of one operator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

/* man/weft-info.1 is checked against this text (tests/manpages.sh). */
static void usage(FILE *f)
{
    fprintf(f, "usage: weft-info [OPTION]...\n"
               "Prints the plugin load report, the device types, the host allocator's\n"
               "statistics and the number of operators.\n"
               "\n"
               "  --ops                 list every operator's schema\n"
               "  --op NAME             print the computed kernel table of operator NAME\n"
               "  --plugin PATH         load this plugin file too\n"
               "  --no-default-plugins  do not search for plugins\n"
               "  --help                this text\n");
}

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

int main(int argc, char **argv)
{
    const char *op_name = NULL;
    bool defaults = true, list_ops = false;
    int status = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--op") == 0 && i + 1 < argc) {
            op_name = argv[++i];
        } else if (strcmp(argv[i], "--plugin") == 0 && i + 1 < argc) {
            if (weft_load_plugin(argv[++i]) < 0) {
                fprintf(stderr, "weft-info: %s\n", weft_last_error());
                status = 1;
            }
        } else if (strcmp(argv[i], "--ops") == 0) {
            list_ops = true;
        } else if (strcmp(argv[i], "--no-default-plugins") == 0) {
            defaults = false;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (defaults && weft_load_default_plugins() < 0) {
        fprintf(stderr, "weft-info: %s\n", weft_last_error());
        status = 1;
    }
    uint32_t major, minor;
    weft_plugin_abi(&major, &minor);
    printf("weft %s (plugin ABI %u.%u)\n", weft_version(), major, minor);
    static const char *const bindings[] = {[WEFT_BIND_AUTO] = "auto", [WEFT_BIND_NONE] = "none",
                                           [WEFT_BIND_SPREAD] = "spread"};
    printf("intra-op threads: %d, binding %s\n\n", weft_get_num_threads(),
           bindings[weft_get_thread_binding()]);

    char *report = NULL;
    if (weft_plugin_report_string(&report) == 0) {
        fputs(report, stdout);
        free(report);
    }

    printf("\nlayouts:\n");
    for (int id = 0; id <= WEFT_MAX_LAYOUTS; id++)
        if (weft_layout_name(id))
            printf("  %-3d %-12s from %s\n", id, weft_layout_name(id), weft_layout_plugin(id));

    /* only types a plugin provides: a reserved name ("hip") without its
     * plugin has no kind, and listing it as "0 devices" read as if its
     * plugin were loaded */
    printf("\ndevice types:\n");
    for (int type = 0; type < WEFT_MAX_DEVICE_TYPES; type++) {
        const char *name = weft_device_type_name(type);
        int kind = weft_device_type_kind(type);
        if (name && kind >= 0)
            printf("  %-3d %-12s %-12s %d device%s\n", type, name, kind_name(kind),
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
                printf("  %s:%d memory: %llu bytes allocated (peak %llu), %llu reserved, "
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
        printf("\nhost allocator (caching): %llu bytes allocated (peak %llu), %llu cached, "
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
        if (weft_op_find(&op, op_name) < 0 || weft_op_dump_table(&table, op) < 0) {
            fprintf(stderr, "weft-info: %s\n", weft_last_error());
            return 1;
        }
        printf("\nkernel table of %s:\n%s", op_name, table);
        free(table);
        return status;
    }
    int n = weft_op_count();
    if (!list_ops) {
        printf("\noperators: %d (--ops lists them, --op NAME shows one's kernels)\n", n);
        return status;
    }
    printf("\noperators (%d):\n", n);
    for (int i = 0; i < n; i++)
        printf("  %s\n", weft_op_schema(weft_op_at(i)));
    return status;
}
