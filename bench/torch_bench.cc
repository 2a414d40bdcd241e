// bench/torch_bench.cc — the libtorch column of weft's benchmark: the same
// measurements as bench/bench.c, on the same sizes and counts (bench/bench.h),
// made with ATen the way a libtorch user would.  bench/weft-bench drives it
// batch by batch through --serve; run alone it prints its medians as
// "key value" lines.  --startup-child is the libtorch start-up program.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/version.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "bench.h"

namespace {

void check(bool ok, const char *what)
{
    if (!ok)
        throw std::runtime_error(what);
}

// The inputs of every measurement, made on first use, so that a server asked
// only for some measurements holds only their memory.
class Bench {
public:
    // Runs one batch of `calls` calls of `kind`, timed around the loop alone;
    // returns ns per call.  Throws on an unknown kind or a wrong result.
    double batch(const std::string &kind, long calls)
    {
        if (kind == BENCH_KIND_ADD1)
            return add1(calls);
        if (kind == BENCH_KIND_ADD1_INFERENCE) {
            // Skips autograd and version counting: libtorch's cheapest eager
            // path, reported for information.
            c10::InferenceMode guard;
            return add1(calls);
        }
        if (kind == BENCH_KIND_ADD_OUT)
            return add_out(calls);
        if (kind == BENCH_KIND_MM)
            return mm(calls);
        if (kind == BENCH_KIND_AUTOGRAD)
            return autograd(calls);
        int id = bench_op_find(kind.c_str());
        if (id >= 0)
            return op(id, calls);
        throw std::runtime_error("unknown measurement " + kind);
    }

private:
    at::Tensor a1_, b1_, big_a_, big_b_, big_out_, mm_a_, mm_b_, grad_x_;
    // issue 3's operator rows (bench.h: bench_ops), made on first use
    at::Tensor oa_, ob_, oout_, m2d_, omm_[3][2], conv_[2][4], bn_[4], ln_[3], xent_[2];

    void op_prepare(int id)
    {
        auto f = at::kFloat;
        if (id <= BENCH_OP_GELU && !oa_.defined()) {
            oa_ = at::full({BENCH_BIG_NUMEL}, BENCH_ADD_A, f);
            ob_ = at::full({BENCH_BIG_NUMEL}, BENCH_ADD_B, f);
            oout_ = at::zeros({BENCH_BIG_NUMEL}, f); // touched: no page faults timed
        }
        if ((id == BENCH_OP_SUM || id == BENCH_OP_SOFTMAX) && !m2d_.defined())
            m2d_ = at::full({BENCH_ROWS2D, BENCH_ROWS2D}, BENCH_ADD_A, f);
        if (id >= BENCH_OP_MM256 && id <= BENCH_OP_MM2048 && !omm_[id - BENCH_OP_MM256][0].defined()) {
            static const int64_t sizes[3] = {256, 1024, 2048};
            int64_t n = sizes[id - BENCH_OP_MM256];
            omm_[id - BENCH_OP_MM256][0] = at::full({n, n}, BENCH_MM_A, f);
            omm_[id - BENCH_OP_MM256][1] = at::full({n, n}, BENCH_MM_B, f);
        }
        if (id >= BENCH_OP_CONV_SMALL && id <= BENCH_OP_BATCH_NORM) {
            int k = id >= BENCH_OP_CONV_BIG;
            if (!conv_[k][0].defined()) {
                int64_t N = k ? BENCH_CONV_BIG_N : BENCH_CONV_SMALL_N,
                        C = k ? BENCH_CONV_BIG_C : BENCH_CONV_SMALL_C,
                        HW = k ? BENCH_CONV_BIG_HW : BENCH_CONV_SMALL_HW,
                        OC = k ? BENCH_CONV_BIG_OC : BENCH_CONV_SMALL_OC;
                conv_[k][0] = at::full({N, C, HW, HW}, BENCH_MM_A, f);
                conv_[k][1] = at::full({OC, C, 3, 3}, BENCH_MM_B, f);
                conv_[k][2] = at::zeros({OC}, f);
                conv_[k][3] = at::ones({N, OC, HW, HW}, f);
            }
        }
        if (id == BENCH_OP_BATCH_NORM && !bn_[0].defined()) {
            bn_[0] = at::ones({BENCH_CONV_BIG_C}, f);
            bn_[1] = at::zeros({BENCH_CONV_BIG_C}, f);
            bn_[2] = at::zeros({BENCH_CONV_BIG_C}, f);
            bn_[3] = at::ones({BENCH_CONV_BIG_C}, f);
        }
        if (id == BENCH_OP_LAYER_NORM && !ln_[0].defined()) {
            ln_[0] = at::full({BENCH_LN_ROWS, BENCH_LN_D}, BENCH_ADD_A, f);
            ln_[1] = at::ones({BENCH_LN_D}, f);
            ln_[2] = at::zeros({BENCH_LN_D}, f);
        }
        if (id == BENCH_OP_CROSS_ENTROPY && !xent_[0].defined()) {
            xent_[0] = at::full({BENCH_XENT_N, BENCH_XENT_C}, BENCH_ADD_A, f);
            xent_[1] = at::zeros({BENCH_XENT_N}, at::kLong);
        }
    }

    // conv2d forward; with backward, a backward from ones, returning the
    // input's gradient (the gradients are then cleared)
    at::Tensor op_conv(at::Tensor *c, bool backward)
    {
        if (!backward)
            return at::conv2d(c[0], c[1], c[2], {1, 1}, {1, 1});
        c[0].requires_grad_(true);
        c[1].requires_grad_(true);
        at::Tensor y = at::conv2d(c[0], c[1], c[2], {1, 1}, {1, 1});
        y.backward(c[3]);
        at::Tensor g = c[0].grad();
        c[0].mutable_grad().reset();
        c[1].mutable_grad().reset();
        c[0].requires_grad_(false);
        c[1].requires_grad_(false);
        return g;
    }

    at::Tensor op_call(int id)
    {
        switch (id) {
        case BENCH_OP_ADD_OUT: return at::add_out(oout_, oa_, ob_);
        case BENCH_OP_ADD: return at::add(oa_, ob_);
        case BENCH_OP_MUL_OUT: return at::mul_out(oout_, oa_, ob_);
        case BENCH_OP_MUL: return at::mul(oa_, ob_);
        case BENCH_OP_EXP_OUT: return at::exp_out(oout_, oa_);
        case BENCH_OP_EXP: return at::exp(oa_);
        case BENCH_OP_SIGMOID_OUT: return at::sigmoid_out(oout_, oa_);
        case BENCH_OP_SIGMOID: return at::sigmoid(oa_);
        case BENCH_OP_GELU_OUT: return at::gelu_out(oout_, oa_);
        case BENCH_OP_GELU: return at::gelu(oa_);
        case BENCH_OP_SUM: return at::sum(m2d_, {-1});
        case BENCH_OP_SOFTMAX: return at::softmax(m2d_, -1);
        case BENCH_OP_MM256: case BENCH_OP_MM1024: case BENCH_OP_MM2048:
            return at::mm(omm_[id - BENCH_OP_MM256][0], omm_[id - BENCH_OP_MM256][1]);
        case BENCH_OP_CONV_SMALL: return op_conv(conv_[0], false);
        case BENCH_OP_CONV_SMALL_BWD: return op_conv(conv_[0], true);
        case BENCH_OP_CONV_BIG: return op_conv(conv_[1], false);
        case BENCH_OP_CONV_BIG_BWD: return op_conv(conv_[1], true);
        case BENCH_OP_MAX_POOL: return at::max_pool2d(conv_[1][0], {3, 3}, {2, 2}, {1, 1});
        case BENCH_OP_BATCH_NORM:
            return at::batch_norm(conv_[1][0], bn_[0], bn_[1], bn_[2], bn_[3], true, 0.1, 1e-5, false);
        case BENCH_OP_LAYER_NORM: return at::layer_norm(ln_[0], {BENCH_LN_D}, ln_[1], ln_[2], 1e-5);
        case BENCH_OP_CROSS_ENTROPY: return at::cross_entropy_loss(xent_[0], xent_[1]);
        default: throw std::runtime_error("unknown operator row");
        }
    }

    double op(int id, long calls)
    {
        op_prepare(id);
        at::Tensor r;
        double t0 = bench_now_ns();
        for (long i = 0; i < calls; i++)
            r = op_call(id); // the previous result is freed here, as in weft's loop
        double ns = (bench_now_ns() - t0) / (double)calls;
        at::Tensor f = r.to(at::kDouble).contiguous();
        int64_t at = f.numel() - 1;
        if (id >= BENCH_OP_CONV_SMALL && id <= BENCH_OP_CONV_BIG_BWD)
            at = f.size(3) + 1;
        check(bench_close(f.data_ptr<double>()[at], bench_op_expected(id)),
              "an operator row gave a wrong result");
        return ns;
    }

    // The fixed cost of at::add on one-element tensors that do not require
    // grad: dispatch (through the autograd layer, as for any user tensor),
    // output allocation, the kernel, and freeing the result.
    double add1(long calls)
    {
        if (!a1_.defined()) {
            a1_ = at::full({1}, BENCH_ADD_A, at::kFloat);
            b1_ = at::full({1}, BENCH_ADD_B, at::kFloat);
        }
        double t0 = bench_now_ns();
        for (long i = 0; i < calls; i++) {
            // The result's destructor frees memory: a side effect the
            // compiler must keep, so the call cannot be optimised away.
            at::Tensor c = at::add(a1_, b1_);
        }
        double ns = (bench_now_ns() - t0) / (double)calls;
        check(at::add(a1_, b1_).item<float>() == (float)(BENCH_ADD_A + BENCH_ADD_B),
              "at::add gave a wrong result");
        return ns;
    }

    // at::add_out into a preallocated 16M-element output.
    double add_out(long calls)
    {
        if (!big_a_.defined()) {
            big_a_ = at::full({BENCH_BIG_NUMEL}, BENCH_ADD_A, at::kFloat);
            big_b_ = at::full({BENCH_BIG_NUMEL}, BENCH_ADD_B, at::kFloat);
            big_out_ = at::zeros({BENCH_BIG_NUMEL}, at::kFloat); // touched: no page faults timed
        }
        double t0 = bench_now_ns();
        for (long i = 0; i < calls; i++)
            at::add_out(big_out_, big_a_, big_b_);
        double ns = (bench_now_ns() - t0) / (double)calls;
        const float *o = big_out_.data_ptr<float>();
        check(o[0] == (float)(BENCH_ADD_A + BENCH_ADD_B) && o[BENCH_BIG_NUMEL - 1] == o[0],
              "at::add_out gave a wrong result");
        return ns;
    }

    // at::mm of two 1024 x 1024 float32 matrices, allocating the result each
    // call as weft_mm does.
    double mm(long calls)
    {
        if (!mm_a_.defined()) {
            mm_a_ = at::full({BENCH_MM_N, BENCH_MM_N}, BENCH_MM_A, at::kFloat);
            mm_b_ = at::full({BENCH_MM_N, BENCH_MM_N}, BENCH_MM_B, at::kFloat);
        }
        double t0 = bench_now_ns();
        for (long i = 0; i < calls; i++) {
            at::Tensor c = at::mm(mm_a_, mm_b_);
        }
        double ns = (bench_now_ns() - t0) / (double)calls;
        at::Tensor c = at::mm(mm_a_, mm_b_);
        const float want = (float)(BENCH_MM_N * BENCH_MM_A * BENCH_MM_B);
        check(c.data_ptr<float>()[0] == want && c.data_ptr<float>()[BENCH_MM_N * BENCH_MM_N - 1] == want,
              "at::mm gave a wrong result");
        return ns;
    }

    // One call: y = x, 1000 times y = y * 1.0001 + 0.5 (recorded by autograd
    // as x requires grad), y.backward(), x's gradient read, the graph freed
    // with y and x's gradient reset for the next call.  Returns the gradient.
    static double autograd_call(at::Tensor &x)
    {
        at::Tensor y = x;
        for (int i = 0; i < BENCH_AUTOGRAD_STEPS; i++)
            y = y * BENCH_AUTOGRAD_MUL + BENCH_AUTOGRAD_ADD;
        y.backward();
        double g = x.grad().item<float>();
        x.mutable_grad().reset();
        return g;
    }

    double autograd(long calls)
    {
        if (!grad_x_.defined())
            grad_x_ = at::ones({1}, at::kFloat).requires_grad_(true);
        double g = 0;
        double t0 = bench_now_ns();
        for (long i = 0; i < calls; i++)
            g = autograd_call(grad_x_);
        double ns = (bench_now_ns() - t0) / (double)calls;
        const double want = std::pow(BENCH_AUTOGRAD_MUL, BENCH_AUTOGRAD_STEPS);
        check(std::fabs(g - want) <= BENCH_AUTOGRAD_TOL * want, "backward gave a wrong gradient");
        return ns;
    }
};

// Warm-up batch, then the median of `batches` batches, in ns per call.
double median_ns(Bench &b, const char *kind, long calls, int batches)
{
    double t[64];
    if (batches > 64)
        batches = 64;
    b.batch(kind, calls);
    for (int i = 0; i < batches; i++)
        t[i] = b.batch(kind, calls);
    return bench_median(t, batches);
}

// Alone: every measurement in turn, one "key value" line each, flushed as it
// is made so that a crash later still leaves the earlier numbers.
int run_alone(bool quick)
{
    Bench b;
    bench_plan p = bench_plan_get(quick);
    std::printf("%s %.2f\n", BENCH_KEY_ADD1_NS, median_ns(b, BENCH_KIND_ADD1, p.add1_calls, p.add1_batches));
    std::fflush(stdout);
    std::printf("%s %.2f\n", BENCH_KEY_ADD1_INFERENCE_NS,
                median_ns(b, BENCH_KIND_ADD1_INFERENCE, p.add1_calls, p.add1_batches));
    std::fflush(stdout);
    std::printf("%s %.3f\n", BENCH_KEY_ADD_OUT_GBS,
                BENCH_BIG_BYTES / median_ns(b, BENCH_KIND_ADD_OUT, p.big_calls, p.big_batches));
    std::fflush(stdout);
    std::printf("%s %.3f\n", BENCH_KEY_MM_GFLOPS,
                BENCH_MM_FLOPS / median_ns(b, BENCH_KIND_MM, p.mm_calls, p.mm_batches));
    std::fflush(stdout);
    std::printf("%s %.2f\n", BENCH_KEY_AUTOGRAD_US,
                median_ns(b, BENCH_KIND_AUTOGRAD, p.autograd_calls, p.autograd_batches) / 1e3);
    std::fflush(stdout);
    return 0;
}

// Driven by weft-bench: one batch per request line (protocol in bench.h).
int serve()
{
    Bench b;
    std::printf("%s\n", BENCH_SERVE_READY);
    std::fflush(stdout);
    char line[256], kind[64];
    long calls;
    while (std::fgets(line, sizeof line, stdin)) {
        if (std::strncmp(line, "quit", 4) == 0)
            break;
        if (std::sscanf(line, "%63s %ld", kind, &calls) != 2 || calls < 1) {
            std::printf("error malformed request\n");
        } else {
            try {
                std::printf("%.6f\n", b.batch(kind, calls));
            } catch (const std::exception &e) {
                std::printf("error %s\n", e.what());
            }
        }
        std::fflush(stdout);
    }
    return 0;
}

// What the start-up row times: a libtorch program that completes one add.
// libtorch registers its operators while its libraries load, before main;
// this adds the first dispatch and the exit.
int startup_child()
{
    at::Tensor a = at::full({1}, BENCH_ADD_A, at::kFloat);
    at::Tensor b = at::full({1}, BENCH_ADD_B, at::kFloat);
    float v = at::add(a, b).item<float>();
    std::printf("%s %g\n%s %ld\n", BENCH_KEY_STARTUP_RESULT, (double)v, BENCH_KEY_VMHWM_KB,
                bench_self_vmhwm_kb());
    return v == (float)(BENCH_ADD_A + BENCH_ADD_B) ? 0 : 1;
}

void usage(FILE *f)
{
    std::fprintf(f, "usage: torch-bench [--quick] [--serve] [--threads N] | --startup-child\n"
                    "  libtorch's side of weft's benchmark.  bench/weft-bench runs it (--serve)\n"
                    "  and prints the comparison; alone it prints \"key value\" medians.\n");
}

} // namespace

int main(int argc, char **argv)
{
    bool quick = false, serving = false;
    int threads = 0;
    for (int i = 1; i < argc; i++) {
        if (std::strcmp(argv[i], "--startup-child") == 0) {
            return startup_child();
        } else if (std::strcmp(argv[i], "--quick") == 0) {
            quick = true;
        } else if (std::strcmp(argv[i], "--serve") == 0) {
            serving = true;
        } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = std::atoi(argv[++i]);
            if (threads < 1) {
                usage(stderr);
                return 2;
            }
        } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    // weft-bench passes its own thread count, so both columns use the same
    // number (it also exports OMP_NUM_THREADS and OPENBLAS_NUM_THREADS, which
    // reach libtorch's OpenMP and the OpenBLAS that both libraries call).
    if (threads > 0)
        at::set_num_threads(threads);
    std::printf("%s %d\n%s %s\n", BENCH_KEY_THREADS, at::get_num_threads(), BENCH_KEY_VERSION,
                TORCH_VERSION);
    try {
        return serving ? serve() : run_alone(quick);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "torch-bench: %s\n", e.what());
        return 1;
    }
}
