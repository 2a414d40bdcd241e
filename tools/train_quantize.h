/* tools/train_quantize.h — weft-train --quantize (tools/train_quantize.c):
 * the trained model's int8 form, made from calibration images, and its
 * forward pass. */
#ifndef WEFT_TOOLS_TRAIN_QUANTIZE_H
#define WEFT_TOOLS_TRAIN_QUANTIZE_H

#include <stdbool.h>

#include <weft/nn.h>
#include <weft/weft.h>

typedef struct wt_int8_model wt_int8_model;
/* The int8 form of weft-train's MLP or CNN m (trained, on the CPU),
 * calibrated on calibration ([n, 784] normalised images).  Errors: the
 * operators' (WEFT_ENOTSUP without the quantized plugin or oneDNN). */
int wt_quantize(wt_int8_model **out, weft_module *m, bool cnn, weft_tensor *calibration);
/* Makes q's input quantizer the images' own encoding: pixel v stands for
 * value[v], affine in v (weft-train's normalisation), so with scale
 * (value[255] - value[0]) / 255 and the zero point nearest -value[0] /
 * scale the quantized input is the pixel bytes themselves: no pass over a
 * batch, neither the float conversion nor a quantization.  Each input is
 * then off its float value by the zero point's rounding only (for
 * weft-train's normalisation 0.07 of a step, the same for every pixel),
 * where the min-max observer's quantizer rounds each value, up to half a
 * step.  The pixels use all of 0..255 where the calibrated activations
 * keep to 0..127, so layer 0's weight is quantized again to 7 bits:
 * oneDNN's u8 x s8 pairs are summed to 16 bits with saturation on AVX2
 * without VNNI.  Errors: WEFT_EINVAL when value[] is not such a range;
 * the quantizer's. */
int wt_int8_pixel_input(wt_int8_model *q, const float value[256]);
/* The int8 model's input for pixels, [n, 784] uint8 images as
 * wt_int8_pixel_input describes: a quantized tensor holding their bytes
 * under q's input quantizer (one copy, make_per_tensor_quantized's).  Made
 * once for a whole data set, its slices are batches read in place: made
 * per batch, the copy cost the int8 MLP's evaluation 3% of its time. */
int wt_int8_input(weft_tensor **out, const wt_int8_model *q, const weft_tensor *pixels);
/* Float logits of the int8 model for input, [b, 784] images from
 * wt_int8_input (or a slice of its result), read, not kept. */
int wt_int8_forward(weft_tensor **logits, wt_int8_model *q, weft_tensor *input);
void wt_int8_destroy(wt_int8_model *q);

#endif
