/* backends/cuda/libs.c — opens cuBLAS and cuDNN at their first use (see
 * libs.h).  The soname's major version comes from the headers the plugin
 * was built with, so a library of another major version is never taken;
 * the plugin's runpath (the toolkit's lib directory) is searched by
 * dlopen. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "libs.h"

#define STR(x) #x
#define XSTR(x) STR(x)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* A library that could not be opened is not looked for again until
 * wfc_libs_close: callers that fall back to another path (batch_norm
 * without cuDNN) would otherwise search the library path on every call.
 * The first failure's message is kept and given again. */
typedef struct {
    void *handle;
    bool failed;
    char why[256];
} lib_state;

/* Opens soname and fills n function pointers named by names; 0 or an
 * error (the handle is closed again, the failure remembered in *lib). */
static int open_table(lib_state *lib, const char *soname, const char *const *names, void **slots,
                      int n)
{
    if (lib->handle)
        return 0;
    if (lib->failed)
        return weft_set_error(WEFT_ENOTSUP, "%s", lib->why);
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(lib->why, sizeof lib->why, WFC_BACKEND ": cannot open %s: %s", soname, dlerror());
    } else {
        for (int i = 0; i < n && !lib->why[0]; i++)
            if (!(slots[i] = dlsym(h, names[i])))
                snprintf(lib->why, sizeof lib->why, WFC_BACKEND ": %s has no %s", soname, names[i]);
        if (!lib->why[0]) {
            lib->handle = h;
            return 0;
        }
        dlclose(h);
    }
    lib->failed = true;
    return weft_set_error(WEFT_ENOTSUP, "%s", lib->why);
}

#define WFC_NAME(f) XSTR(f),

#if WFC_HAVE_BLAS_LIBRARY
static lib_state cublas_lib;
static wfc_cublas_api cublas_table;

const wfc_cublas_api *wfc_cublas(void)
{
    static const char *const names[] = {WFC_CUBLAS_FUNCTIONS(WFC_NAME)};
    pthread_mutex_lock(&lock);
    int rc = open_table(&cublas_lib, "libcublas.so." XSTR(CUBLAS_VER_MAJOR), names,
                        (void **)&cublas_table, (int)(sizeof names / sizeof *names));
    pthread_mutex_unlock(&lock);
    return rc == 0 ? &cublas_table : NULL;
}
#endif

#ifdef WEFT_HAVE_CUDNN
static lib_state cudnn_lib;
static wfc_cudnn_api cudnn_table;

const wfc_cudnn_api *wfc_cudnn(void)
{
    static const char *const names[] = {WFC_CUDNN_FUNCTIONS(WFC_NAME)};
    pthread_mutex_lock(&lock);
    int rc = open_table(&cudnn_lib, "libcudnn.so." XSTR(CUDNN_MAJOR), names,
                        (void **)&cudnn_table, (int)(sizeof names / sizeof *names));
    pthread_mutex_unlock(&lock);
    return rc == 0 ? &cudnn_table : NULL;
}
#endif

void wfc_libs_close(void)
{
    pthread_mutex_lock(&lock);
#if WFC_HAVE_BLAS_LIBRARY
    if (cublas_lib.handle)
        dlclose(cublas_lib.handle);
    cublas_lib = (lib_state){0};
#endif
#ifdef WEFT_HAVE_CUDNN
    if (cudnn_lib.handle)
        dlclose(cudnn_lib.handle);
    cudnn_lib = (lib_state){0};
#endif
    pthread_mutex_unlock(&lock);
}
