/* backends/cuda/libs.c — opens cuBLAS and cuDNN at their first use (see
 * libs.h).  The soname's major version comes from the headers the plugin
 * was built with, so a library of another major version is never taken;
 * the plugin's runpath (the toolkit's lib directory) is searched by
 * dlopen. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "libs.h"

#define STR(x) #x
#define XSTR(x) STR(x)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Opens soname and fills n function pointers named by names; 0 or an
 * error (the handle is closed again). */
static int open_table(void **handle, const char *soname, const char *const *names, void **slots,
                      int n)
{
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return weft_set_error(WEFT_ENOTSUP, "cuda: cannot open %s: %s", soname, dlerror());
    for (int i = 0; i < n; i++) {
        slots[i] = dlsym(h, names[i]);
        if (!slots[i]) {
            int rc = weft_set_error(WEFT_ENOTSUP, "cuda: %s has no %s", soname, names[i]);
            dlclose(h);
            return rc;
        }
    }
    *handle = h;
    return 0;
}

#define WFC_NAME(f) XSTR(f),

static void *cublas_handle;
static wfc_cublas_api cublas_table;

const wfc_cublas_api *wfc_cublas(void)
{
    static const char *const names[] = {WFC_CUBLAS_FUNCTIONS(WFC_NAME)};
    pthread_mutex_lock(&lock);
    int rc = cublas_handle ? 0
                           : open_table(&cublas_handle, "libcublas.so." XSTR(CUBLAS_VER_MAJOR),
                                        names, (void **)&cublas_table,
                                        (int)(sizeof names / sizeof *names));
    pthread_mutex_unlock(&lock);
    return rc == 0 ? &cublas_table : NULL;
}

#ifdef WEFT_HAVE_CUDNN
static void *cudnn_handle;
static wfc_cudnn_api cudnn_table;

const wfc_cudnn_api *wfc_cudnn(void)
{
    static const char *const names[] = {WFC_CUDNN_FUNCTIONS(WFC_NAME)};
    pthread_mutex_lock(&lock);
    int rc = cudnn_handle ? 0
                          : open_table(&cudnn_handle, "libcudnn.so." XSTR(CUDNN_MAJOR), names,
                                       (void **)&cudnn_table, (int)(sizeof names / sizeof *names));
    pthread_mutex_unlock(&lock);
    return rc == 0 ? &cudnn_table : NULL;
}
#endif

void wfc_libs_close(void)
{
    pthread_mutex_lock(&lock);
    if (cublas_handle)
        dlclose(cublas_handle);
    cublas_handle = NULL;
#ifdef WEFT_HAVE_CUDNN
    if (cudnn_handle)
        dlclose(cudnn_handle);
    cudnn_handle = NULL;
#endif
    pthread_mutex_unlock(&lock);
}
