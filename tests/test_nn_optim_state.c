/* tests/test_nn_optim_state.c — optimizer parameter groups (each with its
 * own hyper-parameters, checked against hand-computed updates) and saved
 * optimizer state: train, save the model and the optimizer, load both into
 * fresh objects, continue, and get bit for bit what uninterrupted training
 * gives (SGD with momentum, Adam, AdamW, with two groups and a parameter
 * that never gets a gradient); and files that must be refused without
 * changing the optimizer. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <weft/nn.h>

#include "tests/tap.h"
#include "tests/keep.h"

/* a float64 vector leaf that requires grad (kept) */
static weft_tensor *param(const double *values, int n)
{
    int64_t size = n;
    weft_tensor *t = NULL;
    if (weft_empty(&t, &size, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    memcpy(weft_tensor_data_ptr(t), values, (size_t)n * sizeof(double));
    weft_tensor_set_requires_grad(t, true);
    return keep(t);
}

static void set_grad(weft_tensor *p, const double *values, int n)
{
    int64_t size = n;
    weft_tensor *g = NULL;
    weft_empty(&g, &size, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    memcpy(weft_tensor_data_ptr(g), values, (size_t)n * sizeof(double));
    weft_tensor_set_grad(p, g);
    weft_tensor_release(g);
}

/* ------------------------------------------------------------- groups */

static void test_groups(void)
{
    double a0[2] = {1, 2}, b0[2] = {3, 4}, g[2] = {0.5, -1};
    weft_tensor *a = param(a0, 2), *b = param(b0, 2);
    weft_optimizer *opt = NULL;
    is_int(weft_optimizer_sgd(&opt, &a, 1, 0.1, 0, 0, 0, false), 0, "SGD over a");
    is_int(weft_optimizer_num_groups(opt), 1, "one group");
    weft_optim_group h = {.lr = 0.01, .weight_decay = 0.5};
    is_int(weft_optimizer_add_param_group(opt, &b, 1, &h), 0, "a second group for b");
    is_int(weft_optimizer_num_groups(opt), 2, "two groups");
    set_grad(a, g, 2);
    set_grad(b, g, 2);
    weft_optimizer_step(opt);
    const double *av = values_of(a), *bv = values_of(b);
    /* a: lr 0.1; b: lr 0.01 with d = g + 0.5 b */
    ok(av && fabs(av[0] - (1 - 0.1 * 0.5)) < 1e-15 && fabs(av[1] - (2 + 0.1)) < 1e-15,
       "group 0 steps with its lr");
    ok(bv && fabs(bv[0] - (3 - 0.01 * (0.5 + 1.5))) < 1e-15 &&
           fabs(bv[1] - (4 - 0.01 * (-1 + 2))) < 1e-15,
       "group 1 steps with its own lr and weight decay");
    weft_optim_group got;
    is_int(weft_optimizer_get_group(opt, 1, &got), 0, "get group 1");
    ok(got.lr == 0.01 && got.weight_decay == 0.5, "... its values");
    got.lr = 0.2;
    is_int(weft_optimizer_set_group(opt, 1, &got), 0, "set group 1's lr");
    weft_optimizer_get_group(opt, 1, &got);
    is_double(got.lr, 0.2, 0, "... taken");
    weft_optimizer_set_lr(opt, 0.05);
    weft_optimizer_get_group(opt, 1, &got);
    ok(got.lr == 0.05 && weft_optimizer_get_lr(opt) == 0.05, "set_lr sets every group");

    /* errors leave the optimizer as it was */
    is_int(weft_optimizer_add_param_group(opt, &a, 1, NULL), WEFT_EINVAL,
           "a parameter already in a group is refused");
    like(weft_last_error(), "already in parameter group 0", "... naming its group");
    weft_tensor *c = param(a0, 2);
    weft_optim_group bad = {.lr = -1};
    is_int(weft_optimizer_add_param_group(opt, &c, 1, &bad), WEFT_EINVAL, "a negative lr is refused");
    bad = (weft_optim_group){.lr = 0.1, .momentum = 0, .nesterov = true};
    is_int(weft_optimizer_set_group(opt, 0, &bad), WEFT_EINVAL,
           "nesterov without momentum is refused by set_group");
    is_int(weft_optimizer_get_group(opt, 2, &got), WEFT_EINVAL, "group 2 does not exist");
    is_int(weft_optimizer_num_groups(opt), 2, "still two groups");
    is_int(weft_optimizer_add_param_group(opt, &c, 1, NULL), 0, "NULL: the constructor's values");
    weft_optimizer_get_group(opt, 2, &got);
    is_double(got.lr, 0.1, 0, "... lr 0.1 as given to the constructor");
    weft_optimizer_destroy(opt);

    /* Adam groups: betas per group */
    double p0[1] = {1}, gr[1] = {2};
    weft_tensor *x = param(p0, 1), *y = param(p0, 1);
    is_int(weft_optimizer_adam(&opt, &x, 1, 0.1, 0.9, 0.999, 1e-8, 0), 0, "Adam");
    h = (weft_optim_group){.lr = 0.01, .beta1 = 0.5, .beta2 = 0.9, .eps = 1e-8};
    is_int(weft_optimizer_add_param_group(opt, &y, 1, &h), 0, "a group with other betas and lr");
    set_grad(x, gr, 1);
    set_grad(y, gr, 1);
    weft_optimizer_step(opt);
    /* the first Adam step moves by lr * g / (|g| + eps') = lr (nearly) */
    is_double(values_of(x)[0], 1 - 0.1, 1e-7, "group 0 moves by its lr");
    is_double(values_of(y)[0], 1 - 0.01, 1e-7, "group 1 moves by its lr");
    h.beta1 = 1.0;
    is_int(weft_optimizer_set_group(opt, 1, &h), WEFT_EINVAL, "beta1 = 1 is refused");
    weft_optimizer_destroy(opt);
}

/* -------------------------------------------------------- round trips */

typedef enum { USE_SGD, USE_ADAM, USE_ADAMW } kind;

static weft_module *make_model(uint64_t seed)
{
    weft_generator *g = NULL;
    weft_generator_create(&g, seed);
    weft_module *seq = NULL, *c = NULL;
    weft_module_sequential(&seq);
    weft_module_linear(&c, 4, 3, true, g);
    weft_module_sequential_append(seq, c);
    weft_module_activation(&c, WEFT_ACTIVATION_TANH);
    weft_module_sequential_append(seq, c);
    weft_module_linear(&c, 3, 2, true, g);
    weft_module_sequential_append(seq, c);
    weft_generator_destroy(g);
    return seq;
}

/* group 0: the first layer; group 1: the second layer and a tensor that
 * never gets a gradient (so it never has state) */
static weft_optimizer *make_optimizer(kind k, weft_module *m, weft_tensor *idle,
                                      const char **names_out)
{
    weft_tensor *p[5];
    const char *names[4];
    weft_module_parameters(m, p, names, 4);
    weft_optimizer *opt = NULL;
    if (k == USE_SGD)
        weft_optimizer_sgd(&opt, p, 2, 0.1, 0.9, 0, 1e-3, false);
    else if (k == USE_ADAM)
        weft_optimizer_adam(&opt, p, 2, 0.05, 0.9, 0.999, 1e-8, 1e-3);
    else
        weft_optimizer_adamw(&opt, p, 2, 0.05, 0.9, 0.999, 1e-8, 0.01);
    weft_optim_group h;
    weft_optimizer_get_group(opt, 0, &h);
    h.lr /= 2;
    h.weight_decay = 0;
    if (k == USE_SGD)
        h.momentum = 0.5, h.nesterov = true;
    else
        h.beta1 = 0.8;
    p[4] = idle;
    weft_optimizer_add_param_group(opt, p + 2, 3, &h);
    for (int i = 0; i < 4; i++)
        names_out[i] = names[i];
    names_out[4] = "idle";
    return opt;
}

/* one training step on fixed data; the data depend on the step number */
static int train_step(weft_module *m, weft_optimizer *opt, int step)
{
    double xv[8];
    for (int i = 0; i < 8; i++)
        xv[i] = sin(1.0 + i + 3.0 * step);
    int64_t xs[2] = {2, 4}, labels[2] = {step % 2, (step + 1) % 2};
    weft_tensor *x = NULL, *x32 = NULL, *y = NULL, *logits = NULL, *loss = NULL;
    weft_empty(&x, xs, 2, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    memcpy(weft_tensor_data_ptr(x), xv, sizeof xv);
    weft_to_dtype(&x32, x, WEFT_FLOAT32);
    weft_empty(&y, (int64_t[]){2}, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    memcpy(weft_tensor_data_ptr(y), labels, sizeof labels);
    int rc = weft_module_forward(m, x32, &logits);
    if (rc == 0)
        rc = weft_cross_entropy(&loss, logits, y, NULL, "mean", -100, 0.0);
    if (rc == 0)
        rc = weft_backward(&loss, 1, NULL, false, false);
    if (rc == 0)
        rc = weft_optimizer_step(opt);
    if (rc == 0)
        rc = weft_optimizer_zero_grad(opt);
    weft_tensor *t[] = {x, x32, y, logits, loss};
    for (int i = 0; i < 5; i++)
        weft_tensor_release(t[i]);
    return rc;
}

static bool same_parameters(weft_module *a, weft_module *b)
{
    weft_tensor *pa[4], *pb[4];
    const char *na[4], *nb[4];
    if (weft_module_parameters(a, pa, na, 4) != 4 || weft_module_parameters(b, pb, nb, 4) != 4)
        return false;
    for (int i = 0; i < 4; i++) {
        int64_t n = weft_tensor_numel(pa[i]);
        const double *va = values_of(pa[i]), *vb = values_of(pb[i]);
        if (!va || !vb || n != weft_tensor_numel(pb[i]) || memcmp(va, vb, (size_t)n * 8) != 0)
            return false;
    }
    return true;
}

static void round_trip(kind k, const char *what)
{
    char mpath[] = "/tmp/weft-optstate-m-XXXXXX", opath[] = "/tmp/weft-optstate-o-XXXXXX";
    close(mkstemp(mpath));
    close(mkstemp(opath));
    double z[2] = {0.25, -0.5};
    weft_tensor *idle = param(z, 2), *idle2 = param(z, 2);
    const char *names[5], *names2[5];

    /* uninterrupted: 3 steps, save, 3 more */
    weft_module *m = make_model(1);
    weft_optimizer *opt = make_optimizer(k, m, idle, names);
    int rc = 0;
    for (int s = 0; s < 3 && rc == 0; s++)
        rc = train_step(m, opt, s);
    is_int(rc, 0, "%s: three steps", what);
    is_int(weft_module_save(m, mpath), 0, "%s: save the model", what);
    is_int(weft_optimizer_save(opt, opath, names), 0, "%s: save the optimizer", what);
    for (int s = 3; s < 6 && rc == 0; s++)
        rc = train_step(m, opt, s);

    /* resumed: fresh model and optimizer, load, the same 3 steps */
    weft_module *m2 = make_model(2);
    weft_optimizer *opt2 = make_optimizer(k, m2, idle2, names2);
    ok(!same_parameters(m, m2), "%s: a fresh model differs", what);
    is_int(weft_module_load(m2, mpath), 0, "%s: load the model", what);
    rc = weft_optimizer_load(opt2, opath, names2);
    if (!ok(rc == 0, "%s: load the optimizer", what))
        diag("%s", weft_last_error());
    weft_optim_group h0, h1;
    weft_optimizer_get_group(opt2, 1, &h1);
    weft_optimizer_get_group(opt, 1, &h0);
    ok(memcmp(&h0, &h1, sizeof h0) == 0, "%s: group 1's hyper-parameters came back", what);
    for (int s = 3; s < 6 && rc == 0; s++)
        rc = train_step(m2, opt2, s);
    ok(rc == 0 && same_parameters(m, m2),
       "%s: resumed training gives exactly the uninterrupted numbers", what);
    const double *iv = values_of(idle2);
    ok(iv && iv[0] == 0.25 && iv[1] == -0.5, "%s: the idle parameter was never touched", what);

    /* a second load after more steps puts the saved state back */
    is_int(weft_optimizer_load(opt2, opath, names2), 0, "%s: loading again", what);
    weft_module_load(m2, mpath);
    for (int s = 3; s < 6 && rc == 0; s++)
        rc = train_step(m2, opt2, s);
    ok(rc == 0 && same_parameters(m, m2), "%s: ... replaces the state it had", what);

    /* wrong names: the message names the entry the optimizer does not know */
    rc = weft_optimizer_load(opt2, opath, NULL);
    is_int(rc, WEFT_ENOTFOUND, "%s: loading by index a file saved by name fails", what);
    like(weft_last_error(), "state.0.weight.", "... naming the entry");

    weft_optimizer_destroy(opt);
    weft_optimizer_destroy(opt2);
    weft_module_destroy(m);
    weft_module_destroy(m2);
    unlink(mpath);
    unlink(opath);
}

/* ------------------------------------------------------------ refusals */

static void test_refusals(void)
{
    char spath[] = "/tmp/weft-optstate-s-XXXXXX", apath[] = "/tmp/weft-optstate-a-XXXXXX";
    close(mkstemp(spath));
    close(mkstemp(apath));
    double v[3] = {1, 2, 3}, g[3] = {0.1, 0.2, 0.3};
    weft_tensor *p = param(v, 3), *q = param(v, 3), *r = param(v, 2);
    weft_optimizer *sgd = NULL, *adam = NULL;
    weft_optimizer_sgd(&sgd, &p, 1, 0.1, 0.9, 0, 0, false);
    weft_optimizer_adam(&adam, &q, 1, 0.1, 0.9, 0.999, 1e-8, 0);
    set_grad(p, g, 3);
    set_grad(q, g, 3);
    weft_optimizer_step(sgd);
    weft_optimizer_step(adam);
    is_int(weft_optimizer_save(sgd, spath, NULL), 0, "save SGD's state by index");
    is_int(weft_optimizer_save(adam, apath, NULL), 0, "save Adam's state by index");

    /* the momentum buffer is the documented entry */
    weft_tensor *buf = NULL, *lr = NULL, *idx = NULL, *mom = NULL, *damp = NULL, *nest = NULL,
                *wd = NULL;
    weft_zeros(&buf, (int64_t[]){3}, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    weft_zeros(&idx, (int64_t[]){1}, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    weft_tensor **sc[] = {&lr, &mom, &damp, &nest, &wd};
    for (int i = 0; i < 5; i++)
        weft_zeros(sc[i], NULL, 0, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    weft_tensor *all[] = {buf, idx, lr, mom, damp, nest, wd};
    const char *names[] = {"state.0.momentum_buffer", "param_groups.0.params",
                           "param_groups.0.lr",       "param_groups.0.momentum",
                           "param_groups.0.dampening", "param_groups.0.nesterov",
                           "param_groups.0.weight_decay"};
    is_int(weft_load_parameters(spath, all, names, 7), 0,
           "the SGD file holds exactly the documented entries");
    const double *bv = values_of(buf);
    ok(bv && bv[0] == 0.1 && bv[2] == 0.3, "state.0.momentum_buffer is the first gradient");
    double lrv = 0, momv = 0;
    weft_tensor_item(lr, &lrv);
    weft_tensor_item(mom, &momv);
    ok(lrv == 0.1 && momv == 0.9, "param_groups.0.lr and .momentum hold the values");
    for (int i = 0; i < 7; i++)
        weft_tensor_release(all[i]);

    /* refusals, and the optimizer is unchanged after each */
    weft_optimizer *fresh = NULL;
    weft_tensor *p2 = param(v, 3), *r2 = r;
    weft_optimizer_sgd(&fresh, &p2, 1, 0.3, 0.5, 0, 0, false);
    is_int(weft_optimizer_load(fresh, apath, NULL), WEFT_ENOTFOUND, "Adam's state into SGD");
    like(weft_last_error(), "param_groups.0.momentum", "... names what is missing");
    is_double(weft_optimizer_get_lr(fresh), 0.3, 0, "... and the optimizer is unchanged");

    weft_optimizer *shaped = NULL;
    weft_optimizer_sgd(&shaped, &r2, 1, 0.1, 0.9, 0, 0, false);
    is_int(weft_optimizer_load(shaped, spath, NULL), WEFT_ESHAPE,
           "a momentum buffer of another shape");
    like(weft_last_error(), "'state.0.momentum_buffer' has shape [3] but the parameter needs [2]",
         "... names the entry and both shapes");

    weft_optimizer *two = NULL;
    weft_tensor *pp[2] = {param(v, 3), param(v, 3)};
    weft_optimizer_sgd(&two, pp, 2, 0.1, 0.9, 0, 0, false);
    is_int(weft_optimizer_load(two, spath, NULL), WEFT_EINVAL, "another grouping");
    like(weft_last_error(), "parameter group 0 holds 1 parameters in the file but 2",
         "... says how they differ");

    /* a damaged file */
    FILE *f = fopen(spath, "r+b");
    fseek(f, 40, SEEK_SET);
    fputc(0x5a, f);
    fclose(f);
    is_int(weft_optimizer_load(fresh, spath, NULL), WEFT_EIO, "a damaged file");
    like(weft_last_error(), "checksum", "... fails its checksum");
    ok(truncate(apath, 30) == 0, "truncate the Adam file to 30 bytes");
    is_int(weft_optimizer_load(adam, apath, NULL), WEFT_EIO, "a truncated file");
    is_int(weft_optimizer_load(NULL, apath, NULL), WEFT_EINVAL, "NULL optimizer");
    is_int(weft_optimizer_save(sgd, NULL, NULL), WEFT_EINVAL, "NULL path");

    /* after all that, fresh steps exactly as a never-loaded SGD(0.3, 0.5) */
    set_grad(p2, g, 3);
    weft_optimizer_step(fresh);
    const double *pv = values_of(p2);
    ok(pv && pv[0] == 1 - 0.3 * 0.1 && pv[2] == 3 - 0.3 * 0.3, "the failed loads changed nothing");

    weft_optimizer_destroy(sgd);
    weft_optimizer_destroy(adam);
    weft_optimizer_destroy(fresh);
    weft_optimizer_destroy(shaped);
    weft_optimizer_destroy(two);
    unlink(spath);
    unlink(apath);
}

int main(void)
{
    if (weft_load_default_plugins() < 0)
        skip_all("no plugins: %s", weft_last_error());
    test_groups();
    drop_all();
    round_trip(USE_SGD, "SGD (momentum, nesterov in group 1)");
    drop_all();
    round_trip(USE_ADAM, "Adam");
    drop_all();
    round_trip(USE_ADAMW, "AdamW");
    drop_all();
    test_refusals();
    drop_all();
    return done_testing();
}
