/* bench/conv-bench.c — weft's conv2d, its input gradient and its weight
 * gradient on the training CNN's two layers (weft-train --model cnn:
 * 1 -> 16 channels on 28x28, 16 -> 32 on 14x14, 3x3, padding 1), for a
 * batch of 64 and the epoch's last batch of 32, with the library
 * WEFT_CPU_CONV picks (bench/conv-compare runs this once per library and
 * bench/conv-torch.py beside it).  Prints one line per case:
 *   <layer> <pass> <batch> <best cpu us per call> <best wall us per call>
 * CPU time is the process's (all threads); the best of ROUNDS rounds.
 *
 *   bench/conv-bench THREADS ROUNDS   (run through libtool --mode=execute
 *                                      with WEFT_PLUGIN_PATH set) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <weft/weft.h>

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "conv-bench: %s: %s\n", what, weft_last_error());
    exit(1);
}

static weft_tensor *filled(const int64_t *sizes)
{
    weft_tensor *t = NULL;
    if (weft_empty(&t, sizes, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU) < 0)
        die("weft_empty");
    float *p = weft_tensor_data_ptr(t);
    for (int64_t i = 0; i < weft_tensor_numel(t); i++)
        p[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    return t;
}

enum { FORWARD, BACKWARD_INPUT, BACKWARD_WEIGHT };
static const char *pass_names[] = {"fwd", "bwd_input", "bwd_weight"};

static void one_call(int pass, const weft_tensor *x, const weft_tensor *w, const weft_tensor *bias,
                     const weft_tensor *go)
{
    static const int64_t one[2] = {1, 1}, pad[2] = {1, 1};
    weft_tensor *out = NULL;
    int rc;
    if (pass == FORWARD)
        rc = weft_conv2d(&out, x, w, bias, one, 2, pad, 2, one, 2, 1);
    else if (pass == BACKWARD_INPUT)
        rc = weft_convolution_backward_input(&out, go, w, weft_tensor_sizes(x), 4, one, 2, pad, 2,
                                             one, 2, 1);
    else
        rc = weft_convolution_backward_weight(&out, go, x, weft_tensor_sizes(w), 4, one, 2, pad,
                                              2, one, 2, 1);
    if (rc < 0)
        die(pass_names[pass]);
    weft_tensor_release(out);
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1, rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (weft_load_default_plugins() <= 0 || weft_set_num_threads(threads) < 0)
        die("start");
    static const struct { const char *name; int64_t c, oc, hw; } layers[] = {
        {"conv1", 1, 16, 28}, {"conv2", 16, 32, 14}};
    static const int64_t batches[] = {64, 32};
    for (int l = 0; l < 2; l++)
        for (int bi = 0; bi < 2; bi++) {
            int64_t n = batches[bi], hw = layers[l].hw;
            int64_t xs[4] = {n, layers[l].c, hw, hw}, ws[4] = {layers[l].oc, layers[l].c, 3, 3};
            int64_t gs[4] = {n, layers[l].oc, hw, hw}, bs[4] = {layers[l].oc, 1, 1, 1};
            weft_tensor *x = filled(xs), *w = filled(ws), *go = filled(gs), *b4 = filled(bs);
            weft_tensor *bias = NULL;
            int64_t oc = layers[l].oc;
            if (weft_reshape(&bias, b4, &oc, 1) < 0)
                die("reshape");
            /* about 20 ms of work per round */
            double flop = 2.0 * (double)(n * layers[l].oc * hw * hw) * (double)(layers[l].c * 9);
            int reps = (int)(20e-3 * 20e9 / flop) + 1;
            for (int pass = 0; pass < 3; pass++) {
                double best_cpu = 1e9, best_wall = 1e9;
                one_call(pass, x, w, bias, go); /* primitives made, caches warm */
                for (int r = 0; r < rounds; r++) {
                    double c0 = seconds(CLOCK_PROCESS_CPUTIME_ID), w0 = seconds(CLOCK_MONOTONIC);
                    for (int i = 0; i < reps; i++)
                        one_call(pass, x, w, bias, go);
                    double c = (seconds(CLOCK_PROCESS_CPUTIME_ID) - c0) / reps;
                    double wall = (seconds(CLOCK_MONOTONIC) - w0) / reps;
                    best_cpu = c < best_cpu ? c : best_cpu;
                    best_wall = wall < best_wall ? wall : best_wall;
                }
                printf("%s %s %lld %.1f %.1f\n", layers[l].name, pass_names[pass], (long long)n,
                       best_cpu * 1e6, best_wall * 1e6);
                fflush(stdout);
            }
            weft_tensor *all[] = {x, w, go, b4, bias};
            for (int i = 0; i < 5; i++)
                weft_tensor_release(all[i]);
        }
    return 0;
}
