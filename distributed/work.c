/* distributed/work.c — one collective call in flight: the agreement step,
 * the backend request, the timeout, and the copy of staged results back
 * into the caller's tensors.
 *
 * Why an agreement step: MPI matches collectives by order alone, so a rank
 * that passes another dtype or count produces garbage or a hang.  Before
 * the data moves, every rank sends every other one fixed-size record (the
 * call, dtype, count, reduction, root, and whether this rank refused its
 * own arguments), on a channel of its own tagged with the group's call
 * counter.  Every rank then holds the same records and reaches the same
 * verdict, so bad input is the same clear error everywhere; and a rank
 * whose record never arrives is named when the timeout strikes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#include "distributed/work.h"

static const char *const kind_names[WEFT_DIST_NUM_KINDS] = {
    "all_reduce", "broadcast", "reduce",  "all_gather", "reduce_scatter", "all_to_all",
    "gather",     "scatter",   "barrier", "send",       "recv"};

const char *wdist__kind_name(int kind)
{
    return kind >= 0 && kind < WEFT_DIST_NUM_KINDS ? kind_names[kind] : "?";
}

int64_t wdist__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Fails w with code and a message; the thread's message is set too. */
static int work_fail(weft_work *w, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int work_fail(weft_work *w, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->message, sizeof w->message, fmt, ap);
    va_end(ap);
    w->error = code;
    w->phase = WDIST_DONE;
    return weft_set_error(code, "%s", w->message);
}

static void queue_remove(weft_work *w)
{
    weft_process_group *g = w->group;
    weft_work *prev = NULL;
    for (weft_work *p = g->queue_head; p; prev = p, p = p->next) {
        if (p != w)
            continue;
        if (prev)
            prev->next = w->next;
        else
            g->queue_head = w->next;
        if (g->queue_tail == w)
            g->queue_tail = prev;
        w->next = NULL;
        w->queued = 0;
        return;
    }
}

/* Posts this rank's record to every other member and a receive for
 * theirs.  Called with the lock held. */
int wdist__agree_start(weft_work *w)
{
    weft_process_group *g = w->group;
    const weft_dist_backend *be = wdist__state.backend;
    w->peers = calloc((size_t)g->size, sizeof *w->peers);
    w->ctl = calloc((size_t)g->size * 2, sizeof *w->ctl);
    if (!w->peers || !w->ctl)
        return work_fail(w, WEFT_ENOMEM, "%s: out of memory", wdist__kind_name(w->mine.kind));
    w->peers[g->rank] = w->mine;
    if (g->size > 1 && wdist__backend_ordered()) {
        /* one gather of every record (nccl: an all_gather on the device),
         * posted by wdist__progress in call order; a world of one has
         * nobody to agree with */
        w->exchanged = 1;
        w->phase = WDIST_BEHIND;
        return 0;
    }
    int tag = (int)(w->mine.seq & 0xfffff);
    for (int r = 0; r < g->size; r++) {
        if (r == g->rank)
            continue;
        weft_dist_request_desc d = {sizeof d, WEFT_DIST_RECV, 0, WEFT_UINT8, NULL, &w->peers[r],
                                    (int64_t)sizeof(wdist_meta), r, tag, 1};
        int rc = be->start(&w->ctl[2 * r], g->comm, &d);
        if (rc == 0) {
            d.kind = WEFT_DIST_SEND;
            d.send = &w->mine;
            d.recv = NULL;
            rc = be->start(&w->ctl[2 * r + 1], g->comm, &d);
        }
        if (rc < 0) {
            /* requests already posted can no longer be matched reliably */
            snprintf(g->broken, sizeof g->broken, "%s is unusable: the agreement step of %s failed: %s",
                     g->name, wdist__kind_name(w->mine.kind), weft_last_error());
            return work_fail(w, rc, "%s", g->broken);
        }
    }
    w->phase = WDIST_AGREE;
    return 0;
}

/* Posts w's exchange of the agreement records (an ordered backend). */
static void exchange_start(weft_work *w)
{
    weft_process_group *g = w->group;
    const weft_dist_backend *be = wdist__state.backend;
    int rc = be->exchange(&w->ctl[0], g->comm, &w->mine, w->peers, sizeof(wdist_meta), &w->desc);
    if (rc < 0) {
        snprintf(g->broken, sizeof g->broken, "%s is unusable: the agreement step of %s failed: %s",
                 g->name, wdist__kind_name(w->mine.kind), weft_last_error());
        work_fail(w, rc, "%s", g->broken);
        return;
    }
    w->phase = WDIST_AGREE;
}

/* The verdict on the records: the same on every rank, since every rank
 * holds the same records and looks at them in rank order. */
static void agree_verdict(weft_work *w)
{
    weft_process_group *g = w->group;
    const char *what = wdist__kind_name(w->mine.kind);
    if (w->refuse) {
        /* this rank's own message says more than its record */
        w->error = w->refuse;
        w->phase = WDIST_DONE;
        return;
    }
    for (int r = 0; r < g->size; r++)
        if (w->peers[r].status < 0) {
            w->peers[r].reason[sizeof w->peers[r].reason - 1] = '\0';
            work_fail(w, (int)w->peers[r].status, "%s on %s: rank %d refused its arguments: %s",
                      what, g->name, r, w->peers[r].reason);
            return;
        }
    const wdist_meta *a = &w->peers[0];
    for (int r = 1; r < g->size; r++) {
        const wdist_meta *b = &w->peers[r];
        if (b->seq != a->seq || b->kind != a->kind) {
            work_fail(w, WEFT_EINVAL,
                      "%s on %s: rank 0 called %s (call %lld of the group) but rank %d called %s "
                      "(call %lld): every rank must call the same collectives in the same order",
                      what, g->name, wdist__kind_name((int)a->kind), (long long)a->seq, r,
                      wdist__kind_name((int)b->kind), (long long)b->seq);
            return;
        }
        if (b->dtype != a->dtype) {
            work_fail(w, WEFT_EINVAL, "%s on %s: rank 0 passed %s but rank %d passed %s", what,
                      g->name, weft_dtype_name((weft_dtype)a->dtype), r,
                      weft_dtype_name((weft_dtype)b->dtype));
            return;
        }
        if (b->count != a->count) {
            work_fail(w, WEFT_EINVAL,
                      "%s on %s: rank 0 passed %lld elements per rank but rank %d passed %lld",
                      what, g->name, (long long)a->count, r, (long long)b->count);
            return;
        }
        if (b->op != a->op) {
            work_fail(w, WEFT_EINVAL, "%s on %s: rank 0 reduces with %s but rank %d with %s",
                      what, g->name, weft_reduce_op_name((int)a->op), r,
                      weft_reduce_op_name((int)b->op));
            return;
        }
        if (b->root != a->root) {
            work_fail(w, WEFT_EINVAL, "%s on %s: rank 0 names root %lld but rank %d names %lld",
                      what, g->name, (long long)a->root, r, (long long)b->root);
            return;
        }
    }
    w->phase = WDIST_READY;
}

int wdist__copy_into(weft_tensor *dst, const weft_tensor *src)
{
    weft_device dd = weft_tensor_device(dst), sd = weft_tensor_device(src);
    if (weft_device_equal(dd, sd))
        return weft_copy_(dst, src);
    weft_tensor *moved = NULL;
    int rc = weft_to_device(&moved, src, dd);
    if (rc == 0)
        rc = weft_copy_(dst, moved);
    weft_tensor_release(moved);
    return rc;
}

/* Copies staged results into the caller's tensors, divides for avg. */
static int work_finish(weft_work *w)
{
    int rc = 0;
    bool grad = weft_set_grad_enabled(false);
    if (w->avg_divisor > 1 && w->result)
        rc = weft_div_scalar_(w->result, (double)w->avg_divisor);
    if (rc == 0 && w->result && w->dest && w->dest != w->result)
        rc = wdist__copy_into(w->dest, w->result);
    for (int i = 0; rc == 0 && i < w->n_dests; i++) {
        weft_tensor *chunk = NULL, *shaped = NULL;
        weft_tensor *d = w->dests[i];
        rc = weft_narrow(&chunk, w->result, 0, i * w->mine.count, w->mine.count);
        if (rc == 0)
            rc = weft_view(&shaped, chunk, weft_tensor_sizes(d), weft_tensor_ndim(d));
        if (rc == 0)
            rc = wdist__copy_into(d, shaped);
        weft_tensor_release(shaped);
        weft_tensor_release(chunk);
    }
    weft_set_grad_enabled(grad);
    if (rc < 0)
        return work_fail(w, rc, "%s on %s: copying the result back: %s",
                         wdist__kind_name(w->mine.kind), w->group->name, weft_last_error());
    w->phase = WDIST_DONE;
    return 0;
}

/* Advances every queued work of g as far as it can go without waiting.
 * Data transfers start in call order (the backend matches them by order);
 * a work whose agreement is still out holds back the data of later ones.
 * An ordered backend (nccl) matches *every* request by order, its
 * agreement's gathers and send/recv included: a rank whose first
 * agreement finished early would otherwise start that call's data before
 * the next call's gather while another rank did the reverse.  So there a
 * work's exchange waits for every earlier work's data to start, and
 * send/recv keep their place in the queue.  Called with the lock held. */
void wdist__progress(weft_process_group *g)
{
    const weft_dist_backend *be = wdist__state.backend;
    int ordered = wdist__backend_ordered();
    int may_start = 1;
    for (weft_work *w = g->queue_head, *next; w; w = next) {
        next = w->next;
        if (w->phase == WDIST_BEHIND && may_start)
            exchange_start(w);
        if (w->phase == WDIST_AGREE) {
            int pending = 0;
            for (int i = 0; i < 2 * g->size; i++) {
                if (!w->ctl[i])
                    continue;
                int rc = be->test(w->ctl[i]);
                if (rc == 0) {
                    pending = 1;
                    continue;
                }
                w->ctl[i] = NULL;
                if (rc < 0) {
                    snprintf(g->broken, sizeof g->broken,
                             "%s is unusable: the agreement step of %s failed: %s", g->name,
                             wdist__kind_name(w->mine.kind), weft_last_error());
                    work_fail(w, rc, "%s", g->broken);
                    break;
                }
            }
            if (w->phase == WDIST_AGREE && !pending)
                agree_verdict(w);
        }
        int p2p = w->desc.kind == WEFT_DIST_SEND || w->desc.kind == WEFT_DIST_RECV;
        /* point-to-point messages match by peer and tag, not by order,
         * except on an ordered backend */
        int bypass = p2p && !ordered;
        if (w->phase == WDIST_READY && (may_start || bypass)) {
            int rc = be->start(&w->request, g->comm, &w->desc);
            if (rc < 0)
                work_fail(w, rc, "%s on %s: %s", wdist__kind_name(w->desc.kind), g->name,
                          weft_last_error());
            else
                w->phase = WDIST_DATA;
        }
        if (w->phase == WDIST_DATA) {
            int rc = be->test(w->request);
            if (rc != 0)
                w->request = NULL;
            if (rc < 0)
                work_fail(w, rc, "%s on %s: %s", wdist__kind_name(w->desc.kind), g->name,
                          weft_last_error());
            else if (rc == 1)
                work_finish(w);
        }
        if (w->phase == WDIST_DONE)
            queue_remove(w);
        else if (w->phase != WDIST_DATA && !bypass)
            may_start = 0;
    }
}

/* The timeout: names the ranks whose record did not come, or says that
 * all came and the transfer itself stalled.  Every queued work of the
 * group fails with it and the group is marked unusable (the backend
 * cannot cancel a collective).  Called with the lock held. */
static void work_timeout(weft_work *w)
{
    weft_process_group *g = w->group;
    const weft_dist_backend *be = wdist__state.backend;
    const char *what = wdist__kind_name(w->desc.kind);
    char ranks[160] = "";
    int n = 0;
    if (w->phase == WDIST_AGREE && !w->exchanged)
        for (int r = 0; r < g->size; r++)
            if (r != g->rank && w->ctl[2 * r]) {
                size_t len = strlen(ranks);
                snprintf(ranks + len, sizeof ranks - len, "%s%d", n++ ? ", " : "", r);
            }
    char msg[400];
    if (w->desc.kind == WEFT_DIST_SEND || w->desc.kind == WEFT_DIST_RECV)
        snprintf(msg, sizeof msg,
                 "%s on %s timed out after %lld ms: rank %d did not answer (tag %d, %s)", what,
                 g->name, (long long)g->timeout_ms, w->desc.root, w->desc.tag,
                 weft_dtype_name((weft_dtype)w->desc.dtype));
    else if (w->phase == WDIST_AGREE && w->exchanged)
        /* a gather completes for all or for none: the backend cannot say
         * whose record is missing, only that one is */
        snprintf(msg, sizeof msg,
                 "%s on %s timed out after %lld ms in the agreement step: at least one of the "
                 "%d other ranks did not call it (or died); backend %s cannot tell which",
                 what, g->name, (long long)g->timeout_ms, g->size - 1, be->name);
    else if (n)
        snprintf(msg, sizeof msg,
                 "%s on %s timed out after %lld ms: rank%s %s did not answer (never called it, or "
                 "died)",
                 what, g->name, (long long)g->timeout_ms, n > 1 ? "s" : "", ranks);
    else if (w->phase == WDIST_READY || w->phase == WDIST_BEHIND)
        snprintf(msg, sizeof msg,
                 "%s on %s timed out after %lld ms behind an earlier collective of the group that "
                 "did not finish",
                 what, g->name, (long long)g->timeout_ms);
    else
        snprintf(msg, sizeof msg,
                 "%s on %s timed out after %lld ms: every rank joined but the transfer did not "
                 "finish (a rank may have died)",
                 what, g->name, (long long)g->timeout_ms);
    snprintf(g->broken, sizeof g->broken, "%s is unusable after an earlier timeout: %s", g->name,
             msg);
    for (weft_work *q = g->queue_head, *next; q; q = next) {
        next = q->next;
        for (int i = 0; q->ctl && i < 2 * g->size; i++)
            if (q->ctl[i]) {
                be->abandon(q->ctl[i]);
                q->ctl[i] = NULL;
            }
        if (q->request) {
            be->abandon(q->request);
            q->request = NULL;
        }
        /* the backend may still write these buffers: they stay alive */
        q->leak = 1;
        work_fail(q, WEFT_EIO, "%s", q == w ? msg : g->broken);
        queue_remove(q);
    }
    weft_set_error(WEFT_EIO, "%s", msg);
}

/* microseconds on the monotonic clock, for the wait's sleeping */
static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int wdist__wait_locked(weft_work *w)
{
    int spins = 0;
    int64_t since = now_us();
    while (w->phase != WDIST_DONE) {
        wdist__progress(w->group);
        if (w->phase == WDIST_DONE)
            break;
        if (wdist__now_ms() - w->start_ms > w->group->timeout_ms) {
            work_timeout(w);
            break;
        }
        /* the backend makes progress only while it is tested: spin, then
         * let other threads (and an oversubscribed peer) have the CPU;
         * after a millisecond the peer is plainly not running, and
         * yielding still keeps this thread runnable and competing for the
         * CPU the peer needs: sleep between polls instead (50 us, small
         * next to a wait that long) */
        if (++spins % 64 == 0) {
            pthread_mutex_unlock(&wdist__state.lock);
            if (now_us() - since > 1000)
                nanosleep(&(struct timespec){0, 50000}, NULL);
            else
                sched_yield();
            pthread_mutex_lock(&wdist__state.lock);
        }
    }
    if (w->error)
        return weft_set_error(w->error, "%s", w->message);
    return 0;
}

int weft_work_wait(weft_work *w)
{
    if (!w)
        return weft_set_error(WEFT_EINVAL, "work_wait: NULL work");
    pthread_mutex_lock(&wdist__state.lock);
    int rc = wdist__wait_locked(w);
    pthread_mutex_unlock(&wdist__state.lock);
    return rc;
}

int weft_work_test(weft_work *w)
{
    if (!w)
        return weft_set_error(WEFT_EINVAL, "work_test: NULL work");
    pthread_mutex_lock(&wdist__state.lock);
    if (w->phase != WDIST_DONE) {
        wdist__progress(w->group);
        if (w->phase != WDIST_DONE && wdist__now_ms() - w->start_ms > w->group->timeout_ms)
            work_timeout(w);
    }
    int rc = w->phase != WDIST_DONE ? 0 : w->error ? weft_set_error(w->error, "%s", w->message) : 1;
    pthread_mutex_unlock(&wdist__state.lock);
    return rc;
}

void wdist__work_destroy(weft_work *w)
{
    /* abandoned: the backend may still read or write its records and
     * buffers until the process ends (kept on a list, so that a leak
     * checker sees them held, not lost) */
    if (w->leak) {
        w->next = wdist__state.abandoned;
        wdist__state.abandoned = w;
        return;
    }
    {
        weft_tensor_release(w->send_stage);
        weft_tensor_release(w->result);
        weft_tensor_release(w->dest);
        for (int i = 0; i < w->n_dests; i++)
            weft_tensor_release(w->dests[i]);
        free(w->dests);
        free(w->peers);
    }
    free(w->ctl);
    free(w);
}

void weft_work_free(weft_work *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&wdist__state.lock);
    if (w->phase != WDIST_DONE)
        wdist__wait_locked(w);
    wdist__work_destroy(w);
    pthread_mutex_unlock(&wdist__state.lock);
}
