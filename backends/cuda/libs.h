/* backends/cuda/libs.h — cuBLAS and cuDNN, opened at their first use
 * rather than linked: a machine without a GPU (or without those libraries)
 * loads the plugin without mapping hundreds of megabytes it will never
 * call, and the test suite's valgrind run sees no library it does not
 * use.  Each table lists the functions the plugin calls; the member names
 * are the libraries' own (after cublas_v2.h's renaming), so a call reads
 * `wfc_cublas()->cublasCreate(&h)`. */
#ifndef WEFT_BACKENDS_CUDA_LIBS_H
#define WEFT_BACKENDS_CUDA_LIBS_H

#include "cuda.h"
#include "gpu.h"

#if WFC_HAVE_BLAS_LIBRARY
#include <cublas_v2.h>

#define WFC_CUBLAS_FUNCTIONS(X) \
    X(cublasCreate) X(cublasDestroy) X(cublasSetStream) X(cublasSetWorkspace) \
    X(cublasGemmStridedBatchedEx)

#define WFC_TABLE_MEMBER(f) __typeof__(f) *f;

typedef struct wfc_cublas_api {
    WFC_CUBLAS_FUNCTIONS(WFC_TABLE_MEMBER)
} wfc_cublas_api;

/* The table, loaded once (thread-safe); NULL with the message set when the
 * library or one of its functions is missing. */
const wfc_cublas_api *wfc_cublas(void);
#endif

#ifdef WEFT_HAVE_CUDNN
#include <cudnn.h>

#define WFC_CUDNN_FUNCTIONS(X) \
    X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream) \
    X(cudnnCreateTensorDescriptor) X(cudnnDestroyTensorDescriptor) \
    X(cudnnCreateFilterDescriptor) X(cudnnDestroyFilterDescriptor) \
    X(cudnnCreateConvolutionDescriptor) X(cudnnDestroyConvolutionDescriptor) \
    X(cudnnSetTensor4dDescriptor) X(cudnnSetFilter4dDescriptor) \
    X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionGroupCount) \
    X(cudnnSetConvolutionMathType) X(cudnnGetConvolutionForwardAlgorithm_v7) \
    X(cudnnGetConvolutionBackwardDataAlgorithm_v7) \
    X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) X(cudnnFindConvolutionForwardAlgorithmEx) \
    X(cudnnFindConvolutionBackwardDataAlgorithmEx) \
    X(cudnnFindConvolutionBackwardFilterAlgorithmEx) X(cudnnConvolutionForward) \
    X(cudnnConvolutionBackwardData) X(cudnnConvolutionBackwardFilter) \
    X(cudnnDeriveBNTensorDescriptor) X(cudnnBatchNormalizationForwardTraining) \
    X(cudnnBatchNormalizationForwardInference) X(cudnnBatchNormalizationBackward)

typedef struct wfc_cudnn_api {
    WFC_CUDNN_FUNCTIONS(WFC_TABLE_MEMBER)
} wfc_cudnn_api;

const wfc_cudnn_api *wfc_cudnn(void);

/* conv.c: the calling thread's cuDNN handle for cuda:index, set to
 * stream (the table loaded first; op names the caller in messages); and
 * a cuDNN status as 0 or a weft error naming op and what failed. */
int wfc_cudnn_handle(cudnnHandle_t *out, const char *op, int index, void *stream);
int wfc_cudnn_check(cudnnStatus_t s, const char *op, const char *what);
#endif

/* Closes what was opened (the plugin's fini). */
void wfc_libs_close(void);

#endif
