/* dlpack.h — zero-copy exchange of tensors with other frameworks (NumPy,
 * PyTorch, JAX, CuPy, any C or C++ engine) through DLPack.
 *
 * Both directions share memory and cost the same for any number of
 * elements: one small allocation for the metadata, none for the data.
 *
 * Which struct: DLManagedTensor is DLPack's legacy form (a Python capsule
 * named "dltensor"); DLManagedTensorVersioned is DLPack >= 1.0
 * ("dltensor_versioned"), which adds a version and flags (read-only,
 * is-copied).  The two have different layouts and cannot be cast to one
 * another: pick the function by what you hold.
 *
 * Mappings.  dtypes: bool <-> code 6 (kDLBool) bits 8, uint8 <-> uint 8,
 * int8/16/32/64 <-> int, float16/32/64 <-> float, bfloat16 <-> bfloat 16,
 * complex64/128 <-> complex 64/128 (bits count the whole number); lanes is
 * always 1.  Devices: cpu <-> kDLCPU (1); cuda:i <-> kDLCUDA (2, i);
 * hip:i <-> kDLROCM (10, i); a plugin device type <-> the code its
 * weft_device_interface declares in dlpack_device_code.  On import, pinned
 * host memory (kDLCUDAHost 3, kDLROCMHost 11) becomes a cpu tensor.
 *
 * Thread safety: every function may be called from any thread, on distinct
 * or shared tensors.  The deleter of a struct weft exported may run on any
 * thread, without any lock or interpreter held: it drops an atomic
 * reference and frees memory, nothing else.
 */
#ifndef WEFT_DLPACK_H
#define WEFT_DLPACK_H

#include <weft/dlpack_compat.h>
#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------------------- export */

/* Describes t as a legacy DLManagedTensor that shares t's memory.
 *
 * Ownership: on success *out is the caller's; it keeps t's memory alive
 * (t itself may be released at once) until someone calls
 * (*out)->deleter(*out), exactly once.  t is borrowed.
 *
 * The struct and its shape and strides arrays are one allocation whose size
 * depends only on t's ndim.  strides are in elements and always filled;
 * t's storage offset is folded into dl_tensor.data and byte_offset is 0
 * (some consumers ignore byte_offset).  shape and strides point at valid,
 * possibly empty, arrays even for a 0-d tensor.
 *
 * Errors (*out NULL): WEFT_EINVAL (NULL out or t); WEFT_EDTYPE (a dtype
 * DLPack cannot describe); WEFT_EDEVICE (a plugin device type whose
 * interface declares no DLPack device code); WEFT_ENOTSUP (t's storage is
 * read-only, which the legacy struct cannot say: use the versioned form);
 * WEFT_ENOMEM. */
WEFT_API int weft_to_dlpack(DLManagedTensor **out, weft_tensor *t);

/* Like weft_to_dlpack, as a DLManagedTensorVersioned of version
 * WEFT_DLPACK_MAJOR_VERSION.WEFT_DLPACK_MINOR_VERSION (1.0).
 *
 * flags: 0, or DLPACK_FLAG_BITMASK_READ_ONLY to forbid the consumer to
 * write, and/or DLPACK_FLAG_BITMASK_IS_COPIED when the caller made t as a
 * private copy for this consumer (weft never copies here, so it never sets
 * that bit itself).  READ_ONLY is also set whenever t's storage is
 * read-only.  Other bits: WEFT_EINVAL.  Otherwise as weft_to_dlpack, except
 * that a read-only tensor is exported (with the flag). */
WEFT_API int weft_to_dlpack_versioned(DLManagedTensorVersioned **out, weft_tensor *t,
                                      uint64_t flags);

/* The DLPack device (type code and id) t would be exported with, for
 * __dlpack_device__: (1, 0) for the cpu.  Errors: WEFT_EINVAL (NULL
 * argument), WEFT_EDEVICE (as for weft_to_dlpack).  Thread-safe. */
WEFT_API int weft_tensor_dlpack_device(const weft_tensor *t, int32_t *device_type,
                                       int32_t *device_id);

/* ----------------------------------------------------------------- import */

/* Wraps the tensor m describes as a weft tensor, without copying.
 *
 * Ownership: m is always consumed.  On success *out is a new reference
 * whose storage owns m: m->deleter(m) (if not NULL) runs exactly once, on
 * whichever thread drops the last view of that storage.  On failure weft
 * calls m->deleter(m) (if not NULL) exactly once before returning, so the
 * caller never cleans up and never leaks; do not touch m afterwards.
 *
 * Accepted: data + byte_offset is the first element; strides in elements,
 * NULL meaning compact row-major; the strides of dimensions of size 0 or 1
 * are ignored (replaced by the compact ones); a tensor with no elements may
 * have NULL data; ndim 0 (shape may then be NULL); the dtypes and devices
 * listed at the top of this file.  Negative strides are refused: weft
 * tensors never have them.
 *
 * Errors (*out NULL, deleter called; the message names the field and its
 * value): WEFT_EINVAL (NULL m or out, ndim < 0 or > WEFT_MAX_DIMS, NULL shape
 * with ndim > 0, a negative dimension, NULL data with elements, a first
 * element not aligned to its dtype's alignment);
 * WEFT_EOVERFLOW (the element count or the extent of shape and strides in
 * bytes overflows int64); WEFT_EDTYPE (a dtype code and bits weft lacks,
 * lanes other than 1); WEFT_ENOTSUP (a negative stride); WEFT_EDEVICE (a
 * device code that no weft device type declares, a device id out of range,
 * or a device whose plugin is not loaded); WEFT_ENOMEM. */
WEFT_API int weft_from_dlpack(weft_tensor **out, DLManagedTensor *m);

/* Like weft_from_dlpack for a DLManagedTensorVersioned.  m->version.major
 * is read first: if it is not WEFT_DLPACK_MAJOR_VERSION, no other field is
 * read, m->deleter(m) is called and the error is WEFT_ENOTSUP.  Any minor
 * is accepted.  flags: READ_ONLY makes the tensor's storage read-only (every
 * in-place operator then refuses to write it, with WEFT_EINVAL); the other
 * bits change nothing. */
WEFT_API int weft_from_dlpack_versioned(weft_tensor **out, DLManagedTensorVersioned *m);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_DLPACK_H */
