/* interop/dlpack/dlpack_map.h — internal: how weft's dtypes and devices
 * correspond to DLPack's codes, shared by export.c and import.c.  Every
 * function sets a message naming `op` and the offending value on error. */
#ifndef WF_DLPACK_MAP_H
#define WF_DLPACK_MAP_H

#include <weft/dlpack.h>

#include "c10/core.h"

/* The DLPack data type of a weft dtype.  WEFT_EDTYPE if it has none. */
int wi__dlpack_dtype_of(DLDataType *out, weft_dtype dtype, const char *op);
/* The weft dtype of a DLPack data type.  WEFT_EDTYPE for lanes other than 1
 * or a code and bits weft lacks. */
int wi__dlpack_dtype_to_weft(weft_dtype *out, DLDataType dt, const char *op);

/* The DLPack device of a weft device.  WEFT_EDEVICE when its type declares no
 * DLPack device code. */
int wi__dlpack_device_of(DLDevice *out, weft_device device, const char *op);
/* The weft device of a DLPack device: host codes become the cpu, others the
 * device type that declares the code, which must be loaded and have a device
 * of that index.  WEFT_EDEVICE otherwise. */
int wi__dlpack_device_to_weft(weft_device *out, DLDevice dev, const char *op);

#endif
