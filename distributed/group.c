/* distributed/group.c — the backend plugin, the world and its sub-groups.
 * The backend is found like a device plugin (the same directories, the
 * same dlopen) but under its own file prefix, libweftdist-NAME.so, so the
 * device loader's scan never opens it: a process that does not ask for
 * distributed work never maps MPI. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/work.h"

wdist_state wdist__state = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, NULL, NULL, 1, NULL};

static const char *const reduce_names[WEFT_REDUCE_NUM_OPS] = {"sum", "avg", "max", "min", "prod"};

const char *weft_reduce_op_name(int op)
{
    return op >= 0 && op < WEFT_REDUCE_NUM_OPS ? reduce_names[op] : "invalid";
}

/* Tries dir/libweftdist-NAME.so; appends dir to `looked` for the message. */
static void *open_in(const char *dir, const char *name, char *looked, size_t size, char *why,
                     size_t why_size)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/libweftdist-%s.so", dir, name);
    size_t len = strlen(looked);
    snprintf(looked + len, size - len, "%s%s", len ? ", " : "", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    fclose(f);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        snprintf(why, why_size, "%s", dlerror());
    return h;
}

/* The directories of the device loader (weft.h): $WEFT_PLUGIN_PATH's
 * absolute entries, weft/plugins beside the libweft that is loaded, the
 * installation's plugin directory. */
static int load_backend(const char *name)
{
    char looked[1024] = "", why[512] = "";
    void *h = NULL;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return weft_set_error(WEFT_EINVAL, "dist_init: backend name '%s' is not [a-z0-9_]+",
                                  name);
    const char *env = getenv("WEFT_PLUGIN_PATH");
    if (env && *env) {
        char *copy = strdup(env), *save = NULL;
        if (!copy)
            return weft_set_error(WEFT_ENOMEM, "dist_init: out of memory");
        for (char *d = strtok_r(copy, ":", &save); d && !h && !why[0];
             d = strtok_r(NULL, ":", &save))
            if (d[0] == '/')
                h = open_in(d, name, looked, sizeof looked, why, sizeof why);
        free(copy);
    }
    Dl_info info;
    if (!h && !why[0] && dladdr((void *)&weft_dist_init, &info) && info.dli_fname) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", info.dli_fname);
        char *slash = strrchr(dir, '/');
        if (slash) {
            snprintf(slash, sizeof dir - (size_t)(slash - dir), "/weft/plugins");
            h = open_in(dir, name, looked, sizeof looked, why, sizeof why);
        }
    }
    if (!h && !why[0])
        h = open_in(WEFT_PLUGINDIR, name, looked, sizeof looked, why, sizeof why);
    if (!h && why[0])
        return weft_set_error(WEFT_EPLUGIN, "dist_init: backend '%s' did not load: %s", name, why);
    if (!h)
        return weft_set_error(WEFT_ENOTFOUND,
                              "dist_init: no backend '%s' (libweftdist-%s.so) in %s", name,
                              name, looked);
    const weft_dist_backend *be = dlsym(h, WEFT_DIST_BACKEND_SYMBOL);
    /* version 1 ends at finalize; version 2 grows the struct at the end */
    size_t need = be && be->version >= 2 ? sizeof *be : offsetof(weft_dist_backend, device_type);
    if (!be || be->struct_size < need || be->version < 1 || be->version > WEFT_DIST_BACKEND_VERSION ||
        !be->init || !be->group_create || !be->group_destroy || !be->start || !be->test ||
        !be->abandon || !be->finalize) {
        dlclose(h);
        return weft_set_error(WEFT_EPLUGIN,
                              "dist_init: libweftdist-%s.so has no usable %s (missing, version "
                              "other than 1..%d, or a NULL function)",
                              name, WEFT_DIST_BACKEND_SYMBOL, WEFT_DIST_BACKEND_VERSION);
    }
    wdist__state.library = h;
    wdist__state.backend = be;
    return 0;
}

int wdist__backend_device_type(void)
{
    const weft_dist_backend *be = wdist__state.backend;
    return be && be->version >= 2 ? be->device_type : WEFT_DEVICE_TYPE_CPU;
}

uint32_t wdist__backend_caps(void)
{
    const weft_dist_backend *be = wdist__state.backend;
    return be && be->version >= 2 ? be->caps : 0;
}

int wdist__backend_ordered(void)
{
    const weft_dist_backend *be = wdist__state.backend;
    return be && be->version >= 2 && be->exchange;
}

static weft_process_group *group_alloc(int size)
{
    weft_process_group *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->world_ranks = calloc((size_t)(size > 0 ? size : 1), sizeof *g->world_ranks);
    if (!g->world_ranks) {
        free(g);
        return NULL;
    }
    g->size = size;
    g->rank = -1;
    return g;
}

static void group_register(weft_process_group *g)
{
    g->next_group = wdist__state.groups;
    wdist__state.groups = g;
}

static void group_unregister(weft_process_group *g)
{
    for (weft_process_group **p = &wdist__state.groups; *p; p = &(*p)->next_group)
        if (*p == g) {
            *p = g->next_group;
            return;
        }
}

static int64_t default_timeout(void)
{
    const char *env = getenv("WEFT_DIST_TIMEOUT_MS");
    if (env && *env) {
        char *end;
        long long v = strtoll(env, &end, 10);
        if (*end == '\0' && v > 0)
            return v;
    }
    return 30LL * 60 * 1000;
}

int weft_dist_init(weft_process_group **world, const weft_dist_options *opts)
{
    if (!world)
        return weft_set_error(WEFT_EINVAL, "dist_init: NULL output");
    *world = NULL;
    if (opts && opts->struct_size < sizeof *opts)
        return weft_set_error(WEFT_EINVAL, "dist_init: options of size %u, expected %zu",
                              (unsigned)opts->struct_size, sizeof *opts);
    const char *name = opts && opts->backend ? opts->backend : getenv("WEFT_DIST_BACKEND");
    if (!name || !*name)
        name = "mpi";
    pthread_mutex_lock(&wdist__state.lock);
    int rc;
    if (wdist__state.world) {
        rc = weft_set_error(WEFT_EEXIST, "dist_init: the world is already initialised (backend %s)",
                            wdist__state.backend->name);
        goto out;
    }
    if (wdist__state.backend && strcmp(wdist__state.backend->name, name) != 0) {
        rc = weft_set_error(WEFT_EINVAL, "dist_init: backend %s was used before in this process; "
                                         "%s cannot follow it",
                            wdist__state.backend->name, name);
        goto out;
    }
    if (!wdist__state.backend && (rc = load_backend(name)) < 0)
        goto out;
    void *comm = NULL;
    int rank = -1, size = 0;
    if ((rc = wdist__state.backend->init(&comm, &rank, &size)) < 0)
        goto out;
    if ((opts && opts->rank >= 0 && opts->rank != rank) ||
        (opts && opts->world_size > 0 && opts->world_size != size)) {
        wdist__state.backend->group_destroy(comm);
        char asked[64];
        if (opts->rank >= 0 && opts->world_size > 0)
            snprintf(asked, sizeof asked, "rank %d of %d", opts->rank, opts->world_size);
        else if (opts->rank >= 0)
            snprintf(asked, sizeof asked, "rank %d", opts->rank);
        else
            snprintf(asked, sizeof asked, "a world of %d", opts->world_size);
        rc = weft_set_error(WEFT_EINVAL, "dist_init: asked for %s, but backend %s says rank %d of %d",
                            asked, name, rank, size);
        goto out;
    }
    weft_process_group *g = group_alloc(size);
    if (!g) {
        wdist__state.backend->group_destroy(comm);
        rc = weft_set_error(WEFT_ENOMEM, "dist_init: out of memory");
        goto out;
    }
    for (int i = 0; i < size; i++)
        g->world_ranks[i] = i;
    g->rank = rank;
    g->comm = comm;
    g->is_world = 1;
    g->timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : default_timeout();
    snprintf(g->name, sizeof g->name, "world");
    group_register(g);
    wdist__state.world = g;
    *world = g;
    rc = 0;
out:
    pthread_mutex_unlock(&wdist__state.lock);
    return rc;
}

/* Drops a group's communicator and memory; its queue must be empty or
 * abandoned.  Called with the lock held. */
static void group_destroy_locked(weft_process_group *g)
{
    /* works still queued point at the group: finish them first (each
     * ends done or at the timeout; their owners free them later without
     * touching the group) */
    while (g->queue_head)
        wdist__wait_locked(g->queue_head);
    /* a broken group's communicator may still have requests the backend
     * cannot finish: leave it to the process's end */
    if (g->comm && !g->broken[0])
        wdist__state.backend->group_destroy(g->comm);
    group_unregister(g);
    free(g->world_ranks);
    free(g);
}

int weft_dist_finalize(weft_process_group *world)
{
    if (!world)
        return 0;
    pthread_mutex_lock(&wdist__state.lock);
    int rc = 0;
    if (world != wdist__state.world) {
        rc = weft_set_error(WEFT_EINVAL, "dist_finalize: not the world group");
        goto out;
    }
    while (wdist__state.groups)
        group_destroy_locked(wdist__state.groups);
    wdist__state.world = NULL;
    rc = wdist__state.backend->finalize();
    /* the library stays mapped: MPI cannot be initialised twice in one
     * process, and its atexit handlers live in it */
out:
    pthread_mutex_unlock(&wdist__state.lock);
    return rc;
}

int weft_dist_group_new(weft_process_group **out, weft_process_group *parent, const int *ranks,
                        int n)
{
    if (!out || !parent || !ranks)
        return weft_set_error(WEFT_EINVAL, "dist_group_new: NULL argument");
    *out = NULL;
    pthread_mutex_lock(&wdist__state.lock);
    int rc = 0;
    if (n < 1 || n > parent->size) {
        rc = weft_set_error(WEFT_EINVAL, "dist_group_new: %d ranks for a sub-group of %s (size %d)",
                            n, parent->name, parent->size);
        goto out;
    }
    int member = -1;
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= parent->size) {
            rc = weft_set_error(WEFT_EINVAL, "dist_group_new: rank %d is outside %s (size %d)",
                                ranks[i], parent->name, parent->size);
            goto out;
        }
        for (int j = 0; j < i; j++)
            if (ranks[j] == ranks[i]) {
                rc = weft_set_error(WEFT_EINVAL, "dist_group_new: rank %d is listed twice",
                                    ranks[i]);
                goto out;
            }
        if (ranks[i] == parent->rank && parent->rank >= 0)
            member = i;
    }
    if (parent->broken[0]) {
        rc = weft_set_error(WEFT_EIO, "dist_group_new: %s", parent->broken);
        goto out;
    }
    weft_process_group *g = group_alloc(n);
    if (!g) {
        rc = weft_set_error(WEFT_ENOMEM, "dist_group_new: out of memory");
        goto out;
    }
    int len = snprintf(g->name, sizeof g->name, "group %d [", wdist__state.next_group_id++);
    for (int i = 0; i < n; i++) {
        g->world_ranks[i] = parent->world_ranks[ranks[i]];
        if (len < (int)sizeof g->name)
            len += snprintf(g->name + len, sizeof g->name - (size_t)len, "%s%d", i ? ", " : "",
                            g->world_ranks[i]);
    }
    if (len < (int)sizeof g->name)
        snprintf(g->name + len, sizeof g->name - (size_t)len, "]");
    g->timeout_ms = parent->timeout_ms;
    if (member >= 0) {
        if ((rc = wdist__state.backend->group_create(&g->comm, parent->comm, ranks, n)) < 0) {
            free(g->world_ranks);
            free(g);
            goto out;
        }
        g->rank = member;
    }
    group_register(g);
    *out = g;
out:
    pthread_mutex_unlock(&wdist__state.lock);
    return rc;
}

void weft_dist_group_free(weft_process_group *group)
{
    if (!group || group->is_world)
        return;
    pthread_mutex_lock(&wdist__state.lock);
    /* works still queued are waited for by their owners; an unfinished
     * one keeps pointing here, so the group outlives them only if broken */
    group_destroy_locked(group);
    pthread_mutex_unlock(&wdist__state.lock);
}

int weft_dist_rank(const weft_process_group *group)
{
    return group ? group->rank : -1;
}

int weft_dist_size(const weft_process_group *group)
{
    return group ? group->size : 0;
}

int weft_dist_world_rank(const weft_process_group *group, int rank)
{
    return group && rank >= 0 && rank < group->size ? group->world_ranks[rank] : -1;
}

const char *weft_dist_group_name(const weft_process_group *group)
{
    return group ? group->name : "(null)";
}

const char *weft_dist_backend_name(const weft_process_group *group)
{
    return group && wdist__state.backend ? wdist__state.backend->name : "(none)";
}

int weft_dist_set_timeout(weft_process_group *group, int64_t timeout_ms)
{
    if (!group || timeout_ms <= 0)
        return weft_set_error(WEFT_EINVAL, "dist_set_timeout: %s",
                              group ? "the timeout must be > 0 ms" : "NULL group");
    pthread_mutex_lock(&wdist__state.lock);
    group->timeout_ms = timeout_ms;
    pthread_mutex_unlock(&wdist__state.lock);
    return 0;
}
