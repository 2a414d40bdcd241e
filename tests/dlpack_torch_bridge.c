/* tests/dlpack_torch_bridge.c — the C half of the libtorch round trip
 * (tests/dlpack_torch.cc).  libtorch ships its own copy of dlpack.h,
 * so weft's DLPack declarations stay in this translation unit and the C++
 * half, which sees only libtorch's, hands managed tensors across as void *.
 * Both describe the same ABI: the layout is checked by static asserts in
 * <weft/dlpack_compat.h>. */
#include <weft/dlpack.h>

#include "tests/dlpack_torch_bridge.h"

int bridge_to_dlpack(void **out, weft_tensor *t)
{
    DLManagedTensor *m = NULL;
    int rc = weft_to_dlpack(&m, t);
    *out = m;
    return rc;
}

int bridge_from_dlpack(weft_tensor **out, void *m)
{
    return weft_from_dlpack(out, m);
}

void bridge_delete(void *m)
{
    DLManagedTensor *managed = m;
    if (managed && managed->deleter)
        managed->deleter(managed);
}
