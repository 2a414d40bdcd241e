/* nn/parameter_file.h — internal to nn/: reading a whole parameter file
 * into new host tensors, for the optimizer's state (whose entries depend
 * on the file, so they cannot be named in advance). */
#ifndef WEFT_NN_PARAMETER_FILE_H
#define WEFT_NN_PARAMETER_FILE_H

#include <weft/weft.h>

/* One tensor of a file: a new host tensor and its name (malloc'd). */
typedef struct wf_named_tensor {
    char *name;
    weft_tensor *tensor;
} wf_named_tensor;

/* Reads every tensor of path, checked as weft_load_parameters checks a
 * file, into *out (an array of *n entries, freed with
 * wn__named_tensors_free).  Errors: weft_load_parameters's file errors,
 * WEFT_ENOMEM; *out is NULL and *n 0 on error. */
int wn__read_parameter_file(const char *path, wf_named_tensor **out, int *n);
void wn__named_tensors_free(wf_named_tensor *list, int n);

#endif
