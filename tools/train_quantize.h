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
/* Float logits of the int8 model for x ([b, 784]). */
int wt_int8_forward(weft_tensor **logits, wt_int8_model *q, weft_tensor *x);
void wt_int8_destroy(wt_int8_model *q);

#endif
