/* tests/dir_entries.h — how many entries (not . or ..) a directory holds:
 * /proc/self/task for a process's threads, a scratch directory for the
 * files a test left.  -1 when it cannot be opened. */
#ifndef WEFT_TESTS_DIR_ENTRIES_H
#define WEFT_TESTS_DIR_ENTRIES_H

#include <dirent.h>

static inline int dir_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

#endif
