/* init/init.c — the composition root: the one place that knows every layer
 * and wires them together when libweft is loaded.  Each layer below only
 * looks down; what a lower layer must call above it (c10 freeing autograd
 * metadata, recording views and copies; the dispatcher refreshing a view's
 * history) goes through the hook table in c10/core.h, filled in here.
 *
 * The core is ready before main(): devices, the operator table, the core's
 * own kernels, then autograd's kernels and hooks.  Nothing here can fail
 * except for memory, which would make every later call report it. */
#include "autograd/autograd.h"
#include "c10/core.h"
#include "dispatch/dispatcher.h"
#include "ops/ops.h"
#include "plugins/loader.h"
#include "profiler/profiler.h"

__attribute__((constructor)) static void weft_init(void)
{
    wf__device_init();
    wd__dispatch_init();
    /* every device type registered from here on gets the CPU fallback */
    wd__device_fallback_kernel = wo__cpu_fallback_kernel;
    wo__core_kernels_register();
    /* before any tensor exists, so no tensor is made without them */
    wf__autograd_hooks = (wf_autograd_hooks){
        .meta_free = wa__autograd_meta_free,
        .on_view = wa__autograd_view,
        .on_copy = wa__autograd_copy,
    };
    wa__autograd_register();
    /* the Profiler key's kernel; its hooks into c10 and autograd are
     * stored only while some thread profiles */
    wr__profiler_register();
    wd__loader_summary_hook = wp__loader_summary;
}
