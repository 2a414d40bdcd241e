// bench/torch_train.cc — the libtorch side of bench/train-compare: trains
// the same MLP (784-256-10) or CNN (two conv3x3-relu-maxpool2 stages of 16
// and 32 channels, then linear) as tools/weft-train on the same
// Fashion-MNIST IDX files (read through zlib), with the same normalisation,
// the same shuffle (an xorshift from the seed), torch::nn's default
// initialisation (kaiming_uniform(a=sqrt(5)) and the fan-based bias, as
// weft's modules) and torch::optim::SGD with momentum.  With --json it ends
// with one JSON object holding the fields weft-train --json prints:
// test_accuracy, train_seconds (training loop only), images_per_second and
// peak_rss_mb.  A libtorch C++ user's program, nothing tuned.
#include <torch/torch.h>
#include <torch/version.h>

#include <sys/resource.h>
#include <time.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Options {
    std::string model = "mlp", data = "/usr/share/datasets/fashion-mnist";
    int epochs = 1, batch_size = 64, threads = 0, log_every = 100;
    long limit = 0;
    double lr = 0.01, momentum = 0.9;
    unsigned long long seed = 0;
    bool json = false;
};

struct Dataset {
    long n = 0;
    int rows = 0, cols = 0;
    std::vector<unsigned char> images, labels;
};

double now()
{
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// CPU time of the whole process (every thread), as weft-train reports it.
double cpu_now()
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void read_exact(gzFile f, void *buf, unsigned len, const std::string &path)
{
    if (gzread(f, buf, len) != (int)len)
        throw std::runtime_error(path + ": truncated or unreadable");
}

// An IDX file: magic 0x0801 (labels) or 0x0803 (images).
std::vector<unsigned char> read_idx(const std::string &path, int dims, long *n, int *rows,
                                    int *cols)
{
    gzFile f = gzopen(path.c_str(), "rb");
    if (!f)
        throw std::runtime_error("cannot open " + path);
    std::vector<unsigned char> data;
    try {
        unsigned char head[16];
        read_exact(f, head, 4, path);
        if (be32(head) != (uint32_t)(0x0800 | dims))
            throw std::runtime_error(path + ": not an IDX file of the expected rank");
        read_exact(f, head + 4, 4u * (unsigned)dims, path);
        *n = be32(head + 4);
        *rows = dims == 3 ? (int)be32(head + 8) : 1;
        *cols = dims == 3 ? (int)be32(head + 12) : 1;
        if (*n <= 0 || *n > 10000000 || *rows > 4096 || *cols > 4096)
            throw std::runtime_error(path + ": implausible sizes");
        data.resize((size_t)*n * (size_t)*rows * (size_t)*cols);
        read_exact(f, data.data(), (unsigned)data.size(), path);
    } catch (...) {
        gzclose(f);
        throw;
    }
    gzclose(f);
    return data;
}

Dataset load_split(const Options &o, const char *prefix, long limit)
{
    Dataset d;
    long nl;
    int r, c;
    d.images = read_idx(o.data + "/" + prefix + "-images-idx3-ubyte.gz", 3, &d.n, &d.rows, &d.cols);
    d.labels = read_idx(o.data + "/" + prefix + "-labels-idx1-ubyte.gz", 1, &nl, &r, &c);
    if (nl != d.n)
        throw std::runtime_error(std::string(prefix) + ": images and labels differ in count");
    if (limit > 0 && limit < d.n)
        d.n = limit;
    return d;
}

// Normalised float32 images [b, 784] and int64 labels, as weft-train makes them.
void make_batch(torch::Tensor &x, torch::Tensor &y, const Dataset &d, const long *order,
                long start, long b)
{
    int64_t pixels = (int64_t)d.rows * d.cols;
    x = torch::empty({b, pixels}, torch::kFloat);
    y = torch::empty({b}, torch::kLong);
    float *px = x.data_ptr<float>();
    int64_t *py = y.data_ptr<int64_t>();
    float value[256]; // the same table as weft-train's
    for (int v = 0; v < 256; v++)
        value[v] = ((float)v / 255.0f - 0.2860f) / 0.3530f;
    for (long i = 0; i < b; i++) {
        long k = order ? order[start + i] : start + i;
        const unsigned char *img = d.images.data() + (size_t)k * (size_t)pixels;
        for (int64_t p = 0; p < pixels; p++)
            px[i * pixels + p] = value[img[p]];
        py[i] = d.labels[k];
    }
}

torch::nn::Sequential make_model(bool cnn, int64_t pixels)
{
    namespace nn = torch::nn;
    if (!cnn)
        return nn::Sequential(nn::Linear(pixels, 256), nn::ReLU(), nn::Linear(256, 10));
    return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1)), nn::ReLU(),
                          nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)),
                          nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Linear(32 * 7 * 7, 10));
}

torch::Tensor forward(torch::nn::Sequential &m, bool cnn, const torch::Tensor &x)
{
    return m->forward(cnn ? x.view({x.size(0), 1, 28, 28}) : x);
}

double evaluate(torch::nn::Sequential &m, bool cnn, const Dataset &test)
{
    torch::NoGradGuard no_grad;
    m->eval();
    long correct = 0;
    for (long start = 0; start < test.n; start += 1000) {
        long b = std::min(1000L, test.n - start);
        torch::Tensor x, y;
        make_batch(x, y, test, nullptr, start, b);
        correct += forward(m, cnn, x).argmax(1).eq(y).sum().item<int64_t>();
    }
    m->train();
    return 100.0 * (double)correct / (double)test.n;
}

void usage(FILE *f)
{
    fprintf(f, "usage: torch-train [--model mlp|cnn] [--epochs N] [--batch-size N] [--lr X]\n"
               "                   [--momentum X] [--seed N] [--threads N] [--data DIR]\n"
               "                   [--limit N] [--log-every N] [--json]\n");
}

Options parse(int argc, char **argv)
{
    Options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--json") {
            o.json = true;
            continue;
        }
        if (a == "--help" || a == "-h") {
            usage(stdout);
            exit(0);
        }
        if (!v) {
            usage(stderr);
            exit(2);
        }
        i++;
        if (a == "--model")
            o.model = v;
        else if (a == "--data")
            o.data = v;
        else if (a == "--epochs")
            o.epochs = atoi(v);
        else if (a == "--batch-size")
            o.batch_size = atoi(v);
        else if (a == "--threads")
            o.threads = atoi(v);
        else if (a == "--log-every")
            o.log_every = atoi(v);
        else if (a == "--limit")
            o.limit = atol(v);
        else if (a == "--lr")
            o.lr = atof(v);
        else if (a == "--momentum")
            o.momentum = atof(v);
        else if (a == "--seed")
            o.seed = strtoull(v, nullptr, 10);
        else {
            usage(stderr);
            exit(2);
        }
    }
    if ((o.model != "mlp" && o.model != "cnn") || o.epochs < 1 || o.batch_size < 1 || o.lr <= 0 ||
        o.log_every < 1) {
        usage(stderr);
        exit(2);
    }
    return o;
}

int run(const Options &o)
{
    if (o.threads > 0)
        torch::set_num_threads(o.threads);
    bool cnn = o.model == "cnn";
    Dataset train = load_split(o, "train", o.limit);
    Dataset test = load_split(o, "t10k", o.limit ? (o.limit + 5) / 6 : 0);
    if (train.rows != 28 || train.cols != 28)
        throw std::runtime_error("expected 28x28 images");
    torch::manual_seed(o.seed);
    torch::nn::Sequential model = make_model(cnn, (int64_t)train.rows * train.cols);
    torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(o.lr).momentum(o.momentum));

    std::vector<long> order((size_t)train.n);
    uint64_t state = o.seed * 0x9E3779B97F4A7C15ull + 1; // weft-train's shuffle
    double train_seconds = 0, train_cpu_seconds = 0, accuracy = 0, first_loss = NAN, last_loss = NAN;
    long images = 0;
    for (int epoch = 1; epoch <= o.epochs; epoch++) {
        for (long i = 0; i < train.n; i++)
            order[(size_t)i] = i;
        for (long i = train.n - 1; i > 0; i--) {
            state ^= state << 13, state ^= state >> 7, state ^= state << 17;
            long j = (long)(state % (uint64_t)(i + 1));
            std::swap(order[(size_t)i], order[(size_t)j]);
        }
        double t0 = now(), window = t0, c0 = cpu_now();
        long window_images = 0, steps = (train.n + o.batch_size - 1) / o.batch_size;
        for (long step = 0; step < steps; step++) {
            long start = step * o.batch_size, b = std::min<long>(o.batch_size, train.n - start);
            torch::Tensor x, y;
            make_batch(x, y, train, order.data(), start, b);
            torch::Tensor loss = torch::nn::functional::cross_entropy(forward(model, cnn, x), y);
            loss.backward();
            opt.step();
            opt.zero_grad(); // set_to_none in 1.13's C++ frontend is false; zeroing is cheap
            last_loss = loss.item<double>();
            if (epoch == 1 && step == 0)
                first_loss = last_loss;
            images += b;
            window_images += b;
            if (!o.json && ((step + 1) % o.log_every == 0 || step + 1 == steps)) {
                double t = now();
                printf("epoch %d  step %5ld/%ld  loss %.4f  %8.0f images/s\n", epoch, step + 1,
                       steps, last_loss, (double)window_images / (t - window));
                fflush(stdout);
                window = t;
                window_images = 0;
            }
        }
        train_seconds += now() - t0;
        train_cpu_seconds += cpu_now() - c0;
        accuracy = evaluate(model, cnn, test);
        if (!o.json)
            printf("epoch %d  test accuracy %.2f%%\n", epoch, accuracy);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = (double)ru.ru_maxrss / 1024.0;
    if (o.json)
        printf("{\"model\": \"%s\", \"framework\": \"libtorch %s\", \"threads\": %d, "
               "\"epochs\": %d, \"batch_size\": %d, \"lr\": %g, \"seed\": %llu, "
               "\"first_loss\": %.6f, \"final_loss\": %.6f, \"test_accuracy\": %.2f, "
               "\"train_seconds\": %.3f, \"train_cpu_seconds\": %.3f, \"images_per_second\": %.1f, \"peak_rss_mb\": %.1f}\n",
               o.model.c_str(), TORCH_VERSION, torch::get_num_threads(), o.epochs, o.batch_size,
               o.lr, o.seed, first_loss, last_loss, accuracy, train_seconds, train_cpu_seconds,
               (double)images / train_seconds, rss_mb);
    else
        printf("trained in %.2f s (%.0f images/s), peak RSS %.1f MiB\n", train_seconds,
               (double)images / train_seconds, rss_mb);
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    try {
        return run(parse(argc, argv));
    } catch (const std::exception &e) {
        fprintf(stderr, "torch-train: %s\n", e.what());
        return 1;
    }
}
