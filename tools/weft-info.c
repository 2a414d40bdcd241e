/* tools/weft-info.c — what this weft installation can do: the plugin load
 * report, the device types that loaded plugins provide with their kinds and
 * device counts, the caching host allocator's statistics, the number of
 * operators (--ops lists them), and with --op NAME the computed kernel
 * table of one operator (the report itself is info_report.c, which
 * `python -m weft.info` shares). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "info_report.h"

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
    if (info_report(stdout, op_name, list_ops) < 0) {
        fprintf(stderr, "weft-info: %s\n", weft_last_error());
        return 1;
    }
    return status;
}
