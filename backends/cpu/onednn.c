/* backends/cpu/onednn.c — the CPU plugin's one handle on oneDNN, shared
 * by the layers that call it (gemm_lib.c's sgemm, conv_lib.c's
 * convolutions): opened with dlopen at the first use that wants it (the
 * plugin does not map oneDNN's 40 MB otherwise, so start-up does not pay
 * for it), closed by the plugin's fini after those layers let go of it.
 * It must not depend on what the layers resolve from it: each looks up
 * its own functions with cpu__onednn_symbol.
 *
 * WEFT_ONEDNN_LIBRARY names another file to open than libdnnl.so.2 (a
 * build outside the linker's path; the tests use a missing one to see
 * the fallback). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#include "cpu.h"

static struct {
    pthread_once_t once;
    void *handle;
    /* oneDNN's OpenMP runtime (libgomp), found through its dependencies */
    void (*omp_set_num_threads)(int);
    int (*omp_get_max_threads)(void);
    char error[320]; /* why the library could not be opened */
} dnnl = {.once = PTHREAD_ONCE_INIT};

bool cpu__onednn_by_default(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return false;
#endif
#endif
    return !RUNNING_ON_VALGRIND;
}

int cpu__library_choice(const char *variable, const char *first, const char *second,
                        char *bad_value, size_t bad_size)
{
    const char *v = getenv(variable);
    bad_value[0] = '\0';
    if (!v || !*v || strcmp(v, "auto") == 0)
        return 0;
    if (strcmp(v, first) == 0)
        return 1;
    if (strcmp(v, second) == 0)
        return 2;
    snprintf(bad_value, bad_size, "%s", v);
    return 0;
}

static void open_library(void)
{
    const char *file = getenv("WEFT_ONEDNN_LIBRARY");
    file = file && *file ? file : "libdnnl.so.2";
    void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(dnnl.error, sizeof dnnl.error, "%s", dlerror());
        return;
    }
    dnnl.omp_set_num_threads = (void (*)(int))dlsym(h, "omp_set_num_threads");
    dnnl.omp_get_max_threads = (int (*)(void))dlsym(h, "omp_get_max_threads");
    if (!dnnl.omp_set_num_threads || !dnnl.omp_get_max_threads) {
        snprintf(dnnl.error, sizeof dnnl.error,
                 "%s lacks omp_set_num_threads (not the OpenMP build of oneDNN 2)", file);
        dlclose(h);
        return;
    }
    dnnl.handle = h;
}

bool cpu__onednn_open(const char **error)
{
    pthread_once(&dnnl.once, open_library);
    if (!dnnl.handle && error)
        *error = dnnl.error;
    return dnnl.handle != NULL;
}

void *cpu__onednn_symbol(const char *name)
{
    return dnnl.handle ? dlsym(dnnl.handle, name) : NULL;
}

int cpu__onednn_one_thread(void)
{
    int before = dnnl.omp_get_max_threads();
    dnnl.omp_set_num_threads(1);
    return before;
}

void cpu__onednn_threads_restore(int before)
{
    dnnl.omp_set_num_threads(before);
}

void cpu__onednn_fini(void)
{
    if (dnnl.handle)
        dlclose(dnnl.handle);
    memset(&dnnl, 0, sizeof dnnl);
    dnnl.once = (pthread_once_t)PTHREAD_ONCE_INIT;
}
