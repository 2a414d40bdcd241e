/* c10/owner.c — the hold counters of a plugin's owner record.  A holder
 * increments, then looks at closing; the unloader sets closing, then reads
 * the counts.  Both sides are sequentially consistent, so either the holder
 * backs out or the unloader sees the hold: nothing is created behind an
 * unload's back. */
#include "c10/core.h"

void wf__owner_drop(wf_owner *o)
{
    atomic_fetch_sub_explicit(&o->live, 1, memory_order_release);
}

static atomic_long *hold_counter(wf_owner *o, int kind)
{
    return kind == WF_HOLD_STREAM ? &o->live_streams
           : kind == WF_HOLD_LAYOUT ? &o->live_layout
                                    : &o->live;
}

bool wf__owner_try_hold(wf_owner *o, int kind)
{
    atomic_fetch_add(hold_counter(o, kind), 1);
    if (!atomic_load(&o->closing))
        return true;
    atomic_fetch_sub(hold_counter(o, kind), 1);
    return false;
}

void wf__owner_drop_kind(wf_owner *o, int kind)
{
    atomic_fetch_sub_explicit(hold_counter(o, kind), 1, memory_order_release);
}

long wf__owner_live_kind(wf_owner *o, int kind)
{
    return atomic_load(hold_counter(o, kind));
}

void wf__owner_set_closing(wf_owner *o, bool closing)
{
    atomic_store(&o->closing, closing);
}
