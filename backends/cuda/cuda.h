/* backends/cuda/cuda.h — internal to the CUDA plugin: what the C files and
 * the .cu kernel files share.  The kernel launchers are C functions compiled
 * by nvcc, so the C side never includes CUDA's C++ headers. */
#ifndef WEFT_BACKENDS_CUDA_H
#define WEFT_BACKENDS_CUDA_H

#include <stdint.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most dimensions the strided kernels index (more: the kernel wrapper
 * collapses or refuses with a clear error). */
#define WFC_MAX_DIMS 8

/* A strided operand's geometry in elements, broadcast to the output's
 * shape (stride 0 along broadcast dimensions). */
typedef struct wfc_geometry {
    int ndim;
    int64_t sizes[WFC_MAX_DIMS];
    int64_t strides[3][WFC_MAX_DIMS]; /* out, a, b */
} wfc_geometry;

enum { WFC_ADD, WFC_SUB, WFC_MUL, WFC_DIV };
enum { WFC_NEG, WFC_EXP, WFC_RELU, WFC_SIGMOID, WFC_TANH };

/* Launchers (elementwise.cu).  dtype is WEFT_FLOAT32 or WEFT_FLOAT64; data
 * pointers are device pointers at element 0 of each operand; the launch is
 * asynchronous on `stream` (a cudaStream_t; NULL is the default stream).  Return 0 or a negative WEFT_E* code
 * with the message set. */
int wfc_binary(void *stream, int op, int dtype, void *out, const void *a, const void *b,
               double alpha, int64_t n, const wfc_geometry *g);
int wfc_unary(void *stream, int op, int dtype, void *out, const void *a, int64_t n,
              const wfc_geometry *g);
int wfc_fill(void *stream, int dtype, void *out, double value, int64_t n, const wfc_geometry *g);

/* plugin.c: the calling thread's current stream on a device (NULL: the
 * default stream); kernels launch on it. */
void *wfc_current_stream(int index);

/* kernels.c */
int wfc_register_kernels(weft_registrar *reg);

#ifdef __cplusplus
}
#endif

#endif
