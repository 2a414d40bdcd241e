/* tests/test_shm.c — tensors in POSIX shared memory (issue 18): a handle
 * opened in a forked process sees and writes the same elements, views
 * travel with their strides and offset, and the object disappears from
 * /dev/shm exactly when the last holder in any process lets go. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <weft/distributed.h>

#include "tap.h"

/* Whether the object a handle names is still in /dev/shm. */
static int object_exists(const char *handle)
{
    char name[128], path[160];
    if (sscanf(handle, "weftshm1:%127[^:]", name) != 1)
        return -1;
    snprintf(path, sizeof path, "/dev/shm%s", name);
    struct stat st;
    return stat(path, &st) == 0;
}

static weft_tensor *arange_f32(int64_t n)
{
    weft_tensor *t = NULL;
    weft_empty(&t, &n, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    float *p = weft_tensor_data_ptr(t);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)i;
    return t;
}

int main(void)
{
    if (weft_load_default_plugins() < 0) {
        printf("1..0 # SKIP no plugins: %s\n", weft_last_error());
        return 0;
    }
    weft_tensor *src = arange_f32(6), *shared = NULL, *mat = NULL;
    int64_t shape[2] = {2, 3};
    weft_view(&mat, src, shape, 2);
    is_int(weft_tensor_share_memory(&shared, mat), 0, "share_memory of a 2x3 float32");
    ok(weft_tensor_is_shared(shared) && !weft_tensor_is_shared(mat), "only the copy is shared");
    ok(weft_tensor_ndim(shared) == 2 && weft_tensor_size(shared, 1) == 3 &&
           ((float *)weft_tensor_data_ptr(shared))[5] == 5.0f,
       "same sizes and elements");
    weft_tensor *again = NULL;
    weft_tensor_share_memory(&again, shared);
    ok(again == shared, "sharing a shared tensor gives itself");
    weft_tensor_release(again);

    char handle[WEFT_SHM_HANDLE_MAX];
    is_int(weft_shm_handle(handle, sizeof handle, shared), 0, "handle: %s", handle);
    is_int(object_exists(handle), 1, "the object is in /dev/shm");

    /* a child process opens it, checks it, writes into it and lets go */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        weft_tensor *t = NULL;
        int bad = weft_shm_open(&t, handle) < 0 || weft_tensor_size(t, 0) != 2 ||
                  ((float *)weft_tensor_data_ptr(t))[4] != 4.0f;
        if (!bad)
            ((float *)weft_tensor_data_ptr(t))[1] = 42.0f;
        weft_tensor_release(t);
        _exit(bad);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a forked process opens the handle and reads it");
    is_double(((float *)weft_tensor_data_ptr(shared))[1], 42.0, 0, "... and its write is seen here");
    is_int(object_exists(handle), 1, "the child letting go leaves the object to this holder");

    /* a view travels with its offset and strides */
    weft_tensor *col = NULL, *opened = NULL;
    weft_select(&col, shared, 1, 1); /* elements 1 and 4: offset 1, stride 3 */
    char vh[WEFT_SHM_HANDLE_MAX];
    is_int(weft_shm_handle(vh, sizeof vh, col), 0, "handle of a strided view: %s", vh);
    is_int(weft_shm_open(&opened, vh), 0, "opened again");
    double a = 0, b = 0;
    int64_t i1 = 1;
    weft_tensor_get(opened, &i1, &a);
    weft_tensor_get(col, &i1, &b);
    ok(a == 4.0 && b == 4.0 && weft_tensor_stride(opened, 0) == 3, "the view's elements and stride");
    weft_tensor_release(col);

    /* errors */
    char tiny[8];
    is_int(weft_shm_handle(tiny, sizeof tiny, shared), WEFT_ERANGE, "a buffer too small: %s",
           weft_last_error());
    is_int(weft_shm_handle(handle, sizeof handle, src), WEFT_EINVAL, "a tensor not in shared memory: %s",
           weft_last_error());
    weft_tensor *none = NULL;
    is_int(weft_shm_open(&none, "weftshm1:/x"), WEFT_EINVAL, "a malformed handle: %s", weft_last_error());
    ok(none == NULL, "... leaves the output NULL");
    char beyond[WEFT_SHM_HANDLE_MAX], name[128];
    sscanf(handle, "weftshm1:%127[^:]", name);
    snprintf(beyond, sizeof beyond, "weftshm1:%s:float32:0:1:1000,1", name);
    is_int(weft_shm_open(&none, beyond), WEFT_EIO, "a handle reaching past the object: %s",
           weft_last_error());
    is_int(weft_tensor_share_memory(&none, NULL), WEFT_EINVAL, "share_memory of NULL");

    /* the last holder in this process lets go: the object is gone */
    weft_tensor_release(opened);
    is_int(object_exists(handle), 1, "one holder left: the object stays");
    weft_tensor_release(shared);
    is_int(object_exists(handle), 0, "the last holder let go: the object is unlinked");
    is_int(weft_shm_open(&none, handle), WEFT_ENOTFOUND, "opening it now: %s", weft_last_error());

    /* the child is the last holder: it frees the object when it exits */
    weft_tensor *s2 = NULL;
    weft_tensor_share_memory(&s2, src);
    weft_shm_handle(handle, sizeof handle, s2);
    int to_child[2], from_child[2];
    if (pipe(to_child) || pipe(from_child))
        return 1;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        weft_tensor *t = NULL;
        char c = weft_shm_open(&t, handle) == 0 ? 'y' : 'n';
        (void)!write(from_child[1], &c, 1);
        (void)!read(to_child[0], &c, 1); /* the parent has let go */
        int bad = ((float *)weft_tensor_data_ptr(t))[5] != 5.0f;
        weft_tensor_release(t);
        _exit(bad);
    }
    char c = 0;
    (void)!read(from_child[0], &c, 1);
    weft_tensor_release(s2);
    is_int(object_exists(handle), 1, "the parent let go first: the child's mapping keeps it");
    (void)!write(to_child[1], &c, 1);
    waitpid(pid, &status, 0);
    ok(c == 'y' && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child read it after the parent let go");
    is_int(object_exists(handle), 0, "the child, last holder, unlinked it");

    /* zero elements */
    weft_tensor *empty = arange_f32(0), *se = NULL;
    is_int(weft_tensor_share_memory(&se, empty), 0, "a tensor of 0 elements can be shared");
    weft_tensor_release(se);
    weft_tensor_release(empty);
    weft_tensor_release(mat);
    weft_tensor_release(src);
    return done_testing();
}
