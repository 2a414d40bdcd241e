/* distributed/shm.c — tensors in POSIX shared memory, for processes of one
 * machine (torch.multiprocessing's role).  The object starts with a small
 * header holding a reference count shared by every process that maps it:
 * each mapping counts one, and the mapping whose release takes the count
 * to zero unlinks the name, so the memory goes when the last holder lets
 * go (a process that is killed never decrements: its object stays in
 * /dev/shm until removed by hand). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "distributed/dist.h"

#define SHM_MAGIC 0x7765667473686d31ull /* "weftshm1" */
#define SHM_HEADER 64                   /* keeps the elements 64-byte aligned */
#define SHM_MAX_DIMS 8

typedef struct shm_header {
    uint64_t magic;
    _Atomic int64_t refs;
    int64_t nbytes; /* bytes after the header */
} shm_header;

/* One mapping of this process; the registry answers is_shared and
 * handle from a data pointer. */
typedef struct shm_map {
    char name[64];
    shm_header *header;
    size_t length; /* the whole mapping */
    struct shm_map *next;
} shm_map;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static shm_map *registry;
static _Atomic unsigned name_counter;

static void registry_add(shm_map *m)
{
    pthread_mutex_lock(&registry_lock);
    m->next = registry;
    registry = m;
    pthread_mutex_unlock(&registry_lock);
}

/* The mapping holding byte p, or NULL.  Called with the lock held. */
static shm_map *registry_find(const void *p)
{
    for (shm_map *m = registry; m; m = m->next) {
        const char *data = (const char *)m->header + SHM_HEADER;
        if ((const char *)p >= data && (const char *)p <= data + m->header->nbytes)
            return m;
    }
    return NULL;
}

/* The storage's deleter: the last view of this process's mapping died. */
static void shm_release(void *ctx)
{
    shm_map *m = ctx;
    pthread_mutex_lock(&registry_lock);
    for (shm_map **p = &registry; *p; p = &(*p)->next)
        if (*p == m) {
            *p = m->next;
            break;
        }
    pthread_mutex_unlock(&registry_lock);
    if (atomic_fetch_sub(&m->header->refs, 1) == 1)
        shm_unlink(m->name);
    munmap(m->header, m->length);
    free(m);
}

static int errno_error(int code, const char *what, const char *name)
{
    return weft_set_error(code, "%s: %s of %s failed: %s", "shm", what, name, strerror(errno));
}

/* Maps name (created with nbytes when create), counting this process in. */
static int map_object(shm_map **out, const char *name, int64_t nbytes, bool create)
{
    shm_map *m = calloc(1, sizeof *m);
    if (!m)
        return weft_set_error(WEFT_ENOMEM, "shm: out of memory");
    snprintf(m->name, sizeof m->name, "%s", name);
    int fd = shm_open(name, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
    if (fd < 0) {
        int rc = errno == ENOENT ? weft_set_error(WEFT_ENOTFOUND,
                                                  "shm_open: no shared tensor %s (every holder "
                                                  "let go of it)",
                                                  name)
                                 : errno_error(WEFT_EIO, "shm_open", name);
        free(m);
        return rc;
    }
    struct stat st;
    if (create && ftruncate(fd, (off_t)(SHM_HEADER + nbytes)) < 0) {
        int rc = errno_error(WEFT_EIO, "ftruncate", name);
        close(fd);
        shm_unlink(name);
        free(m);
        return rc;
    }
    if (fstat(fd, &st) < 0 || st.st_size < SHM_HEADER) {
        close(fd);
        free(m);
        return weft_set_error(WEFT_EIO, "shm: %s is not a weft shared tensor (too small)", name);
    }
    m->length = (size_t)st.st_size;
    void *p = mmap(NULL, m->length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        int rc = errno_error(WEFT_EIO, "mmap", name);
        if (create)
            shm_unlink(name);
        free(m);
        return rc;
    }
    m->header = p;
    if (create) {
        m->header->magic = SHM_MAGIC;
        m->header->nbytes = nbytes;
        atomic_store(&m->header->refs, 1);
    } else {
        /* count in unless the count already reached zero (the last holder
         * is unlinking it right now) */
        int64_t refs = atomic_load(&m->header->refs);
        while (refs > 0 && !atomic_compare_exchange_weak(&m->header->refs, &refs, refs + 1))
            ;
        if (m->header->magic != SHM_MAGIC || refs <= 0 ||
            (uint64_t)m->header->nbytes > m->length - SHM_HEADER) {
            munmap(p, m->length);
            free(m);
            return weft_set_error(refs <= 0 ? WEFT_ENOTFOUND : WEFT_EIO,
                                  "shm_open: %s %s", name,
                                  refs <= 0 ? "is being freed by its last holder"
                                            : "is not a weft shared tensor");
        }
    }
    *out = m;
    return 0;
}

bool weft_tensor_is_shared(const weft_tensor *t)
{
    if (!t || weft_tensor_layout(t) != WEFT_LAYOUT_STRIDED)
        return false;
    pthread_mutex_lock(&registry_lock);
    bool found = registry_find(weft_tensor_data_ptr(t)) != NULL;
    pthread_mutex_unlock(&registry_lock);
    return found;
}

int weft_tensor_share_memory(weft_tensor **out, const weft_tensor *t)
{
    if (!out || !t)
        return weft_set_error(WEFT_EINVAL, "tensor_share_memory: NULL argument");
    *out = NULL;
    if (weft_tensor_layout(t) != WEFT_LAYOUT_STRIDED)
        return weft_set_error(WEFT_EINVAL, "tensor_share_memory: a %s tensor has no storage to share",
                              weft_layout_name(weft_tensor_layout(t)));
    if (weft_tensor_device(t).type != WEFT_DEVICE_TYPE_CPU)
        return weft_set_error(WEFT_EDEVICE, "tensor_share_memory: only CPU tensors");
    if (weft_tensor_is_shared(t)) {
        *out = weft_tensor_retain(t);
        return 0;
    }
    int64_t nbytes = weft_tensor_numel(t) * (int64_t)weft_dtype_size(weft_tensor_dtype(t));
    char name[64];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(name, sizeof name, "/weft-%ld-%u-%lx", (long)getpid(), atomic_fetch_add(&name_counter, 1),
             (unsigned long)ts.tv_nsec);
    shm_map *m;
    int rc = map_object(&m, name, nbytes, true);
    if (rc < 0)
        return rc;
    registry_add(m);
    weft_tensor *s = NULL;
    /* the deleter runs also when from_blob fails: nothing to undo here */
    rc = weft_from_blob(&s, (char *)m->header + SHM_HEADER, weft_tensor_sizes(t), NULL,
                        weft_tensor_ndim(t), weft_tensor_dtype(t), WEFT_DEVICE_CPU, shm_release, m);
    if (rc < 0)
        return rc;
    bool grad = weft_set_grad_enabled(false);
    rc = weft_copy_(s, t);
    weft_set_grad_enabled(grad);
    if (rc < 0) {
        weft_tensor_release(s);
        return rc;
    }
    *out = s;
    return 0;
}

int weft_shm_handle(char *buf, size_t size, const weft_tensor *t)
{
    if (!buf || !t)
        return weft_set_error(WEFT_EINVAL, "shm_handle: NULL argument");
    int ndim = weft_tensor_ndim(t);
    if (ndim > SHM_MAX_DIMS)
        return weft_set_error(WEFT_EINVAL, "shm_handle: %d dimensions; handles carry at most %d",
                              ndim, SHM_MAX_DIMS);
    pthread_mutex_lock(&registry_lock);
    shm_map *m = weft_tensor_layout(t) == WEFT_LAYOUT_STRIDED
                     ? registry_find(weft_tensor_data_ptr(t))
                     : NULL;
    char name[64] = "";
    int64_t offset = 0;
    if (m) {
        snprintf(name, sizeof name, "%s", m->name);
        offset = (const char *)weft_tensor_data_ptr(t) - ((const char *)m->header + SHM_HEADER);
    }
    pthread_mutex_unlock(&registry_lock);
    if (!m)
        return weft_set_error(WEFT_EINVAL, "shm_handle: the tensor is not in shared memory "
                                           "(weft_tensor_share_memory first)");
    char text[WEFT_SHM_HANDLE_MAX];
    int len = snprintf(text, sizeof text, "weftshm1:%s:%s:%" PRId64 ":%d", name,
                       weft_dtype_name(weft_tensor_dtype(t)), offset, ndim);
    for (int i = 0; i < ndim; i++)
        len += snprintf(text + len, sizeof text - (size_t)len, ":%" PRId64 ",%" PRId64,
                        weft_tensor_sizes(t)[i], weft_tensor_strides(t)[i]);
    if ((size_t)len >= size)
        return weft_set_error(WEFT_ERANGE, "shm_handle: the handle needs %d bytes, the buffer has %zu",
                              len + 1, size);
    memcpy(buf, text, (size_t)len + 1);
    return 0;
}

int weft_shm_open(weft_tensor **out, const char *handle)
{
    if (!out || !handle)
        return weft_set_error(WEFT_EINVAL, "shm_open: NULL argument");
    *out = NULL;
    char name[64], dtname[32];
    int64_t offset, sizes[SHM_MAX_DIMS], strides[SHM_MAX_DIMS];
    int ndim, used = 0;
    if (sscanf(handle, "weftshm1:%63[^:]:%31[^:]:%" SCNd64 ":%d%n", name, dtname, &offset, &ndim,
               &used) != 4 ||
        ndim < 0 || ndim > SHM_MAX_DIMS || offset < 0)
        return weft_set_error(WEFT_EINVAL, "shm_open: malformed handle '%.80s'", handle);
    const char *p = handle + used;
    for (int i = 0; i < ndim; i++) {
        int n = 0;
        if (sscanf(p, ":%" SCNd64 ",%" SCNd64 "%n", &sizes[i], &strides[i], &n) != 2 ||
            sizes[i] < 0 || strides[i] < 0)
            return weft_set_error(WEFT_EINVAL, "shm_open: malformed sizes in handle '%.80s'", handle);
        p += n;
    }
    weft_dtype dt = weft_dtype_from_name(dtname);
    if (*p || dt == WEFT_DTYPE_UNSET || name[0] != '/')
        return weft_set_error(WEFT_EINVAL, "shm_open: malformed handle '%.80s'", handle);
    /* the last element the view reaches must lie inside the object */
    int64_t last = offset, esize = (int64_t)weft_dtype_size(dt), numel = 1;
    for (int i = 0; i < ndim; i++) {
        numel *= sizes[i];
        if (sizes[i] > 0)
            last += (sizes[i] - 1) * strides[i] * esize;
    }
    shm_map *m;
    int rc = map_object(&m, name, 0, false);
    if (rc < 0)
        return rc;
    int64_t held = m->header->nbytes;
    if (numel > 0 && last + esize > held) {
        shm_release(m);
        return weft_set_error(WEFT_EIO, "shm_open: %s holds %" PRId64 " bytes, the handle reaches %" PRId64,
                              name, held, last + esize);
    }
    registry_add(m);
    return weft_from_blob(out, (char *)m->header + SHM_HEADER + offset, sizes, strides, ndim, dt,
                          WEFT_DEVICE_CPU, shm_release, m);
}
