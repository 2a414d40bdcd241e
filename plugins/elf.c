/* plugins/elf.c — what the loader checks in a plugin file before dlopen
 * maps it.  glibc trusts a library's program headers and dynamic section:
 * a segment that ends past the end of the file raises SIGBUS when touched,
 * and a dynamic section (or an address in it) outside the mapped segments
 * is read through a wild pointer inside dlopen.  Either kills the process
 * that asked for a plugin, with nothing for weft to report.  A truncated
 * copy or a damaged file (tests/fuzz/fuzz_plugin_descriptor.c found one
 * whose program header table had lost its first segment) is refused here
 * instead, with the reason.  Anything that is not a native ELF file is left
 * to dlopen, whose own messages are clear. */
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugins/loader.h"

#if __ELF_NATIVE_CLASS == 64
#define ELFCLASS_HERE ELFCLASS64
#else
#define ELFCLASS_HERE ELFCLASS32
#endif

/* A shared object has about ten program headers; more than this is a
 * damaged count, refused before a table of that size is read. */
#define MAX_PHDRS 512

typedef struct elf_file {
    int fd;
    uint64_t size;
    const ElfW(Phdr) *ph;
    unsigned nph;
} elf_file;

/* Whether [vaddr, vaddr + len) lies in one PT_LOAD segment: within the
 * bytes it maps from the file (`file`) or within its memory image. */
static bool in_load(const elf_file *f, uint64_t vaddr, uint64_t len, bool file)
{
    for (unsigned i = 0; i < f->nph; i++) {
        const ElfW(Phdr) *l = &f->ph[i];
        uint64_t extent = file ? l->p_filesz : l->p_memsz;
        if (l->p_type == PT_LOAD && vaddr >= l->p_vaddr && vaddr - l->p_vaddr <= extent &&
            len <= extent - (vaddr - l->p_vaddr))
            return true;
    }
    return false;
}

static int check_loads(const elf_file *f, char *msg, size_t size)
{
    uint64_t last_end = 0;
    unsigned loads = 0;
    for (unsigned i = 0; i < f->nph; i++) {
        const ElfW(Phdr) *ph = &f->ph[i];
        if (ph->p_type != PT_LOAD && ph->p_type != PT_DYNAMIC)
            continue;
        if (ph->p_offset > f->size || ph->p_filesz > f->size - ph->p_offset) {
            snprintf(msg, size,
                     "truncated ELF file: segment %u ends at byte %llu but the file has %llu "
                     "bytes",
                     i, (unsigned long long)(ph->p_offset + ph->p_filesz),
                     (unsigned long long)f->size);
            return -1;
        }
        if (ph->p_type != PT_LOAD)
            continue;
        /* glibc maps the segments as one block from the first to the last
         * and assumes them ascending, as the ELF specification requires */
        if (ph->p_memsz < ph->p_filesz || ph->p_vaddr + ph->p_memsz < ph->p_vaddr ||
            (loads && ph->p_vaddr < last_end)) {
            snprintf(msg, size,
                     "malformed ELF file: loadable segment %u (at 0x%llx, %llu bytes in memory, "
                     "%llu from the file) overlaps or precedes the one before it, or is smaller "
                     "in memory than in the file",
                     i, (unsigned long long)ph->p_vaddr, (unsigned long long)ph->p_memsz,
                     (unsigned long long)ph->p_filesz);
            return -1;
        }
        last_end = ph->p_vaddr + ph->p_memsz;
        loads++;
    }
    if (!loads) {
        snprintf(msg, size, "malformed ELF file: no loadable segment");
        return -1;
    }
    return 0;
}

/* The segments glibc reads in memory while it loads the library: each must
 * lie in what the loadable segments map. */
static int check_inner_segments(const elf_file *f, char *msg, size_t size)
{
    for (unsigned i = 0; i < f->nph; i++) {
        const ElfW(Phdr) *ph = &f->ph[i];
        const char *what = NULL;
        uint64_t len = ph->p_filesz;
        bool file = true;
        switch (ph->p_type) {
        case PT_DYNAMIC:
            what = "dynamic section";
            break;
        case PT_NOTE:
            what = "note segment";
            break;
        case PT_GNU_PROPERTY:
            what = "property segment";
            break;
        case PT_TLS:
            what = "thread-local data image";
            break;
        case PT_PHDR:
            what = "program header table";
            break;
        case PT_GNU_RELRO: /* glibc mprotects it after relocation */
            what = "read-only-after-relocation range";
            len = ph->p_memsz;
            file = false;
            break;
        default:
            continue;
        }
        if (len && !in_load(f, ph->p_vaddr, len, file)) {
            snprintf(msg, size,
                     "malformed ELF file: its %s (segment %u, at 0x%llx, %llu bytes) lies "
                     "outside its loaded segments",
                     what, i, (unsigned long long)ph->p_vaddr, (unsigned long long)len);
            return -1;
        }
    }
    return 0;
}

/* The dynamic entries that are addresses glibc reads (tables, strings,
 * relocations, initialisers), with the entry that gives the size read
 * there (0: only the first byte is known to be read). */
static const struct {
    ElfW(Sxword) tag, size_tag;
    const char *name;
} address_tags[] = {
    {DT_STRTAB, DT_STRSZ, "DT_STRTAB"},
    {DT_SYMTAB, 0, "DT_SYMTAB"},
    {DT_HASH, 0, "DT_HASH"},
    {DT_GNU_HASH, 0, "DT_GNU_HASH"},
    {DT_RELA, DT_RELASZ, "DT_RELA"},
    {DT_REL, DT_RELSZ, "DT_REL"},
    {DT_JMPREL, DT_PLTRELSZ, "DT_JMPREL"},
    {DT_PLTGOT, 0, "DT_PLTGOT"},
    {DT_INIT, 0, "DT_INIT"},
    {DT_FINI, 0, "DT_FINI"},
    {DT_INIT_ARRAY, DT_INIT_ARRAYSZ, "DT_INIT_ARRAY"},
    {DT_FINI_ARRAY, DT_FINI_ARRAYSZ, "DT_FINI_ARRAY"},
    {DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ, "DT_PREINIT_ARRAY"},
    {DT_VERSYM, 0, "DT_VERSYM"},
    {DT_VERDEF, 0, "DT_VERDEF"},
    {DT_VERNEED, 0, "DT_VERNEED"},
};

static int check_dynamic_entries(const elf_file *f, char *msg, size_t size)
{
    const ElfW(Phdr) *dyn = NULL;
    for (unsigned i = 0; i < f->nph && !dyn; i++)
        if (f->ph[i].p_type == PT_DYNAMIC)
            dyn = &f->ph[i];
    if (!dyn)
        return 0; /* dlopen says "object file has no dynamic section" */
    size_t n = (size_t)(dyn->p_filesz / sizeof(ElfW(Dyn)));
    if (n > 4096)
        n = 4096;
    ElfW(Dyn) *d = malloc((n ? n : 1) * sizeof *d);
    if (!d)
        return 0; /* no memory to look: dlopen decides */
    if (pread(f->fd, d, n * sizeof *d, (off_t)dyn->p_offset) != (ssize_t)(n * sizeof *d)) {
        free(d);
        snprintf(msg, size, "cannot read the dynamic section");
        return -1;
    }
    size_t end = 0;
    while (end < n && d[end].d_tag != DT_NULL)
        end++;
    int rc = 0;
    for (size_t t = 0; t < sizeof address_tags / sizeof address_tags[0] && rc == 0; t++) {
        for (size_t i = 0; i < end; i++) {
            if (d[i].d_tag != address_tags[t].tag)
                continue;
            uint64_t len = 1;
            for (size_t k = 0; address_tags[t].size_tag && k < end; k++)
                if (d[k].d_tag == address_tags[t].size_tag)
                    len = d[k].d_un.d_val;
            if (len && !in_load(f, d[i].d_un.d_ptr, len, false)) {
                snprintf(msg, size,
                         "malformed ELF file: its dynamic entry %s (0x%llx, %llu bytes) points "
                         "outside its loaded segments",
                         address_tags[t].name, (unsigned long long)d[i].d_un.d_ptr,
                         (unsigned long long)len);
                rc = -1;
                break;
            }
        }
    }
    free(d);
    return rc;
}

int wp__elf_check(const char *path, char *msg, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0; /* dlopen reports it */
    struct stat st;
    ElfW(Ehdr) eh;
    ElfW(Phdr) *ph = NULL;
    int rc = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS_HERE)
        goto out;
    uint64_t fsize = (uint64_t)st.st_size;
    if (eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0 || eh.e_phnum > MAX_PHDRS) {
        snprintf(msg, size, "malformed ELF file: %u program headers of %u bytes", eh.e_phnum,
                 eh.e_phentsize);
        rc = -1;
        goto out;
    }
    size_t table = (size_t)eh.e_phnum * sizeof *ph;
    if (eh.e_phoff > fsize || table > fsize - eh.e_phoff) {
        snprintf(msg, size, "truncated ELF file: its program headers end past its %llu bytes",
                 (unsigned long long)fsize);
        rc = -1;
        goto out;
    }
    ph = malloc(table);
    if (!ph)
        goto out; /* no memory to look: dlopen decides */
    if (pread(fd, ph, table, (off_t)eh.e_phoff) != (ssize_t)table) {
        snprintf(msg, size, "cannot read the program headers");
        rc = -1;
        goto out;
    }
    elf_file f = {fd, fsize, ph, eh.e_phnum};
    rc = check_loads(&f, msg, size);
    if (rc == 0)
        rc = check_inner_segments(&f, msg, size);
    if (rc == 0)
        rc = check_dynamic_entries(&f, msg, size);
out:
    free(ph);
    close(fd);
    return rc;
}
