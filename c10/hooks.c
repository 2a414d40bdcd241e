/* c10/hooks.c — the table through which the layer above (autograd) is
 * called from c10 and dispatch without either including it.  Written once by
 * the composition root (init/init.c) in the library constructor, read-only
 * afterwards, so readers need no synchronisation. */
#include "c10/core.h"

wf_autograd_hooks wf__autograd_hooks;

/* Written by the profiler layer when profiling starts and stops
 * (profiler/record.c); read with relaxed loads on every allocation. */
wf_storage_hooks wf__storage_hooks;
