/* tools/weft-train.c — the main job: trains a classifier on Fashion-MNIST
 * (Debian's dataset-fashion-mnist, IDX files read by weft_read_idx) with weft's
 * operators and autograd, prints progress and the test accuracy after each
 * epoch, and with --json ends with one JSON object of the results.
 *
 * Two models, built from the nn modules as torch.nn.Sequential would be: an
 * MLP (784-256-10) and a small CNN (two conv-relu-maxpool stages with 16
 * and 32 channels, then a linear layer), trained with cross entropy and
 * SGD with momentum (or Adam, AdamW).  --save writes the model's state
 * with weft_module_save (a FILE.safetensors in the safetensors format),
 * under PyTorch's state_dict names ("0.weight", "0.bias", ...).
 * --profile FILE records the first --profile-steps steps (default 5) with
 * the profiler, writes their Chrome trace to FILE and prints the operators
 * that took the most time at the end. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <weft/distributed.h>
#include <weft/nn.h>
#include <weft/profiler.h>
#include <weft/quantized.h>
#include <weft/weft.h>

#include "train_prefetch.h"
#include "train_quantize.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

typedef struct options {
    const char *model, *device, *data, *save, *optimizer;
    int epochs, batch_size, threads, log_every;
    long limit;
    double lr, momentum, weight_decay;
    unsigned long long seed;
    bool json, quiet, quantize, distributed, no_prefetch;
    const char *profile; /* --profile FILE */
    int profile_steps;
} options;

typedef struct dataset {
    long n;
    int rows, cols;
    weft_tensor *image_file, *label_file; /* uint8 [n, rows, cols] and [n] */
    const unsigned char *images;          /* their elements */
    const unsigned char *labels;
} dataset;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the whole process (every thread): on a shared machine it
 * says what the work cost when the wall clock mostly says how busy the
 * neighbours were. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what)
{
    fprintf(stderr, "weft-train: %s: %s\n", what, weft_last_error());
    return 1;
}

/* ------------------------------------------------------------------ data */

/* Reads one IDX file with libweft's reader (the one weft.datasets uses);
 * want_dims is 3 for images and 1 for labels. */
static weft_tensor *read_idx(const char *path, int want_dims)
{
    weft_tensor *t = NULL;
    if (weft_read_idx(&t, path) < 0) {
        fprintf(stderr, "weft-train: %s (apt-get install dataset-fashion-mnist)\n",
                weft_last_error());
        return NULL;
    }
    if (weft_tensor_ndim(t) != want_dims) {
        fprintf(stderr, "weft-train: %s: %d dimension(s), expected %d\n", path,
                (int)weft_tensor_ndim(t), want_dims);
        weft_tensor_release(t);
        return NULL;
    }
    return t;
}

static int load_split(dataset *d, const char *dir, const char *prefix, long limit)
{
    char ip[4096], lp[4096];
    snprintf(ip, sizeof ip, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(lp, sizeof lp, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    d->image_file = read_idx(ip, 3);
    d->label_file = d->image_file ? read_idx(lp, 1) : NULL;
    if (!d->label_file)
        return -1;
    d->n = (long)weft_tensor_size(d->image_file, 0);
    d->rows = (int)weft_tensor_size(d->image_file, 1);
    d->cols = (int)weft_tensor_size(d->image_file, 2);
    d->images = weft_tensor_data_ptr(d->image_file);
    d->labels = weft_tensor_data_ptr(d->label_file);
    long nl = (long)weft_tensor_size(d->label_file, 0);
    if (nl != d->n) {
        fprintf(stderr, "weft-train: %s: %ld images but %ld labels\n", dir, d->n, nl);
        return -1;
    }
    if (limit > 0 && limit < d->n)
        d->n = limit;
    return 0;
}

/* The multiply-adds of one training image, times 2: every product of the
 * forward pass, the same again for the weight gradients, and the input
 * gradients of every layer but the first (nothing asks for the image's).
 * Elementwise work (bias, activations, pooling, the loss, the optimizer)
 * is left out: this is the count a GEMM peak bounds (bench/train-compare
 * prints the epoch's rate as a share of bench/gemm-peak's). */
static double train_flops_per_image(bool cnn)
{
    double fwd, first_input_grad;
    if (cnn) {
        double conv1 = 16.0 * 28 * 28 * (1 * 3 * 3), conv2 = 32.0 * 14 * 14 * (16 * 3 * 3);
        double fc = 32.0 * 7 * 7 * 10;
        fwd = conv1 + conv2 + fc;
        first_input_grad = conv1;
    } else {
        double fc1 = 784.0 * 256, fc2 = 256.0 * 10;
        fwd = fc1 + fc2;
        first_input_grad = fc1;
    }
    return 2.0 * (3 * fwd - first_input_grad);
}

/* What a batch is read from: the images and labels, and the order of
 * this epoch (NULL: in file order). */
typedef struct batch_source {
    const dataset *d;
    const long *order;
} batch_source;

/* A pixel's input: normalised with the training set's mean and standard
 * deviation.  host_batch computes it per pixel rather than looking it up
 * in pixel_values' table: the same two float operations give the same
 * bits, and the loop vectorizes where the lookup could not (64 images:
 * 25 against 60 us with SSE2, 14 with AVX2, on weft-train's batch thread,
 * which shares the 2-core machine with the pool's two threads). */
static inline float pixel_value(unsigned v)
{
    return ((float)v / 255.0f - 0.2860f) / 0.3530f;
}

/* Every pixel value's input, for the int8 model's input quantizer. */
static void pixel_values(float value[256])
{
    for (unsigned v = 0; v < 256; v++)
        value[v] = pixel_value(v);
}

/* The pixels of one image converted.  On x86-64 an AVX2 clone is chosen
 * at load time where the CPU has it (this program is built for the
 * baseline): eight divisions at a time, the same bits, 14 against 25 us
 * for 64 images. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void convert_pixels(float *restrict row, const unsigned char *restrict img, int64_t n)
{
    for (int64_t p = 0; p < n; p++)
        row[p] = pixel_value(img[p]);
}

/* A batch as host tensors: normalised float32 images [b, 784] and int64
 * labels (a train_batch_fn: also run on weft-train's batch thread). */
static int host_batch(void *ctx, long start, long b, weft_tensor **x, weft_tensor **labels)
{
    const batch_source *src = ctx;
    const dataset *d = src->d;
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
        long k = src->order ? src->order[start + i] : start + i;
        convert_pixels(px + i * pixels, d->images + (size_t)k * (size_t)pixels, pixels);
        py[i] = d->labels[k];
    }
    *x = hx;
    *labels = hy;
    return 0;
}

/* Host tensors hx, hy moved to device into *x, *labels; consumes hx, hy. */
static int batch_to_device(weft_tensor **x, weft_tensor **labels, weft_tensor *hx, weft_tensor *hy,
                           weft_device device)
{
    int rc = weft_to_device(x, hx, device);
    if (rc == 0 && (rc = weft_to_device(labels, hy, device)) < 0) {
        weft_tensor_release(*x);
        *x = NULL;
    }
    weft_tensor_release(hx);
    weft_tensor_release(hy);
    return rc;
}

/* A batch as tensors on device, built on the calling thread. */
static int make_batch(weft_tensor **x, weft_tensor **labels, const dataset *d, const long *order,
                      long start, long b, weft_device device)
{
    batch_source src = {d, order};
    weft_tensor *hx = NULL, *hy = NULL;
    int rc = host_batch(&src, start, b, &hx, &hy);
    return rc < 0 ? rc : batch_to_device(x, labels, hx, hy, device);
}

/* ----------------------------------------------------------------- model */

/* Appends a new module to seq (which owns it even when the append fails). */
#define APPEND(seq, make)                                                                    \
    do {                                                                                      \
        weft_module *child_ = NULL;                                                           \
        if (rc == 0 && (rc = (make)) == 0)                                                    \
            rc = weft_module_sequential_append(seq, child_);                                  \
    } while (0)

/* The models as torch.nn.Sequential would build them, so the parameters
 * are initialised as PyTorch's (kaiming uniform with a = sqrt(5) and the
 * fan-based bias), drawn from the default generator in layer order, and
 * saved under state_dict's names ("0.weight", "0.bias", ...). */
static int model_create(weft_module **out, bool cnn, int pixels)
{
    static const int64_t k3[2] = {3, 3}, pad1[2] = {1, 1}, two[2] = {2, 2};
    weft_module *seq = NULL;
    int rc = weft_module_sequential(&seq);
    if (cnn) {
        APPEND(seq, weft_module_conv2d(&child_, 1, 16, k3, NULL, pad1, NULL, 1, true, NULL));
        APPEND(seq, weft_module_activation(&child_, WEFT_ACTIVATION_RELU));
        APPEND(seq, weft_module_max_pool2d(&child_, two, NULL, NULL));
        APPEND(seq, weft_module_conv2d(&child_, 16, 32, k3, NULL, pad1, NULL, 1, true, NULL));
        APPEND(seq, weft_module_activation(&child_, WEFT_ACTIVATION_RELU));
        APPEND(seq, weft_module_max_pool2d(&child_, two, NULL, NULL));
        APPEND(seq, weft_module_flatten(&child_, 1, -1));
        APPEND(seq, weft_module_linear(&child_, 32 * 7 * 7, 10, true, NULL));
    } else {
        APPEND(seq, weft_module_linear(&child_, pixels, 256, true, NULL));
        APPEND(seq, weft_module_activation(&child_, WEFT_ACTIVATION_RELU));
        APPEND(seq, weft_module_linear(&child_, 256, 10, true, NULL));
    }
    if (rc < 0) {
        weft_module_destroy(seq);
        return rc;
    }
    *out = seq;
    return 0;
}

/* Images come as [b, 784]; the CNN sees them as [b, 1, 28, 28]. */
static int model_forward(weft_tensor **logits, weft_module *m, bool cnn, weft_tensor *x)
{
    if (!cnn)
        return weft_module_forward(m, x, logits);
    weft_tensor *img = NULL;
    int64_t sizes[4] = {weft_tensor_size(x, 0), 1, 28, 28};
    int rc = weft_view(&img, x, sizes, 4);
    if (rc == 0)
        rc = weft_module_forward(m, img, logits);
    weft_tensor_release(img);
    return rc;
}

/* The int8 model's input: b images of d from start as their bytes, which
 * are its quantized input (wt_int8_pixel_input), as an int8 deployment
 * takes 8-bit images; made once for the test set, whose batches are then
 * slices of it (views, no copy: the float model's batches are float
 * conversions because it needs floats, the int8 model needs the bytes). */
static int int8_images(weft_tensor **x, const wt_int8_model *q, const dataset *d, long start,
                       long b)
{
    int64_t pixels = (int64_t)d->rows * d->cols, sizes[2] = {b, pixels};
    weft_tensor *bytes = NULL;
    int rc = weft_from_blob(&bytes, (void *)(d->images + (size_t)start * (size_t)pixels), sizes,
                            NULL, 2, WEFT_UINT8, WEFT_DEVICE_CPU, NULL, NULL);
    if (rc == 0)
        rc = wt_int8_input(x, q, bytes);
    weft_tensor_release(bytes);
    return rc;
}

/* q: the int8 form of m to evaluate instead (--quantize), or NULL; qtest
 * then the test set as q's input (int8_images) */
static int evaluate(double *accuracy, weft_module *m, bool cnn, const dataset *test,
                    weft_device dev, wt_int8_model *q, const weft_tensor *qtest)
{
    bool mode = weft_set_grad_enabled(false);
    weft_module_train(m, false);
    long correct = 0, batch = 1000;
    int rc = 0;
    for (long start = 0; start < test->n && rc == 0; start += batch) {
        long b = test->n - start < batch ? test->n - start : batch;
        weft_tensor *x = NULL, *logits = NULL, *pred = NULL, *host = NULL;
        int64_t dim = 1;
        if (q) {
            if ((rc = weft_quantized_slice(&x, qtest, 0, start, start + b, 1)) == 0)
                rc = wt_int8_forward(&logits, q, x);
        } else {
            weft_tensor *y = NULL;
            if ((rc = make_batch(&x, &y, test, NULL, start, b, dev)) == 0)
                rc = model_forward(&logits, m, cnn, x);
            weft_tensor_release(y);
        }
        if (rc == 0)
            rc = weft_argmax(&pred, logits, &dim, false);
        if (rc == 0)
            rc = weft_to_device(&host, pred, WEFT_DEVICE_CPU);
        for (long i = 0; rc == 0 && i < b; i++)
            correct += ((const int64_t *)weft_tensor_data_ptr(host))[i] == test->labels[start + i];
        weft_tensor *tmp[] = {x, logits, pred, host};
        for (int i = 0; i < 4; i++)
            weft_tensor_release(tmp[i]);
    }
    weft_module_train(m, true);
    weft_set_grad_enabled(mode);
    *accuracy = 100.0 * (double)correct / (double)test->n;
    return rc;
}

/* ----------------------------------------------------------- the program */

/* The option list here is the one man/weft-train.1 is checked against
 * (tests/manpages.sh): every option named in one must be in the other. */
static void usage(FILE *f)
{
    fprintf(f,
            "usage: weft-train [OPTION]...\n"
            "Trains a classifier on Fashion-MNIST and prints the test accuracy per epoch.\n"
            "\n"
            "  --model mlp|cnn        the model (default mlp)\n"
            "  --device DEV           cpu, cuda:0, ...; best (the default) picks the first\n"
            "                         accelerator a plugin provides, else the CPU, and says why\n"
            "  --epochs N             passes over the training set (default 2)\n"
            "  --batch-size N         images per step (default 64)\n"
            "  --lr X                 learning rate (default 0.02)\n"
            "  --optimizer NAME       sgd, adam or adamw (default sgd)\n"
            "  --momentum X           SGD's momentum (default 0.9)\n"
            "  --weight-decay X       weight decay (default 0; adamw's 0.01)\n"
            "  --seed N               the seed of the initialisation and the shuffle (default 0)\n"
            "  --threads N            intra-op threads (default: every CPU)\n"
            "  --limit N              train on the first N images and test on N/6; 0 (the\n"
            "                         default) uses all of them\n"
            "  --log-every N          a progress line every N steps (default 100)\n"
            "  --data DIR             the IDX files (default " DEFAULT_DATA ")\n"
            "  --save FILE            write the trained parameters to FILE\n"
            "  --profile FILE         write a Chrome trace of the first steps to FILE and\n"
            "                         print the operators that took the most time (with\n"
            "                         --quantize, also those of one test pass of each model)\n"
            "  --profile-steps N      how many steps --profile records (default 5)\n"
            "  --json                 end with one JSON object of the results on stdout;\n"
            "                         progress goes to stderr\n"
            "  --quiet                no progress lines\n"
            "  --no-prefetch          build each batch in the training loop instead of on a\n"
            "                         thread beside it while the previous step runs\n"
            "  --quantize             after training, quantize the model (weights per channel\n"
            "                         qint8, activations per tensor quint8, calibrated on 1000\n"
            "                         training images) and print its test accuracy and the\n"
            "                         test set's inference time next to the float model's\n"
            "                         (CPU only; needs the quantized plugin with oneDNN)\n"
            "  --distributed          data-parallel over the ranks of mpirun (the mpi backend):\n"
            "                         each rank takes its share of every batch, which keeps\n"
            "                         its size; rank 0 alone prints\n"
            "  --help                 this text\n");
}

/* Numbers are read whole: "--lr abc" and "--epochs 2x" say what is wrong
 * with the text instead of training with 0. */
static int parse_long(const char *opt, const char *text, long min, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE) {
        fprintf(stderr, "weft-train: %s: '%s' is not a whole number\n", opt, text);
        return -1;
    }
    if (v < min || v > INT32_MAX) {
        fprintf(stderr, "weft-train: %s must be %s%ld (got %ld)\n", opt,
                v > INT32_MAX ? "at most " : "at least ", v > INT32_MAX ? (long)INT32_MAX : min,
                v);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_double(const char *opt, const char *text, bool positive, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || !isfinite(v)) {
        fprintf(stderr, "weft-train: %s: '%s' is not a finite number\n", opt, text);
        return -1;
    }
    if (positive ? v <= 0 : v < 0) {
        fprintf(stderr, "weft-train: %s must be %s (got %s)\n", opt,
                positive ? "positive" : "zero or more", text);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse(options *o, int argc, char **argv)
{
    *o = (options){"mlp", "best", DEFAULT_DATA, NULL, "sgd", 2, 64, 0, 100, 0, 0.02, 0.9, 0,
                   0, false, false, false, false, false, NULL, 5};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            o->json = true;
            continue;
        }
        if (strcmp(a, "--quiet") == 0) {
            o->quiet = true;
            continue;
        }
        if (strcmp(a, "--quantize") == 0) {
            o->quantize = true;
            continue;
        }
        if (strcmp(a, "--no-prefetch") == 0) {
            o->no_prefetch = true;
            continue;
        }
        if (strcmp(a, "--distributed") == 0) {
            o->distributed = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        /* every option below that takes a value, so that a missing value
         * and an unknown option get messages of their own */
        static const char *const with_value[] = {
            "--model", "--device", "--data", "--save", "--optimizer", "--epochs", "--batch-size",
            "--threads", "--log-every", "--limit", "--lr", "--weight-decay", "--momentum",
            "--seed", "--profile", "--profile-steps"};
        bool known = false;
        for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
            known = known || strcmp(a, with_value[k]) == 0;
        if (!known) {
            fprintf(stderr, "weft-train: unknown option '%s'\n", a);
            usage(stderr);
            return -1;
        }
        if (!v) {
            fprintf(stderr, "weft-train: %s needs a value\n", a);
            return -1;
        }
        i++;
        long n = 0;
        int rc = 0;
        if (strcmp(a, "--model") == 0)
            o->model = v;
        else if (strcmp(a, "--device") == 0)
            o->device = v;
        else if (strcmp(a, "--data") == 0)
            o->data = v;
        else if (strcmp(a, "--save") == 0)
            o->save = v;
        else if (strcmp(a, "--profile") == 0)
            o->profile = v;
        else if (strcmp(a, "--profile-steps") == 0 && (rc = parse_long(a, v, 1, &n)) == 0)
            o->profile_steps = (int)n;
        else if (strcmp(a, "--optimizer") == 0)
            o->optimizer = v;
        else if (strcmp(a, "--epochs") == 0 && (rc = parse_long(a, v, 1, &n)) == 0)
            o->epochs = (int)n;
        else if (strcmp(a, "--batch-size") == 0 && (rc = parse_long(a, v, 1, &n)) == 0)
            o->batch_size = (int)n;
        else if (strcmp(a, "--threads") == 0 && (rc = parse_long(a, v, 0, &n)) == 0)
            o->threads = (int)n;
        else if (strcmp(a, "--log-every") == 0 && (rc = parse_long(a, v, 1, &n)) == 0)
            o->log_every = (int)n;
        /* 0 is "no limit", as bench/train-compare passes it (documented in
         * --help and the man page) */
        else if (strcmp(a, "--limit") == 0 && (rc = parse_long(a, v, 0, &n)) == 0)
            o->limit = n;
        else if (strcmp(a, "--lr") == 0)
            rc = parse_double(a, v, true, &o->lr);
        else if (strcmp(a, "--weight-decay") == 0)
            rc = parse_double(a, v, false, &o->weight_decay);
        else if (strcmp(a, "--momentum") == 0)
            rc = parse_double(a, v, false, &o->momentum);
        else if (strcmp(a, "--seed") == 0) {
            char *end;
            errno = 0;
            o->seed = strtoull(v, &end, 10);
            if (end == v || *end != '\0' || errno == ERANGE || v[0] == '-') {
                fprintf(stderr, "weft-train: --seed: '%s' is not a whole number from 0 to %llu\n",
                        v, (unsigned long long)UINT64_MAX);
                rc = -1;
            }
        }
        if (rc < 0)
            return -1;
    }
    if (strcmp(o->optimizer, "sgd") != 0 && strcmp(o->optimizer, "adam") != 0 &&
        strcmp(o->optimizer, "adamw") != 0) {
        fprintf(stderr, "weft-train: unknown optimizer '%s' (sgd, adam or adamw)\n", o->optimizer);
        return -1;
    }
    return 0;
}

/* Appends "; NAME: why" to the reasons --device best gives. */
static void add_reason(char *buf, size_t size, const char *name, const char *why)
{
    size_t len = strlen(buf);
    if (len < size)
        snprintf(buf + len, size - len, "%s%s: %s", len ? "; " : "", name, why);
}

/* "best": device 0 of the first type (in the order the plugins registered
 * them) whose plugin says it is an accelerator and that has a device, else
 * the CPU.  Any other device would be slower than the CPU backend itself:
 * an emulated device runs its work on the CPU too, through copies (a
 * device with no kernels of its own trained at half the CPU's speed), and
 * a plugin that does not say what it is may be such a device.  *why gets
 * the reason for the choice, naming every type passed over. */
static int pick_device(weft_device *dev, const char *text, char *why, size_t size)
{
    *dev = WEFT_DEVICE_CPU;
    why[0] = '\0';
    if (strcmp(text, "best") != 0)
        return weft_device_from_string(dev, text);
    char skipped[512] = "";
    int chosen = -1;
    for (int type = 0; type < WEFT_MAX_DEVICE_TYPES; type++) {
        const char *name = weft_device_type_name(type);
        int kind = weft_device_type_kind(type);
        if (!name || kind < 0 || kind == WEFT_DEVICE_KIND_HOST)
            continue; /* no plugin provides it, or it is the CPU */
        if (kind == WEFT_DEVICE_KIND_EMULATED)
            add_reason(skipped, sizeof skipped, name, "emulated (its work runs on the CPU)");
        else if (kind == WEFT_DEVICE_KIND_UNKNOWN)
            add_reason(skipped, sizeof skipped, name,
                       "its plugin does not say what kind of device it is");
        else if (weft_device_count(type) < 1)
            add_reason(skipped, sizeof skipped, name, "an accelerator, but no device is present");
        else if (chosen >= 0)
            add_reason(skipped, sizeof skipped, name, "an accelerator registered later");
        else
            chosen = type;
    }
    if (chosen >= 0)
        *dev = (weft_device){(int16_t)chosen, 0};
    snprintf(why, size, "%s%s%s",
             chosen >= 0 ? "the first accelerator" : "no accelerator device is present",
             skipped[0] ? "; passed over " : "", skipped);
    return 0;
}

/* torch.optim's constructors with PyTorch's defaults for what weft-train
 * does not expose: SGD(lr, momentum, weight_decay), Adam/AdamW(lr,
 * betas=(0.9, 0.999), eps=1e-8, weight_decay; AdamW's default 0.01 only
 * when --weight-decay is not given). */
static int make_optimizer(weft_optimizer **opt, const options *o, weft_tensor *const *params,
                          int n, bool decay_given)
{
    if (strcmp(o->optimizer, "adam") == 0)
        return weft_optimizer_adam(opt, params, n, o->lr, 0.9, 0.999, 1e-8, o->weight_decay);
    if (strcmp(o->optimizer, "adamw") == 0)
        return weft_optimizer_adamw(opt, params, n, o->lr, 0.9, 0.999, 1e-8,
                                    decay_given ? o->weight_decay : 0.01);
    return weft_optimizer_sgd(opt, params, n, o->lr, o->momentum, 0, o->weight_decay, false);
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
    /* through the API: the CPU plugin resizes its pool and OpenBLAS's count
     * from it, whenever it is loaded */
    if (o.threads != 0 && weft_set_num_threads(o.threads) < 0)
        return fail("--threads");
    /* Before the plugins load OpenMP (the quantized plugin's oneDNN).
     * Its int8 products run on weft's pool with OpenMP at one thread now,
     * but a product of fewer rows than threads still starts an OpenMP team,
     * and OpenMP's default keeps its threads spinning after each call on
     * the CPU the next operator's pool worker needs (when every int8 call
     * ran on such a team, the int8 MLP's test set took 0.29-1.2 s with 2
     * threads on a loaded 2-CPU machine, 0.05 s with passive waits:
     * docs/benchmarks.md).  The float models run no OpenMP team; a user's
     * setting wins. */
    setenv("OMP_WAIT_POLICY", "passive", 0);
    if (weft_load_default_plugins() < 0)
        return fail("loading plugins");
    /* --distributed: every rank trains a replica on its share of each
     * batch; the gradients are averaged by the ddp (nn/ddp.c) */
    weft_process_group *world = NULL;
    int rank = 0, world_size = 1;
    if (o.distributed) {
        if (weft_dist_init(&world, NULL) < 0)
            return fail("--distributed");
        rank = weft_dist_rank(world);
        world_size = weft_dist_size(world);
        if (rank != 0)
            o.quiet = true;
    }
    weft_device dev;
    char why[768];
    if (pick_device(&dev, o.device, why, sizeof why) < 0)
        return fail("--device");
    char devname[64];
    weft_device_to_string(dev, devname, sizeof devname);
    /* progress: stdout, or stderr when stdout carries the JSON result */
    FILE *progress = o.quiet ? NULL : o.json ? stderr : stdout;
    if (progress && why[0])
        fprintf(progress, "weft-train: --device best chose %s: %s\n", devname, why);
    if (progress)
        fprintf(progress,
                "weft-train: %s on %s, %d epoch(s), batch %d, %s lr %g, momentum %g, seed %llu\n",
                o.model, devname, o.epochs, o.batch_size, o.optimizer, o.lr, o.momentum, o.seed);
    if (progress && world)
        fprintf(progress, "weft-train: data-parallel over %d ranks (%s), %d images per rank per step\n",
                world_size, weft_dist_backend_name(world), o.batch_size / world_size);

    dataset train = {0}, test = {0};
    if (load_split(&train, o.data, "train", o.limit) < 0 ||
        load_split(&test, o.data, "t10k", o.limit ? (o.limit + 5) / 6 : 0) < 0)
        return 1;

    weft_manual_seed(o.seed);
    bool cnn = strcmp(o.model, "cnn") == 0;
    weft_module *m = NULL;
    if (train.rows != 28 || train.cols != 28) {
        fprintf(stderr, "weft-train: expected 28x28 images, got %dx%d\n", train.rows, train.cols);
        return 1;
    }
    /* initialised on the host from the seed, then moved: the same numbers
     * whatever the device */
    int rc = model_create(&m, cnn, train.rows * train.cols);
    if (rc == 0)
        rc = weft_module_to_device(m, dev);
    if (rc < 0)
        return fail("initialising the model");
    weft_tensor *params[16];
    const char *names[16];
    int nparams = weft_module_parameters(m, params, names, 16);
    weft_optimizer *opt = NULL;
    bool decay_given = false;
    for (int i = 1; i < argc; i++)
        decay_given = decay_given || strcmp(argv[i], "--weight-decay") == 0;
    if (nparams < 0 || make_optimizer(&opt, &o, params, nparams, decay_given) < 0)
        return fail("creating the optimizer");
    weft_ddp *ddp = NULL;
    if (world && weft_ddp_new(&ddp, m, world, 0) < 0)
        return fail("--distributed: the data-parallel wrapper");

    long *order = weft_malloc((size_t)train.n * sizeof *order);
    if (!order) {
        fprintf(stderr, "weft-train: out of memory for the order of %ld images\n", train.n);
        return 1;
    }
    /* a shuffle from the seed alone, so the same seed gives the same run */
    uint64_t state = o.seed * 0x9E3779B97F4A7C15ull + 1;
    double train_seconds = 0, train_cpu_seconds = 0, accuracy = 0, last_loss = NAN, first_loss = NAN;
    long images = 0;
    /* --profile: the first steps, with shapes and memory */
    weft_profiler *prof = NULL;
    if (o.profile) {
        weft_profiler_options po = {sizeof po, true, true};
        if (weft_profiler_create(&prof, &po) < 0 || weft_profiler_start(prof) < 0)
            return fail("--profile");
    }
    long profiled_steps = 0;
    /* the batch thread (--no-prefetch: none); without one, every batch is
     * built in the loop as before */
    batch_source source = {&train, order};
    train_prefetch *prefetch = NULL;
    if (!o.no_prefetch && train_prefetch_start(&prefetch, host_batch, &source) < 0)
        prefetch = NULL;
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
        double t0 = now(), window = t0, c0 = cpu_now();
        long window_images = 0, steps = (train.n + o.batch_size - 1) / o.batch_size;
        for (long step = 0; step < steps && rc == 0; step++) {
            long start = step * o.batch_size;
            long b = train.n - start < o.batch_size ? train.n - start : o.batch_size;
            weft_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL;
            bool profiling = prof && profiled_steps < o.profile_steps;
            if (profiling) {
                char label[48];
                snprintf(label, sizeof label, "step %ld", profiled_steps);
                rc = weft_profiler_range_push(label);
            }
            /* this rank's rows of the batch: [lo, hi) */
            long lo = b * rank / world_size, hi = b * (rank + 1) / world_size;
            if (rc == 0) {
                weft_tensor *hx = NULL, *hy = NULL;
                rc = train_prefetch_take(prefetch, host_batch, &source, start + lo, hi - lo, &hx,
                                         &hy);
                if (rc == 0)
                    rc = batch_to_device(&x, &y, hx, hy, dev);
            }
            if (rc == 0)
                rc = model_forward(&logits, m, cnn, x);
            if (rc == 0)
                rc = weft_cross_entropy(&loss, logits, y, NULL, "mean", -100, 0.0);
            /* the next step's rows, built on the batch thread while this
             * step's backward runs.  Not earlier: asked for as the step
             * began, the batch thread woke during the first layer's
             * product, when the pool's threads held both of the 2-core
             * machine's CPUs, and the next step waited ~70 us for it (the
             * median, --profile traces).  From here the next step finds
             * its batch ready (median wait 1 us); the thread still
             * preempts this loop on its CPU more often than the spinning
             * worker on the other (the request's median cost 55-76 us
             * under load), but the epoch measured faster this way
             * (docs/benchmarks.md, issue 20's twelfth session) */
            if (rc == 0 && step + 1 < steps) {
                long nstart = (step + 1) * o.batch_size;
                long nb = train.n - nstart < o.batch_size ? train.n - nstart : o.batch_size;
                train_prefetch_request(prefetch, nstart + nb * rank / world_size,
                                       nb * (rank + 1) / world_size - nb * rank / world_size);
            }
            /* the ddp averages the ranks' gradients: weighting each rank's
             * mean by its share of the batch makes that the gradient of
             * the whole batch's mean, also when b does not divide evenly */
            weft_tensor *scaled = NULL;
            if (rc == 0 && world)
                rc = weft_mul_scalar(&scaled, loss, (double)(hi - lo) * world_size / (double)b);
            if (rc == 0)
                rc = weft_backward(scaled ? &scaled : &loss, 1, NULL, false, false);
            weft_tensor_release(scaled);
            if (rc == 0 && ddp)
                rc = weft_ddp_finish(ddp);
            if (rc == 0)
                rc = weft_optimizer_step(opt);
            if (rc == 0)
                rc = weft_optimizer_zero_grad(opt);
            if (rc == 0)
                rc = weft_tensor_item(loss, &last_loss);
            if (profiling) {
                int prc = weft_profiler_range_pop();
                rc = rc < 0 ? rc : prc;
                if (++profiled_steps == o.profile_steps && rc == 0)
                    rc = weft_profiler_stop(prof);
            }
            if (epoch == 1 && step == 0)
                first_loss = last_loss;
            images += b;
            window_images += b;
            if (rc == 0 && progress && ((step + 1) % o.log_every == 0 || step + 1 == steps)) {
                double t = now();
                fprintf(progress, "epoch %d  step %5ld/%ld  loss %.4f  %8.0f images/s\n", epoch,
                        step + 1, steps, last_loss, (double)window_images / (t - window));
                fflush(progress);
                window = t;
                window_images = 0;
            }
            weft_tensor *tmp[] = {x, y, logits, loss};
            for (int i = 0; i < 4; i++)
                weft_tensor_release(tmp[i]);
        }
        /* nothing is in flight here: the last step requests nothing, and
         * an error ends the epochs (the order is reshuffled only after a
         * whole epoch) */
        train_seconds += now() - t0;
        train_cpu_seconds += cpu_now() - c0;
        if (rc == 0)
            rc = evaluate(&accuracy, m, cnn, &test, dev, NULL, NULL);
        if (rc == 0 && progress)
            fprintf(progress, "epoch %d  test accuracy %.2f%%\n", epoch, accuracy);
    }
    train_prefetch_stop(prefetch);
    if (rc == 0 && o.save && rank == 0) {
        /* FILE.safetensors: the format other frameworks read */
        size_t len = strlen(o.save), ext = strlen(".safetensors");
        bool safetensors = len > ext && strcmp(o.save + len - ext, ".safetensors") == 0;
        rc = safetensors ? weft_module_save_safetensors(m, o.save) : weft_module_save(m, o.save);
    }
    if (rc < 0)
        return fail(o.save ? "training or saving" : "training");
    if (prof) {
        /* fewer steps than --profile-steps: still recording */
        if (weft_profiler_current() == prof)
            weft_profiler_stop(prof);
        char *table = NULL;
        /* with --distributed every rank profiles its own steps; rank 0
         * alone writes the trace and prints the table */
        if (rank == 0 &&
            (weft_profiler_export_chrome_trace(prof, o.profile) < 0 ||
             weft_profiler_table(&table, prof, "self_cpu_time_total", 10, false) < 0))
            return fail("--profile");
        if (rank == 0) {
            FILE *to = o.json ? stderr : stdout;
            fprintf(to, "weft-train: the trace of %ld step(s) is in %s; the operators that took "
                        "the most time:\n%s",
                    profiled_steps, o.profile, table);
        }
        free(table);
        weft_profiler_destroy(prof);
    }
    if (rank != 0) { /* rank 0 alone reports */
        weft_ddp_destroy(ddp);
        weft_optimizer_destroy(opt);
        weft_module_destroy(m);
        return weft_dist_finalize(world) < 0 ? fail("--distributed: finalize") : 0;
    }
    /* --quantize (issue 17): the int8 model next to the float one, both
     * timed over the whole test set */
    double int8_accuracy = NAN, float_eval_seconds = NAN, int8_eval_seconds = NAN;
    /* CPU time too: on a shared machine the wall times mostly measure
     * waiting for a CPU, which the process's CPU time leaves out */
    double float_eval_cpu_seconds = NAN, int8_eval_cpu_seconds = NAN;
    if (o.quantize) {
        wt_int8_model *q = NULL;
        weft_tensor *cx = NULL, *cy = NULL;
        long ncal = train.n < 1000 ? train.n : 1000;
        if (dev.type != WEFT_DEVICE_TYPE_CPU) {
            fprintf(stderr, "weft-train: --quantize runs on the CPU (got --device %s)\n", devname);
            return 2;
        }
        rc = make_batch(&cx, &cy, &train, NULL, 0, ncal, dev);
        float value[256];
        pixel_values(value);
        if (rc == 0 && (rc = wt_quantize(&q, m, cnn, cx)) == 0)
            rc = wt_int8_pixel_input(q, value);
        /* both models are timed warm: the float one has just trained, the
         * int8 one packs its weights and builds its oneDNN primitives on
         * its first batch (torch's convert prepacks ahead), here one of the
         * calibration images */
        weft_tensor *warm_x = NULL, *warm_logits = NULL, *qtest = NULL;
        if (rc == 0 && (rc = int8_images(&warm_x, q, &train, 0, ncal)) == 0)
            rc = wt_int8_forward(&warm_logits, q, warm_x);
        weft_tensor_release(warm_x);
        weft_tensor_release(warm_logits);
        if (rc == 0)
            rc = int8_images(&qtest, q, &test, 0, test.n);
        /* one pass over the test set is tens of milliseconds, which one
         * context switch moves by a tenth: the best of three passes of
         * each model.  The float model's three come first: a float pass
         * right after an int8 one measured ~10% slower (caches and thread
         * wake-ups), so alternating would flatter the int8 model */
        double float_accuracy = 0;
        /* with --profile: one untimed pass of each model under the
         * profiler first, and the operators that took the most time in
         * each (where the int8 model's time goes on this machine) */
        for (int pass = 0; o.profile && rc == 0 && pass < 2; pass++) {
            weft_profiler *ep = NULL;
            weft_profiler_options po = {sizeof po, true, false};
            char *table = NULL;
            double acc;
            if ((rc = weft_profiler_create(&ep, &po)) == 0 && (rc = weft_profiler_start(ep)) == 0) {
                rc = evaluate(&acc, m, cnn, &test, dev, pass ? q : NULL, qtest);
                int src = weft_profiler_stop(ep);
                rc = rc < 0 ? rc : src;
            }
            if (rc == 0)
                rc = weft_profiler_table(&table, ep, "self_cpu_time_total", 12, true);
            if (rc == 0)
                fprintf(o.json ? stderr : stdout,
                        "weft-train: the operators that took the most time in one pass of the %s "
                        "model over the test set:\n%s",
                        pass ? "int8" : "float", table);
            free(table);
            weft_profiler_destroy(ep);
        }
        for (int pass = 0; rc == 0 && pass < 6; pass++) {
            bool int8 = pass >= 3;
            double t0 = now(), c0 = cpu_now();
            if ((rc = evaluate(int8 ? &int8_accuracy : &float_accuracy, m, cnn, &test, dev,
                               int8 ? q : NULL, qtest)) < 0)
                break;
            double wall = now() - t0, cpu = cpu_now() - c0;
            double *w = int8 ? &int8_eval_seconds : &float_eval_seconds;
            double *c = int8 ? &int8_eval_cpu_seconds : &float_eval_cpu_seconds;
            if (!(wall >= *w)) /* NAN at first */
                *w = wall;
            if (!(cpu >= *c))
                *c = cpu;
        }
        weft_tensor_release(qtest);
        weft_tensor_release(cx);
        weft_tensor_release(cy);
        wt_int8_destroy(q);
        if (rc < 0)
            return fail("--quantize");
        if (progress)
            fprintf(progress,
                    "int8 test accuracy %.2f%% (float %.2f%%); test set in %.3f s (float %.3f s, "
                    "%.2fx)\n",
                    int8_accuracy, float_accuracy, int8_eval_seconds, float_eval_seconds,
                    float_eval_seconds / int8_eval_seconds);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = (double)ru.ru_maxrss / 1024.0;
    if (o.json)
        printf("{\"model\": \"%s\", \"device\": \"%s\", \"optimizer\": \"%s\", \"epochs\": %d, \"batch_size\": %d, \"lr\": %g, \"seed\": %llu, "
               "\"first_loss\": %.6f, \"final_loss\": %.6f, \"test_accuracy\": %.2f, "
               "\"train_seconds\": %.3f, \"train_cpu_seconds\": %.3f, "
               "\"images_per_second\": %.1f, \"train_gflop\": %.2f, \"train_gflops\": %.2f, "
               "\"peak_rss_mb\": %.1f%s",
               o.model, devname, o.optimizer, o.epochs, o.batch_size, o.lr, o.seed, first_loss, last_loss, accuracy,
               train_seconds, train_cpu_seconds,
               (double)images / train_seconds, (double)images * train_flops_per_image(cnn) / 1e9,
               (double)images * train_flops_per_image(cnn) / 1e9 / train_seconds, rss_mb,
               o.quantize ? ", " : "}\n");
    if (o.json && o.quantize)
        printf("\"int8_test_accuracy\": %.2f, \"float_eval_seconds\": %.4f, "
               "\"int8_eval_seconds\": %.4f, \"float_eval_cpu_seconds\": %.4f, "
               "\"int8_eval_cpu_seconds\": %.4f}\n",
               int8_accuracy, float_eval_seconds, int8_eval_seconds, float_eval_cpu_seconds,
               int8_eval_cpu_seconds);
    else if (!o.json) /* the result, even with --quiet */
        printf("test accuracy %.2f%%; trained in %.2f s (%.0f images/s), peak RSS %.1f MiB\n",
               accuracy, train_seconds, (double)images / train_seconds, rss_mb);
    if (o.save && progress)
        fprintf(progress, "parameters saved to %s\n", o.save);
    weft_ddp_destroy(ddp);
    weft_optimizer_destroy(opt);
    weft_module_destroy(m);
    if (world && weft_dist_finalize(world) < 0)
        return fail("--distributed: finalize");
    weft_free(order);
    weft_tensor_release(train.image_file);
    weft_tensor_release(train.label_file);
    weft_tensor_release(test.image_file);
    weft_tensor_release(test.label_file);
    return 0;
}
