/* plugins/loader.c — finds, probes, chooses and loads plugins.
 *
 * A candidate is opened with RTLD_NOW | RTLD_LOCAL and its entry descriptor
 * (a data symbol) is read without running plugin code; only the score
 * function runs before the choice, and plugins must compile it for the
 * baseline ISA.  Among candidates with one name the best score wins.  The
 * chosen plugin's init gets a registrar of its own; if init fails, everything
 * it registered is released, so the core's tables are exactly as before.
 * The current directory is never searched. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dispatch/dispatcher.h"

#include "plugins/quiesce.h"

int wf__registrar_new(weft_registrar **out, const char *name);
void wf__registrar_release_all(weft_registrar *reg);
long wf__registrar_release_unless_depended(weft_registrar *reg, char *buf, size_t size);

typedef struct plugin {
    char *path;
    char *name;
    dev_t dev;
    ino_t ino;
    void *handle;
    const weft_plugin_descriptor *desc;
    weft_registrar *reg;
    struct plugin *next;
} plugin;

typedef struct report_row {
    weft_plugin_report r;
    struct report_row *next;
} report_row;

static pthread_mutex_t loader_mutex = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
/* Set while an unload holds the mutex and waits for sections to end. */
static atomic_bool quiescing;

/* Locks the loader.  A thread inside a section (a kernel calling into the
 * loader) must not block on the mutex: an unload may hold it while waiting
 * for that very thread.  It waits only while the holder is not quiescing,
 * else gives up with WEFT_EBUSY. */
static int loader_lock(const char *what)
{
    if (!wf__reader_inside()) {
        pthread_mutex_lock(&loader_mutex);
        return 0;
    }
    while (pthread_mutex_trylock(&loader_mutex) != 0) {
        if (atomic_load(&quiescing))
            return wf__errorf(WEFT_EBUSY,
                              "%s: the plugin loader is waiting for running operators to finish "
                              "an unload, and this call comes from inside one",
                              what);
        sched_yield();
    }
    return 0;
}
/* Files weft_load_default_plugins has already decided on (a losing variant,
 * a failure, an unsupported build): a later call neither opens them again
 * nor repeats their report rows.  weft_load_plugin still takes them. */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
} file_id;
static file_id *decided;
static int n_decided, cap_decided;

static bool was_decided(dev_t dev, ino_t ino)
{
    for (int i = 0; i < n_decided; i++)
        if (decided[i].dev == dev && decided[i].ino == ino)
            return true;
    return false;
}

static void remember_decided(dev_t dev, ino_t ino)
{
    if (was_decided(dev, ino))
        return;
    if (n_decided == cap_decided) {
        int cap = cap_decided ? 2 * cap_decided : 16;
        file_id *g = realloc(decided, (size_t)cap * sizeof *g);
        if (!g)
            return; /* only costs a repeated probe later */
        decided = g;
        cap_decided = cap;
    }
    decided[n_decided++] = (file_id){dev, ino};
}
static plugin *loaded;
static report_row *report_head, **report_tail = &report_head;
static int report_rows;
static char **api_paths;
static int n_api_paths;

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void report(const char *path, const char *name, const char *variant,
                   weft_plugin_status status, const char *error, uint32_t major, uint32_t minor,
                   int score)
{
    report_row *row = calloc(1, sizeof *row);
    if (!row)
        return;
    row->r.path = dup_or_null(path);
    row->r.name = dup_or_null(name);
    row->r.variant = dup_or_null(variant);
    row->r.status = status;
    row->r.error = dup_or_null(error);
    row->r.abi_major = major;
    row->r.abi_minor = minor;
    row->r.score = score;
    *report_tail = row;
    report_tail = &row->next;
    report_rows++;
}

WEFT_API const char *weft_version(void)
{
    return WEFT_VERSION_STRING;
}

WEFT_API void weft_plugin_abi(uint32_t *major, uint32_t *minor)
{
    if (major)
        *major = WEFT_PLUGIN_ABI_MAJOR;
    if (minor)
        *minor = WEFT_PLUGIN_ABI_MINOR;
}

WEFT_API int weft_plugin_add_search_path(const char *dir)
{
    if (!dir || !*dir)
        return wf__errorf(WEFT_EINVAL, "plugin_add_search_path: empty directory");
    int lrc = loader_lock("plugin_add_search_path");
    if (lrc < 0)
        return lrc;
    char **grown = realloc(api_paths, (size_t)(n_api_paths + 1) * sizeof *grown);
    char *copy = strdup(dir);
    if (!grown || !copy) {
        if (grown)
            api_paths = grown;
        free(copy);
        pthread_mutex_unlock(&loader_mutex);
        return wf__errorf(WEFT_ENOMEM, "plugin_add_search_path: out of memory");
    }
    api_paths = grown;
    api_paths[n_api_paths++] = copy;
    pthread_mutex_unlock(&loader_mutex);
    return 0;
}

/* The search path, in order; the caller frees each string and the array. */
static int search_dirs(char ***out)
{
    int cap = n_api_paths + 8, n = 0;
    char **dirs = calloc((size_t)cap, sizeof *dirs);
    if (!dirs)
        return -1;
    for (int i = 0; i < n_api_paths; i++)
        dirs[n++] = strdup(api_paths[i]);
    const char *env = getenv("WEFT_PLUGIN_PATH");
    if (env && *env) {
        char *copy = strdup(env), *save = NULL;
        for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save)) {
            if (n == cap) {
                char **g = realloc(dirs, (size_t)(cap *= 2) * sizeof *g);
                if (!g)
                    break;
                dirs = g;
            }
            /* a relative entry would depend on the current directory */
            if (d[0] == '/')
                dirs[n++] = strdup(d);
        }
        free(copy);
    }
    if (n + 2 > cap) {
        char **g = realloc(dirs, (size_t)(cap = n + 2) * sizeof *g);
        if (!g) {
            for (int i = 0; i < n; i++)
                free(dirs[i]);
            free(dirs);
            return -1;
        }
        dirs = g;
    }
    /* beside the libweft that is actually loaded: a relocated or
     * DESTDIR-staged installation finds its own plugins */
    Dl_info info;
    if (dladdr((void *)&weft_load_default_plugins, &info) && info.dli_fname) {
        char buf[PATH_MAX];
        snprintf(buf, sizeof buf, "%s", info.dli_fname);
        char *slash = strrchr(buf, '/');
        if (slash) {
            *slash = '\0';
            size_t len = strlen(buf);
            snprintf(buf + len, sizeof buf - len, "/weft/plugins");
            dirs[n++] = strdup(buf);
        }
    }
    dirs[n++] = strdup(WEFT_PLUGINDIR);
    *out = dirs;
    return n;
}

static void free_dirs(char **dirs, int n)
{
    for (int i = 0; i < n; i++)
        free(dirs[i]);
    free(dirs);
}

static plugin *find_loaded_file(dev_t dev, ino_t ino)
{
    for (plugin *p = loaded; p; p = p->next)
        if (p->dev == dev && p->ino == ino)
            return p;
    return NULL;
}

static plugin *find_loaded_name(const char *name)
{
    for (plugin *p = loaded; p; p = p->next)
        if (strcmp(p->name, name) == 0)
            return p;
    return NULL;
}

static bool name_disabled(const char *name)
{
    const char *list = getenv("WEFT_DISABLE_PLUGINS");
    if (!list)
        return false;
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && strncmp(p, name, len) == 0)
            return true;
        p += n + (end ? 1 : 0);
    }
    return false;
}

/* WEFT_PLUGIN_VARIANT=name:variant[,name:variant...]: whether autoloading
 * may choose this variant of name.  False only when name is listed with
 * another variant (a variant-less plugin matches no listed one).  Tests
 * that compare bits between processes pin the variant so that, say, a run
 * under valgrind, whose CPUID hides AVX-512, and its native re-runs use
 * the same CPU code; WEFT_DISABLE_PLUGINS cannot, as variants share the
 * name. */
static bool variant_allowed(const char *name, const char *variant)
{
    const char *list = getenv("WEFT_PLUGIN_VARIANT");
    if (!list)
        return true;
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', n);
        if (colon && (size_t)(colon - p) == len && strncmp(p, name, len) == 0) {
            size_t vlen = n - (size_t)(colon + 1 - p);
            return variant && strlen(variant) == vlen && strncmp(colon + 1, variant, vlen) == 0;
        }
        p += n + (end ? 1 : 0);
    }
    return true;
}

/* An opened, checked candidate that has not been initialised. */
typedef struct candidate {
    char *path;
    dev_t dev;
    ino_t ino;
    void *handle;
    const weft_plugin_descriptor *desc;
    int score;
    bool chosen;
} candidate;

/* Opens path and checks its descriptor.  On failure the report has the
 * row and the return is negative. */
static int probe(candidate *c, const char *path)
{
    memset(c, 0, sizeof *c);
    struct stat st;
    if (stat(path, &st) != 0) {
        report(path, NULL, NULL, WEFT_PLUGIN_FAILED, "file not found", 0, 0, 0);
        return wf__errorf(WEFT_ENOTFOUND, "plugin '%s': file not found", path);
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        report(path, NULL, NULL, WEFT_PLUGIN_FAILED, e, 0, 0, 0);
        return wf__errorf(WEFT_EPLUGIN, "plugin '%s': dlopen failed: %s", path, e);
    }
    const weft_plugin_descriptor *d = dlsym(h, WEFT_PLUGIN_ENTRY_SYMBOL);
    char msg[512];
    int rc = 0;
    if (!d) {
        snprintf(msg, sizeof msg, "no entry symbol '%s': not a weft plugin", WEFT_PLUGIN_ENTRY_SYMBOL);
        rc = WEFT_EPLUGIN;
    } else if (d->struct_size < offsetof(weft_plugin_descriptor, init) + sizeof(void *)) {
        snprintf(msg, sizeof msg, "entry descriptor too small (%u bytes)", d->struct_size);
        rc = WEFT_EABI;
    } else if (d->abi_major != WEFT_PLUGIN_ABI_MAJOR || d->abi_minor > WEFT_PLUGIN_ABI_MINOR) {
        snprintf(msg, sizeof msg,
                 "built for plugin ABI %u.%u, but this weft (%s) implements ABI %u.%u%s", d->abi_major,
                 d->abi_minor, WEFT_VERSION_STRING, WEFT_PLUGIN_ABI_MAJOR, WEFT_PLUGIN_ABI_MINOR,
                 d->abi_major == WEFT_PLUGIN_ABI_MAJOR ? " (the plugin needs a newer weft)" : "");
        rc = WEFT_EABI;
    } else if (!d->name || !*d->name || !d->init) {
        snprintf(msg, sizeof msg, "entry descriptor lacks a name or an init function");
        rc = WEFT_EPLUGIN;
    }
    if (rc < 0) {
        report(path, d && d->struct_size >= 32 && d->name ? d->name : NULL, NULL,
               WEFT_PLUGIN_FAILED, msg, d ? d->abi_major : 0, d ? d->abi_minor : 0, 0);
        dlclose(h);
        return wf__errorf(rc, "plugin '%s': %s", path, msg);
    }
    c->path = strdup(path);
    c->dev = st.st_dev;
    c->ino = st.st_ino;
    c->handle = h;
    c->desc = d;
    c->score = d->score ? d->score() : 0;
    return 0;
}

static void drop_candidate(candidate *c)
{
    if (c->handle)
        dlclose(c->handle);
    free(c->path);
    c->handle = NULL;
    c->path = NULL;
}

/* Runs init for a chosen candidate.  Takes its handle either way (closing
 * it on failure); the candidate keeps its path for the caller to free. */
static int init_candidate(candidate *c)
{
    const weft_plugin_descriptor *d = c->desc;
    plugin *p = calloc(1, sizeof *p);
    weft_registrar *reg = NULL;
    char *path_copy = strdup(c->path);
    if (!p || !path_copy || wf__registrar_new(&reg, d->name) < 0) {
        free(p);
        free(path_copy);
        dlclose(c->handle);
        c->handle = NULL;
        return wf__errorf(WEFT_ENOMEM, "out of memory loading a plugin");
    }
    weft_clear_error();
    wf__registrar_set_initializing(reg, true);
    int rc = d->init(reg);
    if (rc < 0) {
        char msg[768];
        const char *why = weft_last_error();
        snprintf(msg, sizeof msg, "init failed with %s: %s", weft_error_name(rc),
                 *why ? why : weft_strerror(rc));
        /* everything the plugin registered goes, newest first */
        wf__registrar_release_all(reg);
        free(reg);
        report(c->path, d->name, d->variant, WEFT_PLUGIN_FAILED, msg, d->abi_major, d->abi_minor,
               c->score);
        rc = wf__errorf(WEFT_EPLUGIN, "plugin '%s' (%s): %s", d->name, c->path, msg);
        free(p);
        free(path_copy);
        dlclose(c->handle);
        c->handle = NULL;
        return rc;
    }
    wf__registrar_set_initializing(reg, false); /* its CPU fallbacks go live */
    p->path = path_copy;
    p->name = strdup(d->name);
    p->dev = c->dev;
    p->ino = c->ino;
    p->handle = c->handle;
    c->handle = NULL;
    p->desc = d;
    p->reg = reg;
    p->next = loaded;
    loaded = p;
    report(c->path, d->name, d->variant, WEFT_PLUGIN_LOADED, NULL, d->abi_major, d->abi_minor,
           c->score);
    return 1;
}

static int strcmp_ptr_(const char *const *a, const char *const *b)
{
    return strcmp(*a, *b);
}

static bool is_plugin_file(const char *name)
{
    size_t n = strlen(name);
    return strncmp(name, "libweft-", 8) == 0 && n > 11 && strcmp(name + n - 3, ".so") == 0;
}

WEFT_API int weft_load_default_plugins(void)
{
    const char *off = getenv("WEFT_NO_AUTOLOAD");
    if (off && *off && strcmp(off, "0") != 0)
        return 0;
    int lrc = loader_lock("load_default_plugins");
    if (lrc < 0)
        return lrc;
    char **dirs;
    int ndirs = search_dirs(&dirs);
    if (ndirs < 0) {
        pthread_mutex_unlock(&loader_mutex);
        return wf__errorf(WEFT_ENOMEM, "out of memory listing plugin directories");
    }
    candidate *cands = NULL;
    int ncands = 0, cap = 0;
    for (int i = 0; i < ndirs; i++) {
        DIR *dir = opendir(dirs[i]);
        if (!dir)
            continue;
        struct dirent *e;
        /* readdir order is arbitrary: sort names so the choice is stable */
        char **names = NULL;
        int nn = 0;
        while ((e = readdir(dir)) != NULL) {
            if (!is_plugin_file(e->d_name))
                continue;
            char **g = realloc(names, (size_t)(nn + 1) * sizeof *g);
            if (!g)
                break;
            names = g;
            names[nn++] = strdup(e->d_name);
        }
        closedir(dir);
        if (nn > 1)
            qsort(names, (size_t)nn, sizeof *names, (int (*)(const void *, const void *))strcmp_ptr_);
        for (int k = 0; k < nn; k++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", dirs[i], names[k]);
            free(names[k]);
            struct stat st;
            if (stat(path, &st) != 0 || find_loaded_file(st.st_dev, st.st_ino) ||
                was_decided(st.st_dev, st.st_ino))
                continue;
            bool seen = false;
            for (int j = 0; j < ncands; j++)
                if (cands[j].dev == st.st_dev && cands[j].ino == st.st_ino)
                    seen = true;
            if (seen)
                continue;
            if (ncands == cap) {
                candidate *g = realloc(cands, (size_t)(cap = cap ? 2 * cap : 8) * sizeof *g);
                if (!g)
                    break;
                cands = g;
            }
            if (probe(&cands[ncands], path) == 0)
                ncands++;
            else
                remember_decided(st.st_dev, st.st_ino);
        }
        free(names);
    }
    free_dirs(dirs, ndirs);
    /* choose: per name, the best score that can run here */
    int loaded_now = 0;
    for (int i = 0; i < ncands; i++) {
        candidate *c = &cands[i];
        const char *name = c->desc->name;
        const weft_plugin_descriptor *d = c->desc;
        if (c->score < 0) {
            report(c->path, name, d->variant, WEFT_PLUGIN_UNSUPPORTED,
                   "its score says this machine cannot run it", d->abi_major, d->abi_minor, c->score);
            continue;
        }
        if (name_disabled(name)) {
            report(c->path, name, d->variant, WEFT_PLUGIN_SKIPPED, "disabled by WEFT_DISABLE_PLUGINS",
                   d->abi_major, d->abi_minor, c->score);
            continue;
        }
        if (!variant_allowed(name, d->variant)) {
            report(c->path, name, d->variant, WEFT_PLUGIN_SKIPPED,
                   "not the variant WEFT_PLUGIN_VARIANT asks for", d->abi_major, d->abi_minor,
                   c->score);
            continue;
        }
        int best = i;
        for (int j = 0; j < ncands; j++)
            if (j != i && cands[j].score >= 0 && strcmp(cands[j].desc->name, name) == 0 &&
                cands[j].score > cands[best].score &&
                variant_allowed(name, cands[j].desc->variant))
                best = j;
        if (best != i) {
            char msg[PATH_MAX + 64];
            snprintf(msg, sizeof msg, "a better variant was chosen: %s", cands[best].path);
            report(c->path, name, d->variant, WEFT_PLUGIN_SKIPPED, msg, d->abi_major, d->abi_minor,
                   c->score);
            continue;
        }
        if (find_loaded_name(name)) {
            report(c->path, name, d->variant, WEFT_PLUGIN_SKIPPED, "a plugin of this name is already loaded",
                   d->abi_major, d->abi_minor, c->score);
            continue;
        }
        c->chosen = true;
        if (init_candidate(c) > 0)
            loaded_now++;
    }
    for (int i = 0; i < ncands; i++) {
        remember_decided(cands[i].dev, cands[i].ino);
        drop_candidate(&cands[i]);
    }
    free(cands);
    pthread_mutex_unlock(&loader_mutex);
    return loaded_now;
}

WEFT_API int weft_load_plugin(const char *path)
{
    if (!path || !*path)
        return wf__errorf(WEFT_EINVAL, "load_plugin: path is empty");
    int lrc = loader_lock("load_plugin");
    if (lrc < 0)
        return lrc;
    char found[PATH_MAX];
    int rc = 0;
    if (!strchr(path, '/')) {
        /* a bare name is looked up in the search path, never in "." */
        char **dirs;
        int ndirs = search_dirs(&dirs);
        found[0] = '\0';
        for (int i = 0; i < ndirs && !found[0]; i++) {
            char cand[PATH_MAX];
            struct stat st;
            snprintf(cand, sizeof cand, "%s/%s", dirs[i], path);
            if (stat(cand, &st) == 0)
                snprintf(found, sizeof found, "%s", cand);
        }
        if (ndirs >= 0)
            free_dirs(dirs, ndirs);
        if (!found[0]) {
            report(path, NULL, NULL, WEFT_PLUGIN_FAILED, "not found in the plugin search path", 0, 0, 0);
            pthread_mutex_unlock(&loader_mutex);
            return wf__errorf(WEFT_ENOTFOUND, "plugin '%s' was not found in the plugin search path",
                              path);
        }
    } else {
        snprintf(found, sizeof found, "%s", path);
    }
    struct stat st;
    if (stat(found, &st) == 0 && find_loaded_file(st.st_dev, st.st_ino)) {
        pthread_mutex_unlock(&loader_mutex);
        return 0; /* the same file twice is one plugin */
    }
    candidate c;
    rc = probe(&c, found);
    if (rc == 0) {
        const weft_plugin_descriptor *d = c.desc;
        plugin *other = find_loaded_name(d->name);
        if (other) {
            char msg[PATH_MAX + 64];
            snprintf(msg, sizeof msg, "a plugin named '%s' is already loaded from %s", d->name,
                     other->path);
            report(c.path, d->name, d->variant, WEFT_PLUGIN_SKIPPED, msg, d->abi_major, d->abi_minor,
                   c.score);
            rc = wf__errorf(WEFT_EEXIST, "plugin '%s': %s", found, msg);
            drop_candidate(&c);
        } else if (c.score < 0) {
            report(c.path, d->name, d->variant, WEFT_PLUGIN_UNSUPPORTED,
                   "its score says this machine cannot run it", d->abi_major, d->abi_minor, c.score);
            rc = wf__errorf(WEFT_ENOTSUP, "plugin '%s' (%s variant) cannot run on this machine",
                            d->name, d->variant ? d->variant : "default");
            drop_candidate(&c);
        } else {
            rc = init_candidate(&c);
            if (rc > 0)
                rc = 0;
            drop_candidate(&c);
        }
    }
    pthread_mutex_unlock(&loader_mutex);
    return rc;
}

/* Appends ", N what" to an EBUSY message when n > 0. */
static void busy_part(char *buf, size_t size, size_t *len, long n, const char *one,
                      const char *many)
{
    if (n <= 0 || *len >= size)
        return;
    *len += (size_t)snprintf(buf + *len, size - *len, "%s%ld %s", *len ? ", " : "", n,
                             n == 1 ? one : many);
}

/* Unloading in three steps, so that no thread can be left running the
 * plugin's code or holding its memory:
 *   1. decide: with the registrar "closing" (new storages, streams and events
 *      of the plugin are refused meanwhile), count what is alive; then, under
 *      the registry lock, check that no other registrar's registration
 *      depends on the plugin and, in the same critical section, release all
 *      of the plugin's registrations (kernels leave the tables, its device
 *      types their slots);
 *   2. wait for every thread that was inside a dispatch, an allocation or a
 *      device call to leave it once (wf__quiesce): after that no thread can
 *      still be in, or about to call, the plugin's code;
 *   3. fini, dlclose. */
WEFT_API int weft_unload_plugin(const char *name)
{
    if (!name)
        return wf__errorf(WEFT_EINVAL, "unload_plugin: name is NULL");
    if (wf__reader_inside())
        return wf__errorf(WEFT_EBUSY,
                          "plugin '%s' cannot be unloaded from inside an operator, allocator or "
                          "device call (the code it would return to could be the plugin's)",
                          name);
    pthread_mutex_lock(&loader_mutex);
    plugin **pp = &loaded;
    while (*pp && strcmp((*pp)->name, name) != 0)
        pp = &(*pp)->next;
    plugin *p = *pp;
    if (!p) {
        pthread_mutex_unlock(&loader_mutex);
        return wf__errorf(WEFT_ENOTFOUND, "no plugin named '%s' is loaded", name);
    }
    wf__registrar_set_closing(p->reg, true);
    long storages = wf__registrar_live_kind(p->reg, WF_HOLD_STORAGE);
    long streams = wf__registrar_live_kind(p->reg, WF_HOLD_STREAM);
    char who[256] = "";
    long dependents = 0;
    if (storages == 0 && streams == 0)
        dependents = wf__registrar_release_unless_depended(p->reg, who, sizeof who);
    if (storages || streams || dependents) {
        wf__registrar_set_closing(p->reg, false);
        pthread_mutex_unlock(&loader_mutex);
        char what[512];
        size_t len = 0;
        what[0] = '\0';
        busy_part(what, sizeof what, &len, storages, "storage it allocated",
                  "storages it allocated");
        busy_part(what, sizeof what, &len, streams, "stream or event on its devices",
                  "streams and events on its devices");
        busy_part(what, sizeof what, &len, dependents, "registration by another registrar",
                  "registrations by other registrars");
        if (dependents && len < sizeof what)
            snprintf(what + len, sizeof what - len, " (%s: kernels, fallbacks or allocators for "
                     "its device types, or kernels for its operators)", who);
        return wf__errorf(WEFT_EBUSY, "plugin '%s' cannot be unloaded: still alive: %s", name,
                          what);
    }
    *pp = p->next;
    /* its variants, and whatever lost to it, are candidates again */
    n_decided = 0;
    /* The loader mutex stays held, so nobody reloads the same file before
     * fini; sections never take it blocking (loader_lock). */
    atomic_store(&quiescing, true);
    wf__quiesce();
    atomic_store(&quiescing, false);
    if (p->desc->struct_size >= offsetof(weft_plugin_descriptor, fini) + sizeof(void *) &&
        p->desc->fini)
        p->desc->fini();
    free(p->reg);
    dlclose(p->handle);
    free(p->path);
    free(p->name);
    free(p);
    pthread_mutex_unlock(&loader_mutex);
    return 0;
}

WEFT_API int weft_plugin_report_count(void)
{
    int lrc = loader_lock("plugin_report_count");
    if (lrc < 0)
        return lrc;
    int n = report_rows;
    pthread_mutex_unlock(&loader_mutex);
    return n;
}

WEFT_API int weft_plugin_report_get(int i, weft_plugin_report *out)
{
    if (!out)
        return wf__errorf(WEFT_EINVAL, "plugin_report_get: out is NULL");
    int lrc = loader_lock("plugin_report_get");
    if (lrc < 0)
        return lrc;
    report_row *row = report_head;
    for (int k = 0; row && k < i; k++)
        row = row->next;
    if (i < 0 || !row) {
        pthread_mutex_unlock(&loader_mutex);
        return wf__errorf(WEFT_ERANGE, "plugin_report_get: row %d of %d", i, report_rows);
    }
    *out = row->r;
    pthread_mutex_unlock(&loader_mutex);
    return 0;
}

static const char *const status_names[] = {"loaded", "skipped", "unsupported", "failed"};

WEFT_API int weft_plugin_report_string(char **out)
{
    if (!out)
        return wf__errorf(WEFT_EINVAL, "plugin_report_string: out is NULL");
    *out = NULL;
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return wf__errorf(WEFT_ENOMEM, "plugin_report_string: out of memory");
    int lrc = loader_lock("plugin_report_string");
    if (lrc < 0) {
        fclose(f);
        free(buf);
        return lrc;
    }
    char **dirs;
    int ndirs = search_dirs(&dirs);
    fprintf(f, "plugin search path:\n");
    for (int i = 0; i < ndirs; i++)
        fprintf(f, "  %s\n", dirs[i]);
    if (ndirs >= 0)
        free_dirs(dirs, ndirs);
    fprintf(f, "candidates:\n");
    if (!report_head)
        fprintf(f, "  (none)\n");
    for (report_row *row = report_head; row; row = row->next) {
        const weft_plugin_report *r = &row->r;
        fprintf(f, "  %-11s %s\n", status_names[r->status], r->path ? r->path : "?");
        fprintf(f, "              name=%s variant=%s abi=%u.%u score=%d chosen=%s\n",
                r->name ? r->name : "?", r->variant ? r->variant : "-", r->abi_major, r->abi_minor,
                r->score, r->status == WEFT_PLUGIN_LOADED ? "yes" : "no");
        if (r->error)
            fprintf(f, "              %s\n", r->error);
    }
    pthread_mutex_unlock(&loader_mutex);
    if (fclose(f) != 0 || !buf) {
        free(buf);
        return wf__errorf(WEFT_ENOMEM, "plugin_report_string: out of memory");
    }
    *out = buf;
    return 0;
}

/* One line for error messages: which plugins are loaded and where the
 * loader looked. */
void wf__loader_summary(char *buf, size_t size)
{
    if (loader_lock("loader_summary") < 0) {
        snprintf(buf, size, "loaded plugins: (the loader is busy unloading one)");
        return;
    }
    size_t n = (size_t)snprintf(buf, size, "loaded plugins: ");
    if (!loaded && n < size)
        n += (size_t)snprintf(buf + n, size - n, "none (call weft_load_default_plugins)");
    for (plugin *p = loaded; p && n < size; p = p->next)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", p == loaded ? "" : ", ", p->name);
    char **dirs;
    int ndirs = search_dirs(&dirs);
    if (n < size)
        n += (size_t)snprintf(buf + n, size - n, "; searched:");
    for (int i = 0; i < ndirs && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, " %s", dirs[i]);
    if (ndirs >= 0)
        free_dirs(dirs, ndirs);
    pthread_mutex_unlock(&loader_mutex);
}
