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
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dispatch/dispatcher.h"

#include "c10/quiesce.h"
#include "plugins/loader.h"


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
/* The name of the plugin whose init is running, or NULL.  Written and read
 * only with loader_mutex held; the mutex is recursive, so only the thread
 * running that init can see it set.  A plugin's init that calls back into
 * the loader (load, load default, unload) is refused: the nested call would
 * otherwise probe and initialise the very file being initialised, without
 * end, or close a library whose init is still on the stack. */
static const char *initializing;

static int refuse_from_init(const char *what)
{
    return wf__errorf(WEFT_EBUSY,
                      "%s: called from inside the init of plugin '%s'; a plugin's init must "
                      "not load or unload plugins",
                      what, initializing);
}
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
        file_id *g = wf__realloc(decided, (size_t)cap * sizeof *g);
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
    return s ? wf__strdup(s) : NULL;
}

static void report(const char *path, const char *name, const char *variant,
                   weft_plugin_status status, const char *error, uint32_t major, uint32_t minor,
                   int score)
{
    report_row *row = wf__calloc(1, sizeof *row);
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
    char **grown = wf__realloc(api_paths, (size_t)(n_api_paths + 1) * sizeof *grown);
    char *copy = wf__strdup(dir);
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
    char **dirs = wf__calloc((size_t)cap, sizeof *dirs);
    if (!dirs)
        return -1;
    for (int i = 0; i < n_api_paths; i++)
        dirs[n++] = wf__strdup(api_paths[i]);
    const char *env = getenv("WEFT_PLUGIN_PATH");
    if (env && *env) {
        char *copy = wf__strdup(env), *save = NULL;
        for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save)) {
            if (n == cap) {
                char **g = wf__realloc(dirs, (size_t)(cap *= 2) * sizeof *g);
                if (!g)
                    break;
                dirs = g;
            }
            /* a relative entry would depend on the current directory */
            if (d[0] == '/')
                dirs[n++] = wf__strdup(d);
        }
        free(copy);
    }
    if (n + 2 > cap) {
        char **g = wf__realloc(dirs, (size_t)(cap = n + 2) * sizeof *g);
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
            dirs[n++] = wf__strdup(buf);
        }
    }
    dirs[n++] = wf__strdup(WEFT_PLUGINDIR);
    *out = dirs;
    return n;
}

/* search_dirs skips WEFT_PLUGIN_PATH's relative entries; the report says
 * so, since whoever wrote one expects it to be searched. */
static void print_ignored_path_entries(FILE *f)
{
    const char *env = getenv("WEFT_PLUGIN_PATH");
    for (const char *p = env ? env : ""; *p;) {
        size_t n = strcspn(p, ":");
        if (n > 0 && p[0] != '/')
            fprintf(f,
                    "  ignored: '%.*s' from WEFT_PLUGIN_PATH is a relative directory (plugins are "
                    "never searched relative to the working directory; give an absolute path)\n",
                    (int)n, p);
        p += n + (p[n] == ':');
    }
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

/* The entry of a comma list (an environment variable) whose key — the
 * part before ':' if any — is name: its value after ':' in *value (NULL
 * without one).  False when no entry has that key. */
static bool env_list_find(const char *list, const char *name, const char **value,
                          size_t *value_len)
{
    size_t len = strlen(name);
    for (const char *p = list ? list : ""; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', n);
        size_t klen = colon ? (size_t)(colon - p) : n;
        if (klen == len && strncmp(p, name, len) == 0) {
            *value = colon ? colon + 1 : NULL;
            *value_len = colon ? n - klen - 1 : 0;
            return true;
        }
        p += n + (end ? 1 : 0);
    }
    return false;
}

/* WEFT_DISABLE_PLUGINS=name[,name...] */
static bool name_disabled(const char *name)
{
    const char *v;
    size_t vlen;
    return env_list_find(getenv("WEFT_DISABLE_PLUGINS"), name, &v, &vlen);
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
    const char *v;
    size_t vlen;
    if (!env_list_find(getenv("WEFT_PLUGIN_VARIANT"), name, &v, &vlen))
        return true;
    return v && variant && strlen(variant) == vlen && strncmp(v, variant, vlen) == 0;
}

/* An opened, checked candidate that has not been initialised.  Its name
 * and variant are copies: a candidate whose init fails is closed at once,
 * and the descriptor's strings live in the closed library. */
typedef struct candidate {
    char *path;
    char *name;
    char *variant;
    uint32_t abi_major, abi_minor;
    dev_t dev;
    ino_t ino;
    void *handle;
    const weft_plugin_descriptor *desc; /* valid while handle is open */
    int score;
    bool done; /* reported: loaded, failed, skipped or unsupported */
} candidate;

/* A plugin name is at most this long (the registrar keeps a copy), printable
 * ASCII without '/' or ',' (WEFT_DISABLE_PLUGINS is a comma list). */
#define NAME_MAX_LEN 47

/* Checks that the entry symbol is a data object big enough and aligned for
 * the descriptor before any field is read: an entry that is a function, or a
 * one-byte object, would otherwise be read as a descriptor (a misaligned,
 * out-of-bounds read of whatever follows it). */
static int check_entry_symbol(const void *d, char *msg, size_t size)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    /* A valid entry is a dynamic symbol of its library, so this finds it;
     * in a damaged file dlsym can return an address that is none (a symbol
     * made STT_TLS in a library without TLS comes back as a small number),
     * and reading a descriptor there would crash. */
    if (!dladdr1(d, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || info.dli_saddr != d) {
        snprintf(msg, size,
                 "entry symbol '%s' does not lie at a symbol of a loaded library (a damaged "
                 "symbol table?)",
                 WEFT_PLUGIN_ENTRY_SYMBOL);
        return -1;
    }
    int type = ELF64_ST_TYPE(sym->st_info); /* the same macro in both classes */
    if (type != STT_OBJECT) {
        snprintf(msg, size, "entry symbol '%s' is %s, not a weft_plugin_descriptor object",
                 WEFT_PLUGIN_ENTRY_SYMBOL,
                 type == STT_FUNC ? "a function" : type == STT_TLS ? "thread-local" : "not data");
        return -1;
    }
    size_t need = offsetof(weft_plugin_descriptor, init) + sizeof(void *);
    if (sym->st_size < need) {
        snprintf(msg, size, "entry symbol '%s' is %llu bytes, too small for a descriptor (%zu)",
                 WEFT_PLUGIN_ENTRY_SYMBOL, (unsigned long long)sym->st_size, need);
        return -1;
    }
    if ((uintptr_t)d % _Alignof(weft_plugin_descriptor) != 0) {
        snprintf(msg, size, "entry symbol '%s' is misaligned", WEFT_PLUGIN_ENTRY_SYMBOL);
        return -1;
    }
    if (((const weft_plugin_descriptor *)d)->struct_size > sym->st_size) {
        snprintf(msg, size, "entry descriptor claims %u bytes but its symbol has %llu",
                 ((const weft_plugin_descriptor *)d)->struct_size,
                 (unsigned long long)sym->st_size);
        return -1;
    }
    return 0;
}

/* The name's problem, or NULL when it is acceptable. */
static const char *bad_name(const char *name)
{
    size_t n = strnlen(name, NAME_MAX_LEN + 1);
    if (n == 0)
        return "the plugin name is empty";
    if (n > NAME_MAX_LEN)
        return "the plugin name is longer than 47 characters";
    for (size_t i = 0; i < n; i++)
        if (name[i] <= ' ' || name[i] > '~' || name[i] == '/' || name[i] == ',')
            return "the plugin name has a character other than printable ASCII, "
                   "or a space, '/' or ','";
    return NULL;
}

/* Where a descriptor's pointer may point: into a loaded segment of the
 * plugin's own library with the given permission (PF_R for strings, PF_X for
 * functions).  A NULL pointer needs no relocation, so in a damaged file the
 * bytes of a NULL field (score, fini, often variant) are what dlopen leaves
 * there, and the loader would read or call an arbitrary address. */
typedef struct segment_query {
    uintptr_t base;   /* the library's load address (its link_map's l_addr) */
    const char *name; /* and its l_name */
    uintptr_t addr;
    unsigned flags;
    size_t room; /* bytes from addr to the end of its segment; 0: in none */
} segment_query;

static int find_segment(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    segment_query *q = data;
    if (info->dlpi_addr != q->base || !info->dlpi_name || strcmp(info->dlpi_name, q->name) != 0)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || (ph->p_flags & q->flags) != q->flags)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (q->addr >= start && q->addr - start < ph->p_memsz) {
            q->room = ph->p_memsz - (q->addr - start);
            break;
        }
    }
    return 1; /* the library was found: stop */
}

/* Bytes from p to the end of its segment in h's library with `flags`, or 0
 * when p lies in no such segment. */
static size_t room_in_library(void *h, const void *p, unsigned flags)
{
    struct link_map *lm = NULL;
    if (!p || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name)
        return 0;
    segment_query q = {lm->l_addr, lm->l_name, (uintptr_t)p, flags, 0};
    dl_iterate_phdr(find_segment, &q);
    return q.room;
}

/* Whether s is a string of h's library that ends (or reaches `limit` bytes)
 * inside its segment, so that strnlen(s, limit) reads only mapped bytes. */
static bool string_in_library(void *h, const char *s, size_t limit)
{
    size_t room = room_in_library(h, s, PF_R);
    if (room == 0)
        return false;
    return room >= limit || strnlen(s, room) < room;
}

/* The descriptor's pointers that are not NULL — its strings and its
 * functions — lie where they must; else the reason. */
static const char *bad_pointers(void *h, const weft_plugin_descriptor *d)
{
    if (d->name && !string_in_library(h, d->name, NAME_MAX_LEN + 1))
        return "the entry descriptor's name points outside the plugin's data";
    if (d->variant && !string_in_library(h, d->variant, NAME_MAX_LEN + 1))
        return "the entry descriptor's variant points outside the plugin's data";
    if (d->version && !string_in_library(h, d->version, SIZE_MAX))
        return "the entry descriptor's version points outside the plugin's data";
    if ((d->score && !room_in_library(h, (const void *)d->score, PF_X)) ||
        (d->init && !room_in_library(h, (const void *)d->init, PF_X)) ||
        (d->struct_size >= offsetof(weft_plugin_descriptor, fini) + sizeof(void *) && d->fini &&
         !room_in_library(h, (const void *)d->fini, PF_X)))
        return "a function of the entry descriptor points outside the plugin's code";
    return NULL;
}

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
    char msg[512];
    if (wp__elf_check(path, msg, sizeof msg) < 0) {
        report(path, NULL, NULL, WEFT_PLUGIN_FAILED, msg, 0, 0, 0);
        return wf__errorf(WEFT_EPLUGIN, "plugin '%s': %s", path, msg);
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        report(path, NULL, NULL, WEFT_PLUGIN_FAILED, e, 0, 0, 0);
        return wf__errorf(WEFT_EPLUGIN, "plugin '%s': dlopen failed: %s", path, e);
    }
    const weft_plugin_descriptor *d = dlsym(h, WEFT_PLUGIN_ENTRY_SYMBOL);
    int rc = 0;
    const char *why_name = NULL, *why_pointer = NULL;
    if (!d) {
        snprintf(msg, sizeof msg, "no entry symbol '%s': not a weft plugin", WEFT_PLUGIN_ENTRY_SYMBOL);
        rc = WEFT_EPLUGIN;
    } else if (check_entry_symbol(d, msg, sizeof msg) < 0) {
        d = NULL; /* nothing of it may be read */
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
    } else if ((why_pointer = bad_pointers(h, d)) != NULL) {
        snprintf(msg, sizeof msg, "%s", why_pointer);
        rc = WEFT_EPLUGIN;
    } else if (!d->name || !*d->name || !d->init) {
        snprintf(msg, sizeof msg, "entry descriptor lacks a name or an init function");
        rc = WEFT_EPLUGIN;
    } else if ((why_name = bad_name(d->name)) != NULL ||
               (d->variant && strnlen(d->variant, NAME_MAX_LEN + 1) > NAME_MAX_LEN)) {
        snprintf(msg, sizeof msg, "%s", why_name ? why_name : "the variant name is longer than 47 characters");
        rc = WEFT_EPLUGIN;
    }
    if (rc < 0) {
        /* a name is shown only when it lies in the library and passed its
         * own check */
        const char *shown = d && d->struct_size >= 32 && d->name &&
                                    string_in_library(h, d->name, NAME_MAX_LEN + 1) &&
                                    !bad_name(d->name)
                                ? d->name
                                : NULL;
        report(path, shown, NULL, WEFT_PLUGIN_FAILED, msg, d ? d->abi_major : 0,
               d ? d->abi_minor : 0, 0);
        dlclose(h);
        return wf__errorf(rc, "plugin '%s': %s", path, msg);
    }
    c->path = wf__strdup(path);
    c->name = wf__strdup(d->name);
    c->variant = d->variant ? wf__strdup(d->variant) : NULL;
    if (!c->path || !c->name || (d->variant && !c->variant)) {
        free(c->path);
        free(c->name);
        free(c->variant);
        memset(c, 0, sizeof *c);
        report(path, NULL, NULL, WEFT_PLUGIN_FAILED, "out of memory", 0, 0, 0);
        dlclose(h);
        return wf__errorf(WEFT_ENOMEM, "plugin '%s': out of memory", path);
    }
    c->abi_major = d->abi_major;
    c->abi_minor = d->abi_minor;
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
    free(c->name);
    free(c->variant);
    c->handle = NULL;
    c->desc = NULL;
    c->path = c->name = c->variant = NULL;
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

/* Waits for the threads that may be running a plugin's code or reading what
 * it registered, once its registrations are released (loader mutex held;
 * sections that call the loader meanwhile give up instead of blocking). */
static void quiesce_locked(void)
{
    atomic_store(&quiescing, true);
    wf__quiesce();
    atomic_store(&quiescing, false);
}

/* Plugins whose init failed while storages, streams or events made on their
 * device types were alive: those call the library's deleters and drop holds
 * on its registrar later, so neither is closed nor freed.  Listed, so they
 * stay reachable. */
typedef struct kept_library {
    void *handle;
    weft_registrar *reg;
    struct kept_library *next;
} kept_library;
static kept_library *kept;

/* Runs init for a chosen candidate.  Takes its handle either way (closing
 * it on failure); the candidate keeps its path for the caller to free. */
static int init_candidate(candidate *c)
{
    const weft_plugin_descriptor *d = c->desc;
    c->done = true;
    plugin *p = wf__calloc(1, sizeof *p);
    weft_registrar *reg = NULL;
    char *path_copy = wf__strdup(c->path);
    char *name_copy = wf__strdup(c->name);
    if (!p || !path_copy || !name_copy || wd__registrar_new(&reg, c->name) < 0) {
        free(p);
        free(path_copy);
        free(name_copy);
        dlclose(c->handle);
        c->handle = NULL;
        c->desc = NULL;
        report(c->path, c->name, c->variant, WEFT_PLUGIN_FAILED, "out of memory", c->abi_major,
               c->abi_minor, c->score);
        return wf__errorf(WEFT_ENOMEM, "out of memory loading plugin '%s'", c->name);
    }
    weft_clear_error();
    wd__registrar_set_initializing(reg, true);
    const char *outer = initializing;
    initializing = c->name;
    int rc = d->init(reg);
    initializing = outer;
    if (rc < 0) {
        char msg[768];
        const char *why = weft_last_error();
        snprintf(msg, sizeof msg, "init failed with %s: %s", weft_error_name(rc),
                 *why ? why : weft_strerror(rc));
        /* Everything the plugin registered goes, newest first.  Other
         * threads may have used it while init ran (device types, kernels
         * and allocators are live as soon as they are registered), so this
         * is an unload: refuse new holds, unpublish, wait for the threads
         * that may be inside its code. */
        wd__registrar_set_closing(reg, true);
        wd__registrar_release_all(reg);
        quiesce_locked();
        long storages = wd__registrar_live_kind(reg, WF_HOLD_STORAGE);
        long streams = wd__registrar_live_kind(reg, WF_HOLD_STREAM);
        long layout_tensors = wd__registrar_live_kind(reg, WF_HOLD_LAYOUT);
        if (storages || streams || layout_tensors) {
            char what[256] = "";
            size_t len = 0, at = strlen(msg);
            busy_part(what, sizeof what, &len, storages, "storage", "storages");
            busy_part(what, sizeof what, &len, streams, "stream or event", "streams and events");
            busy_part(what, sizeof what, &len, layout_tensors, "tensor of its layouts",
                      "tensors of its layouts");
            snprintf(msg + at, sizeof msg - at,
                     "; its library stays loaded: %s made while init ran still alive", what);
            kept_library *k = wf__calloc(1, sizeof *k);
            if (k) {
                *k = (kept_library){c->handle, reg, kept};
                kept = k;
            } /* else both leak, which is still safe */
        } else {
            free(reg);
            /* nothing of the descriptor is read after this: it lives in
             * the library being closed */
            dlclose(c->handle);
        }
        c->handle = NULL;
        c->desc = NULL;
        report(c->path, c->name, c->variant, WEFT_PLUGIN_FAILED, msg, c->abi_major, c->abi_minor,
               c->score);
        rc = wf__errorf(WEFT_EPLUGIN, "plugin '%s' (%s): %s", c->name, c->path, msg);
        free(p);
        free(path_copy);
        free(name_copy);
        return rc;
    } else if (rc > 0) {
        rc = 0;
    }
    wd__registrar_set_initializing(reg, false); /* its CPU fallbacks go live */
    p->path = path_copy;
    p->name = name_copy;
    p->dev = c->dev;
    p->ino = c->ino;
    p->handle = c->handle;
    c->handle = NULL;
    p->desc = d;
    p->reg = reg;
    p->next = loaded;
    loaded = p;
    report(c->path, c->name, c->variant, WEFT_PLUGIN_LOADED, NULL, c->abi_major, c->abi_minor,
           c->score);
    return 1;
}

/* Why candidate o, found by searching, is not loaded: the plugin of its
 * name, `won`, is — chosen now from candidate `winner`, or loaded before
 * (winner NULL).  Both files are named, so one row is enough to find the
 * stray copy. */
static void lost_reason(char *msg, size_t size, const candidate *o, const plugin *won,
                        const candidate *winner)
{
    if (!winner)
        snprintf(msg, size, "plugin '%s' is already loaded from %s; this file, %s, is not used",
                 o->name, won->path, o->path);
    else if ((!o->variant && !winner->variant) ||
             (o->variant && winner->variant && strcmp(o->variant, winner->variant) == 0))
        snprintf(msg, size,
                 "a duplicate: plugin '%s'%s%s is already loaded from %s; this copy, %s, is not "
                 "used",
                 o->name, winner->variant ? " variant " : "", winner->variant ? winner->variant : "",
                 won->path, o->path);
    else
        snprintf(msg, size, "a better variant was chosen: %s (score %d) from %s, not %s from %s",
                 winner->variant ? winner->variant : "default", winner->score, won->path,
                 o->variant ? o->variant : "default", o->path);
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
    if (initializing) {
        int rc = refuse_from_init("load_default_plugins");
        pthread_mutex_unlock(&loader_mutex);
        return rc;
    }
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
            char **g = wf__realloc(names, (size_t)(nn + 1) * sizeof *g);
            if (!g)
                break;
            names = g;
            names[nn++] = wf__strdup(e->d_name);
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
                candidate *g = wf__realloc(cands, (size_t)(cap = cap ? 2 * cap : 8) * sizeof *g);
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
    /* choose: per name, the best score that can run here; when its init
     * fails, the next best (a broken AVX-512 build must not leave the
     * machine without its baseline CPU plugin) */
    int loaded_now = 0;
    for (int i = 0; i < ncands; i++) {
        candidate *c = &cands[i];
        if (c->done)
            continue;
        if (c->score < 0) {
            c->done = true;
            report(c->path, c->name, c->variant, WEFT_PLUGIN_UNSUPPORTED,
                   "its score says this machine cannot run it", c->abi_major, c->abi_minor,
                   c->score);
            continue;
        }
        if (name_disabled(c->name)) {
            c->done = true;
            report(c->path, c->name, c->variant, WEFT_PLUGIN_SKIPPED,
                   "disabled by WEFT_DISABLE_PLUGINS", c->abi_major, c->abi_minor, c->score);
            continue;
        }
        if (!variant_allowed(c->name, c->variant)) {
            c->done = true;
            report(c->path, c->name, c->variant, WEFT_PLUGIN_SKIPPED,
                   "not the variant WEFT_PLUGIN_VARIANT asks for", c->abi_major, c->abi_minor,
                   c->score);
            continue;
        }
    }
    for (;;) {
        /* the best remaining candidate of any name, the first on ties */
        int best = -1;
        for (int j = 0; j < ncands; j++)
            if (!cands[j].done && (best < 0 || strcmp(cands[j].name, cands[best].name) < 0 ||
                                   (strcmp(cands[j].name, cands[best].name) == 0 &&
                                    cands[j].score > cands[best].score)))
                best = j;
        if (best < 0)
            break;
        candidate *c = &cands[best];
        plugin *won = find_loaded_name(c->name);
        if (!won && init_candidate(c) > 0) {
            loaded_now++;
            won = find_loaded_name(c->name);
        }
        c->done = true;
        if (!won)
            continue; /* its failure is reported; the next best of the name is tried */
        bool c_won = won->ino == c->ino && won->dev == c->dev;
        for (int j = 0; j < ncands; j++) {
            candidate *o = &cands[j];
            if (o->done || strcmp(o->name, c->name) != 0)
                continue;
            o->done = true;
            char msg[2 * PATH_MAX + 160];
            lost_reason(msg, sizeof msg, o, won, c_won ? c : NULL);
            report(o->path, o->name, o->variant, WEFT_PLUGIN_SKIPPED, msg, o->abi_major,
                   o->abi_minor, o->score);
        }
        if (!c_won) {
            char msg[2 * PATH_MAX + 160];
            lost_reason(msg, sizeof msg, c, won, NULL);
            report(c->path, c->name, c->variant, WEFT_PLUGIN_SKIPPED, msg, c->abi_major,
                   c->abi_minor, c->score);
        }
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
    if (initializing) {
        int rc = refuse_from_init("load_plugin");
        pthread_mutex_unlock(&loader_mutex);
        return rc;
    }
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
        plugin *other = find_loaded_name(c.name);
        if (other) {
            char msg[PATH_MAX + 64];
            snprintf(msg, sizeof msg, "a plugin named '%s' is already loaded from %s", c.name,
                     other->path);
            report(c.path, c.name, c.variant, WEFT_PLUGIN_SKIPPED, msg, c.abi_major, c.abi_minor,
                   c.score);
            rc = wf__errorf(WEFT_EEXIST, "plugin '%s': %s", found, msg);
            drop_candidate(&c);
        } else if (c.score < 0) {
            report(c.path, c.name, c.variant, WEFT_PLUGIN_UNSUPPORTED,
                   "its score says this machine cannot run it", c.abi_major, c.abi_minor, c.score);
            rc = wf__errorf(WEFT_ENOTSUP, "plugin '%s' (%s variant) cannot run on this machine",
                            c.name, c.variant ? c.variant : "default");
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
    if (initializing) {
        int rc = refuse_from_init("unload_plugin");
        pthread_mutex_unlock(&loader_mutex);
        return rc;
    }
    plugin **pp = &loaded;
    while (*pp && strcmp((*pp)->name, name) != 0)
        pp = &(*pp)->next;
    plugin *p = *pp;
    if (!p) {
        pthread_mutex_unlock(&loader_mutex);
        return wf__errorf(WEFT_ENOTFOUND, "no plugin named '%s' is loaded", name);
    }
    wd__registrar_set_closing(p->reg, true);
    long storages = wd__registrar_live_kind(p->reg, WF_HOLD_STORAGE);
    long streams = wd__registrar_live_kind(p->reg, WF_HOLD_STREAM);
    long layout_tensors = wd__registrar_live_kind(p->reg, WF_HOLD_LAYOUT);
    char who[256] = "";
    long dependents = 0;
    if (storages == 0 && streams == 0 && layout_tensors == 0)
        dependents = wd__registrar_release_unless_depended(p->reg, who, sizeof who);
    if (storages || streams || layout_tensors || dependents) {
        wd__registrar_set_closing(p->reg, false);
        pthread_mutex_unlock(&loader_mutex);
        char what[512];
        size_t len = 0;
        what[0] = '\0';
        busy_part(what, sizeof what, &len, storages, "storage it allocated",
                  "storages it allocated");
        busy_part(what, sizeof what, &len, streams, "stream or event on its devices",
                  "streams and events on its devices");
        busy_part(what, sizeof what, &len, layout_tensors, "tensor of its layouts",
                  "tensors of its layouts");
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
    quiesce_locked();
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
    print_ignored_path_entries(f);
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
 * loader looked.  It waits for the loader at most about 100 ms: a call
 * that misses a kernel while another thread loads a plugin must not wait
 * for that load (a GPU plugin's init takes seconds, and an init may itself
 * wait for the call; tests/test_unload.c), so it may say "busy" instead of
 * the list.  The thread running an init gets the recursive mutex at once. */
void wp__loader_summary(char *buf, size_t size)
{
    bool locked = false;
    for (int i = 0; i < 100 && !(locked = pthread_mutex_trylock(&loader_mutex) == 0); i++) {
        if (atomic_load(&quiescing))
            break; /* an unload waits for running operators, maybe this one */
        struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
    }
    if (!locked) {
        snprintf(buf, size, "loaded plugins: (the loader is busy loading or unloading one)");
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
