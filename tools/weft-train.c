/* tools/weft-train.c — the main job: trains a classifier on Fashion-MNIST
 * (Debian's dataset-fashion-mnist, IDX files read through zlib) with weft's
 * operators and autograd, prints progress and the test accuracy after each
 * epoch, and with --json ends with one JSON object of the results.
 *
 * The MLP (784-256-10) is built from matmul, add, relu and a cross entropy
 * composed of amax, sub, exp, sum, log and mean; SGD with momentum updates
 * the parameters with grad mode off.  The CNN needs conv2d and max_pool2d,
 * which are not in weft yet: --model cnn says so. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <zlib.h>

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

/* A batch as tensors: normalised float32 images [b, 784] and one-hot [b, 10]. */
static int make_batch(weft_tensor **x, weft_tensor **onehot, const dataset *d, const long *order,
                      long start, long b, weft_device device)
{
    int64_t pixels = (int64_t)d->rows * d->cols;
    int64_t xs[2] = {b, pixels}, ys[2] = {b, 10};
    weft_tensor *hx = NULL, *hy = NULL;
    int rc = weft_empty(&hx, xs, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_zeros(&hy, ys, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    if (rc < 0) {
        weft_tensor_release(hx);
        return rc;
    }
    float *px = weft_tensor_data_ptr(hx), *py = weft_tensor_data_ptr(hy);
    for (long i = 0; i < b; i++) {
        long k = order ? order[start + i] : start + i;
        const unsigned char *img = d->images + (size_t)k * (size_t)pixels;
        /* the training set's mean and standard deviation */
        for (int64_t p = 0; p < pixels; p++)
            px[i * pixels + p] = ((float)img[p] / 255.0f - 0.2860f) / 0.3530f;
        py[i * 10 + d->labels[k]] = 1.0f;
    }
    rc = weft_to_device(x, hx, device);
    if (rc == 0 && (rc = weft_to_device(onehot, hy, device)) < 0) {
        weft_tensor_release(*x);
        *x = NULL;
    }
    weft_tensor_release(hx);
    weft_tensor_release(hy);
    return rc;
}

/* ----------------------------------------------------------------- model */

typedef struct mlp {
    weft_tensor *w1, *b1, *w2, *b2;
    weft_tensor *v[4]; /* momentum buffers */
} mlp;

static weft_tensor **params(mlp *m, int i)
{
    weft_tensor **p[4] = {&m->w1, &m->b1, &m->w2, &m->b2};
    return p[i];
}

/* PyTorch's nn.Linear initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
 * for weight and bias (kaiming uniform with a = sqrt(5)). */
static int init_linear(weft_tensor **w, weft_tensor **b, int64_t in, int64_t out, weft_device dev)
{
    int64_t ws[2] = {in, out};
    double bound = 1.0 / sqrt((double)in);
    int rc = weft_empty(w, ws, 2, WEFT_FLOAT32, dev);
    if (rc == 0)
        rc = weft_uniform_(*w, -bound, bound);
    if (rc == 0)
        rc = weft_empty(b, &out, 1, WEFT_FLOAT32, dev);
    if (rc == 0)
        rc = weft_uniform_(*b, -bound, bound);
    if (rc == 0)
        rc = weft_tensor_set_requires_grad(*w, true);
    if (rc == 0)
        rc = weft_tensor_set_requires_grad(*b, true);
    return rc;
}

static int mlp_forward(weft_tensor **logits, const mlp *m, weft_tensor *x)
{
    weft_tensor *h1 = NULL, *h2 = NULL, *h3 = NULL, *h4 = NULL;
    int rc = weft_matmul(&h1, x, m->w1);
    if (rc == 0)
        rc = weft_add(&h2, h1, m->b1);
    if (rc == 0)
        rc = weft_relu(&h3, h2);
    if (rc == 0)
        rc = weft_matmul(&h4, h3, m->w2);
    if (rc == 0)
        rc = weft_add(logits, h4, m->b2);
    weft_tensor_release(h1);
    weft_tensor_release(h2);
    weft_tensor_release(h3);
    weft_tensor_release(h4);
    return rc;
}

/* mean over the batch of -sum(onehot * log_softmax(logits)), with the
 * row maximum subtracted (outside the graph) for stability */
static int cross_entropy(weft_tensor **loss, weft_tensor *logits, weft_tensor *onehot)
{
    int64_t dim = 1;
    weft_tensor *mx = NULL, *z = NULL, *e = NULL, *s = NULL, *lse = NULL, *logp = NULL,
                *picked = NULL, *per = NULL, *mean = NULL;
    bool mode = weft_set_grad_enabled(false);
    int rc = weft_amax(&mx, logits, &dim, 1, true);
    weft_set_grad_enabled(mode);
    if (rc == 0)
        rc = weft_sub(&z, logits, mx);
    if (rc == 0)
        rc = weft_exp(&e, z);
    if (rc == 0)
        rc = weft_sum(&s, e, &dim, 1, true);
    if (rc == 0)
        rc = weft_log(&lse, s);
    if (rc == 0)
        rc = weft_sub(&logp, z, lse);
    if (rc == 0)
        rc = weft_mul(&picked, logp, onehot);
    if (rc == 0)
        rc = weft_sum(&per, picked, &dim, 1, false);
    if (rc == 0)
        rc = weft_mean(&mean, per, NULL, 0, false);
    if (rc == 0)
        rc = weft_neg(loss, mean);
    weft_tensor *tmp[] = {mx, z, e, s, lse, logp, picked, per, mean};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        weft_tensor_release(tmp[i]);
    return rc;
}

/* SGD with momentum (PyTorch's form): v = mu v + g; p -= lr v */
static int sgd_step(mlp *m, double lr, double mu)
{
    bool mode = weft_set_grad_enabled(false);
    int rc = 0;
    for (int i = 0; i < 4 && rc == 0; i++) {
        weft_tensor *p = *params(m, i), *g = NULL;
        rc = weft_tensor_grad(&g, p);
        if (rc < 0 || !g)
            continue;
        if (!m->v[i]) {
            rc = weft_empty_like(&m->v[i], g);
            if (rc == 0)
                rc = weft_copy_(m->v[i], g);
        } else {
            rc = weft_mul_scalar_(m->v[i], mu);
            if (rc == 0)
                rc = weft_add_(m->v[i], g);
        }
        if (rc == 0)
            rc = weft_sub_ex_(p, m->v[i], lr);
        if (rc == 0)
            rc = weft_tensor_set_grad(p, NULL);
        weft_tensor_release(g);
    }
    weft_set_grad_enabled(mode);
    return rc;
}

static int evaluate(double *accuracy, const mlp *m, const dataset *test, weft_device dev)
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
            rc = mlp_forward(&logits, m, x);
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
    if (strcmp(o.model, "mlp") != 0) {
        fprintf(stderr, "weft-train: model '%s' is not available: the CNN needs conv2d and "
                        "max_pool2d, which weft does not have yet; use --model mlp\n",
                o.model);
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
    mlp m = {0};
    int rc = init_linear(&m.w1, &m.b1, (int64_t)train.rows * train.cols, 256, dev);
    if (rc == 0)
        rc = init_linear(&m.w2, &m.b2, 256, 10, dev);
    if (rc < 0)
        return fail("initialising the model");

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
                rc = mlp_forward(&logits, &m, x);
            if (rc == 0)
                rc = cross_entropy(&loss, logits, y);
            if (rc == 0)
                rc = weft_backward(&loss, 1, NULL, false, false);
            if (rc == 0)
                rc = sgd_step(&m, o.lr, o.momentum);
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
    if (rc < 0)
        return fail("training");
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
    if (o.save)
        fprintf(stderr, "weft-train: --save is not implemented yet (issue 4: the parameter file "
                        "format); nothing was saved\n");
    for (int i = 0; i < 4; i++) {
        weft_tensor_release(*params(&m, i));
        weft_tensor_release(m.v[i]);
    }
    free(order);
    free(train.images);
    free(train.labels);
    free(test.images);
    free(test.labels);
    return o.save ? 1 : 0;
}
