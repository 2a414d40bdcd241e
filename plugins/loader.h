/* plugins/loader.h — internal: what the loader offers the layers that wire
 * it in (the composition root).  The public loader API is in weft.h. */
#ifndef WF_PLUGINS_LOADER_H
#define WF_PLUGINS_LOADER_H

#include <stddef.h>

/* One line for error messages: which plugins are loaded and where the
 * loader looked.  Thread-safe. */
void wp__loader_summary(char *buf, size_t size);

/* plugins/elf.c: 0 when the file at path is not a native ELF file (dlopen
 * judges it) or its program headers and dynamic section are safe for dlopen
 * to trust; else -1 with the reason in msg.  Reads the file only. */
int wp__elf_check(const char *path, char *msg, size_t size);

#endif
