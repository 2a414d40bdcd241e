/* tests/dlpack_torch_bridge.h — weft's DLPack functions with the
 * managed tensor as void *, for the C++ test that includes libtorch's own
 * dlpack.h (see tests/dlpack_torch_bridge.c). */
#ifndef WEFT_TESTS_DLPACK_TORCH_BRIDGE_H
#define WEFT_TESTS_DLPACK_TORCH_BRIDGE_H

#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/* weft_to_dlpack: *out receives a DLManagedTensor *. */
int bridge_to_dlpack(void **out, weft_tensor *t);
/* weft_from_dlpack of a DLManagedTensor *. */
int bridge_from_dlpack(weft_tensor **out, void *m);
/* Calls a DLManagedTensor's deleter (for one a consumer refused). */
void bridge_delete(void *m);

#ifdef __cplusplus
}
#endif

#endif
