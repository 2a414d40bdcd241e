/* tests/test_malformed_plugins.c — malformed plugins on the default search
 * path (issue 14).  Each case runs in a child process whose search path holds
 * one directory with the bad plugin(s) and then the build's own plugins; the
 * parent asserts that the child did not crash, that the load report has a
 * clear line for the bad file, that the CPU plugin loaded and computes, and
 * that the core's tables (operators, device types, the CPU's exp kernel) are
 * what a child without the bad plugin sees.  Before the loader's fix half of
 * these children died of SIGSEGV or SIGBUS. */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <weft/ops.h>
#include <weft/plugin.h>
#include <weft/weft.h>

#include "tap.h"

static char builddir[PATH_MAX];

/* What a child sees after loading the default plugins: a fingerprint of the
 * tables, whether the CPU computes, and the report rows of files under dir. */
static void child(const char *dir)
{
    char path[2 * PATH_MAX + 8];
    if (dir)
        snprintf(path, sizeof path, "%s:%s/.libs", dir, builddir);
    else
        snprintf(path, sizeof path, "%s/.libs", builddir);
    setenv("WEFT_PLUGIN_PATH", path, 1);
    int n = weft_load_default_plugins();
    printf("LOADED %d\n", n);
    printf("FP ops=%d", weft_op_count());
    for (int t = 0; t < 40; t++) {
        const char *name = weft_device_type_name(t);
        if (name && strcmp(name, "baddev") != 0)
            printf(" %d:%s", t, name);
    }
    printf("\n");
    weft_tensor *a = NULL, *b = NULL, *c = NULL;
    int64_t four = 4;
    double v = 0, w = 0;
    int rc = weft_ones(&a, &four, 1, WEFT_FLOAT32, (weft_device){WEFT_DEVICE_TYPE_CPU, 0});
    if (rc == 0)
        rc = weft_exp(&b, a);
    if (rc == 0)
        rc = weft_add(&c, b, a);
    if (rc == 0) {
        v = ((const float *)weft_tensor_data_ptr(b))[3];
        w = ((const float *)weft_tensor_data_ptr(c))[3];
    }
    printf("CPU %s exp=%.5f add=%.5f %s\n", rc == 0 ? "ok" : "error", v, w,
           rc == 0 ? "" : weft_last_error());
    weft_tensor_release(a);
    weft_tensor_release(b);
    weft_tensor_release(c);
    int rows = weft_plugin_report_count();
    for (int i = 0; i < rows; i++) {
        weft_plugin_report r;
        if (weft_plugin_report_get(i, &r) < 0)
            continue;
        bool mine = dir && r.path && strncmp(r.path, dir, strlen(dir)) == 0;
        bool cpu = r.name && strcmp(r.name, "cpu") == 0;
        if (mine || cpu)
            printf("ROW %s status=%d name=%s error=%s\n", mine ? "bad" : "cpu", (int)r.status,
                   r.name ? r.name : "?", r.error ? r.error : "-");
    }
    fflush(stdout);
}

/* Runs child(dir) in a process of its own and returns what it printed
 * (malloc'd) and how it ended. */
static char *run_child(const char *dir, int *status)
{
    int fds[2];
    if (pipe(fds) != 0)
        return NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 1);
        child(dir);
        _exit(0);
    }
    close(fds[1]);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ssize_t got;
    while (buf && (got = read(fds[0], buf + len, cap - len - 1)) > 0) {
        len += (size_t)got;
        if (len + 1 == cap) {
            char *g = realloc(buf, cap *= 2);
            if (!g)
                break;
            buf = g;
        }
    }
    close(fds[0]);
    waitpid(pid, status, 0);
    if (buf)
        buf[len] = '\0';
    return buf;
}

static char *line_of(const char *out, const char *prefix, char *line, size_t size)
{
    const char *p = strstr(out, prefix);
    if (!p)
        return NULL;
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n >= size)
        n = size - 1;
    memcpy(line, p, n);
    line[n] = '\0';
    return line;
}

static void link_plugin(const char *dir, const char *lib)
{
    char from[PATH_MAX + 64], to[PATH_MAX + 64];
    snprintf(from, sizeof from, "%s/tests/malformed/.libs/libweft-%s.so", builddir, lib);
    snprintf(to, sizeof to, "%s/libweft-%s.so", dir, lib);
    if (symlink(from, to) != 0)
        diag("symlink %s: %s", to, strerror(errno));
}

/* The whole file at path (malloc'd, its size in *size), or NULL. */
static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *in = fopen(path, "rb");
    if (!in)
        return NULL;
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    fseek(in, 0, SEEK_SET);
    unsigned char *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (buf && fread(buf, 1, (size_t)n, in) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(in);
    *size = buf ? (size_t)n : 0;
    return buf;
}

/* Writes size bytes of buf to path and frees buf; rc stays -1 (and nothing
 * is written) when the caller already failed. */
static int write_file(const char *path, unsigned char *buf, size_t size, int rc)
{
    FILE *out = rc == 0 ? fopen(path, "wb") : NULL;
    if (!out || fwrite(buf, 1, size, out) != size)
        rc = -1;
    if (out)
        fclose(out);
    free(buf);
    return rc;
}

/* Writes the build's CPU plugin cut in the middle of what dlopen maps (half
 * of the extent of its PT_LOAD segments; a plain half of the file can lie
 * wholly in the debug sections) as libweft-trunc.so. */
static int write_truncated(const char *dir)
{
    char from[PATH_MAX + 64], to[PATH_MAX + 64];
    snprintf(from, sizeof from, "%s/.libs/libweft-cpu.so", builddir);
    snprintf(to, sizeof to, "%s/libweft-trunc.so", dir);
    size_t size;
    unsigned char *buf = read_file(from, &size);
    int rc = buf ? 0 : -1;
    uint64_t extent = 0;
    if (rc == 0 && (size_t)size >= sizeof(Elf64_Ehdr)) {
        const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
        for (unsigned i = 0; i < eh->e_phnum; i++) {
            const Elf64_Phdr *ph = (const Elf64_Phdr *)(buf + eh->e_phoff + i * sizeof *ph);
            if (eh->e_phoff + (i + 1) * sizeof *ph <= size && ph->p_type == PT_LOAD &&
                ph->p_offset + ph->p_filesz > extent)
                extent = ph->p_offset + ph->p_filesz;
        }
    }
    size_t cut = (size_t)(extent / 2);
    if (cut == 0)
        rc = -1;
    return write_file(to, buf, cut, rc);
}

/* Writes tests/plugins/good.c's build as libweft-damaged.so with garbage in
 * one descriptor field that is NULL in the source ("score" or "fini"): a
 * NULL pointer has no relocation, so dlopen leaves the file's bytes there
 * (a damaged copy, as tests/fuzz/fuzz_plugin_descriptor.c makes them).
 * Before the loader checked where the pointers point, it called them.
 * "tls" instead makes the descriptor's symbol STT_TLS: dlsym then returns a
 * small number, which the loader read as a descriptor. */
static int write_damaged(const char *dir, const char *field)
{
    char from[PATH_MAX + 64], to[PATH_MAX + 64];
    snprintf(from, sizeof from, "%s/tests/plugins/.libs/test-good.so", builddir);
    snprintf(to, sizeof to, "%s/libweft-damaged.so", dir);
    size_t size;
    unsigned char *buf = read_file(from, &size);
    int rc = buf ? 0 : -1;
    /* the descriptor's file offset: its dynamic symbol's value, through
     * the PT_LOAD segment that holds it */
    long at = -1;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
    for (int s = 0; rc == 0 && s < eh->e_shnum; s++) {
        const Elf64_Shdr *sh = (const Elf64_Shdr *)(buf + eh->e_shoff) + s;
        if (sh->sh_type != SHT_DYNSYM)
            continue;
        const Elf64_Shdr *strs = (const Elf64_Shdr *)(buf + eh->e_shoff) + sh->sh_link;
        const Elf64_Sym *sym = (const Elf64_Sym *)(buf + sh->sh_offset);
        for (size_t i = 0; i < sh->sh_size / sizeof *sym; i++) {
            if (strcmp((const char *)buf + strs->sh_offset + sym[i].st_name, "weft_plugin_entry"))
                continue;
            if (strcmp(field, "tls") == 0) /* the symbol's type made STT_TLS */
                ((Elf64_Sym *)sym)[i].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_TLS);
            for (int k = 0; k < eh->e_phnum; k++) {
                const Elf64_Phdr *ph = (const Elf64_Phdr *)(buf + eh->e_phoff) + k;
                if (ph->p_type == PT_LOAD && sym[i].st_value >= ph->p_vaddr &&
                    sym[i].st_value < ph->p_vaddr + ph->p_filesz)
                    at = (long)(sym[i].st_value - ph->p_vaddr + ph->p_offset);
            }
        }
    }
    if (at < 0)
        rc = -1;
    uint64_t garbage = 0x00001234deadbee0u;
    if (rc == 0 && strcmp(field, "tls") != 0) {
        at += strcmp(field, "score") == 0 ? (long)offsetof(weft_plugin_descriptor, score)
                                          : (long)offsetof(weft_plugin_descriptor, fini);
        if (at + 8 <= (long)size)
            memcpy(buf + at, &garbage, sizeof garbage);
    }
    return write_file(to, buf, size, rc);
}

/* Writes tests/plugins/good.c's build as libweft-phdrs.so with its program
 * header table damaged: "drop-first-load" starts the table after its first
 * PT_LOAD (the segment that maps the ELF header and the dynamic symbols,
 * which the dynamic section still points into), "dynamic-moved" moves the
 * PT_DYNAMIC segment's address 1 GiB past the loaded ones.  glibc's dlopen
 * trusts both and reads through a wild pointer (SIGSEGV): the first is what
 * tests/fuzz/fuzz_plugin_descriptor.c once found. */
static int write_phdrs(const char *dir, const char *how)
{
    char from[PATH_MAX + 64], to[PATH_MAX + 64];
    snprintf(from, sizeof from, "%s/tests/plugins/.libs/test-good.so", builddir);
    snprintf(to, sizeof to, "%s/libweft-phdrs.so", dir);
    size_t size;
    unsigned char *buf = read_file(from, &size);
    int rc = buf && size >= sizeof(Elf64_Ehdr) ? 0 : -1;
    Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
    if (rc == 0 && eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > size)
        rc = -1;
    bool done = false;
    for (unsigned i = 0; rc == 0 && !done && i < eh->e_phnum; i++) {
        Elf64_Phdr *ph = (Elf64_Phdr *)(buf + eh->e_phoff) + i;
        if (strcmp(how, "drop-first-load") == 0 && ph->p_type == PT_LOAD) {
            eh->e_phoff += (i + 1) * sizeof *ph;
            eh->e_phnum = (Elf64_Half)(eh->e_phnum - i - 1);
            done = true;
        } else if (strcmp(how, "dynamic-moved") == 0 && ph->p_type == PT_DYNAMIC) {
            ph->p_vaddr += 1u << 30;
            done = true;
        }
    }
    if (!done)
        rc = -1;
    return write_file(to, buf, size, rc);
}

static void remove_dir(const char *dir)
{
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
}

typedef struct bad_case {
    const char *what;
    const char *libs[2]; /* tests/malformed/.libs/libweft-X.so, "trunc", "damaged-FIELD" */
    const char *expect;  /* in the bad row's error */
    bool tables_change;  /* a second plugin legitimately loads */
} bad_case;

static const bad_case cases[] = {
    {"init fails with a message", {"bad1"}, "bad1: this init always fails", false},
    {"init fails without a message", {"bad2"}, "init failed with WEFT_EINTERNAL", false},
    {"init unloads itself", {"bad3"}, "must not load or unload plugins", false},
    {"a 'cpu' with a better score whose init fails", {"bad4"}, "bad4: a broken cpu build", false},
    {"init runs an operator before the CPU plugin is in", {"bad5"}, "init failed with", false},
    {"a 10,000-character name", {"bad6"}, "longer than 47 characters", false},
    {"the entry symbol is a 1-byte object", {"bad7"}, "too small for a descriptor", false},
    {"the entry symbol is a function", {"bad8"}, "is a function", false},
    {"init calls weft_load_default_plugins", {"bad9"}, "must not load or unload plugins", false},
    {"two plugins register one device name", {"bad10", "bad11"}, "baddev", true},
    {"a truncated copy of the CPU plugin", {"trunc"}, "truncated ELF file", false},
    {"a damaged copy whose NULL score is garbage", {"damaged-score"},
     "a function of the entry descriptor points outside the plugin's code", false},
    {"a damaged copy whose NULL fini is garbage", {"damaged-fini"},
     "a function of the entry descriptor points outside the plugin's code", false},
    {"a damaged copy whose entry symbol is thread-local", {"damaged-tls"},
     "does not lie at a symbol of a loaded library", false},
    {"a damaged copy whose program headers lost the first segment", {"phdrs-drop-first-load"},
     "outside its loaded segments", false},
    {"a damaged copy whose dynamic section lies outside its segments", {"phdrs-dynamic-moved"},
     "its dynamic section (segment", false},
};

int main(void)
{
    const char *b = getenv("WEFT_BUILDDIR");
    if (!b) {
        printf("1..0 # SKIP WEFT_BUILDDIR is not set (run through make check)\n");
        return 0;
    }
    snprintf(builddir, sizeof builddir, "%s", b);

    int status;
    char *base = run_child(NULL, &status);
    char fp[4096] = "", line[4096];
    ok(base && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the baseline child loads the plugins");
    if (base)
        line_of(base, "FP ", fp, sizeof fp);
    ok(base && strstr(base, "CPU ok exp=2.71828 add=3.71828"), "baseline: the CPU computes (%s)",
       base && line_of(base, "CPU ", line, sizeof line) ? line : "?");
    free(base);

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        char dir[] = "/tmp/weft-malformed-XXXXXX";
        if (!mkdtemp(dir)) {
            ok(0, "mkdtemp: %s", strerror(errno));
            continue;
        }
        for (int k = 0; k < 2 && c->libs[k]; k++) {
            if (strcmp(c->libs[k], "trunc") == 0) {
                if (write_truncated(dir) != 0)
                    diag("could not write the truncated plugin");
            } else if (strncmp(c->libs[k], "phdrs-", 6) == 0) {
                if (write_phdrs(dir, c->libs[k] + 6) != 0)
                    diag("could not write the plugin with damaged program headers");
            } else if (strncmp(c->libs[k], "damaged-", 8) == 0) {
                if (write_damaged(dir, c->libs[k] + 8) != 0)
                    diag("could not write the damaged plugin");
            } else {
                link_plugin(dir, c->libs[k]);
            }
        }
        char *out = run_child(dir, &status);
        ok(out && WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: no crash (%s %d)", c->what,
           WIFSIGNALED(status) ? "signal" : "exit",
           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        if (!out)
            out = strdup("");
        /* the failed row of the bad file carries the reason */
        bool found = false;
        for (const char *p = out; (p = strstr(p, "ROW bad status=3")) != NULL; p++)
            if (line_of(p, "ROW", line, sizeof line) && strstr(line, c->expect))
                found = true;
        ok(found, "%s: the report says '%s'", c->what, c->expect);
        if (!found)
            diag("child printed:\n%s", out);
        ok(strstr(out, "ROW cpu status=0 name=cpu"), "%s: the CPU plugin is loaded", c->what);
        ok(strstr(out, "CPU ok exp=2.71828 add=3.71828"), "%s: the CPU computes exp and add (%s)",
           c->what, line_of(out, "CPU ", line, sizeof line) ? line : "?");
        char mine[4096] = "";
        line_of(out, "FP ", mine, sizeof mine);
        if (c->tables_change)
            ok(strstr(out, "ROW bad status=0 name=bad10"), "%s: the first of them loads", c->what);
        else
            ok(fp[0] && strcmp(mine, fp) == 0, "%s: operators and device types as without it",
               c->what);
        free(out);
        remove_dir(dir);
    }
    return done_testing();
}
