/* nn.h — the neural-network library of libweft, in C: parameter
 * initialisation, modules (Linear, Conv2d, BatchNorm2d, ..., Sequential),
 * optimizers with their state, learning-rate schedules, and saving and
 * loading parameters.
 *
 * Everything here is written with weft's operators, so it runs on whatever
 * device the tensors live on.  The conventions of <weft/weft.h> hold: 0 or a
 * negative WEFT_E* code, a message in weft_last_error, out-pointers NULL on
 * error, input tensors borrowed.
 */
#ifndef WEFT_NN_H
#define WEFT_NN_H

#include <stdbool.h>
#include <stddef.h>

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

/* --------------------------------------------------------------- modules */

/* Modules in the spirit of torch.nn: an opaque weft_module owns its
 * parameters (leaf tensors that require grad) and buffers (BatchNorm2d's
 * running statistics), is in training mode when created, and computes its
 * forward pass with weft's operators, so autograd records it and it runs on
 * whatever device its tensors are on.  The constructors take PyTorch's
 * arguments (their defaults are given beside each one) and initialise as
 * PyTorch does, drawing from g (NULL: the default generator); tensors are
 * created float32 on the CPU (see weft_module_to_device/_to_dtype).
 *
 * Errors of the constructors: WEFT_EINVAL (NULL out, a size below 1, an
 * argument out of range — the message names the module and the argument),
 * WEFT_ENOMEM.  *out is NULL on error.
 *
 * Thread safety: a module is not thread-safe; distinct modules may be used
 * by distinct threads.  A module is destroyed by weft_module_destroy,
 * except a module appended to a Sequential, which the Sequential owns. */
typedef struct weft_module weft_module;

/* nn.Linear(in_features, out_features, bias=True): y = x W^T + b over the
 * last dimension.  weight [out, in] ~ kaiming_uniform(a = sqrt(5)), i.e.
 * U(-1/sqrt(in), 1/sqrt(in)); bias [out] ~ U(-1/sqrt(in), 1/sqrt(in)). */
WEFT_API int weft_module_linear(weft_module **out, int64_t in_features, int64_t out_features,
                                bool bias, weft_generator *g);
/* nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0,
 * dilation=1, groups=1, bias=True).  kernel_size, stride, padding and
 * dilation are (height, width) pairs; NULL stride, padding or dilation
 * means PyTorch's default.  weight [out, in/groups, kh, kw] and bias [out]
 * are initialised as nn.Linear's with fan_in = in/groups * kh * kw.  Both
 * channel counts must be divisible by groups. */
WEFT_API int weft_module_conv2d(weft_module **out, int64_t in_channels, int64_t out_channels,
                                const int64_t kernel_size[2], const int64_t stride[2],
                                const int64_t padding[2], const int64_t dilation[2],
                                int64_t groups, bool bias, weft_generator *g);
/* nn.BatchNorm2d(num_features, eps=1e-5, momentum=0.1, affine=True,
 * track_running_stats=True).  Parameters weight (ones) and bias (zeros)
 * when affine; buffers running_mean (zeros), running_var (ones) and
 * num_batches_tracked (int64, 0-d) when tracking.  In training mode the
 * batch's statistics normalise the input and the running statistics
 * become (1 - momentum) * running + momentum * batch (the variance
 * unbiased), as PyTorch does; in eval mode the running statistics are
 * used.  momentum NaN means PyTorch's momentum=None: a cumulative average
 * (factor 1 / num_batches_tracked). */
WEFT_API int weft_module_batch_norm2d(weft_module **out, int64_t num_features, double eps,
                                      double momentum, bool affine, bool track_running_stats);
/* nn.LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True): the
 * last ndim dimensions (1..8) are normalised; weight (ones) and bias
 * (zeros) of that shape. */
WEFT_API int weft_module_layer_norm(weft_module **out, const int64_t *normalized_shape, int ndim,
                                    double eps, bool elementwise_affine);
/* nn.Dropout(p=0.5): in training mode zeroes each element with
 * probability p, drawing from g (borrowed: it must outlive the module;
 * NULL: the default generator), and scales the rest by 1 / (1 - p); the
 * identity in eval mode.  p must be in [0, 1]. */
WEFT_API int weft_module_dropout(weft_module **out, double p, weft_generator *g);
/* nn.Embedding(num_embeddings, embedding_dim, padding_idx=None): weight
 * [num, dim] ~ N(0, 1) with the padding_idx row zeroed; that row's
 * gradient stays zero.  padding_idx may be negative (counted from the end,
 * as PyTorch); WEFT_NO_PADDING_IDX means None.  Inputs are int64 indices
 * of any shape. */
#define WEFT_NO_PADDING_IDX INT64_MIN
WEFT_API int weft_module_embedding(weft_module **out, int64_t num_embeddings,
                                   int64_t embedding_dim, int64_t padding_idx, weft_generator *g);

/* Parameterless modules: activations, nn.MaxPool2d and nn.Flatten. */
typedef enum weft_activation {
    WEFT_ACTIVATION_RELU = 0,
    WEFT_ACTIVATION_SIGMOID = 1,
    WEFT_ACTIVATION_TANH = 2,
    WEFT_ACTIVATION_GELU = 3 /* the exact (erf) form, PyTorch's default */
} weft_activation;
WEFT_API int weft_module_activation(weft_module **out, weft_activation kind);
/* nn.MaxPool2d(kernel_size, stride=None (= kernel_size), padding=0):
 * NULL stride or padding means the default. */
WEFT_API int weft_module_max_pool2d(weft_module **out, const int64_t kernel_size[2],
                                    const int64_t stride[2], const int64_t padding[2]);
/* nn.Flatten(start_dim=1, end_dim=-1). */
WEFT_API int weft_module_flatten(weft_module **out, int start_dim, int end_dim);

/* nn.Sequential: an empty container; weft_module_sequential_append adds a
 * child, named by its position ("0", "1", ...), and takes ownership of it
 * — also when it fails (then the child is destroyed), so a chain of
 * appends needs no cleanup of its own.  A NULL child is WEFT_EINVAL (and
 * nothing is destroyed); a child that already has a parent, seq itself or
 * a module that contains seq is WEFT_EINVAL and left alone.  forward runs the children in order. */
WEFT_API int weft_module_sequential(weft_module **out);
WEFT_API int weft_module_sequential_append(weft_module *seq, weft_module *child);

/* Runs the module on input: a new reference in *out.  The input is
 * checked first: a wrong rank, channel count or feature size is
 * WEFT_ESHAPE with a message naming the module (as PyTorch prints it, e.g.
 * "Conv2d(1, 16, kernel_size=(3, 3), stride=(1, 1))") and both shapes;
 * otherwise the operators' errors. */
WEFT_API int weft_module_forward(weft_module *m, weft_tensor *input, weft_tensor **out);

/* The module's tensors as PyTorch's named_parameters() (parameters only)
 * and state_dict() (parameters and buffers, in state_dict order: a
 * module's own tensors, then its children's, prefixed "0.", "1." ...).
 * Fills at most capacity entries of tensors and names (either may be NULL,
 * as parameters() wants only the tensors; both when capacity is 0) and
 * returns how many there are, so a first call with capacity 0 sizes the
 * arrays.  The tensors and names are borrowed:
 * they stay valid until the module is destroyed, moved
 * (weft_module_to_device/_to_dtype) or, for a Sequential, appended to.
 * Errors: WEFT_EINVAL (NULL m, capacity < 0, both arrays NULL with
 * capacity > 0), WEFT_ENOMEM. */
WEFT_API int weft_module_parameters(weft_module *m, weft_tensor **tensors, const char **names,
                                    int capacity);
WEFT_API int weft_module_state(weft_module *m, weft_tensor **tensors, const char **names,
                               int capacity);

/* Training (true, the default) or eval mode, for the module and all its
 * children (Dropout and BatchNorm2d behave differently).  NULL is a no-op;
 * is_training returns false for NULL. */
WEFT_API void weft_module_train(weft_module *m, bool training);
WEFT_API bool weft_module_is_training(const weft_module *m);
/* Moves every parameter and buffer to device, or converts the floating
 * ones to a floating dtype (num_batches_tracked stays int64).  Parameters
 * are replaced by new leaves that require grad (gradients are dropped),
 * so an optimizer must be made after this.  All or nothing: on error the
 * module is unchanged.  Errors: WEFT_EINVAL (NULL m), WEFT_EDTYPE (a dtype
 * that is not floating), the copies' errors. */
WEFT_API int weft_module_to_device(weft_module *m, weft_device device);
WEFT_API int weft_module_to_dtype(weft_module *m, weft_dtype dtype);
/* PyTorch's name of the module's kind ("Linear", "Sequential"); the
 * string is static.  NULL for NULL. */
WEFT_API const char *weft_module_kind(const weft_module *m);
/* The module as PyTorch prints it on one line, without children
 * ("Linear(in_features=784, out_features=256, bias=True)"); returns the
 * length the full text needs, like snprintf. */
WEFT_API int weft_module_describe(const weft_module *m, char *buf, size_t size);
/* Saves or loads weft_module_state() with weft_save_parameters /
 * weft_load_parameters (same names as PyTorch's state_dict), with their
 * errors and guarantees (a failed load changes nothing). */
WEFT_API int weft_module_save(weft_module *m, const char *path);
/* Saves weft_module_state() with weft_save_safetensors, under the same
 * names, with its errors (weft-train --save FILE.safetensors). */
WEFT_API int weft_module_save_safetensors(weft_module *m, const char *path);
WEFT_API int weft_module_load(weft_module *m, const char *path);
/* Destroys the module, its children and its references to its tensors.
 * NULL is a no-op; a module that has a parent must not be destroyed. */
WEFT_API void weft_module_destroy(weft_module *m);

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

/* ------------------------------------------------------ parameter groups */

/* The hyper-parameters of one parameter group, as torch.optim's
 * param_groups entries: every group of an optimizer has its own.  The
 * fields of the other kind are ignored (SGD: momentum, dampening,
 * nesterov; Adam and AdamW: beta1, beta2, eps). */
typedef struct weft_optim_group {
    double lr, weight_decay;
    double momentum, dampening; /* SGD */
    bool nesterov;              /* SGD */
    double beta1, beta2, eps;   /* Adam, AdamW */
} weft_optim_group;

/* The parameters given to the constructor are group 0, with the
 * constructor's hyper-parameters.  add_param_group appends a group (index
 * weft_optimizer_num_groups() - 1) of n more parameters with hyper (NULL:
 * a copy of the constructor's values, as torch fills missing keys with the
 * defaults).  Errors: WEFT_EINVAL (NULL opt, a NULL, non-leaf or repeated
 * parameter — also one already in another group —, a hyper-parameter out
 * of range, named as the constructors name it), WEFT_EDTYPE, WEFT_ENOMEM;
 * on error the optimizer is unchanged. */
WEFT_API int weft_optimizer_add_param_group(weft_optimizer *opt, weft_tensor *const *params,
                                            int n, const weft_optim_group *hyper);
/* The number of groups (0 for NULL). */
WEFT_API int weft_optimizer_num_groups(const weft_optimizer *opt);
/* Copies group's hyper-parameters into *out / replaces them (checked as
 * add_param_group checks them).  Errors: WEFT_EINVAL (NULL, a group out of
 * range, a bad value). */
WEFT_API int weft_optimizer_get_group(const weft_optimizer *opt, int group, weft_optim_group *out);
WEFT_API int weft_optimizer_set_group(weft_optimizer *opt, int group,
                                      const weft_optim_group *hyper);

/* ---------------------------------------------------- optimizer state */

/* Saves the optimizer's state (torch's optimizer.state_dict()) as a
 * parameter file (see weft_save_parameters) with these entries, <p> being
 * param_names[i] for the i-th parameter (in group order: group 0's, then
 * group 1's ...) or, when param_names is NULL, its index "0", "1" ...:
 *   param_groups.<g>.params        int64 [k]: the indices of group g's
 *                                  parameters
 *   param_groups.<g>.lr, .weight_decay, and for SGD .momentum, .dampening,
 *     .nesterov (0 or 1), for Adam/AdamW .beta1, .beta2, .eps
 *                                  float64 0-d
 *   state.<p>.momentum_buffer      SGD, once p has one (p's dtype, shape)
 *   state.<p>.exp_avg, state.<p>.exp_avg_sq, state.<p>.step (int64 0-d)
 *                                  Adam/AdamW, once p has stepped
 * Errors: weft_save_parameters's, WEFT_EINVAL (NULL opt or path, a NULL
 * name), WEFT_ENOMEM.  Not thread-safe with a step of the same optimizer. */
WEFT_API int weft_optimizer_save(const weft_optimizer *opt, const char *path,
                                 const char *const *param_names);
/* Loads a file written by weft_optimizer_save into an optimizer of the
 * same kind over parameters of the same shapes and dtypes, grouped the
 * same way: replaces every group's hyper-parameters and every parameter's
 * state (a parameter without state in the file has none afterwards), the
 * state tensors copied to each parameter's device.  Loading then stepping
 * gives exactly the numbers the saved optimizer would have given.  The
 * whole file is checked first and on any error the optimizer is
 * unchanged.  Errors: the file errors of weft_load_parameters (WEFT_EIO),
 * WEFT_ENOTFOUND (an entry missing, or one this optimizer does not know —
 * e.g. Adam's state loaded into SGD; the message names it), WEFT_ESHAPE
 * and WEFT_EDTYPE (naming the entry and both shapes or dtypes),
 * WEFT_EINVAL (a different grouping, a bad hyper-parameter), WEFT_ENOMEM. */
WEFT_API int weft_optimizer_load(weft_optimizer *opt, const char *path,
                                 const char *const *param_names);

/* One update of every parameter that has a gradient (those without one are
 * skipped and their state and step count left alone).  Gradients are read,
 * not cleared.  A sparse gradient (a plugin layout's) is applied row-wise
 * by SGD; with momentum the buffer is sparse too, as torch 1.13's (a copy
 * of the first gradient, coalesced through the layout's `coalesce`
 * operator each step), so only rows a gradient touched are written.
 * Adam, AdamW (dense moments) and SGD with weight_decay (torch refuses it
 * too) refuse it with WEFT_ENOTSUP naming the parameter, its layout and
 * the option, before touching that parameter.  Errors: those of the
 * operators (WEFT_ENOMEM, a device
 * error); a step that fails part-way may have updated some parameters
 * already. */
WEFT_API int weft_optimizer_step(weft_optimizer *opt);
/* Clears every parameter's gradient (sets it to NULL, as PyTorch's
 * zero_grad(set_to_none=True)). */
WEFT_API int weft_optimizer_zero_grad(weft_optimizer *opt);
/* The learning rate used by the next step; set_lr is how a schedule is
 * applied.  set_lr sets every group's lr; get_lr returns group 0's.  set_lr errors: WEFT_EINVAL for NULL or a negative or
 * non-finite lr.  get_lr returns NaN for NULL. */
WEFT_API int weft_optimizer_set_lr(weft_optimizer *opt, double lr);
WEFT_API double weft_optimizer_get_lr(const weft_optimizer *opt);
/* Releases the optimizer's state and its references to the parameters.
 * NULL is a no-op. */
WEFT_API void weft_optimizer_destroy(weft_optimizer *opt);

/* ------------------------------------------- optimizer steps over lists */

/* One step of torch.optim 1.13's SGD, Adam, AdamW, RMSprop or Adagrad
 * (their single-tensor formulas, every option) over n parameters at once,
 * the state kept by the caller: what weft.optim and weft_optimizer_step
 * call, one call per parameter group.  Each parameter is updated in one
 * pass over it, its gradient and its state (the _fused_*_ operators), not
 * by a chain of whole-tensor operators with temporaries.
 *
 * params[i] is written in place (with grad mode off: no autograd record),
 * grads[i] is its gradient (dense, read only).  The state lists are the
 * caller's arrays of n entries, written in place: an entry that is NULL is
 * created on this step and stored there as a new reference the caller
 * owns (torch's lazily made state: zeros, SGD's buffer = the first d,
 * Adagrad's sum = initial_accumulator_value, a step count = 0 before this
 * step).  Step counts are 0-d float32 CPU tensors, as torch's
 * state["step"], incremented by this call.
 *
 * Every tensor of a parameter must have its shape, dtype (float16,
 * bfloat16, float32 or float64) and device, be contiguous and not share
 * its memory; everything — counts, NULLs, shapes, dtypes, devices,
 * hyper-parameters — is checked before anything is written or created,
 * so a refused call changes nothing.  Errors: WEFT_EINVAL (n < 0, a NULL
 * list, parameter or gradient, a repeated parameter, a hyper-parameter
 * out of range — with torch's checks —, a non-contiguous tensor, shared
 * memory, a tensor of a plugin layout: a sparse gradient is refused by
 * its layout, never densified; weft.optim applies it row-wise), WEFT_ESHAPE, WEFT_EDTYPE, WEFT_EDEVICE (each naming the list,
 * the index and both values), WEFT_ENOMEM (state created on this call is
 * released and its entries set back to NULL); a kernel failing part-way
 * (a device error) may leave earlier parameters updated.  Not
 * thread-safe for the same tensors; distinct lists on distinct threads
 * are fine. */
typedef struct weft_sgd_options {
    double lr, momentum, dampening, weight_decay;
    bool nesterov, maximize;
} weft_sgd_options;
/* d = (maximize ? -grad : grad) + weight_decay * p;
 * buf = d on its first step, else momentum * buf + (1 - dampening) * d;
 * d = nesterov ? d + momentum * buf : buf (momentum != 0); p -= lr * d.
 * momentum_bufs may be NULL when momentum is 0 (no buffers then). */
WEFT_API int weft_sgd_step(weft_tensor *const *params, weft_tensor *const *grads,
                           weft_tensor **momentum_bufs, int n, const weft_sgd_options *o);

typedef struct weft_adam_options {
    double lr, beta1, beta2, eps, weight_decay;
    bool amsgrad, maximize;
} weft_adam_options;
/* t = ++step; d = (maximize ? -grad : grad) (+ weight_decay * p for Adam;
 * AdamW: p *= 1 - lr * weight_decay first); m = beta1 * m + (1 - beta1) * d;
 * v = beta2 * v + (1 - beta2) * d^2; amsgrad: vmax = max(vmax, v) and v is
 * vmax below; p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) +
 * eps).  max_exp_avg_sqs is needed with amsgrad and ignored without. */
WEFT_API int weft_adam_step(weft_tensor *const *params, weft_tensor *const *grads,
                            weft_tensor **exp_avgs, weft_tensor **exp_avg_sqs,
                            weft_tensor **max_exp_avg_sqs, weft_tensor **steps, int n,
                            const weft_adam_options *o);
WEFT_API int weft_adamw_step(weft_tensor *const *params, weft_tensor *const *grads,
                             weft_tensor **exp_avgs, weft_tensor **exp_avg_sqs,
                             weft_tensor **max_exp_avg_sqs, weft_tensor **steps, int n,
                             const weft_adam_options *o);

typedef struct weft_rmsprop_options {
    double lr, alpha, eps, weight_decay, momentum;
    bool centered, maximize;
} weft_rmsprop_options;
/* ++step; d as Adam's; sq = alpha * sq + (1 - alpha) * d^2; centered:
 * ga = alpha * ga + (1 - alpha) * d, avg = sqrt(sq - ga^2) + eps, else
 * avg = sqrt(sq) + eps; momentum > 0: buf = momentum * buf + d / avg and
 * p -= lr * buf, else p -= lr * d / avg.  momentum_bufs is needed with
 * momentum > 0, grad_avgs with centered; each is ignored otherwise. */
WEFT_API int weft_rmsprop_step(weft_tensor *const *params, weft_tensor *const *grads,
                               weft_tensor **square_avgs, weft_tensor **momentum_bufs,
                               weft_tensor **grad_avgs, weft_tensor **steps, int n,
                               const weft_rmsprop_options *o);

typedef struct weft_adagrad_options {
    double lr, lr_decay, weight_decay, initial_accumulator_value, eps;
    bool maximize;
} weft_adagrad_options;
/* t = ++step; d as Adam's; sum += d^2; p -= lr / (1 + (t - 1) * lr_decay) *
 * d / (sqrt(sum) + eps).  initial_accumulator_value fills a sum this call
 * creates. */
WEFT_API int weft_adagrad_step(weft_tensor *const *params, weft_tensor *const *grads,
                               weft_tensor **state_sums, weft_tensor **steps, int n,
                               const weft_adagrad_options *o);

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
/* Writes tensors[i] under names[i] in the safetensors format (an 8-byte
 * little-endian header length, a JSON header mapping each name to its
 * dtype, shape and data_offsets, padded with spaces to a multiple of 8,
 * then the elements, row-major, little-endian), which PyTorch, JAX and
 * others read through the safetensors package.  Device tensors are copied
 * to the host; the file is written beside path and renamed over it.
 * Errors: WEFT_EINVAL (as weft_save_parameters), WEFT_EDTYPE (a complex
 * tensor: safetensors has no complex dtype; nothing is written), WEFT_EIO,
 * WEFT_ENOMEM.  Thread-safe for distinct paths. */
WEFT_API int weft_save_safetensors(const char *path, weft_tensor *const *tensors,
                                   const char *const *names, int n);
/* Reads a file written by weft_save_parameters into tensors[i], matched by
 * names[i] (the order in the file does not matter), copying to each
 * tensor's device and layout under no-grad.  The whole file is checked
 * first — magic, version, its length, the checksum, that it holds exactly
 * these n names, and each tensor's dtype and shape — and on any error no
 * tensor is modified.  A path that is not a regular file (a pipe, a
 * device) is read only if it starts with the magic, and at most 1 GiB of
 * it.  Errors: WEFT_EIO (unreadable, truncated, bad magic or version,
 * checksum mismatch, a non-regular file past 1 GiB), WEFT_ENOTFOUND (a
 * name missing from the file, or a name in the file not asked for),
 * WEFT_EDTYPE and WEFT_ESHAPE (the message names the tensor and both
 * dtypes or shapes), WEFT_EINVAL, WEFT_ENOMEM.  Not thread-safe with other writers of the same tensors. */
WEFT_API int weft_load_parameters(const char *path, weft_tensor *const *tensors,
                                  const char *const *names, int n);

/* ------------------------------------------------------------ observers */

/* Post-training quantization's observers (issue 17), as
 * torch.ao.quantization's MinMaxObserver, MovingAverageMinMaxObserver,
 * PerChannelMinMaxObserver and MovingAveragePerChannelMinMaxObserver: they
 * keep the running minimum and maximum of the float tensors shown to them
 * (whole tensors, or per channel along ch_axis; moving averages with
 * averaging_constant c: min += c * (batch min - min) after the first
 * batch), and give the scale and zero point torch gives for them (float32
 * arithmetic, half-to-even rounding).  Computing parameters needs no
 * plugin; quantizing with them is <weft/quantized.h>'s.  An observer is
 * not thread-safe: one thread at a time. */
typedef struct weft_observer weft_observer;

typedef struct weft_observer_options {
    size_t struct_size;    /* sizeof(weft_observer_options) */
    bool per_channel;      /* per channel along ch_axis, else per tensor */
    int ch_axis;           /* may be negative */
    bool moving_average;   /* MovingAverage*MinMaxObserver */
    double averaging_constant; /* 0 means torch's 0.01 */
    weft_dtype dtype;      /* WEFT_UINT8 (quint8, the default 0 is read as it) or WEFT_INT8 */
    bool symmetric;        /* per_tensor_symmetric / per_channel_symmetric */
    bool reduce_range;     /* one bit less: [0, 127] / [-64, 63] */
} weft_observer_options;

/* A new observer (NULL options: quint8, per tensor, affine, min-max).
 * Errors: WEFT_EINVAL (struct_size, an averaging constant outside (0, 1]),
 * WEFT_EDTYPE (dtype not uint8 or int8), WEFT_ENOMEM. */
WEFT_API int weft_observer_create(weft_observer **out, const weft_observer_options *options);
/* Records x's minimum and maximum (x floating, any device; a tensor with
 * no elements is ignored).  Errors: WEFT_EDTYPE, WEFT_EINVAL (ch_axis out
 * of range, a channel count that changed), the operators'. */
WEFT_API int weft_observer_observe(weft_observer *o, const weft_tensor *x);
/* The parameters: *scale float32 and *zero_point int64, one entry for a
 * per-tensor observer (as torch), one per channel otherwise; new
 * references.  Errors: WEFT_EINVAL (nothing observed yet). */
WEFT_API int weft_observer_qparams(weft_observer *o, weft_tensor **scale, weft_tensor **zero_point);
/* Frees the observer; NULL is a no-op. */
WEFT_API void weft_observer_destroy(weft_observer *o);
/* ------------------------------------------------------------- datasets */

/* Reads an IDX file (the format of MNIST and Fashion-MNIST: two zero bytes,
 * an element-type byte, a dimension count byte, that many big-endian uint32
 * sizes, then the elements) into a new contiguous uint8 CPU tensor of those
 * sizes in *out (the caller owns it; release with weft_tensor_release).
 * The file may be gzip-compressed (as Debian's dataset-fashion-mnist ships
 * it) or plain.  Only unsigned-byte elements (type 0x08) are read.  The
 * whole file is checked and *out is NULL on any error.  Errors: WEFT_EINVAL
 * (NULL out or path), WEFT_EIO (unopenable or unreadable, not IDX, a corrupt
 * gzip stream, truncated, bytes past the last element, 0 or more than
 * WEFT_MAX_DIMS dimensions, more than 4 GiB of elements; the message names
 * the path and what is wrong), WEFT_ENOTSUP (another element type),
 * WEFT_ENOMEM.  Thread-safe. */
WEFT_API int weft_read_idx(weft_tensor **out, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_NN_H */
