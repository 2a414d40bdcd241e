/* tests/fuzz/fuzz_plugin_descriptor.c — libFuzzer harness for the plugin
 * loader's checks of a plugin file (plugins/elf.c: wp__elf_check, plugins/loader.c:
 * check_entry_symbol, the descriptor's size, ABI, name and variant checks).
 *
 * A loaded library's memory cannot be changed before dlopen reads it, so
 * the harness changes the file instead: it copies a small valid plugin
 * (tests/plugins/good.c, built without libweft by tests/fuzz.sh; its path in
 * WEFT_FUZZ_PLUGIN), overwrites some of the copy's bytes with the input,
 * loads the copy with weft_load_plugin and unloads it when it loaded.  The
 * bytes it may overwrite are found once, from the ELF file itself:
 *   0  the weft_plugin_entry descriptor (its size, ABI and reserved words;
 *      its pointers are relocated by dlopen, so their file bytes are inert)
 *   1  the descriptor's dynamic symbol: its size and type (what
 *      check_entry_symbol checks), not its name, value or section
 *   2  the bytes of the name string and 3 of the variant string
 *   4  the ELF header's e_phoff, e_phentsize and e_phnum
 *   5  p_offset and p_filesz of every PT_LOAD and PT_DYNAMIC header, kept
 *      only when the segment then ends past the end of the file (a segment
 *      moved within the file maps wrong code that glibc runs in dlopen)
 * Input: one byte whose bit i says whether region i is written, then the
 * regions' new bytes in that order (a short input leaves the rest as is).
 * Only what the loader checks before or instead of trusting glibc is
 * changed: other corruptions (a symbol made an IFUNC, which dlsym calls as
 * a resolver; a symbol value pointing outside the library; segment contents
 * mapped from the wrong offset) crash inside glibc's dlopen or dlsym, before
 * weft could look at anything — see docs/design.md, Tests.
 *
 * Invariants: the load returns 0 (then the unload returns 0 too) or a
 * negative code with a message; after the unload nothing of the plugin is
 * left (its device type is gone); no crash, leak or UB.
 *
 * WEFT_FUZZ_WRITE_SEEDS=DIR: writes the seed corpus (the unchanged regions,
 * and near-valid changes of each) into DIR and exits. */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "fuzz_common.h"

static unsigned char *image; /* the valid plugin file */
static size_t image_len;

#define MAX_SPANS 64
typedef struct span {
    size_t off, len;
} span;
/* every region is a list of spans of the file */
typedef struct region {
    span spans[MAX_SPANS];
    int n;
} region;
#define N_REGIONS 6
static region regions[N_REGIONS];
static char dir[4096];
static unsigned long counter;

static void add_span(int r, size_t off, size_t len)
{
    CHECK(regions[r].n < MAX_SPANS && off + len <= image_len);
    regions[r].spans[regions[r].n++] = (span){off, len};
}

/* The file offset of virtual address v, through the PT_LOAD headers. */
static size_t file_offset(const Elf64_Ehdr *eh, uint64_t v)
{
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(image + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && v >= ph[i].p_vaddr && v < ph[i].p_vaddr + ph[i].p_filesz)
            return (size_t)(v - ph[i].p_vaddr + ph[i].p_offset);
    fprintf(stderr, "fuzz_plugin_descriptor: address %#llx is in no loaded segment\n",
            (unsigned long long)v);
    abort();
}

/* The address a pointer field at virtual address `at` gets: the addend of
 * its RELATIVE relocation, or (REL, RELR) the bytes already there. */
static uint64_t pointer_at(const Elf64_Ehdr *eh, const Elf64_Shdr *sh, uint64_t at)
{
    for (int s = 0; s < eh->e_shnum; s++) {
        if (sh[s].sh_type != SHT_RELA)
            continue;
        const Elf64_Rela *rel = (const Elf64_Rela *)(image + sh[s].sh_offset);
        for (size_t i = 0; i < sh[s].sh_size / sizeof *rel; i++)
            if (rel[i].r_offset == at)
                return (uint64_t)rel[i].r_addend;
    }
    uint64_t v;
    memcpy(&v, image + file_offset(eh, at), sizeof v);
    return v;
}

static void find_regions(void)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)image;
    CHECK(image_len > sizeof *eh && memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 &&
          eh->e_ident[EI_CLASS] == ELFCLASS64);
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(image + eh->e_shoff);
    const Elf64_Sym *entry = NULL;
    size_t entry_off = 0;
    for (int s = 0; s < eh->e_shnum && !entry; s++) {
        if (sh[s].sh_type != SHT_DYNSYM)
            continue;
        const char *strtab = (const char *)image + sh[sh[s].sh_link].sh_offset;
        const Elf64_Sym *sym = (const Elf64_Sym *)(image + sh[s].sh_offset);
        for (size_t i = 0; i < sh[s].sh_size / sizeof *sym; i++)
            if (strcmp(strtab + sym[i].st_name, WEFT_PLUGIN_ENTRY_SYMBOL) == 0) {
                entry = &sym[i];
                entry_off = sh[s].sh_offset + i * sizeof *sym;
            }
    }
    CHECK(entry);
    size_t desc = file_offset(eh, entry->st_value);
    add_span(0, desc, sizeof(weft_plugin_descriptor) < entry->st_size
                          ? sizeof(weft_plugin_descriptor)
                          : (size_t)entry->st_size);
    add_span(1, entry_off + offsetof(Elf64_Sym, st_info), 1);
    add_span(1, entry_off + offsetof(Elf64_Sym, st_size), 8);
    uint64_t name = pointer_at(eh, sh, entry->st_value + offsetof(weft_plugin_descriptor, name));
    uint64_t variant =
        pointer_at(eh, sh, entry->st_value + offsetof(weft_plugin_descriptor, variant));
    size_t at = file_offset(eh, name);
    add_span(2, at, strlen((const char *)image + at) + 1);
    if (variant) {
        at = file_offset(eh, variant);
        add_span(3, at, strlen((const char *)image + at) + 1);
    }
    add_span(4, offsetof(Elf64_Ehdr, e_phoff), 8);
    add_span(4, offsetof(Elf64_Ehdr, e_phentsize), 2);
    add_span(4, offsetof(Elf64_Ehdr, e_phnum), 2);
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(image + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD || ph[i].p_type == PT_DYNAMIC) {
            size_t h = eh->e_phoff + (size_t)i * sizeof *ph;
            add_span(5, h + offsetof(Elf64_Phdr, p_offset), 8);
            add_span(5, h + offsetof(Elf64_Phdr, p_filesz), 8);
        }
}

/* Overwrites the chosen regions of copy with the input's bytes. */
static void apply(unsigned char *copy, const uint8_t *data, size_t size)
{
    if (size == 0)
        return;
    uint8_t which = data[0];
    size_t pos = 1;
    for (int r = 0; r < N_REGIONS; r++)
        for (int s = 0; s < regions[r].n; s++) {
            const span *sp = &regions[r].spans[s];
            for (size_t i = 0; i < sp->len && pos < size; i++, pos++)
                if (which & (1u << r))
                    copy[sp->off + i] = data[pos];
            /* a 1-byte type field: an IFUNC would be called by dlsym as
             * its resolver (a crash in glibc that no check can precede);
             * any other type reaches check_entry_symbol */
            if (r == 1 && s == 0 && (which & 2) &&
                ELF64_ST_TYPE(copy[sp->off]) == STT_GNU_IFUNC)
                copy[sp->off] = (unsigned char)ELF64_ST_INFO(ELF64_ST_BIND(copy[sp->off]), STT_OBJECT);
        }
    /* A segment moved or shortened but still inside the file maps the wrong
     * bytes (or zeros) as code or data: glibc runs the library's _init from
     * them inside dlopen, and no check of weft's can tell such a file from a
     * valid one.  Only the changes the loader can see are kept: a segment
     * that ends past the end of the file (wp__elf_check). */
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)image;
    for (int i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *orig = (const Elf64_Phdr *)(image + eh->e_phoff) + i;
        if (orig->p_type != PT_LOAD && orig->p_type != PT_DYNAMIC)
            continue;
        Elf64_Phdr *now = (Elf64_Phdr *)(copy + eh->e_phoff) + i;
        bool changed = now->p_offset != orig->p_offset || now->p_filesz != orig->p_filesz;
        bool past_end = now->p_offset > image_len || now->p_filesz > image_len - now->p_offset;
        if (changed && !past_end) {
            now->p_offset = orig->p_offset;
            now->p_filesz = orig->p_filesz;
        }
    }
}

/* ------------------------------------------------------------------ seeds */

static size_t region_bytes(unsigned char *out, const unsigned char *from)
{
    size_t n = 0;
    for (int r = 0; r < N_REGIONS; r++)
        for (int s = 0; s < regions[r].n; s++) {
            memcpy(out + n, from + regions[r].spans[s].off, regions[r].spans[s].len);
            n += regions[r].spans[s].len;
        }
    return n;
}

static void write_seed(const char *to, const char *tag, uint8_t which, const unsigned char *file)
{
    unsigned char buf[4096];
    buf[0] = which;
    size_t n = 1 + region_bytes(buf + 1, file);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", to, tag);
    FILE *f = fopen(path, "wb");
    CHECK(f);
    CHECK(fwrite(buf, 1, n, f) == n);
    CHECK(fclose(f) == 0);
}

static void write_seeds(const char *to)
{
    unsigned char *copy = malloc(image_len);
    CHECK(copy);
    write_seed(to, "valid", 0x3f, image);
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)image;
    size_t desc = regions[0].spans[0].off;
    struct {
        const char *tag;
        uint8_t which;
        size_t off;
        uint32_t value;
        int width;
    } changes[] = {
        {"abi-minor-newer", 1, desc + offsetof(weft_plugin_descriptor, abi_minor), WEFT_PLUGIN_ABI_MINOR + 1, 4},
        {"abi-major-old", 1, desc + offsetof(weft_plugin_descriptor, abi_major), WEFT_PLUGIN_ABI_MAJOR - 1, 4},
        {"struct-size-small", 1, desc + offsetof(weft_plugin_descriptor, struct_size), 16, 4},
        {"struct-size-large", 1, desc + offsetof(weft_plugin_descriptor, struct_size), 4096, 4},
        {"symbol-size-small", 2, regions[1].spans[1].off, 8, 4},
        {"symbol-a-function", 2, regions[1].spans[0].off, ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), 1},
        {"name-slash", 4, regions[2].spans[0].off + 1, '/', 1},
        {"name-empty", 4, regions[2].spans[0].off, 0, 1},
        {"phnum-zero", 16, offsetof(Elf64_Ehdr, e_phnum), 0, 2},
        {"phoff-past-end", 16, offsetof(Elf64_Ehdr, e_phoff), 0x7fffff00u, 4},
        {"segment-past-end", 32, regions[5].spans[1].off, 0x7fffff00u, 4},
    };
    (void)eh;
    for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
        memcpy(copy, image, image_len);
        uint32_t v = changes[i].value;
        memcpy(copy + changes[i].off, &v, (size_t)changes[i].width); /* little-endian */
        write_seed(to, changes[i].tag, changes[i].which, copy);
    }
    free(copy);
}

/* ---------------------------------------------------------------- harness */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *path = getenv("WEFT_FUZZ_PLUGIN");
    if (!path) {
        fprintf(stderr, "fuzz_plugin_descriptor: set WEFT_FUZZ_PLUGIN to a plugin file\n");
        exit(1);
    }
    int fd = open(path, O_RDONLY);
    struct stat st;
    CHECK(fd >= 0 && fstat(fd, &st) == 0);
    image_len = (size_t)st.st_size;
    image = malloc(image_len);
    CHECK(image && read(fd, image, image_len) == (ssize_t)image_len);
    close(fd);
    find_regions();
    const char *seeds = getenv("WEFT_FUZZ_WRITE_SEEDS");
    if (seeds) {
        write_seeds(seeds);
        exit(0);
    }
    /* the copies live in memory-backed /dev/shm where there is one */
    struct stat ds;
    const char *base = stat("/dev/shm", &ds) == 0 && access("/dev/shm", W_OK) == 0
                           ? "/dev/shm"
                           : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    snprintf(dir, sizeof dir, "%s/weft-fuzz-plugin-XXXXXX", base);
    CHECK(mkdtemp(dir));
    /* the valid copy loads and unloads: the regions are right */
    CHECK(weft_device_type_from_name("testdev") < 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *copy = malloc(image_len);
    CHECK(copy);
    memcpy(copy, image, image_len);
    apply(copy, data, size);
    /* a new name each time: glibc keeps a library it still has open by
     * file identity, and a rewritten file must not be taken for it */
    char path[4200];
    snprintf(path, sizeof path, "%s/libweft-fuzz-%lu.so", dir, counter++);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, copy, image_len) == (ssize_t)image_len);
    CHECK(close(fd) == 0);
    free(copy);

    weft_clear_error();
    int rc = weft_load_plugin(path);
    CHECK(rc <= 0);
    if (rc < 0) {
        CHECK(weft_last_error()[0] != '\0');
    } else {
        /* the last report row is this file's; its name is the (possibly
         * changed) descriptor's */
        int rows = weft_plugin_report_count();
        CHECK(rows > 0);
        weft_plugin_report row;
        CHECK(weft_plugin_report_get(rows - 1, &row) == 0);
        CHECK(row.status == WEFT_PLUGIN_LOADED && row.name);
        char name[64];
        snprintf(name, sizeof name, "%s", row.name);
        rc = weft_unload_plugin(name);
        if (rc != 0)
            fprintf(stderr, "unload of '%s' failed: %s\n", name, weft_last_error());
        CHECK(rc == 0);
    }
    CHECK(weft_device_type_from_name("testdev") < 0);
    unlink(path);
    return 0;
}

/* the directory goes with the process */
__attribute__((destructor)) static void remove_dir(void)
{
    if (dir[0])
        rmdir(dir);
}
