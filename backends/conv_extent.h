/* backends/conv_extent.h — a convolution's output extents computed with
 * overflow checks, for every backend's size checks (the CPU plugin's
 * nn_conv.c, the CUDA/HIP plans): beside a 0-sized dim another size may be
 * near int64's limit, and the plain arithmetic then overflowed
 * (fuzz_call_boxed's UBSan findings: conv_transpose2d with a padding of
 * 2^62, conv1d's channels times groups).  Header-only: plugins share no
 * code at run time.  Each returns false where a step overflows. */
#ifndef WEFT_BACKENDS_CONV_EXTENT_H
#define WEFT_BACKENDS_CONV_EXTENT_H

#include <stdbool.h>
#include <stdint.h>

/* size + 2 padding - dilation (kernel - 1): a convolution's padded input
 * less the dilated kernel's reach (the output is this / stride + 1) */
static inline bool conv_padded_extent(int64_t size, int64_t padding, int64_t dilation,
                                      int64_t kernel, int64_t *out)
{
    int64_t pad2, reach;
    return !__builtin_mul_overflow(padding, 2, &pad2) &&
           !__builtin_mul_overflow(dilation, kernel - 1, &reach) &&
           !__builtin_add_overflow(size, pad2, out) && !__builtin_sub_overflow(*out, reach, out);
}

/* conv_transpose2d's output size: (size - 1) stride - 2 padding +
 * dilation (kernel - 1) + output_padding + 1 */
static inline bool conv_transposed_extent(int64_t size, int64_t stride, int64_t padding,
                                          int64_t dilation, int64_t kernel, int64_t output_padding,
                                          int64_t *out)
{
    int64_t grown, pad2, reach;
    return !__builtin_mul_overflow(size - 1, stride, &grown) &&
           !__builtin_mul_overflow(padding, 2, &pad2) &&
           !__builtin_mul_overflow(dilation, kernel - 1, &reach) &&
           !__builtin_sub_overflow(grown, pad2, out) && !__builtin_add_overflow(*out, reach, out) &&
           !__builtin_add_overflow(*out, output_padding, out) && !__builtin_add_overflow(*out, 1, out);
}

#endif /* WEFT_BACKENDS_CONV_EXTENT_H */
