/* nn.h — the neural-network library of libweft, in C: parameter
 * initialisation, optimizers with their state, learning-rate schedules, and
 * saving and loading parameters.
 *
 * Everything here is written with weft's operators, so it runs on whatever
 * device the tensors live on.  The conventions of <weft/weft.h> hold: 0 or a
 * negative WEFT_E* code, a message in weft_last_error, out-pointers NULL on
 * error, input tensors borrowed.
 */
#ifndef WEFT_NN_H
#define WEFT_NN_H

#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------- initialisation */

/* Initialisers write t in place with grad mode off, so they may be used on
 * leaves that already require grad.  They draw from g (NULL: the default
 * generator).  A tensor with no elements is left alone (returns 0).  They
 * are thread-safe for distinct tensors (the generator is).
 *
 * Fans are PyTorch's: t needs at least 2 dimensions; with the receptive
 * field r = the product of sizes[2:], fan_in = size(1) * r and
 * fan_out = size(0) * r.  Errors: WEFT_EINVAL (NULL t, fewer than 2
 * dimensions, an unknown nonlinearity), WEFT_EDTYPE (t not floating), and
 * those of the uniform_/normal_ operators. */

typedef enum weft_fan_mode {
    WEFT_FAN_IN = 0, /* preserve the variance of the forward pass */
    WEFT_FAN_OUT = 1 /* preserve the variance of the backward pass */
} weft_fan_mode;

/* PyTorch's _calculate_fan_in_and_fan_out.  Pure function. */
WEFT_API int weft_init_fans(const weft_tensor *t, int64_t *fan_in, int64_t *fan_out);

/* PyTorch's nn.init.calculate_gain: "linear", "conv1d", "conv2d",
 * "conv3d", "conv_transpose1d/2d/3d", "sigmoid" -> 1; "tanh" -> 5/3;
 * "relu" -> sqrt(2); "leaky_relu" -> sqrt(2 / (1 + param^2)) (param is the
 * negative slope, NaN meaning PyTorch's default 0.01); "selu" -> 3/4.
 * Errors: WEFT_EINVAL for any other name.  Pure function. */
WEFT_API int weft_init_calculate_gain(double *gain, const char *nonlinearity, double param);

/* kaiming_uniform_: U(-b, b) with b = gain * sqrt(3 / fan), fan chosen by
 * mode, gain = calculate_gain(nonlinearity, a) ("leaky_relu" when
 * nonlinearity is NULL, as PyTorch's default).  nn.Linear and nn.Conv2d
 * initialise their weight with a = sqrt(5), "leaky_relu", WEFT_FAN_IN. */
WEFT_API int weft_init_kaiming_uniform_(weft_tensor *t, double a, weft_fan_mode mode,
                                        const char *nonlinearity, weft_generator *g);
/* kaiming_normal_: N(0, std^2) with std = gain / sqrt(fan). */
WEFT_API int weft_init_kaiming_normal_(weft_tensor *t, double a, weft_fan_mode mode,
                                       const char *nonlinearity, weft_generator *g);
/* xavier_uniform_: U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)). */
WEFT_API int weft_init_xavier_uniform_(weft_tensor *t, double gain, weft_generator *g);
/* xavier_normal_: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)). */
WEFT_API int weft_init_xavier_normal_(weft_tensor *t, double gain, weft_generator *g);

/* ------------------------------------------------------------ optimizers */

/* An optimizer over a fixed array of parameter tensors, with its state per
 * parameter (momentum buffers; Adam's exp_avg, exp_avg_sq and step count),
 * created lazily on a parameter's first step on the parameter's device.
 * The update rules are exactly torch.optim.SGD, Adam and AdamW's
 * (single-tensor form, no amsgrad, no maximize), computed with weft's
 * operators under no-grad.
 *
 * The optimizer holds a reference to every parameter until
 * weft_optimizer_destroy.  Parameters must be distinct leaf tensors of a
 * floating dtype.  An optimizer is not thread-safe: one thread at a time
 * may step it, and no thread may run backward into its parameters while it
 * steps.  Distinct optimizers may be used by distinct threads. */
typedef struct weft_optimizer weft_optimizer;

/* torch.optim.SGD: with d = grad + weight_decay * p,
 *   buf = d on the first step, else buf = momentum * buf + (1 - dampening) * d
 *   d = nesterov ? d + momentum * buf : buf          (when momentum != 0)
 *   p = p - lr * d
 * Returns a new optimizer in *out (destroy with weft_optimizer_destroy).
 * Errors: WEFT_EINVAL (NULL out, NULL params with n > 0, n < 0, a NULL,
 * duplicated or non-leaf parameter, lr, momentum, dampening or
 * weight_decay negative or not finite, nesterov without momentum > 0 and
 * dampening == 0), WEFT_EDTYPE (a parameter not floating), WEFT_ENOMEM. */
WEFT_API int weft_optimizer_sgd(weft_optimizer **out, weft_tensor *const *params, int n, double lr,
                                double momentum, double dampening, double weight_decay,
                                bool nesterov);
/* torch.optim.Adam: with step t counted per parameter and
 * g = grad + weight_decay * p,
 *   m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
 *   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * Errors as weft_optimizer_sgd, and WEFT_EINVAL for a beta outside [0, 1)
 * or a negative eps. */
WEFT_API int weft_optimizer_adam(weft_optimizer **out, weft_tensor *const *params, int n, double lr,
                                 double beta1, double beta2, double eps, double weight_decay);
/* torch.optim.AdamW: Adam with decoupled weight decay — p = p * (1 - lr *
 * weight_decay) first, and the gradient is not touched.  PyTorch's default
 * weight_decay is 0.01. */
WEFT_API int weft_optimizer_adamw(weft_optimizer **out, weft_tensor *const *params, int n,
                                  double lr, double beta1, double beta2, double eps,
                                  double weight_decay);

/* One update of every parameter that has a gradient (those without one are
 * skipped and their state and step count left alone).  Gradients are read,
 * not cleared.  Errors: those of the operators (WEFT_ENOMEM, a device
 * error); a step that fails part-way may have updated some parameters
 * already. */
WEFT_API int weft_optimizer_step(weft_optimizer *opt);
/* Clears every parameter's gradient (sets it to NULL, as PyTorch's
 * zero_grad(set_to_none=True)). */
WEFT_API int weft_optimizer_zero_grad(weft_optimizer *opt);
/* The learning rate used by the next step; set_lr is how a schedule is
 * applied.  set_lr errors: WEFT_EINVAL for NULL or a negative or
 * non-finite lr.  get_lr returns NaN for NULL. */
WEFT_API int weft_optimizer_set_lr(weft_optimizer *opt, double lr);
WEFT_API double weft_optimizer_get_lr(const weft_optimizer *opt);
/* Releases the optimizer's state and its references to the parameters.
 * NULL is a no-op. */
WEFT_API void weft_optimizer_destroy(weft_optimizer *opt);

/* ------------------------------------------------ learning-rate schedules */

/* Pure functions of the epoch (PyTorch's closed forms, epoch counted from
 * 0; a negative epoch gives NaN).  Thread-safe.
 * StepLR: base_lr * gamma^floor(epoch / step_size) (step_size < 1 gives
 * NaN).  CosineAnnealingLR: eta_min + (base_lr - eta_min) *
 * (1 + cos(pi * epoch / T_max)) / 2 (T_max < 1 gives NaN); past T_max it
 * follows the same formula, as PyTorch's closed form does. */
WEFT_API double weft_lr_step(double base_lr, int64_t step_size, double gamma, int64_t epoch);
WEFT_API double weft_lr_cosine(double base_lr, double eta_min, int64_t T_max, int64_t epoch);

/* ------------------------------------------------------ saving, loading */

/* The parameter file (all integers little-endian):
 *   "WEFTPARM" (8 bytes), uint32 version (1), uint32 count,
 *   count times: uint32 name length, the name's bytes (no NUL),
 *                uint32 dtype (the weft_dtype number), uint32 ndim,
 *                int64 sizes[ndim], the elements contiguous in row-major
 *                order, each little-endian (complex: real then imaginary),
 *   uint32 CRC-32 (zlib's polynomial) of every byte before it. */

/* Writes tensors[i] under names[i] (distinct, non-empty, at most 4096
 * bytes), copying device tensors to the host.  The file is written beside
 * path and renamed over it, so path is never left half-written.  Errors:
 * WEFT_EINVAL (NULL or duplicated names, NULL tensors, n < 0), WEFT_EIO
 * (the message names the path and the system's reason), WEFT_ENOMEM.
 * Thread-safe for distinct paths. */
WEFT_API int weft_save_parameters(const char *path, weft_tensor *const *tensors,
                                  const char *const *names, int n);
/* Reads a file written by weft_save_parameters into tensors[i], matched by
 * names[i] (the order in the file does not matter), copying to each
 * tensor's device and layout under no-grad.  The whole file is checked
 * first — magic, version, its length, the checksum, that it holds exactly
 * these n names, and each tensor's dtype and shape — and on any error no
 * tensor is modified.  Errors: WEFT_EIO (unreadable, truncated, bad magic
 * or version, checksum mismatch), WEFT_ENOTFOUND (a name missing from the
 * file, or a name in the file not asked for), WEFT_EDTYPE and WEFT_ESHAPE
 * (the message names the tensor and both dtypes or shapes), WEFT_EINVAL,
 * WEFT_ENOMEM.  Not thread-safe with other writers of the same tensors. */
WEFT_API int weft_load_parameters(const char *path, weft_tensor *const *tensors,
                                  const char *const *names, int n);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_NN_H */
