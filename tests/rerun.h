/* tests/rerun.h — the shell command that runs this test program again, for
 * the tests that compare bits between runs (with 1, 2 and 3 threads).  The
 * runs must use the same CPU plugin variant, whose bits may differ from
 * another's: under valgrind, whose CPUID hides AVX-512, this run loads
 * avx2 while its re-runs, which valgrind does not follow, would choose
 * avx512.  So the command pins this run's variant with WEFT_PLUGIN_VARIANT.
 * Likewise the libraries behind products and convolutions: under valgrind
 * (and in AddressSanitizer builds) the CPU plugin's `auto` never opens
 * oneDNN, while the re-runs, outside valgrind, would; so there an unset or
 * `auto` WEFT_CPU_GEMM and WEFT_CPU_CONV become what this run resolved them
 * to (openblas, im2col). */
#ifndef WEFT_TESTS_RERUN_H
#define WEFT_TESTS_RERUN_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/weft.h>

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

/* The variant of the CPU plugin this process loaded ("avx2"), or NULL. */
static inline const char *loaded_cpu_variant(void)
{
    int n = weft_plugin_report_count();
    for (int i = 0; i < n; i++) {
        weft_plugin_report r;
        if (weft_plugin_report_get(i, &r) == 0 && r.status == WEFT_PLUGIN_LOADED && r.name &&
            strcmp(r.name, "cpu") == 0)
            return r.variant;
    }
    return NULL;
}

/* Writes into cmd the command that runs this program with the environment
 * assignments env (e.g. "WEFT_NUM_THREADS=2") and the arguments args, in
 * this run's CPU variant; false if /proc/self/exe cannot be read or the
 * command does not fit. */
static inline bool rerun_command(char *cmd, size_t size, const char *env, const char *args)
{
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return false;
    self[len] = '\0';
    const char *variant = loaded_cpu_variant();
    bool no_onednn = RUNNING_ON_VALGRIND;
#if defined(__SANITIZE_ADDRESS__)
    no_onednn = true;
#endif
    char libs[128] = "";
    if (no_onednn) {
        const char *g = getenv("WEFT_CPU_GEMM"), *c = getenv("WEFT_CPU_CONV");
        bool g_auto = !g || !*g || strcmp(g, "auto") == 0, c_auto = !c || !*c || strcmp(c, "auto") == 0;
        snprintf(libs, sizeof libs, "%s%s", g_auto ? "WEFT_CPU_GEMM=openblas " : "",
                 c_auto ? "WEFT_CPU_CONV=im2col " : "");
    }
    /* put first, the pin wins over a cpu entry the re-run would inherit */
    int n = snprintf(cmd, size, "%s%s%s %s%s '%s' %s", variant ? "WEFT_PLUGIN_VARIANT=cpu:" : "",
                     variant ? variant : "",
                     variant ? "${WEFT_PLUGIN_VARIANT:+,$WEFT_PLUGIN_VARIANT}" : "", libs, env,
                     self, args);
    return n > 0 && (size_t)n < size;
}

#endif
