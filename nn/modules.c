/* nn/modules.c — torch.nn's modules in C: Linear, Conv2d, BatchNorm2d,
 * LayerNorm, Dropout, Embedding, activations, MaxPool2d, Flatten and
 * Sequential, behind one opaque weft_module.  Forward passes are weft
 * operators only (so autograd records them and any device runs them); this
 * file never touches elements.  It checks inputs before calling an
 * operator, so that a shape error names the module, not a kernel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/nn.h>
#include <weft/plugin.h>

typedef enum module_type {
    MOD_LINEAR,
    MOD_CONV2D,
    MOD_BATCH_NORM2D,
    MOD_LAYER_NORM,
    MOD_DROPOUT,
    MOD_EMBEDDING,
    MOD_ACTIVATION,
    MOD_MAX_POOL2D,
    MOD_FLATTEN,
    MOD_SEQUENTIAL
} module_type;

/* A parameter or buffer under its local name ("weight"). */
typedef struct module_entry {
    const char *name; /* static */
    weft_tensor *tensor;
    bool buffer;
} module_entry;

#define MAX_ENTRIES 5
#define MAX_NORM_DIMS 8

struct weft_module {
    module_type type;
    bool training;
    weft_module *parent;
    int nentries;
    module_entry entries[MAX_ENTRIES];
    /* Sequential */
    int nchildren, capchildren;
    weft_module **children;
    /* configuration; which fields mean something depends on type */
    int64_t in, out;                                       /* Linear, Conv2d, Embedding */
    int64_t kernel[2], stride[2], padding[2], dilation[2]; /* Conv2d, MaxPool2d */
    int64_t groups, padding_idx;
    bool has_bias;
    double p, eps, momentum; /* Dropout; BatchNorm2d, LayerNorm */
    int64_t batches;         /* BatchNorm2d's num_batches_tracked, mirrored on the host */
    int norm_ndim;
    int64_t norm_shape[MAX_NORM_DIMS];
    weft_activation activation;
    int start_dim, end_dim;
    weft_generator *generator; /* Dropout; borrowed */
    /* names for weft_module_state/_parameters, built on demand */
    char **names;
    weft_tensor **tensors;
    bool *is_buffer;
    int nnames; /* -1: stale */
};

static const char *const kind_names[] = {
    [MOD_LINEAR] = "Linear",       [MOD_CONV2D] = "Conv2d",       [MOD_BATCH_NORM2D] = "BatchNorm2d",
    [MOD_LAYER_NORM] = "LayerNorm", [MOD_DROPOUT] = "Dropout",     [MOD_EMBEDDING] = "Embedding",
    [MOD_ACTIVATION] = "Activation", [MOD_MAX_POOL2D] = "MaxPool2d", [MOD_FLATTEN] = "Flatten",
    [MOD_SEQUENTIAL] = "Sequential"};
static const char *const activation_names[] = {"ReLU", "Sigmoid", "Tanh", "GELU"};

const char *weft_module_kind(const weft_module *m)
{
    if (!m)
        return NULL;
    return m->type == MOD_ACTIVATION ? activation_names[m->activation] : kind_names[m->type];
}

/* ------------------------------------------------------------- lifetime */

static int new_module(weft_module **out, module_type type)
{
    *out = weft_calloc(1, sizeof **out);
    if (!*out)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", kind_names[type]);
    (*out)->type = type;
    (*out)->training = true;
    (*out)->nnames = -1;
    return 0;
}

static void drop_names(weft_module *m)
{
    for (int i = 0; i < m->nnames; i++)
        free(m->names[i]);
    free(m->names);
    free(m->tensors);
    free(m->is_buffer);
    m->names = NULL;
    m->tensors = NULL;
    m->is_buffer = NULL;
    m->nnames = -1;
}

/* The names cached by m and its ancestors no longer hold. */
static void invalidate(weft_module *m)
{
    for (; m; m = m->parent)
        drop_names(m);
}

void weft_module_destroy(weft_module *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->nentries; i++)
        weft_tensor_release(m->entries[i].tensor);
    for (int i = 0; i < m->nchildren; i++)
        weft_module_destroy(m->children[i]);
    free(m->children);
    drop_names(m);
    free(m);
}

/* Adds a float32 CPU tensor of the given shape to m, filled with value
 * (NaN: left for an initialiser).  Parameters require grad. */
static int add_entry(weft_module *m, const char *name, const int64_t *sizes, int ndim,
                     double value, bool buffer, weft_dtype dtype)
{
    weft_tensor *t = NULL;
    int rc = isnan(value) ? weft_empty(&t, sizes, ndim, dtype, WEFT_DEVICE_CPU)
                          : weft_full(&t, sizes, ndim, value, dtype, WEFT_DEVICE_CPU);
    if (rc == 0 && !buffer)
        rc = weft_tensor_set_requires_grad(t, true);
    if (rc < 0) {
        weft_tensor_release(t);
        return rc;
    }
    m->entries[m->nentries++] = (module_entry){name, t, buffer};
    return 0;
}

static weft_tensor *entry(const weft_module *m, const char *name)
{
    for (int i = 0; i < m->nentries; i++)
        if (strcmp(m->entries[i].name, name) == 0)
            return m->entries[i].tensor;
    return NULL;
}

/* Fills a leaf parameter in place without recording anything. */
static int init_uniform(weft_tensor *t, double bound, weft_generator *g)
{
    bool mode = weft_set_grad_enabled(false);
    int rc = weft_uniform_ex_(t, -bound, bound, g);
    weft_set_grad_enabled(mode);
    return rc;
}

/* PyTorch's reset_parameters of nn.Linear and nn.Conv2d. */
static int init_weight_and_bias(weft_module *m, weft_generator *g)
{
    weft_tensor *w = entry(m, "weight"), *b = entry(m, "bias");
    int rc = weft_init_kaiming_uniform_(w, sqrt(5.0), WEFT_FAN_IN, "leaky_relu", g);
    int64_t fan_in = 0, fan_out = 0;
    if (rc == 0 && b && (rc = weft_init_fans(w, &fan_in, &fan_out)) == 0 && fan_in > 0)
        rc = init_uniform(b, 1.0 / sqrt((double)fan_in), g);
    return rc;
}

static int finish(weft_module **out, weft_module *m, int rc)
{
    if (rc < 0) {
        weft_module_destroy(m);
        return rc;
    }
    *out = m;
    return 0;
}

/* ---------------------------------------------------------- constructors */

int weft_module_linear(weft_module **out, int64_t in_features, int64_t out_features, bool bias,
                       weft_generator *g)
{
    if (!out)
        return weft_set_error(WEFT_EINVAL, "Linear: NULL out");
    *out = NULL;
    if (in_features < 1 || out_features < 1)
        return weft_set_error(WEFT_EINVAL,
                              "Linear: in_features (%lld) and out_features (%lld) must be positive",
                              (long long)in_features, (long long)out_features);
    weft_module *m;
    int rc = new_module(&m, MOD_LINEAR);
    if (rc < 0)
        return rc;
    m->in = in_features;
    m->out = out_features;
    m->has_bias = bias;
    int64_t ws[2] = {out_features, in_features};
    rc = add_entry(m, "weight", ws, 2, NAN, false, WEFT_FLOAT32);
    if (rc == 0 && bias)
        rc = add_entry(m, "bias", ws, 1, NAN, false, WEFT_FLOAT32);
    if (rc == 0)
        rc = init_weight_and_bias(m, g);
    return finish(out, m, rc);
}

static void pair_or(int64_t dst[2], const int64_t *src, int64_t dflt0, int64_t dflt1)
{
    dst[0] = src ? src[0] : dflt0;
    dst[1] = src ? src[1] : dflt1;
}

int weft_module_conv2d(weft_module **out, int64_t in_channels, int64_t out_channels,
                       const int64_t kernel_size[2], const int64_t stride[2],
                       const int64_t padding[2], const int64_t dilation[2], int64_t groups,
                       bool bias, weft_generator *g)
{
    if (!out)
        return weft_set_error(WEFT_EINVAL, "Conv2d: NULL out");
    *out = NULL;
    if (in_channels < 1 || out_channels < 1 || groups < 1)
        return weft_set_error(WEFT_EINVAL,
                              "Conv2d: in_channels (%lld), out_channels (%lld) and groups (%lld) "
                              "must be positive",
                              (long long)in_channels, (long long)out_channels, (long long)groups);
    if (in_channels % groups || out_channels % groups)
        return weft_set_error(WEFT_EINVAL,
                              "Conv2d: in_channels (%lld) and out_channels (%lld) must be divisible "
                              "by groups (%lld)",
                              (long long)in_channels, (long long)out_channels, (long long)groups);
    if (!kernel_size)
        return weft_set_error(WEFT_EINVAL, "Conv2d: NULL kernel_size");
    int64_t k[2], s[2], p[2], d[2];
    pair_or(k, kernel_size, 0, 0);
    pair_or(s, stride, 1, 1);
    pair_or(p, padding, 0, 0);
    pair_or(d, dilation, 1, 1);
    if (k[0] < 1 || k[1] < 1 || s[0] < 1 || s[1] < 1 || p[0] < 0 || p[1] < 0 || d[0] < 1 ||
        d[1] < 1)
        return weft_set_error(WEFT_EINVAL,
                              "Conv2d: kernel_size (%lld, %lld), stride (%lld, %lld) and dilation "
                              "(%lld, %lld) must be positive, padding (%lld, %lld) not negative",
                              (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1],
                              (long long)d[0], (long long)d[1], (long long)p[0], (long long)p[1]);
    weft_module *m;
    int rc = new_module(&m, MOD_CONV2D);
    if (rc < 0)
        return rc;
    m->in = in_channels;
    m->out = out_channels;
    m->groups = groups;
    m->has_bias = bias;
    memcpy(m->kernel, k, sizeof k);
    memcpy(m->stride, s, sizeof s);
    memcpy(m->padding, p, sizeof p);
    memcpy(m->dilation, d, sizeof d);
    int64_t ws[4] = {out_channels, in_channels / groups, k[0], k[1]};
    rc = add_entry(m, "weight", ws, 4, NAN, false, WEFT_FLOAT32);
    if (rc == 0 && bias)
        rc = add_entry(m, "bias", ws, 1, NAN, false, WEFT_FLOAT32);
    if (rc == 0)
        rc = init_weight_and_bias(m, g);
    return finish(out, m, rc);
}

int weft_module_batch_norm2d(weft_module **out, int64_t num_features, double eps, double momentum,
                             bool affine, bool track_running_stats)
{
    if (!out)
        return weft_set_error(WEFT_EINVAL, "BatchNorm2d: NULL out");
    *out = NULL;
    if (num_features < 1 || !(eps >= 0) || isinf(eps) || (!isnan(momentum) && !(momentum >= 0 && momentum <= 1)))
        return weft_set_error(WEFT_EINVAL,
                              "BatchNorm2d: num_features (%lld) must be positive, eps (%g) finite "
                              "and not negative, momentum (%g) in [0, 1] or NaN",
                              (long long)num_features, eps, momentum);
    weft_module *m;
    int rc = new_module(&m, MOD_BATCH_NORM2D);
    if (rc < 0)
        return rc;
    m->in = num_features;
    m->eps = eps;
    m->momentum = momentum;
    m->has_bias = affine;
    int64_t c[1] = {num_features};
    if (affine) {
        rc = add_entry(m, "weight", c, 1, 1.0, false, WEFT_FLOAT32);
        if (rc == 0)
            rc = add_entry(m, "bias", c, 1, 0.0, false, WEFT_FLOAT32);
    }
    if (rc == 0 && track_running_stats) {
        rc = add_entry(m, "running_mean", c, 1, 0.0, true, WEFT_FLOAT32);
        if (rc == 0)
            rc = add_entry(m, "running_var", c, 1, 1.0, true, WEFT_FLOAT32);
        if (rc == 0)
            rc = add_entry(m, "num_batches_tracked", c, 0, 0.0, true, WEFT_INT64);
    }
    return finish(out, m, rc);
}

int weft_module_layer_norm(weft_module **out, const int64_t *normalized_shape, int ndim, double eps,
                           bool elementwise_affine)
{
    if (!out)
        return weft_set_error(WEFT_EINVAL, "LayerNorm: NULL out");
    *out = NULL;
    if (!normalized_shape || ndim < 1 || ndim > MAX_NORM_DIMS || !(eps >= 0) || isinf(eps))
        return weft_set_error(WEFT_EINVAL,
                              "LayerNorm: normalized_shape must have 1 to %d dims (got %d) and eps "
                              "(%g) be finite and not negative",
                              MAX_NORM_DIMS, ndim, eps);
    for (int i = 0; i < ndim; i++)
        if (normalized_shape[i] < 1)
            return weft_set_error(WEFT_EINVAL, "LayerNorm: normalized_shape[%d] is %lld", i,
                                  (long long)normalized_shape[i]);
    weft_module *m;
    int rc = new_module(&m, MOD_LAYER_NORM);
    if (rc < 0)
        return rc;
    m->norm_ndim = ndim;
    memcpy(m->norm_shape, normalized_shape, (size_t)ndim * sizeof *normalized_shape);
    m->eps = eps;
    m->has_bias = elementwise_affine;
    if (elementwise_affine) {
        rc = add_entry(m, "weight", normalized_shape, ndim, 1.0, false, WEFT_FLOAT32);
        if (rc == 0)
            rc = add_entry(m, "bias", normalized_shape, ndim, 0.0, false, WEFT_FLOAT32);
    }
    return finish(out, m, rc);
}

int weft_module_dropout(weft_module **out, double p, weft_generator *g)
{
    if (!out)
        return weft_set_error(WEFT_EINVAL, "Dropout: NULL out");
    *out = NULL;
    if (!(p >= 0 && p <= 1))
        return weft_set_error(WEFT_EINVAL, "Dropout: probability p must be in [0, 1], got %g", p);
    weft_module *m;
    int rc = new_module(&m, MOD_DROPOUT);
    if (rc < 0)
        return rc;
    m->p = p;
    m->generator = g;
    *out = m;
    return 0;
}

int weft_module_embedding(weft_module **out, int64_t num_embeddings, int64_t embedding_dim,
                          int64_t padding_idx, weft_generator *g)
{
    if (!out)
        return weft_set_error(WEFT_EINVAL, "Embedding: NULL out");
    *out = NULL;
    if (num_embeddings < 1 || embedding_dim < 1)
        return weft_set_error(WEFT_EINVAL,
                              "Embedding: num_embeddings (%lld) and embedding_dim (%lld) must be "
                              "positive",
                              (long long)num_embeddings, (long long)embedding_dim);
    if (padding_idx != WEFT_NO_PADDING_IDX) {
        if (padding_idx >= num_embeddings || padding_idx < -num_embeddings)
            return weft_set_error(WEFT_EINVAL,
                                  "Embedding: padding_idx (%lld) must be within num_embeddings "
                                  "(%lld)",
                                  (long long)padding_idx, (long long)num_embeddings);
        if (padding_idx < 0)
            padding_idx += num_embeddings;
    }
    weft_module *m;
    int rc = new_module(&m, MOD_EMBEDDING);
    if (rc < 0)
        return rc;
    m->in = num_embeddings;
    m->out = embedding_dim;
    m->padding_idx = padding_idx == WEFT_NO_PADDING_IDX ? -1 : padding_idx;
    int64_t ws[2] = {num_embeddings, embedding_dim};
    rc = add_entry(m, "weight", ws, 2, NAN, false, WEFT_FLOAT32);
    if (rc == 0) {
        bool mode = weft_set_grad_enabled(false);
        weft_tensor *w = m->entries[0].tensor, *row = NULL;
        rc = weft_normal_ex_(w, 0.0, 1.0, g);
        if (rc == 0 && m->padding_idx >= 0 && (rc = weft_select(&row, w, 0, m->padding_idx)) == 0)
            rc = weft_fill_(row, 0.0);
        weft_tensor_release(row);
        weft_set_grad_enabled(mode);
    }
    return finish(out, m, rc);
}

int weft_module_activation(weft_module **out, weft_activation kind)
{
    if (!out)
        return weft_set_error(WEFT_EINVAL, "activation: NULL out");
    *out = NULL;
    if ((unsigned)kind > WEFT_ACTIVATION_GELU)
        return weft_set_error(WEFT_EINVAL, "activation: unknown kind %d", (int)kind);
    weft_module *m;
    int rc = new_module(&m, MOD_ACTIVATION);
    if (rc == 0) {
        m->activation = kind;
        *out = m;
    }
    return rc;
}

int weft_module_max_pool2d(weft_module **out, const int64_t kernel_size[2], const int64_t stride[2],
                           const int64_t padding[2])
{
    if (!out)
        return weft_set_error(WEFT_EINVAL, "MaxPool2d: NULL out");
    *out = NULL;
    if (!kernel_size)
        return weft_set_error(WEFT_EINVAL, "MaxPool2d: NULL kernel_size");
    int64_t k[2], s[2], p[2];
    pair_or(k, kernel_size, 0, 0);
    pair_or(s, stride, k[0], k[1]);
    pair_or(p, padding, 0, 0);
    if (k[0] < 1 || k[1] < 1 || s[0] < 1 || s[1] < 1 || p[0] < 0 || p[1] < 0 ||
        2 * p[0] > k[0] || 2 * p[1] > k[1])
        return weft_set_error(WEFT_EINVAL,
                              "MaxPool2d: kernel_size (%lld, %lld) and stride (%lld, %lld) must be "
                              "positive, padding (%lld, %lld) at most half the kernel",
                              (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1],
                              (long long)p[0], (long long)p[1]);
    weft_module *m;
    int rc = new_module(&m, MOD_MAX_POOL2D);
    if (rc == 0) {
        memcpy(m->kernel, k, sizeof k);
        memcpy(m->stride, s, sizeof s);
        memcpy(m->padding, p, sizeof p);
        m->dilation[0] = m->dilation[1] = 1;
        *out = m;
    }
    return rc;
}

int weft_module_flatten(weft_module **out, int start_dim, int end_dim)
{
    if (!out)
        return weft_set_error(WEFT_EINVAL, "Flatten: NULL out");
    *out = NULL;
    weft_module *m;
    int rc = new_module(&m, MOD_FLATTEN);
    if (rc == 0) {
        m->start_dim = start_dim;
        m->end_dim = end_dim;
        *out = m;
    }
    return rc;
}

int weft_module_sequential(weft_module **out)
{
    if (!out)
        return weft_set_error(WEFT_EINVAL, "Sequential: NULL out");
    *out = NULL;
    return new_module(out, MOD_SEQUENTIAL);
}

int weft_module_sequential_append(weft_module *seq, weft_module *child)
{
    if (!child)
        return weft_set_error(WEFT_EINVAL, "Sequential: NULL child");
    if (child->parent)
        return weft_set_error(WEFT_EINVAL, "Sequential: the %s already has a parent",
                              weft_module_kind(child));
    /* a module inside itself would make forward and destroy recurse forever */
    for (const weft_module *up = seq; up; up = up->parent)
        if (up == child)
            return weft_set_error(WEFT_EINVAL,
                                  "Sequential: cannot append a %s to itself or to a module "
                                  "inside it",
                                  weft_module_kind(child));
    int rc = 0;
    if (!seq || seq->type != MOD_SEQUENTIAL) {
        rc = weft_set_error(WEFT_EINVAL, "Sequential append: the container is %s",
                            seq ? weft_module_kind(seq) : "NULL");
    } else if (seq->nchildren == seq->capchildren) {
        int cap = seq->capchildren ? 2 * seq->capchildren : 8;
        weft_module **grown = weft_realloc(seq->children, (size_t)cap * sizeof *grown);
        if (grown) {
            seq->children = grown;
            seq->capchildren = cap;
        } else {
            rc = weft_set_error(WEFT_ENOMEM, "Sequential: out of memory");
        }
    }
    if (rc < 0) {
        weft_module_destroy(child);
        return rc;
    }
    /* a child in a container: its training flag follows the container's */
    child->parent = seq;
    seq->children[seq->nchildren++] = child;
    invalidate(seq);
    return 0;
}

/* ------------------------------------------------------------- describe */

static int pair_text(char *buf, size_t size, const int64_t v[2])
{
    return snprintf(buf, size, "(%lld, %lld)", (long long)v[0], (long long)v[1]);
}

int weft_module_describe(const weft_module *m, char *buf, size_t size)
{
    if (!m)
        return snprintf(buf, size, "NULL");
    char k[48], s[48], p[48], d[48];
    pair_text(k, sizeof k, m->kernel);
    pair_text(s, sizeof s, m->stride);
    pair_text(p, sizeof p, m->padding);
    pair_text(d, sizeof d, m->dilation);
    switch (m->type) {
    case MOD_LINEAR:
        return snprintf(buf, size, "Linear(in_features=%lld, out_features=%lld, bias=%s)",
                        (long long)m->in, (long long)m->out, m->has_bias ? "True" : "False");
    case MOD_CONV2D: {
        char extra[160] = "";
        size_t n = 0;
        if (m->padding[0] || m->padding[1])
            n += (size_t)snprintf(extra + n, sizeof extra - n, ", padding=%s", p);
        if (m->dilation[0] != 1 || m->dilation[1] != 1)
            n += (size_t)snprintf(extra + n, sizeof extra - n, ", dilation=%s", d);
        if (m->groups != 1)
            n += (size_t)snprintf(extra + n, sizeof extra - n, ", groups=%lld",
                                  (long long)m->groups);
        if (!m->has_bias)
            snprintf(extra + n, sizeof extra - n, ", bias=False");
        return snprintf(buf, size, "Conv2d(%lld, %lld, kernel_size=%s, stride=%s%s)",
                        (long long)m->in, (long long)m->out, k, s, extra);
    }
    case MOD_BATCH_NORM2D: {
        char momentum[32] = "None";
        if (!isnan(m->momentum))
            snprintf(momentum, sizeof momentum, "%g", m->momentum);
        return snprintf(buf, size,
                        "BatchNorm2d(%lld, eps=%g, momentum=%s, affine=%s, "
                        "track_running_stats=%s)",
                        (long long)m->in, m->eps, momentum, m->has_bias ? "True" : "False",
                        entry(m, "running_mean") ? "True" : "False");
    }
    case MOD_LAYER_NORM: {
        char shape[8 * 24] = "";
        size_t n = 0;
        for (int i = 0; i < m->norm_ndim; i++)
            n += (size_t)snprintf(shape + n, sizeof shape - n, "%s%lld", i ? ", " : "",
                                  (long long)m->norm_shape[i]);
        return snprintf(buf, size, "LayerNorm((%s%s), eps=%g, elementwise_affine=%s)", shape,
                        m->norm_ndim == 1 ? "," : "", m->eps, m->has_bias ? "True" : "False");
    }
    case MOD_DROPOUT:
        return snprintf(buf, size, "Dropout(p=%g, inplace=False)", m->p);
    case MOD_EMBEDDING:
        if (m->padding_idx >= 0)
            return snprintf(buf, size, "Embedding(%lld, %lld, padding_idx=%lld)",
                            (long long)m->in, (long long)m->out, (long long)m->padding_idx);
        return snprintf(buf, size, "Embedding(%lld, %lld)", (long long)m->in, (long long)m->out);
    case MOD_ACTIVATION:
        return snprintf(buf, size, "%s()", activation_names[m->activation]);
    case MOD_MAX_POOL2D:
        return snprintf(buf, size, "MaxPool2d(kernel_size=%s, stride=%s, padding=%s)", k, s, p);
    case MOD_FLATTEN:
        return snprintf(buf, size, "Flatten(start_dim=%d, end_dim=%d)", m->start_dim, m->end_dim);
    case MOD_SEQUENTIAL:
        return snprintf(buf, size, "Sequential(%d modules)", m->nchildren);
    }
    return snprintf(buf, size, "?");
}

/* "[64, 784]" */
static const char *shape_text(char *buf, size_t size, const weft_tensor *t)
{
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < weft_tensor_ndim(t) && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "",
                              (long long)weft_tensor_size(t, i));
    if (n < size)
        snprintf(buf + n, size - n, "]");
    return buf;
}

/* WEFT_ESHAPE naming the module, what it expected and the input's shape. */
static int shape_error(const weft_module *m, const weft_tensor *x, const char *expected)
{
    char what[256], shape[512];
    weft_module_describe(m, what, sizeof what);
    return weft_set_error(WEFT_ESHAPE, "%s: expected %s, got an input of shape %s", what, expected,
                          shape_text(shape, sizeof shape, x));
}

/* --------------------------------------------------------------- forward */

/* Conv2d and MaxPool2d take [N, C, H, W] or an unbatched [C, H, W], as
 * PyTorch does; the unbatched form is run as a batch of one. */
static int spatial_forward(const weft_module *m, weft_tensor *x, weft_tensor **out)
{
    weft_tensor *batched = NULL, *y = NULL;
    bool unbatched = weft_tensor_ndim(x) == 3;
    int rc = unbatched ? weft_unsqueeze(&batched, x, 0) : 0;
    const weft_tensor *in = unbatched ? batched : x;
    if (rc == 0 && m->type == MOD_CONV2D)
        rc = weft_conv2d(&y, in, entry(m, "weight"), entry(m, "bias"), m->stride, 2, m->padding, 2,
                         m->dilation, 2, m->groups);
    else if (rc == 0)
        rc = weft_max_pool2d(&y, in, m->kernel, 2, m->stride, 2, m->padding, 2, m->dilation, 2,
                             false);
    if (rc == 0 && unbatched) {
        rc = weft_squeeze(out, y, 0);
        weft_tensor_release(y);
    } else if (rc == 0) {
        *out = y;
    }
    weft_tensor_release(batched);
    return rc;
}

static int batch_norm_forward(weft_module *m, weft_tensor *x, weft_tensor **out)
{
    weft_tensor *mean = entry(m, "running_mean"), *var = entry(m, "running_var");
    bool use_batch = m->training || !mean;
    double factor = 0;
    if (m->training && mean) {
        /* momentum None: the cumulative moving average */
        factor = isnan(m->momentum) ? 1.0 / (double)(m->batches + 1) : m->momentum;
    }
    int rc = weft_batch_norm(out, x, entry(m, "weight"), entry(m, "bias"), mean, var, use_batch,
                             factor, m->eps);
    if (rc == 0 && m->training && mean) {
        bool mode = weft_set_grad_enabled(false);
        rc = weft_add_scalar_(entry(m, "num_batches_tracked"), 1.0);
        weft_set_grad_enabled(mode);
        if (rc == 0)
            m->batches++;
    }
    return rc;
}

static int check_input(const weft_module *m, const weft_tensor *x)
{
    char expected[256];
    int nd = weft_tensor_ndim(x);
    switch (m->type) {
    case MOD_LINEAR:
        if (nd < 1 || weft_tensor_size(x, -1) != m->in) {
            snprintf(expected, sizeof expected, "an input whose last dimension is %lld",
                     (long long)m->in);
            return shape_error(m, x, expected);
        }
        break;
    case MOD_CONV2D:
        if ((nd != 3 && nd != 4) || weft_tensor_size(x, -3) != m->in) {
            snprintf(expected, sizeof expected, "a 4-d input [N, %lld, H, W] (or 3-d [%lld, H, W])",
                     (long long)m->in, (long long)m->in);
            return shape_error(m, x, expected);
        }
        break;
    case MOD_MAX_POOL2D:
        if (nd != 3 && nd != 4)
            return shape_error(m, x, "a 4-d input [N, C, H, W] (or 3-d [C, H, W])");
        break;
    case MOD_BATCH_NORM2D:
        if (nd != 4 || weft_tensor_size(x, 1) != m->in) {
            snprintf(expected, sizeof expected, "a 4-d input [N, %lld, H, W]", (long long)m->in);
            return shape_error(m, x, expected);
        }
        break;
    case MOD_LAYER_NORM: {
        bool match = nd >= m->norm_ndim;
        for (int i = 0; match && i < m->norm_ndim; i++)
            match = weft_tensor_size(x, nd - m->norm_ndim + i) == m->norm_shape[i];
        if (!match)
            return shape_error(m, x, "an input whose last dimensions are normalized_shape");
        break;
    }
    case MOD_EMBEDDING: {
        weft_dtype dt = weft_tensor_dtype(x);
        if (dt != WEFT_INT64 && dt != WEFT_INT32) {
            char what[256];
            weft_module_describe(m, what, sizeof what);
            return weft_set_error(WEFT_EDTYPE, "%s: expected int64 or int32 indices, got %s", what,
                                  weft_dtype_name(dt));
        }
        break;
    }
    default:
        break;
    }
    return 0;
}

int weft_module_forward(weft_module *m, weft_tensor *input, weft_tensor **out)
{
    if (!out)
        return weft_set_error(WEFT_EINVAL, "weft_module_forward: NULL out");
    *out = NULL;
    if (!m || !input)
        return weft_set_error(WEFT_EINVAL, "weft_module_forward: NULL %s", m ? "input" : "module");
    int rc = check_input(m, input);
    if (rc < 0)
        return rc;
    switch (m->type) {
    case MOD_LINEAR:
        return weft_linear(out, input, entry(m, "weight"), entry(m, "bias"));
    case MOD_CONV2D:
    case MOD_MAX_POOL2D:
        return spatial_forward(m, input, out);
    case MOD_BATCH_NORM2D:
        return batch_norm_forward(m, input, out);
    case MOD_LAYER_NORM:
        return weft_layer_norm(out, input, m->norm_shape, m->norm_ndim, entry(m, "weight"),
                               entry(m, "bias"), m->eps);
    case MOD_DROPOUT:
        return weft_dropout_ex(out, input, m->p, m->training, m->generator);
    case MOD_EMBEDDING:
        return weft_embedding(out, entry(m, "weight"), input, m->padding_idx);
    case MOD_ACTIVATION:
        switch (m->activation) {
        case WEFT_ACTIVATION_RELU:
            return weft_relu(out, input);
        case WEFT_ACTIVATION_SIGMOID:
            return weft_sigmoid(out, input);
        case WEFT_ACTIVATION_TANH:
            return weft_tanh(out, input);
        case WEFT_ACTIVATION_GELU:
            return weft_gelu(out, input);
        }
        break;
    case MOD_FLATTEN:
        return weft_flatten(out, input, m->start_dim, m->end_dim);
    case MOD_SEQUENTIAL: {
        weft_tensor *x = weft_tensor_retain(input);
        for (int i = 0; i < m->nchildren && rc == 0; i++) {
            weft_tensor *y = NULL;
            rc = weft_module_forward(m->children[i], x, &y);
            weft_tensor_release(x);
            x = y;
        }
        if (rc == 0)
            *out = x;
        return rc;
    }
    }
    return weft_set_error(WEFT_EINVAL, "weft_module_forward: corrupt module");
}

/* --------------------------------------------------------- enumeration */

/* Appends m's tensors, then its children's, named prefix + local name. */
static int collect(weft_module *root, const weft_module *m, const char *prefix, int *cap)
{
    for (int i = 0; i < m->nentries; i++) {
        if (root->nnames == *cap) {
            int c = *cap ? 2 * *cap : 16;
            char **names = weft_realloc(root->names, (size_t)c * sizeof *names);
            if (names)
                root->names = names;
            weft_tensor **tensors = weft_realloc(root->tensors, (size_t)c * sizeof *tensors);
            if (tensors)
                root->tensors = tensors;
            bool *buffers = weft_realloc(root->is_buffer, (size_t)c * sizeof *buffers);
            if (buffers)
                root->is_buffer = buffers;
            if (!names || !tensors || !buffers)
                return weft_set_error(WEFT_ENOMEM, "module state: out of memory");
            *cap = c;
        }
        size_t len = strlen(prefix) + strlen(m->entries[i].name) + 1;
        char *name = weft_malloc(len);
        if (!name)
            return weft_set_error(WEFT_ENOMEM, "module state: out of memory");
        snprintf(name, len, "%s%s", prefix, m->entries[i].name);
        root->names[root->nnames] = name;
        root->tensors[root->nnames] = m->entries[i].tensor;
        root->is_buffer[root->nnames] = m->entries[i].buffer;
        root->nnames++;
    }
    for (int c = 0; c < m->nchildren; c++) {
        char child_prefix[1024];
        if ((size_t)snprintf(child_prefix, sizeof child_prefix, "%s%d.", prefix, c) >=
            sizeof child_prefix)
            return weft_set_error(WEFT_EINVAL, "module state: modules nested too deeply");
        int rc = collect(root, m->children[c], child_prefix, cap);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int enumerate(weft_module *m, weft_tensor **tensors, const char **names, int capacity,
                     bool with_buffers)
{
    const char *what = with_buffers ? "weft_module_state" : "weft_module_parameters";
    if (!m)
        return weft_set_error(WEFT_EINVAL, "%s: the module is NULL", what);
    if (capacity < 0 || (capacity > 0 && !tensors && !names))
        return weft_set_error(WEFT_EINVAL,
                              "%s: capacity %d with neither a tensors nor a names array to fill",
                              what, capacity);
    if (m->nnames < 0) {
        int cap = 0;
        m->nnames = 0;
        int rc = collect(m, m, "", &cap);
        if (rc < 0) {
            drop_names(m);
            return rc;
        }
    }
    int count = 0;
    for (int i = 0; i < m->nnames; i++) {
        if (m->is_buffer[i] && !with_buffers)
            continue;
        /* either array may be NULL: parameters() wants only the tensors */
        if (count < capacity && tensors)
            tensors[count] = m->tensors[i];
        if (count < capacity && names)
            names[count] = m->names[i];
        count++;
    }
    return count;
}

int weft_module_parameters(weft_module *m, weft_tensor **tensors, const char **names, int capacity)
{
    return enumerate(m, tensors, names, capacity, false);
}

int weft_module_state(weft_module *m, weft_tensor **tensors, const char **names, int capacity)
{
    return enumerate(m, tensors, names, capacity, true);
}

void weft_module_train(weft_module *m, bool training)
{
    if (!m)
        return;
    m->training = training;
    for (int i = 0; i < m->nchildren; i++)
        weft_module_train(m->children[i], training);
}

bool weft_module_is_training(const weft_module *m)
{
    return m && m->training;
}

/* ---------------------------------------------------------------- moving */

typedef struct move {
    bool to_dtype;
    weft_device device;
    weft_dtype dtype;
} move;

/* Counts (moved NULL) or makes the moved copies of m's tensors, in the
 * order apply_moved will use them. */
static int make_moved(const weft_module *m, const move *how, weft_tensor **moved, int *n)
{
    for (int i = 0; i < m->nentries; i++) {
        const module_entry *e = &m->entries[i];
        if (moved) {
            weft_tensor *t = NULL;
            int rc;
            if (!how->to_dtype)
                rc = weft_to_device(&t, e->tensor, how->device);
            else if (weft_dtype_is_floating(weft_tensor_dtype(e->tensor)))
                rc = weft_to_dtype(&t, e->tensor, how->dtype);
            else
                rc = (t = weft_tensor_retain(e->tensor)) ? 0 : WEFT_EINVAL;
            if (rc == 0 && t != e->tensor && !e->buffer)
                rc = weft_tensor_set_requires_grad(t, true);
            moved[*n] = t;
            if (rc < 0)
                return rc;
        }
        (*n)++;
    }
    for (int c = 0; c < m->nchildren; c++) {
        int rc = make_moved(m->children[c], how, moved, n);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void apply_moved(weft_module *m, weft_tensor **moved, int *n)
{
    drop_names(m); /* a child's own cache holds the old tensors too */
    for (int i = 0; i < m->nentries; i++) {
        weft_tensor_release(m->entries[i].tensor);
        m->entries[i].tensor = moved[(*n)++];
    }
    for (int c = 0; c < m->nchildren; c++)
        apply_moved(m->children[c], moved, n);
}

static int move_module(weft_module *m, const move *how)
{
    int n = 0;
    make_moved(m, how, NULL, &n);
    weft_tensor **moved = weft_calloc((size_t)n + 1, sizeof *moved);
    if (!moved)
        return weft_set_error(WEFT_ENOMEM, "moving a %s: out of memory", weft_module_kind(m));
    bool mode = weft_set_grad_enabled(false);
    int made = 0;
    int rc = make_moved(m, how, moved, &made);
    weft_set_grad_enabled(mode);
    if (rc < 0) {
        for (int i = 0; i < n; i++)
            weft_tensor_release(moved[i]);
    } else {
        made = 0;
        apply_moved(m, moved, &made);
        invalidate(m);
    }
    free(moved);
    return rc;
}

int weft_module_to_device(weft_module *m, weft_device device)
{
    if (!m)
        return weft_set_error(WEFT_EINVAL, "weft_module_to_device: NULL module");
    move how = {false, device, WEFT_FLOAT32};
    return move_module(m, &how);
}

int weft_module_to_dtype(weft_module *m, weft_dtype dtype)
{
    if (!m)
        return weft_set_error(WEFT_EINVAL, "weft_module_to_dtype: NULL module");
    if (!weft_dtype_is_floating(dtype))
        return weft_set_error(WEFT_EDTYPE, "weft_module_to_dtype: %s is not a floating dtype",
                              weft_dtype_name(dtype));
    move how = {true, WEFT_DEVICE_CPU, dtype};
    return move_module(m, &how);
}

/* ------------------------------------------------------------ save, load */

/* BatchNorm2d keeps num_batches_tracked on the host too (for momentum
 * None); a load brings the mirror back in line with the buffer. */
static int sync_batches(weft_module *m)
{
    weft_tensor *t = entry(m, "num_batches_tracked");
    double v = 0;
    int rc = t ? weft_tensor_item(t, &v) : 0;
    if (rc == 0 && t)
        m->batches = (int64_t)v;
    for (int c = 0; c < m->nchildren && rc == 0; c++)
        rc = sync_batches(m->children[c]);
    return rc;
}

enum { MODULE_LOAD, MODULE_SAVE, MODULE_SAVE_SAFETENSORS };

static int save_or_load(weft_module *m, const char *path, int what)
{
    int n = weft_module_state(m, NULL, NULL, 0);
    if (n < 0)
        return n;
    weft_tensor **tensors = weft_calloc((size_t)n + 1, sizeof *tensors);
    const char **names = weft_calloc((size_t)n + 1, sizeof *names);
    int rc = tensors && names ? weft_module_state(m, tensors, names, n)
                              : weft_set_error(WEFT_ENOMEM, "module save/load: out of memory");
    if (rc >= 0)
        rc = what == MODULE_SAVE   ? weft_save_parameters(path, tensors, names, n)
             : what == MODULE_LOAD ? weft_load_parameters(path, tensors, names, n)
                                   : weft_save_safetensors(path, tensors, names, n);
    if (rc == 0 && what == MODULE_LOAD)
        rc = sync_batches(m);
    free(tensors);
    free(names);
    return rc < 0 ? rc : 0;
}

int weft_module_save(weft_module *m, const char *path)
{
    return save_or_load(m, path, MODULE_SAVE);
}

int weft_module_save_safetensors(weft_module *m, const char *path)
{
    return save_or_load(m, path, MODULE_SAVE_SAFETENSORS);
}

int weft_module_load(weft_module *m, const char *path)
{
    return save_or_load(m, path, MODULE_LOAD);
}
