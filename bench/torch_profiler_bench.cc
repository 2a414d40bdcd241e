// bench/torch_profiler_bench.cc — the reference for bench/profiler_bench.c:
// libtorch 1.13's 1-element at::add with its profiler off, on, and on with
// record_shapes and profile_memory, measured exactly as weft's side is
// (batches alternating in rotated order, medians of thread CPU time per
// call, per-op cost as the median of per-round differences).  Debian's
// libtorch has no Kineto, so torch.profiler.profile runs the legacy CPU
// profiler: this is the profiler torch users get on this machine.  Every
// profiled batch is checked: its events must hold one aten::add per call.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

namespace prof = torch::autograd::profiler;

static double thread_ns()
{
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double add_batch(const at::Tensor &a, const at::Tensor &b, long calls)
{
    double t0 = thread_ns();
    for (long i = 0; i < calls; i++) {
        at::Tensor r = at::add(a, b);
    }
    return (thread_ns() - t0) / (double)calls;
}

static double profiled_batch(const at::Tensor &a, const at::Tensor &b, long calls, bool full)
{
    torch::profiler::impl::ProfilerConfig cfg(torch::profiler::impl::ProfilerState::CPU, full,
                                              full);
    prof::enableProfilerLegacy(cfg);
    double ns = add_batch(a, b, calls);
    prof::thread_event_lists lists = prof::disableProfilerLegacy();
    long adds = 0;
    for (const auto &list : lists)
        for (const auto &e : list)
            if (e.kindStr() == "push" && std::strcmp(e.name(), "aten::add") == 0)
                adds++;
    if (adds != calls) {
        std::fprintf(stderr, "torch-profiler-bench: %ld aten::add events of %ld\n", adds, calls);
        std::exit(1);
    }
    return ns;
}

int main(int argc, char **argv)
{
    long calls = 20000;
    int rounds = 31;
    for (int i = 1; i < argc; i++) {
        if (std::strcmp(argv[i], "--calls") == 0 && i + 1 < argc)
            calls = std::atol(argv[++i]);
        else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = std::atoi(argv[++i]);
        else {
            std::fprintf(stderr, "usage: %s [--calls N] [--rounds N]\n", argv[0]);
            return 2;
        }
    }
    if (calls < 1 || rounds < 1)
        return 2;
    at::Tensor a = at::full({1}, 1.5), b = at::full({1}, 2.25);
    std::vector<double> v[3], d_on, d_full;
    add_batch(a, b, calls);
    profiled_batch(a, b, calls, true);
    for (int r = 0; r < rounds; r++) {
        double got[3];
        for (int k = 0; k < 3; k++) {
            int m = (r + k) % 3;
            got[m] = m == 0 ? add_batch(a, b, calls) : profiled_batch(a, b, calls, m == 2);
        }
        for (int m = 0; m < 3; m++)
            v[m].push_back(got[m]);
        d_on.push_back(got[1] - got[0]);
        d_full.push_back(got[2] - got[0]);
    }
    if (at::add(a, b).item<float>() != 3.75f) {
        std::fprintf(stderr, "torch-profiler-bench: add gave a wrong result\n");
        return 1;
    }
    std::printf("torch_version %s\ncalls %ld\nrounds %d\n", TORCH_VERSION, calls, rounds);
    std::printf("add_1elem_off_ns %.2f\n", median(v[0]));
    std::printf("add_1elem_on_ns %.2f\n", median(v[1]));
    std::printf("add_1elem_on_full_ns %.2f\n", median(v[2]));
    std::printf("per_op_overhead_ns %.2f\n", median(d_on));
    std::printf("per_op_overhead_full_ns %.2f\n", median(d_full));
    return 0;
}
