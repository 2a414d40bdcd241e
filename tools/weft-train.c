/* tools/weft-train.c — the main job: trains a classifier on Fashion-MNIST
 * (Debian's dataset-fashion-mnist, IDX files read through zlib) with weft's
 * operators and autograd, prints progress and the test accuracy after each
 * epoch, and with --json ends with one JSON object of the results.
 *
 * Two models: an MLP (784-256-10) and a small CNN (two conv-relu-maxpool
 * stages with 16 and 32 channels, then a linear layer), both trained with
 * cross entropy and the nn library's SGD with momentum, initialised as
 * PyTorch's nn.Linear and nn.Conv2d are.  --save writes the parameters with
 * weft_save_parameters ("fc1.weight", "conv1.bias", ...). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <zlib.h>

#include <weft/nn.h>
#include <weft/weft.h>

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

typedef struct options {
    const char *model, *device, *data, *save;
    int epochs, batch_size, threads, log_every;
    long limit;
    double lr, momentum;
    unsigned long long seed;
    bool json;
} options;

typedef struct dataset {
    long n;
    int rows, cols;
    unsigned char *images; /* n * rows * cols */
    unsigned char *labels; /* n */
} dataset;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what)
{
    fprintf(stderr, "weft-train: %s: %s\n", what, weft_last_error());
    return 1;
}

/* ------------------------------------------------------------------ data */

static int read_exact(gzFile f, void *buf, unsigned len, const char *path)
{
    int got = gzread(f, buf, len);
    if (got != (int)len) {
        fprintf(stderr, "weft-train: %s: truncated or unreadable (wanted %u bytes, got %d)\n", path,
                len, got);
        return -1;
    }
    return 0;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads an IDX file (magic 0x0801 labels or 0x0803 images). */
static unsigned char *read_idx(const char *path, int want_dims, long *n, int *rows, int *cols)
{
    gzFile f = gzopen(path, "rb");
    if (!f) {
        fprintf(stderr, "weft-train: cannot open %s: %s (apt-get install dataset-fashion-mnist)\n",
                path, strerror(errno));
        return NULL;
    }
    unsigned char head[16];
    unsigned char *data = NULL;
    if (read_exact(f, head, 4, path) == 0) {
        uint32_t magic = be32(head);
        if (magic != (uint32_t)(0x0800 | want_dims)) {
            fprintf(stderr, "weft-train: %s: not an IDX file of %d dimension(s) (magic 0x%08x)\n",
                    path, want_dims, magic);
        } else if (read_exact(f, head + 4, 4u * (unsigned)want_dims, path) == 0) {
            *n = be32(head + 4);
            *rows = want_dims == 3 ? (int)be32(head + 8) : 1;
            *cols = want_dims == 3 ? (int)be32(head + 12) : 1;
            size_t bytes = (size_t)*n * (size_t)*rows * (size_t)*cols;
            if (*n <= 0 || *n > 10000000 || *rows > 4096 || *cols > 4096) {
                fprintf(stderr, "weft-train: %s: implausible sizes\n", path);
            } else if ((data = malloc(bytes)) && read_exact(f, data, (unsigned)bytes, path) < 0) {
                free(data);
                data = NULL;
            }
        }
    }
    gzclose(f);
    return data;
}

static int load_split(dataset *d, const char *dir, const char *prefix, long limit)
{
    char ip[4096], lp[4096];
    snprintf(ip, sizeof ip, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(lp, sizeof lp, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    long nl;
    int r1, c1;
    d->images = read_idx(ip, 3, &d->n, &d->rows, &d->cols);
    d->labels = d->images ? read_idx(lp, 1, &nl, &r1, &c1) : NULL;
    if (!d->labels)
        return -1;
    if (nl != d->n) {
        fprintf(stderr, "weft-train: %s: %ld images but %ld labels\n", dir, d->n, nl);
        return -1;
    }
    if (limit > 0 && limit < d->n)
        d->n = limit;
    return 0;
}

/* A batch as tensors: normalised float32 images [b, 784] and int64 labels. */
static int make_batch(weft_tensor **x, weft_tensor **labels, const dataset *d, const long *order,
                      long start, long b, weft_device device)
{
    int64_t pixels = (int64_t)d->rows * d->cols;
    int64_t xs[2] = {b, pixels}, ys[1] = {b};
    weft_tensor *hx = NULL, *hy = NULL;
    int rc = weft_empty(&hx, xs, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_empty(&hy, ys, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc < 0) {
        weft_tensor_release(hx);
        return rc;
    }
    float *px = weft_tensor_data_ptr(hx);
    int64_t *py = weft_tensor_data_ptr(hy);
    for (long i = 0; i < b; i++) {
        long k = order ? order[start + i] : start + i;
        const unsigned char *img = d->images + (size_t)k * (size_t)pixels;
        /* the training set's mean and standard deviation */
        for (int64_t p = 0; p < pixels; p++)
            px[i * pixels + p] = ((float)img[p] / 255.0f - 0.2860f) / 0.3530f;
        py[i] = d->labels[k];
    }
    rc = weft_to_device(x, hx, device);
    if (rc == 0 && (rc = weft_to_device(labels, hy, device)) < 0) {
        weft_tensor_release(*x);
        *x = NULL;
    }
    weft_tensor_release(hx);
    weft_tensor_release(hy);
    return rc;
}

/* ----------------------------------------------------------------- model */

#define MAX_PARAMS 8

typedef struct model {
    bool cnn;
    int n;
    weft_tensor *p[MAX_PARAMS]; /* weights and biases, in layer order */
} model;

/* the parameters' names in a saved file, as PyTorch's state_dict names them */
static const char *const mlp_names[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
static const char *const cnn_names[] = {"conv1.weight", "conv1.bias", "conv2.weight",
                                        "conv2.bias",   "fc.weight",  "fc.bias"};

/* PyTorch's initialisation of nn.Linear and nn.Conv2d: kaiming uniform with
 * a = sqrt(5), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), for weight and bias. */
static int add_layer(model *m, const int64_t *wsizes, int wndim)
{
    int64_t fan_in = 1;
    for (int d = 1; d < wndim; d++)
        fan_in *= wsizes[d];
    double bound = 1.0 / sqrt((double)fan_in);
    weft_tensor **w = &m->p[m->n++], **b = &m->p[m->n++];
    int rc = weft_empty(w, wsizes, wndim, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_uniform_(*w, -bound, bound);
    if (rc == 0)
        rc = weft_empty(b, wsizes, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_uniform_(*b, -bound, bound);
    return rc;
}

static int model_init(model *m, bool cnn, int pixels, weft_device dev)
{
    m->cnn = cnn;
    int rc;
    if (cnn) {
        int64_t c1[4] = {16, 1, 3, 3}, c2[4] = {32, 16, 3, 3}, fc[2] = {10, 32 * 7 * 7};
        rc = add_layer(m, c1, 4);
        if (rc == 0)
            rc = add_layer(m, c2, 4);
        if (rc == 0)
            rc = add_layer(m, fc, 2);
    } else {
        int64_t l1[2] = {256, pixels}, l2[2] = {10, 256};
        rc = add_layer(m, l1, 2);
        if (rc == 0)
            rc = add_layer(m, l2, 2);
    }
    /* initialised on the host from the seed, then moved: the same numbers
     * whatever the device */
    for (int i = 0; i < m->n && rc == 0; i++) {
        weft_tensor *moved = NULL;
        rc = weft_to_device(&moved, m->p[i], dev);
        if (rc == 0) {
            weft_tensor_release(m->p[i]);
            m->p[i] = moved;
            rc = weft_tensor_set_requires_grad(m->p[i], true);
        }
    }
    return rc;
}

static void model_free(model *m)
{
    for (int i = 0; i < m->n; i++)
        weft_tensor_release(m->p[i]);
}

/* conv(3x3, padding 1) - relu - maxpool(2) */
static int conv_stage(weft_tensor **out, weft_tensor *x, weft_tensor *w, weft_tensor *b)
{
    static const int64_t one[1] = {1}, two[1] = {2}, zero[1] = {0};
    weft_tensor *c = NULL, *r = NULL;
    int rc = weft_conv2d(&c, x, w, b, one, 1, one, 1, one, 1, 1);
    if (rc == 0)
        rc = weft_relu(&r, c);
    if (rc == 0)
        rc = weft_max_pool2d(out, r, two, 1, two, 1, zero, 1, one, 1, false);
    weft_tensor_release(c);
    weft_tensor_release(r);
    return rc;
}

static int model_forward(weft_tensor **logits, const model *m, weft_tensor *x)
{
    weft_tensor *t[4] = {NULL, NULL, NULL, NULL};
    int rc;
    if (m->cnn) {
        int64_t img[4] = {weft_tensor_size(x, 0), 1, 28, 28};
        rc = weft_view(&t[0], x, img, 4);
        if (rc == 0)
            rc = conv_stage(&t[1], t[0], m->p[0], m->p[1]);
        if (rc == 0)
            rc = conv_stage(&t[2], t[1], m->p[2], m->p[3]);
        if (rc == 0)
            rc = weft_flatten(&t[3], t[2], 1, -1);
        if (rc == 0)
            rc = weft_linear(logits, t[3], m->p[4], m->p[5]);
    } else {
        rc = weft_linear(&t[0], x, m->p[0], m->p[1]);
        if (rc == 0)
            rc = weft_relu(&t[1], t[0]);
        if (rc == 0)
            rc = weft_linear(logits, t[1], m->p[2], m->p[3]);
    }
    for (int i = 0; i < 4; i++)
        weft_tensor_release(t[i]);
    return rc;
}

static int evaluate(double *accuracy, const model *m, const dataset *test, weft_device dev)
{
    bool mode = weft_set_grad_enabled(false);
    long correct = 0, batch = 1000;
    int rc = 0;
    for (long start = 0; start < test->n && rc == 0; start += batch) {
        long b = test->n - start < batch ? test->n - start : batch;
        weft_tensor *x = NULL, *y = NULL, *logits = NULL, *pred = NULL, *host = NULL;
        int64_t dim = 1;
        rc = make_batch(&x, &y, test, NULL, start, b, dev);
        if (rc == 0)
            rc = model_forward(&logits, m, x);
        if (rc == 0)
            rc = weft_argmax(&pred, logits, &dim, false);
        if (rc == 0)
            rc = weft_to_device(&host, pred, WEFT_DEVICE_CPU);
        for (long i = 0; rc == 0 && i < b; i++)
            correct += ((const int64_t *)weft_tensor_data_ptr(host))[i] == test->labels[start + i];
        weft_tensor *tmp[] = {x, y, logits, pred, host};
        for (int i = 0; i < 5; i++)
            weft_tensor_release(tmp[i]);
    }
    weft_set_grad_enabled(mode);
    *accuracy = 100.0 * (double)correct / (double)test->n;
    return rc;
}

/* ----------------------------------------------------------- the program */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: weft-train [--model mlp|cnn] [--device DEV] [--epochs N] [--batch-size N]\n"
            "                  [--lr X] [--momentum X] [--seed N] [--threads N] [--save FILE]\n"
            "                  [--json] [--data DIR] [--limit N] [--log-every N]\n");
}

static int parse(options *o, int argc, char **argv)
{
    *o = (options){"mlp", NULL, DEFAULT_DATA, NULL, 2, 64, 0, 100, 0, 0.02, 0.9, 0, false};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = true;
        if (strcmp(a, "--model") == 0 && v)
            o->model = v;
        else if (strcmp(a, "--device") == 0 && v)
            o->device = v;
        else if (strcmp(a, "--data") == 0 && v)
            o->data = v;
        else if (strcmp(a, "--save") == 0 && v)
            o->save = v;
        else if (strcmp(a, "--epochs") == 0 && v)
            o->epochs = atoi(v);
        else if (strcmp(a, "--batch-size") == 0 && v)
            o->batch_size = atoi(v);
        else if (strcmp(a, "--threads") == 0 && v)
            o->threads = atoi(v);
        else if (strcmp(a, "--log-every") == 0 && v)
            o->log_every = atoi(v);
        else if (strcmp(a, "--limit") == 0 && v)
            o->limit = atol(v);
        else if (strcmp(a, "--lr") == 0 && v)
            o->lr = atof(v);
        else if (strcmp(a, "--momentum") == 0 && v)
            o->momentum = atof(v);
        else if (strcmp(a, "--seed") == 0 && v)
            o->seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--json") == 0)
            o->json = true, takes = false;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else {
            usage(stderr);
            return -1;
        }
        i += takes;
    }
    if (o->epochs < 1 || o->batch_size < 1 || o->lr <= 0 || o->log_every < 1) {
        fprintf(stderr, "weft-train: --epochs, --batch-size, --lr and --log-every must be positive\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    if (parse(&o, argc, argv) < 0)
        return 2;
    if (strcmp(o.model, "mlp") != 0 && strcmp(o.model, "cnn") != 0) {
        fprintf(stderr, "weft-train: unknown model '%s' (mlp or cnn)\n", o.model);
        return 2;
    }
    if (o.threads > 0) {
        char n[16];
        snprintf(n, sizeof n, "%d", o.threads);
        setenv("WEFT_NUM_THREADS", n, 1);
        setenv("OPENBLAS_NUM_THREADS", n, 1);
    }
    if (weft_load_default_plugins() < 0)
        return fail("loading plugins");
    weft_device dev = WEFT_DEVICE_CPU;
    if (o.device && weft_device_from_string(&dev, o.device) < 0)
        return fail("--device");
    if (!o.json)
        printf("weft-train: %s on %s, %d epoch(s), batch %d, lr %g, momentum %g, seed %llu\n",
               o.model, o.device ? o.device : "cpu", o.epochs, o.batch_size, o.lr, o.momentum,
               o.seed);

    dataset train = {0}, test = {0};
    if (load_split(&train, o.data, "train", o.limit) < 0 ||
        load_split(&test, o.data, "t10k", o.limit ? (o.limit + 5) / 6 : 0) < 0)
        return 1;

    weft_manual_seed(o.seed);
    model m = {0};
    if (train.rows != 28 || train.cols != 28) {
        fprintf(stderr, "weft-train: expected 28x28 images, got %dx%d\n", train.rows, train.cols);
        return 1;
    }
    int rc = model_init(&m, strcmp(o.model, "cnn") == 0, train.rows * train.cols, dev);
    if (rc < 0)
        return fail("initialising the model");
    /* torch.optim.SGD(params, lr, momentum): no dampening, decay or nesterov */
    weft_optimizer *opt = NULL;
    if (weft_optimizer_sgd(&opt, m.p, m.n, o.lr, o.momentum, 0, 0, false) < 0)
        return fail("creating the optimizer");

    long *order = malloc((size_t)train.n * sizeof *order);
    if (!order)
        return 1;
    /* a shuffle from the seed alone, so the same seed gives the same run */
    uint64_t state = o.seed * 0x9E3779B97F4A7C15ull + 1;
    double train_seconds = 0, accuracy = 0, last_loss = NAN, first_loss = NAN;
    long images = 0;
    for (int epoch = 1; epoch <= o.epochs && rc == 0; epoch++) {
        for (long i = 0; i < train.n; i++)
            order[i] = i;
        for (long i = train.n - 1; i > 0; i--) {
            state ^= state << 13, state ^= state >> 7, state ^= state << 17;
            long j = (long)(state % (uint64_t)(i + 1));
            long t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        double t0 = now(), window = t0;
        long window_images = 0, steps = (train.n + o.batch_size - 1) / o.batch_size;
        for (long step = 0; step < steps && rc == 0; step++) {
            long start = step * o.batch_size;
            long b = train.n - start < o.batch_size ? train.n - start : o.batch_size;
            weft_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL;
            rc = make_batch(&x, &y, &train, order, start, b, dev);
            if (rc == 0)
                rc = model_forward(&logits, &m, x);
            if (rc == 0)
                rc = weft_cross_entropy(&loss, logits, y, NULL, "mean", -100, 0.0);
            if (rc == 0)
                rc = weft_backward(&loss, 1, NULL, false, false);
            if (rc == 0)
                rc = weft_optimizer_step(opt);
            if (rc == 0)
                rc = weft_optimizer_zero_grad(opt);
            if (rc == 0)
                rc = weft_tensor_item(loss, &last_loss);
            if (epoch == 1 && step == 0)
                first_loss = last_loss;
            images += b;
            window_images += b;
            if (rc == 0 && !o.json && ((step + 1) % o.log_every == 0 || step + 1 == steps)) {
                double t = now();
                printf("epoch %d  step %5ld/%ld  loss %.4f  %8.0f images/s\n", epoch, step + 1,
                       steps, last_loss, (double)window_images / (t - window));
                fflush(stdout);
                window = t;
                window_images = 0;
            }
            weft_tensor *tmp[] = {x, y, logits, loss};
            for (int i = 0; i < 4; i++)
                weft_tensor_release(tmp[i]);
        }
        train_seconds += now() - t0;
        if (rc == 0)
            rc = evaluate(&accuracy, &m, &test, dev);
        if (rc == 0 && !o.json)
            printf("epoch %d  test accuracy %.2f%%\n", epoch, accuracy);
    }
    if (rc == 0 && o.save)
        rc = weft_save_parameters(o.save, m.p, m.cnn ? cnn_names : mlp_names, m.n);
    if (rc < 0)
        return fail(o.save ? "training or saving" : "training");
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = (double)ru.ru_maxrss / 1024.0;
    if (o.json)
        printf("{\"model\": \"%s\", \"epochs\": %d, \"batch_size\": %d, \"lr\": %g, \"seed\": %llu, "
               "\"first_loss\": %.6f, \"final_loss\": %.6f, \"test_accuracy\": %.2f, "
               "\"train_seconds\": %.3f, "
               "\"images_per_second\": %.1f, \"peak_rss_mb\": %.1f}\n",
               o.model, o.epochs, o.batch_size, o.lr, o.seed, first_loss, last_loss, accuracy,
               train_seconds,
               (double)images / train_seconds, rss_mb);
    else
        printf("trained in %.2f s (%.0f images/s), peak RSS %.1f MiB\n", train_seconds,
               (double)images / train_seconds, rss_mb);
    if (o.save && !o.json)
        printf("parameters saved to %s\n", o.save);
    weft_optimizer_destroy(opt);
    model_free(&m);
    free(order);
    free(train.images);
    free(train.labels);
    free(test.images);
    free(test.labels);
    return 0;
}
