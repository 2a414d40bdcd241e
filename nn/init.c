/* nn/init.c — parameter initialisation as torch.nn.init does it (kaiming
 * and xavier, uniform and normal).  Uses only the public API: the numbers
 * come from the uniform_/normal_ operators, so any device works. */
#include <math.h>
#include <string.h>

#include <weft/nn.h>
#include <weft/plugin.h>

int weft_init_fans(const weft_tensor *t, int64_t *fan_in, int64_t *fan_out)
{
    if (!t || !fan_in || !fan_out)
        return weft_set_error(WEFT_EINVAL, "weft_init_fans: NULL argument");
    int ndim = weft_tensor_ndim(t);
    if (ndim < 2)
        return weft_set_error(WEFT_EINVAL,
                              "fan in and fan out can not be computed for a tensor with fewer "
                              "than 2 dimensions (it has %d)",
                              ndim);
    const int64_t *sizes = weft_tensor_sizes(t);
    int64_t receptive = 1;
    for (int d = 2; d < ndim; d++)
        receptive *= sizes[d];
    *fan_in = sizes[1] * receptive;
    *fan_out = sizes[0] * receptive;
    return 0;
}

int weft_init_calculate_gain(double *gain, const char *nonlinearity, double param)
{
    static const char *const unit[] = {"linear", "conv1d", "conv2d", "conv3d",
                                       "conv_transpose1d", "conv_transpose2d",
                                       "conv_transpose3d", "sigmoid"};
    if (!gain || !nonlinearity)
        return weft_set_error(WEFT_EINVAL, "weft_init_calculate_gain: NULL argument");
    for (size_t i = 0; i < sizeof unit / sizeof unit[0]; i++)
        if (strcmp(nonlinearity, unit[i]) == 0)
            return *gain = 1.0, 0;
    if (strcmp(nonlinearity, "tanh") == 0)
        *gain = 5.0 / 3.0;
    else if (strcmp(nonlinearity, "relu") == 0)
        *gain = sqrt(2.0);
    else if (strcmp(nonlinearity, "leaky_relu") == 0) {
        double slope = isnan(param) ? 0.01 : param;
        *gain = sqrt(2.0 / (1.0 + slope * slope));
    } else if (strcmp(nonlinearity, "selu") == 0)
        *gain = 3.0 / 4.0;
    else
        return weft_set_error(WEFT_EINVAL, "unsupported nonlinearity '%s'", nonlinearity);
    return 0;
}

/* Fills t from U(-bound, bound) or N(0, bound^2) with grad mode off. */
static int fill_random(weft_tensor *t, bool normal, double bound, weft_generator *g)
{
    bool mode = weft_set_grad_enabled(false);
    int rc = normal ? weft_normal_ex_(t, 0.0, bound, g) : weft_uniform_ex_(t, -bound, bound, g);
    weft_set_grad_enabled(mode);
    return rc;
}

/* The checks every initialiser shares; *empty is set for a tensor with no
 * elements, which initialisers leave alone as PyTorch does. */
static int check_target(weft_tensor *t, int64_t *fan_in, int64_t *fan_out, bool *empty)
{
    if (!t)
        return weft_set_error(WEFT_EINVAL, "initialiser: NULL tensor");
    if (!weft_dtype_is_floating(weft_tensor_dtype(t)))
        return weft_set_error(WEFT_EDTYPE, "initialiser: tensor of dtype %s is not floating",
                              weft_dtype_name(weft_tensor_dtype(t)));
    int rc = weft_init_fans(t, fan_in, fan_out);
    *empty = rc == 0 && weft_tensor_numel(t) == 0;
    return rc;
}

static int kaiming(weft_tensor *t, double a, weft_fan_mode mode, const char *nonlinearity,
                   weft_generator *g, bool normal)
{
    int64_t fan_in, fan_out;
    bool empty;
    double gain;
    int rc = check_target(t, &fan_in, &fan_out, &empty);
    if (rc < 0 || empty)
        return rc;
    if (mode != WEFT_FAN_IN && mode != WEFT_FAN_OUT)
        return weft_set_error(WEFT_EINVAL, "kaiming init: mode %d is neither fan_in nor fan_out",
                              (int)mode);
    rc = weft_init_calculate_gain(&gain, nonlinearity ? nonlinearity : "leaky_relu", a);
    if (rc < 0)
        return rc;
    double std = gain / sqrt((double)(mode == WEFT_FAN_IN ? fan_in : fan_out));
    return fill_random(t, normal, normal ? std : sqrt(3.0) * std, g);
}

static int xavier(weft_tensor *t, double gain, weft_generator *g, bool normal)
{
    int64_t fan_in, fan_out;
    bool empty;
    int rc = check_target(t, &fan_in, &fan_out, &empty);
    if (rc < 0 || empty)
        return rc;
    double std = gain * sqrt(2.0 / (double)(fan_in + fan_out));
    return fill_random(t, normal, normal ? std : sqrt(3.0) * std, g);
}

int weft_init_kaiming_uniform_(weft_tensor *t, double a, weft_fan_mode mode,
                               const char *nonlinearity, weft_generator *g)
{
    return kaiming(t, a, mode, nonlinearity, g, false);
}

int weft_init_kaiming_normal_(weft_tensor *t, double a, weft_fan_mode mode,
                              const char *nonlinearity, weft_generator *g)
{
    return kaiming(t, a, mode, nonlinearity, g, true);
}

int weft_init_xavier_uniform_(weft_tensor *t, double gain, weft_generator *g)
{
    return xavier(t, gain, g, false);
}

int weft_init_xavier_normal_(weft_tensor *t, double gain, weft_generator *g)
{
    return xavier(t, gain, g, true);
}
