/* nn/optim_state.c — saving and loading an optimizer's state (torch's
 * optimizer.state_dict()) as a parameter file: each group's
 * hyper-parameters and parameter indices, each parameter's momentum
 * buffer or Adam moments and step count, under the documented names of
 * <weft/nn.h>.  Loading checks everything before it changes anything. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/nn.h>
#include <weft/plugin.h>

#include "nn/optim_internal.h"
#include "nn/parameter_file.h"

/* One group's hyper-parameters by name, for either direction. */
typedef struct hyper_field {
    const char *name;
    double *value; /* into a weft_optim_group; nesterov goes through a double */
} hyper_field;

static int hyper_fields(optimizer_kind kind, weft_optim_group *h, double *nesterov,
                        hyper_field out[6])
{
    int n = 0;
    out[n++] = (hyper_field){"lr", &h->lr};
    out[n++] = (hyper_field){"weight_decay", &h->weight_decay};
    if (kind == OPTIM_SGD) {
        out[n++] = (hyper_field){"momentum", &h->momentum};
        out[n++] = (hyper_field){"dampening", &h->dampening};
        out[n++] = (hyper_field){"nesterov", nesterov};
    } else {
        out[n++] = (hyper_field){"beta1", &h->beta1};
        out[n++] = (hyper_field){"beta2", &h->beta2};
        out[n++] = (hyper_field){"eps", &h->eps};
    }
    return n;
}

/* The state entries a parameter may have, and the tensor each is. */
static int state_slots(optimizer_kind kind, const char *names[3])
{
    if (kind == OPTIM_SGD) {
        names[0] = "momentum_buffer";
        return 1;
    }
    names[0] = "exp_avg";
    names[1] = "exp_avg_sq";
    names[2] = "step";
    return 3;
}

static const char *param_key(const char *const *param_names, int i, char *buf, size_t size)
{
    if (param_names)
        return param_names[i];
    snprintf(buf, size, "%d", i);
    return buf;
}

/* ------------------------------------------------------------------ save */

typedef struct entries {
    int n, cap;
    weft_tensor **tensors;
    char **names;
} entries;

/* Adds t (a new reference, taken even on failure) under a formatted name. */
static int add(entries *e, weft_tensor *t, const char *fmt, const char *a, const char *b)
{
    if (!t)
        return WEFT_ENOMEM; /* the caller's factory set the message */
    if (e->n == e->cap) {
        int cap = e->cap ? 2 * e->cap : 32;
        weft_tensor **tensors = weft_realloc(e->tensors, (size_t)cap * sizeof *tensors);
        if (tensors)
            e->tensors = tensors;
        char **names = weft_realloc(e->names, (size_t)cap * sizeof *names);
        if (names)
            e->names = names;
        if (!tensors || !names) {
            weft_tensor_release(t);
            return weft_set_error(WEFT_ENOMEM, "optimizer save: out of memory");
        }
        e->cap = cap;
    }
    int len = snprintf(NULL, 0, fmt, a, b);
    char *name = weft_malloc((size_t)len + 1);
    if (!name) {
        weft_tensor_release(t);
        return weft_set_error(WEFT_ENOMEM, "optimizer save: out of memory");
    }
    snprintf(name, (size_t)len + 1, fmt, a, b);
    e->tensors[e->n] = t;
    e->names[e->n++] = name;
    return 0;
}

static weft_tensor *scalar(double v, weft_dtype dtype)
{
    weft_tensor *t = NULL;
    return weft_full(&t, NULL, 0, v, dtype, WEFT_DEVICE_CPU) == 0 ? t : NULL;
}

static int add_group(entries *e, const weft_optimizer *opt, int g)
{
    char gname[16];
    snprintf(gname, sizeof gname, "%d", g);
    int64_t k = 0;
    for (int i = 0; i < opt->n; i++)
        k += opt->state[i].group == g;
    weft_tensor *indices = NULL;
    int rc = weft_empty(&indices, &k, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc < 0)
        return rc;
    int64_t *p = weft_tensor_data_ptr(indices);
    for (int i = 0; i < opt->n; i++)
        if (opt->state[i].group == g)
            *p++ = i;
    rc = add(e, indices, "param_groups.%s.%s", gname, "params");
    weft_optim_group h = opt->groups[g];
    double nesterov = h.nesterov;
    hyper_field fields[6];
    int nf = hyper_fields(opt->kind, &h, &nesterov, fields);
    for (int f = 0; f < nf && rc == 0; f++)
        rc = add(e, scalar(*fields[f].value, WEFT_FLOAT64), "param_groups.%s.%s", gname,
                 fields[f].name);
    return rc;
}

int weft_optimizer_save(const weft_optimizer *opt, const char *path,
                        const char *const *param_names)
{
    if (!opt || !path)
        return weft_set_error(WEFT_EINVAL, "weft_optimizer_save: NULL %s",
                              opt ? "path" : "optimizer");
    for (int i = 0; param_names && i < opt->n; i++)
        if (!param_names[i])
            return weft_set_error(WEFT_EINVAL, "weft_optimizer_save: parameter %d has no name", i);
    entries e = {0};
    int rc = 0;
    for (int g = 0; g < opt->ngroups && rc == 0; g++)
        rc = add_group(&e, opt, g);
    for (int i = 0; i < opt->n && rc == 0; i++) {
        const param_state *s = &opt->state[i];
        char buf[16];
        const char *key = param_key(param_names, i, buf, sizeof buf);
        if (!s->first)
            continue;
        if (opt->kind == OPTIM_SGD) {
            rc = add(&e, weft_tensor_retain(s->first), "state.%s.%s", key, "momentum_buffer");
        } else {
            rc = add(&e, weft_tensor_retain(s->first), "state.%s.%s", key, "exp_avg");
            if (rc == 0)
                rc = add(&e, weft_tensor_retain(s->second), "state.%s.%s", key, "exp_avg_sq");
            if (rc == 0)
                rc = add(&e, scalar((double)s->step, WEFT_INT64), "state.%s.%s", key, "step");
        }
    }
    if (rc == 0)
        rc = weft_save_parameters(path, e.tensors, (const char *const *)e.names, e.n);
    for (int i = 0; i < e.n; i++) {
        weft_tensor_release(e.tensors[i]);
        free(e.names[i]);
    }
    free(e.tensors);
    free(e.names);
    return rc;
}

/* ------------------------------------------------------------------ load */

typedef struct file {
    const char *path;
    wf_named_tensor *list;
    int n;
    bool *used;
} file;

/* The entry called prefix.middle.suffix, marked used; NULL if absent. */
static weft_tensor *take(file *f, const char *prefix, const char *middle, const char *suffix)
{
    char name[4200];
    snprintf(name, sizeof name, "%s.%s.%s", prefix, middle, suffix);
    for (int i = 0; i < f->n; i++)
        if (!f->used[i] && strcmp(f->list[i].name, name) == 0) {
            f->used[i] = true;
            return f->list[i].tensor;
        }
    return NULL;
}

static bool same_shape(const weft_tensor *a, const weft_tensor *b)
{
    int nd = weft_tensor_ndim(a);
    if (nd != weft_tensor_ndim(b))
        return false;
    for (int d = 0; d < nd; d++)
        if (weft_tensor_size(a, d) != weft_tensor_size(b, d))
            return false;
    return true;
}

static int read_group(file *f, const weft_optimizer *opt, int g, weft_optim_group *out)
{
    char gname[16];
    snprintf(gname, sizeof gname, "%d", g);
    weft_tensor *indices = take(f, "param_groups", gname, "params");
    if (!indices)
        return weft_set_error(WEFT_ENOTFOUND, "%s: has no 'param_groups.%d.params' (the optimizer "
                              "has %d parameter groups)",
                              f->path, g, opt->ngroups);
    int64_t k = 0;
    for (int i = 0; i < opt->n; i++)
        k += opt->state[i].group == g;
    if (weft_tensor_dtype(indices) != WEFT_INT64 || weft_tensor_ndim(indices) != 1 ||
        weft_tensor_size(indices, 0) != k)
        return weft_set_error(WEFT_EINVAL,
                              "%s: parameter group %d holds %lld parameters in the file but %lld "
                              "in the optimizer",
                              f->path, g,
                              weft_tensor_ndim(indices) == 1 ? (long long)weft_tensor_size(indices, 0)
                                                             : -1LL,
                              (long long)k);
    const int64_t *p = weft_tensor_data_ptr(indices);
    for (int i = 0; i < opt->n; i++)
        if (opt->state[i].group == g && *p++ != i)
            return weft_set_error(WEFT_EINVAL,
                                  "%s: parameter group %d holds other parameters than the "
                                  "optimizer's (index %" PRId64 " where %d was expected)",
                                  f->path, g, p[-1], i);
    *out = opt->groups[g];
    double nesterov = out->nesterov;
    hyper_field fields[6];
    int nf = hyper_fields(opt->kind, out, &nesterov, fields);
    for (int i = 0; i < nf; i++) {
        weft_tensor *t = take(f, "param_groups", gname, fields[i].name);
        if (!t || weft_tensor_dtype(t) != WEFT_FLOAT64 || weft_tensor_ndim(t) != 0)
            return weft_set_error(t ? WEFT_EDTYPE : WEFT_ENOTFOUND,
                                  "%s: 'param_groups.%d.%s' is %s (expected a float64 scalar)",
                                  f->path, g, fields[i].name, t ? "not a float64 scalar" : "missing");
        *fields[i].value = *(const double *)weft_tensor_data_ptr(t);
    }
    out->nesterov = nesterov != 0;
    int rc = wn__optim_check_hyper(opt->kind, out);
    if (rc < 0) {
        char why[512]; /* the message is rewritten from its own buffer */
        snprintf(why, sizeof why, "%s", weft_last_error());
        return weft_set_error(rc, "%s: parameter group %d: %s", f->path, g, why);
    }
    return 0;
}

/* Checks entry t as state of parameter p: p's dtype and shape (a 0-d
 * int64 for step). */
static int check_state(const file *f, const char *key, const char *slot, const weft_tensor *t,
                       const weft_tensor *p)
{
    bool step = strcmp(slot, "step") == 0;
    weft_dtype want = step ? WEFT_INT64 : weft_tensor_dtype(p);
    if (weft_tensor_dtype(t) != want)
        return weft_set_error(WEFT_EDTYPE, "%s: 'state.%s.%s' is %s but the parameter needs %s",
                              f->path, key, slot, weft_dtype_name(weft_tensor_dtype(t)),
                              weft_dtype_name(want));
    if (step ? weft_tensor_ndim(t) != 0 : !same_shape(t, p)) {
        char got[256], need[256];
        size_t a = 0, b = 0;
        got[0] = need[0] = '\0';
        for (int d = 0; d < weft_tensor_ndim(t); d++)
            a += (size_t)snprintf(got + a, sizeof got - a, "%s%lld", d ? ", " : "",
                                  (long long)weft_tensor_size(t, d));
        for (int d = 0; !step && d < weft_tensor_ndim(p); d++)
            b += (size_t)snprintf(need + b, sizeof need - b, "%s%lld", d ? ", " : "",
                                  (long long)weft_tensor_size(p, d));
        return weft_set_error(WEFT_ESHAPE, "%s: 'state.%s.%s' has shape [%s] but the parameter "
                              "needs [%s]",
                              f->path, key, slot, got, need);
    }
    return 0;
}

/* The new state of one parameter, staged on its device. */
typedef struct staged {
    weft_tensor *first, *second;
    int64_t step;
} staged;

static int read_state(file *f, const weft_optimizer *opt, int i, const char *key, staged *out)
{
    const char *slots[3];
    int ns = state_slots(opt->kind, slots);
    weft_tensor *found[3] = {NULL, NULL, NULL};
    int present = 0;
    for (int s = 0; s < ns; s++) {
        found[s] = take(f, "state", key, slots[s]);
        present += found[s] != NULL;
    }
    if (present == 0)
        return 0;
    if (present != ns)
        for (int s = 0; s < ns; s++)
            if (!found[s])
                return weft_set_error(WEFT_ENOTFOUND, "%s: has no 'state.%s.%s' although it has "
                                      "other state of that parameter",
                                      f->path, key, slots[s]);
    const weft_tensor *p = opt->state[i].param;
    for (int s = 0; s < ns; s++) {
        int rc = check_state(f, key, slots[s], found[s], p);
        if (rc < 0)
            return rc;
    }
    weft_device dev = weft_tensor_device(p);
    int rc = weft_to_device(&out->first, found[0], dev);
    if (rc == 0 && ns == 3) {
        rc = weft_to_device(&out->second, found[1], dev);
        out->step = *(const int64_t *)weft_tensor_data_ptr(found[2]);
        if (rc == 0 && out->step < 1)
            rc = weft_set_error(WEFT_EINVAL, "%s: 'state.%s.step' is %lld", f->path, key,
                                (long long)out->step);
    }
    return rc;
}

int weft_optimizer_load(weft_optimizer *opt, const char *path, const char *const *param_names)
{
    if (!opt || !path)
        return weft_set_error(WEFT_EINVAL, "weft_optimizer_load: NULL %s",
                              opt ? "path" : "optimizer");
    for (int i = 0; param_names && i < opt->n; i++)
        if (!param_names[i])
            return weft_set_error(WEFT_EINVAL, "weft_optimizer_load: parameter %d has no name", i);
    file f = {.path = path};
    int rc = wn__read_parameter_file(path, &f.list, &f.n);
    if (rc < 0)
        return rc;
    f.used = weft_calloc((size_t)f.n + 1, sizeof *f.used);
    weft_optim_group *groups = weft_calloc((size_t)opt->ngroups + 1, sizeof *groups);
    staged *states = weft_calloc((size_t)opt->n + 1, sizeof *states);
    if (!f.used || !groups || !states)
        rc = weft_set_error(WEFT_ENOMEM, "weft_optimizer_load: out of memory");
    for (int g = 0; g < opt->ngroups && rc == 0; g++)
        rc = read_group(&f, opt, g, &groups[g]);
    for (int i = 0; i < opt->n && rc == 0; i++) {
        char buf[16];
        rc = read_state(&f, opt, i, param_key(param_names, i, buf, sizeof buf), &states[i]);
    }
    for (int i = 0; i < f.n && rc == 0; i++)
        if (!f.used[i])
            rc = weft_set_error(WEFT_ENOTFOUND,
                                "%s: holds '%s', which is not state of this %s optimizer over "
                                "%d parameters in %d groups",
                                path, f.list[i].name,
                                opt->kind == OPTIM_SGD ? "SGD" : opt->kind == OPTIM_ADAM ? "Adam" : "AdamW",
                                opt->n, opt->ngroups);
    if (rc == 0) {
        /* everything is checked and staged: commit */
        memcpy(opt->groups, groups, (size_t)opt->ngroups * sizeof *groups);
        for (int i = 0; i < opt->n; i++) {
            param_state *s = &opt->state[i];
            weft_tensor_release(s->first);
            weft_tensor_release(s->second);
            s->first = states[i].first;
            s->second = states[i].second;
            s->step = states[i].step;
            states[i].first = states[i].second = NULL;
        }
    }
    for (int i = 0; states && i < opt->n; i++) {
        weft_tensor_release(states[i].first);
        weft_tensor_release(states[i].second);
    }
    free(states);
    free(groups);
    free(f.used);
    wn__named_tensors_free(f.list, f.n);
    return rc;
}
