/* c10/layout.c — the layout registry and layout tensors.  Strided is built
 * in (id 0); a plugin registers others through its registrar
 * (dispatch/registrar.c, which calls wf__layout_install under the registry
 * lock).  Readers take no lock: an entry's `registered` flag is published
 * after its fields are written, and a name is never rewritten while a
 * reader may hold it (the same rule as device type names). */
#include <stdio.h>
#include <string.h>

#include "c10/core.h"

wf_layout wf__layouts[WEFT_MAX_LAYOUTS + 1] = {[0] = {.name = "strided", .registered = true}};

static bool valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= sizeof wf__layouts[0].name)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
              name[i] == '_'))
            return false;
    return true;
}

int wf__layout_install(wf_owner *owner, const weft_layout_interface *iface, int *id_out)
{
    /* the fields this version reads must be inside what the plugin has */
    size_t need = offsetof(weft_layout_interface, from_strided);
    if (!iface || iface->struct_size < need)
        return wf__errorf(WEFT_EINVAL,
                          "register_layout: interface is NULL or its struct_size (%zu) is below "
                          "%zu",
                          iface ? iface->struct_size : (size_t)0, need);
    if (!iface->name || !valid_name(iface->name))
        return wf__errorf(WEFT_EINVAL,
                          "register_layout: bad layout name '%s' (1 to 31 characters of a-z, 0-9 "
                          "and _)",
                          iface->name ? iface->name : "(null)");
    if (!iface->release || !iface->to_strided)
        return wf__errorf(WEFT_EINVAL, "register_layout: layout '%s' lacks %s", iface->name,
                          !iface->release ? "release" : "to_strided");
    int free_id = -1;
    for (int i = 0; i <= WEFT_MAX_LAYOUTS; i++) {
        wf_layout *l = &wf__layouts[i];
        if (atomic_load(&l->registered) && strcmp(l->name, iface->name) == 0)
            return wf__errorf(WEFT_EEXIST,
                              "layout '%s' is already registered (by %s); plugin '%s' cannot "
                              "register it again",
                              iface->name, l->owner ? l->owner->name : "the core", owner->name);
        /* prefer the id this name had before (a reload keeps its id) */
        if (i > 0 && !atomic_load(&l->registered) &&
            (free_id < 0 || strcmp(l->name, iface->name) == 0))
            free_id = i;
    }
    if (free_id < 0)
        return wf__errorf(WEFT_ENOMEM, "register_layout: all %d layout ids are in use (by %s...)",
                          WEFT_MAX_LAYOUTS, wf__layouts[1].owner->name);
    wf_layout *l = &wf__layouts[free_id];
    memset(&l->iface, 0, sizeof l->iface);
    memcpy(&l->iface, iface,
           iface->struct_size < sizeof l->iface ? iface->struct_size : sizeof l->iface);
    l->iface.struct_size = sizeof l->iface;
    if (strcmp(l->name, iface->name) != 0)
        snprintf(l->name, sizeof l->name, "%s", iface->name);
    l->iface.name = l->name; /* the plugin's string goes with its library */
    l->owner = owner;
    atomic_store(&l->registered, true);
    *id_out = free_id;
    return 0;
}

void wf__layout_remove(int id)
{
    if (id > 0 && id <= WEFT_MAX_LAYOUTS)
        atomic_store(&wf__layouts[id].registered, false);
}

/* The layout record of a live id, or NULL. */
static wf_layout *live_layout(int id)
{
    if (id < 0 || id > WEFT_MAX_LAYOUTS || !atomic_load(&wf__layouts[id].registered))
        return NULL;
    return &wf__layouts[id];
}

/* What is wrong with result, a plugin's answer for t that should have
 * layout `want`, t's dtype, `device` and shape sizes[ndim]; NULL when
 * nothing.  A plugin's result is checked before anything reads it. */
static const char *result_problem(const weft_tensor *result, const weft_tensor *t, int want,
                                  weft_device device, const int64_t *sizes, int ndim)
{
    return !result                                      ? "nothing"
           : result->layout != want                     ? "a tensor of another layout"
           : result->dtype != t->dtype                  ? "another dtype"
           : !weft_device_equal(result->device, device) ? "another device"
           : result->ndim != ndim ||
                   memcmp(result->sizes, sizes, (size_t)ndim * sizeof(int64_t))
               ? "another shape"
               : NULL;
}

/* 0 when result, from layout `name`'s conversion `fn` of t, has the layout
 * `want` and t's shape, dtype and device; else releases it and says what it
 * was. */
static int check_conversion(weft_tensor *result, const weft_tensor *t, int want,
                            const char *name, const char *fn, const char *op)
{
    const char *bad = result_problem(result, t, want, t->device, t->sizes, t->ndim);
    if (!bad)
        return 0;
    weft_tensor_release(result);
    return wf__errorf(WEFT_EINTERNAL, "%s: layout '%s''s %s returned %s", op, name, fn, bad);
}

int wf__layout_refuse(const weft_tensor *t, const char *op)
{
    return wf__errorf(WEFT_EINVAL,
                      "%s: expected a strided tensor, got one of layout '%s' (convert it with "
                      "to_strided first)",
                      op, wf__layouts[t->layout].name);
}

int wf__layout_strided(weft_tensor **out, const weft_tensor *t, const char *op)
{
    *out = NULL;
    if (t->layout == WEFT_LAYOUT_STRIDED) {
        *out = weft_tensor_retain(t);
        return 0;
    }
    const wf_layout *l = &wf__layouts[t->layout];
    int rc = l->iface.to_strided(out, t);
    if (rc < 0) {
        *out = NULL;
        return rc;
    }
    rc = check_conversion(*out, t, WEFT_LAYOUT_STRIDED, l->name, "to_strided", op);
    if (rc < 0)
        *out = NULL;
    return rc;
}

int wf__layout_to_device(weft_tensor **out, const weft_tensor *t, weft_device device)
{
    *out = NULL;
    if (weft_device_equal(device, t->device)) {
        *out = weft_tensor_retain(t);
        return 0;
    }
    int rc = wf__check_device(device, "to_device");
    if (rc < 0)
        return rc;
    const wf_layout *l = &wf__layouts[t->layout];
    if (!l->iface.to_device)
        return wf__errorf(WEFT_ENOTSUP,
                          "to_device: layout '%s' cannot move between devices (its plugin has "
                          "no to_device); convert the tensor with to_strided first",
                          l->name);
    rc = l->iface.to_device(out, t, device);
    if (rc < 0) {
        *out = NULL;
        return rc;
    }
    /* the same checks as a conversion's, on a twin that is on device */
    const char *bad = result_problem(*out, t, t->layout, device, t->sizes, t->ndim);
    if (!bad)
        return 0;
    weft_tensor_release(*out);
    *out = NULL;
    return wf__errorf(WEFT_EINTERNAL, "to_device: layout '%s''s to_device returned %s", l->name,
                      bad);
}

int wf__layout_view(weft_tensor **out, const weft_tensor *t, const weft_layout_view *v)
{
    *out = NULL;
    const wf_layout *l = &wf__layouts[t->layout];
    int rc = l->iface.view(out, t, v);
    if (rc < 0) {
        *out = NULL;
        return rc;
    }
    /* a select may leave what the layout cannot hold (a sparse tensor's
     * last sparse dim selected): then the result is strided, as torch's */
    int want = v->kind == WEFT_LAYOUT_VIEW_SELECT && *out && (*out)->layout == WEFT_LAYOUT_STRIDED
                   ? WEFT_LAYOUT_STRIDED
                   : t->layout;
    const char *bad = result_problem(*out, t, want, t->device, v->shape, v->ndim);
    if (!bad)
        return 0;
    weft_tensor_release(*out);
    *out = NULL;
    return wf__errorf(WEFT_EINTERNAL, "%s: layout '%s''s view returned %s", v->op, l->name, bad);
}

int wf__layout_from_strided(weft_tensor **out, const weft_tensor *t, int layout, const char *op)
{
    *out = NULL;
    if (t->layout == layout) {
        *out = weft_tensor_retain(t);
        return 0;
    }
    if (layout == WEFT_LAYOUT_STRIDED)
        return wf__layout_strided(out, t, op);
    const wf_layout *l = &wf__layouts[layout];
    if (!l->iface.from_strided)
        return wf__errorf(WEFT_ENOTSUP, "%s: layout '%s' cannot be made from a strided tensor "
                                        "(its plugin has no from_strided)", op, l->name);
    weft_tensor *strided;
    int rc = wf__layout_strided(&strided, t, op);
    if (rc < 0)
        return rc;
    rc = l->iface.from_strided(out, strided);
    weft_tensor_release(strided);
    if (rc < 0) {
        *out = NULL;
        return rc;
    }
    rc = check_conversion(*out, t, layout, l->name, "from_strided", op);
    if (rc < 0)
        *out = NULL;
    return rc;
}

/* The deleter of a layout tensor's storage: the payload goes to the
 * layout's release, then the hold on its plugin (taken at creation, it
 * kept the layout registered until here). */
static void layout_storage_free(void *payload, void *ctx)
{
    wf_layout *l = ctx;
    if (payload)
        l->iface.release(payload);
    wf__owner_drop_kind(l->owner, WF_HOLD_LAYOUT);
}

WEFT_API int weft_tensor_layout(const weft_tensor *t)
{
    return t ? t->layout : WEFT_LAYOUT_STRIDED;
}

WEFT_API const char *weft_layout_name(int layout)
{
    wf_layout *l = live_layout(layout);
    return l ? l->name : NULL;
}

WEFT_API const char *weft_layout_plugin(int layout)
{
    wf_layout *l = live_layout(layout);
    return !l ? NULL : l->owner ? l->owner->name : "core";
}

WEFT_API int weft_layout_flags(int layout)
{
    wf_layout *l = live_layout(layout);
    if (!l)
        return wf__errorf(WEFT_EINVAL, "layout_flags: no layout has id %d", layout);
    return (int)(l->iface.flags & 0x7fffffffu);
}

WEFT_API int weft_layout_lookup(const char *name)
{
    if (!name)
        return wf__errorf(WEFT_EINVAL, "layout_lookup: name is NULL");
    char known[256];
    size_t n = 0;
    known[0] = '\0';
    for (int i = 0; i <= WEFT_MAX_LAYOUTS; i++) {
        wf_layout *l = live_layout(i);
        if (!l)
            continue;
        if (strcmp(l->name, name) == 0)
            return i;
        if (n < sizeof known)
            n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", n ? ", " : "", l->name);
    }
    return wf__errorf(WEFT_ENOTFOUND, "no layout named '%s' (registered: %s)", name, known);
}

WEFT_API int weft_layout_key(int layout)
{
    if (layout == WEFT_LAYOUT_STRIDED || !live_layout(layout))
        return wf__errorf(WEFT_EINVAL, "layout_key: %d is not a registered plugin layout", layout);
    return wf__layout_key(layout);
}

WEFT_API int64_t weft_tensor_nbytes(const weft_tensor *t)
{
    if (!t)
        return 0;
    if (t->layout == WEFT_LAYOUT_STRIDED)
        return (int64_t)t->storage->nbytes;
    const wf_layout *l = &wf__layouts[t->layout];
    return l->iface.nbytes ? l->iface.nbytes(t) : 0;
}

WEFT_API void *weft_tensor_layout_payload(const weft_tensor *t)
{
    return t && t->layout ? t->storage->data.data : NULL;
}

WEFT_API int weft_tensor_new_layout(weft_tensor **out, int layout, const int64_t *sizes, int ndim,
                                    weft_dtype dtype, weft_device device, void *payload)
{
    if (out)
        *out = NULL;
    wf_layout *l = layout == WEFT_LAYOUT_STRIDED ? NULL : live_layout(layout);
    /* from here on the payload is the core's: every failure releases it */
    if (!l)
        return wf__errorf(WEFT_EINVAL, "tensor_new_layout: %d is not a registered plugin layout",
                          layout);
    int rc = 0;
    int64_t numel;
    if (!out)
        rc = wf__errorf(WEFT_EINVAL, "tensor_new_layout: out is NULL");
    else if (weft_dtype_size(dtype) == 0)
        rc = wf__errorf(WEFT_EINVAL, "tensor_new_layout: bad dtype %d", (int)dtype);
    else if ((rc = wf__checked_numel(&numel, sizes, ndim, "tensor_new_layout")) == 0)
        rc = wf__check_device(device, "tensor_new_layout");
    if (rc == 0 && !wf__owner_try_hold(l->owner, WF_HOLD_LAYOUT))
        rc = wf__errorf(WEFT_EBUSY, "tensor_new_layout: plugin '%s' of layout '%s' is being "
                                    "unloaded", l->owner->name, l->name);
    if (rc < 0) {
        if (payload)
            l->iface.release(payload);
        return rc;
    }
    /* the storage owns the payload and the hold from here on */
    wf_storage *s = wf__storage_wrap(
        (weft_data_ptr){.data = payload, .ctx = l, .deleter = layout_storage_free}, 0, device);
    if (!s) {
        layout_storage_free(payload, l);
        return wf__errorf(WEFT_ENOMEM, "out of memory for a tensor of layout '%s'", l->name);
    }
    weft_tensor *t = NULL;
    rc = wf__tensor_make(&t, s, sizes, NULL, ndim, 0, dtype);
    wf__storage_release(s); /* the tensor's reference, or the last one: then released */
    if (rc < 0)
        return rc;
    t->layout = (uint8_t)layout;
    t->keys = WEFT_KEYSET_BIT(wf__layout_key(layout)) | WEFT_KEYSET_BIT(device.type);
    t->data = NULL;
    *out = t;
    return 0;
}
