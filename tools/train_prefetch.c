/* tools/train_prefetch.c — one assembling thread and a one-batch slot:
 * the training loop requests batch s + 1 as it takes batch s, so the
 * gather and conversion of the next images overlap the step's products
 * instead of preceding them.  Errors made in the thread travel back with
 * their messages (weft's messages are per thread). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <weft/plugin.h> /* weft_set_error: a thread's error carried back */

#include "train_prefetch.h"

struct train_prefetch {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    train_batch_fn fn;
    void *ctx;
    bool stop, requested, ready;
    long start, count;  /* the batch requested */
    weft_tensor *x, *y; /* built, not yet taken */
    int rc;
    char message[512];
};

static void *assemble(void *arg)
{
    train_prefetch *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && (!p->requested || p->ready))
            pthread_cond_wait(&p->cond, &p->lock);
        if (p->stop)
            break;
        long start = p->start, count = p->count;
        pthread_mutex_unlock(&p->lock);
        weft_tensor *x = NULL, *y = NULL;
        int rc = p->fn(p->ctx, start, count, &x, &y);
        pthread_mutex_lock(&p->lock);
        p->x = x;
        p->y = y;
        p->rc = rc;
        if (rc < 0)
            snprintf(p->message, sizeof p->message, "%s", weft_last_error());
        p->ready = true;
        pthread_cond_broadcast(&p->cond);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int train_prefetch_start(train_prefetch **out, train_batch_fn fn, void *ctx)
{
    train_prefetch *p = calloc(1, sizeof *p);
    if (!p)
        return weft_set_error(WEFT_ENOMEM, "weft-train: out of memory for the batch thread");
    p->fn = fn;
    p->ctx = ctx;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    if (pthread_create(&p->thread, NULL, assemble, p) != 0) {
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->cond);
        free(p);
        return weft_set_error(WEFT_EINVAL, "weft-train: cannot start the batch thread");
    }
    *out = p;
    return 0;
}

void train_prefetch_request(train_prefetch *p, long start, long count)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    if (!p->requested) {
        p->requested = true;
        p->ready = false;
        p->start = start;
        p->count = count;
        pthread_cond_broadcast(&p->cond);
    }
    pthread_mutex_unlock(&p->lock);
}

int train_prefetch_take(train_prefetch *p, train_batch_fn fn, void *ctx, long start, long count,
                        weft_tensor **x, weft_tensor **y)
{
    if (p) {
        pthread_mutex_lock(&p->lock);
        bool mine = p->requested && p->start == start && p->count == count;
        /* another batch in flight: let it finish, then drop it */
        while (p->requested && !p->ready)
            pthread_cond_wait(&p->cond, &p->lock);
        weft_tensor *bx = p->x, *by = p->y;
        int rc = p->rc;
        char message[sizeof p->message];
        snprintf(message, sizeof message, "%s", p->message);
        p->x = p->y = NULL;
        p->requested = p->ready = false;
        p->rc = 0;
        pthread_mutex_unlock(&p->lock);
        if (mine) {
            if (rc < 0)
                return weft_set_error(rc, "%s", message);
            *x = bx;
            *y = by;
            return 0;
        }
        weft_tensor_release(bx);
        weft_tensor_release(by);
    }
    return fn(ctx, start, count, x, y);
}

void train_prefetch_stop(train_prefetch *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    weft_tensor_release(p->x);
    weft_tensor_release(p->y);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p);
}
