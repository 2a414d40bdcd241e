/* dlpack_compat.h — what weft needs from DLPack 1.0 on top of whatever
 * <dlpack/dlpack.h> the system provides.
 *
 * Debian 12 ships DLPack 0.6: the legacy DLManagedTensor only, without the
 * bool dtype code, the versioned struct or its flags.  Each declaration below
 * is written from the DLPack specification and guarded by the version macros
 * of the header that was included (DLPACK_VERSION up to 0.8,
 * DLPACK_MAJOR_VERSION / DLPACK_MINOR_VERSION from 1.0), so a newer system
 * header takes over and this file then only adds weft's own names and checks
 * the layout.  Field names are DLPack's, so code compiles against either.
 *
 * Only one dlpack.h can be seen by a translation unit (they share the
 * include guard DLPACK_DLPACK_H_): if another copy was included first, that
 * one is used and its version decides what is declared here.
 */
#ifndef WEFT_DLPACK_COMPAT_H
#define WEFT_DLPACK_COMPAT_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------ which DLPack the header is */

#if defined(DLPACK_MAJOR_VERSION)
/* 1.0 and later */
#define WEFT_DLPACK_HEADER_VERSION_ (DLPACK_MAJOR_VERSION * 100 + DLPACK_MINOR_VERSION)
#elif defined(DLPACK_VERSION)
/* 0.6 defines 60, 0.7 70, 0.8 80 */
#define WEFT_DLPACK_HEADER_VERSION_ DLPACK_VERSION
#else
#define WEFT_DLPACK_HEADER_VERSION_ 0
#endif

/* ----------------------------------------------------- data type codes */

#if WEFT_DLPACK_HEADER_VERSION_ < 80
/* DLPack 0.8 added a bool code; elements are one byte (bits = 8). */
enum { kDLBool = 6 };
#endif

/* ------------------------------------------------------- device codes */

#if WEFT_DLPACK_HEADER_VERSION_ < 70
/* added in DLPack 0.7 */
enum { kDLOneAPI = 14, kDLWebGPU = 15, kDLHexagon = 16 };
#endif
#if WEFT_DLPACK_HEADER_VERSION_ < 100
/* added in DLPack 1.0.  (Trainium, 18, came after 1.1 without a version
 * bump, so no macro can say whether a header has it: weft does not name
 * it.) */
enum { kDLMAIA = 17 };
#endif

/* --------------------------------------------- the versioned struct (1.0) */

#if WEFT_DLPACK_HEADER_VERSION_ < 100
/* The version a DLManagedTensorVersioned was made for.  A consumer reads
 * major first and refuses (calling the deleter) a major it does not know. */
typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

/* The managed tensor of DLPack >= 1.0.  Unlike the legacy struct, the
 * DLTensor comes last, so the two cannot be cast to one another: a capsule's
 * name says which one it holds. */
struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    /* Called once by the consumer when it is done; frees self. */
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags; /* DLPACK_FLAG_BITMASK_* */
    DLTensor dl_tensor;
};
#endif
/* DLPack's own header declares only the struct tag; C code wants the
 * typedef name too (repeating an identical typedef is valid C11 and C++). */
typedef struct DLManagedTensorVersioned DLManagedTensorVersioned;

/* Flags of DLManagedTensorVersioned. */
#ifndef DLPACK_FLAG_BITMASK_READ_ONLY
/* the consumer must not write the data */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#endif
#ifndef DLPACK_FLAG_BITMASK_IS_COPIED
/* the producer made a private copy that the consumer alone owns */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#endif
#ifndef DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
/* (1.1) elements of a sub-byte type are padded to a byte each */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)
#endif

/* ------------------------------------------------- weft's own names */

/* The DLPack version weft implements: what weft_to_dlpack_versioned puts
 * in version, and the major weft_from_dlpack_versioned accepts. */
#define WEFT_DLPACK_MAJOR_VERSION 1
#define WEFT_DLPACK_MINOR_VERSION 0

/* Python capsule names (the consumer renames a capsule to the used_ form
 * when it takes ownership). */
#define WEFT_DLPACK_CAPSULE "dltensor"
#define WEFT_DLPACK_CAPSULE_USED "used_dltensor"
#define WEFT_DLPACK_VERSIONED_CAPSULE "dltensor_versioned"
#define WEFT_DLPACK_VERSIONED_CAPSULE_USED "used_dltensor_versioned"

/* ----------------------------------------------------- the layout check
 * The ABI every producer and consumer shares on 64-bit platforms.  If one of
 * these fails, the dlpack.h in use does not describe the DLPack ABI. */
#if UINTPTR_MAX == UINT64_MAX
#ifdef __cplusplus
#define WEFT_DLPACK_ASSERT_(cond, what) static_assert(cond, what)
#else
#define WEFT_DLPACK_ASSERT_(cond, what) _Static_assert(cond, what)
#endif
WEFT_DLPACK_ASSERT_(sizeof(DLDevice) == 8, "DLDevice is 8 bytes");
WEFT_DLPACK_ASSERT_(sizeof(DLDataType) == 4, "DLDataType is 4 bytes");
WEFT_DLPACK_ASSERT_(sizeof(DLTensor) == 48, "DLTensor is 48 bytes");
WEFT_DLPACK_ASSERT_(offsetof(DLTensor, data) == 0, "DLTensor.data at 0");
WEFT_DLPACK_ASSERT_(offsetof(DLTensor, device) == 8, "DLTensor.device at 8");
WEFT_DLPACK_ASSERT_(offsetof(DLTensor, ndim) == 16, "DLTensor.ndim at 16");
WEFT_DLPACK_ASSERT_(offsetof(DLTensor, dtype) == 20, "DLTensor.dtype at 20");
WEFT_DLPACK_ASSERT_(offsetof(DLTensor, shape) == 24, "DLTensor.shape at 24");
WEFT_DLPACK_ASSERT_(offsetof(DLTensor, strides) == 32, "DLTensor.strides at 32");
WEFT_DLPACK_ASSERT_(offsetof(DLTensor, byte_offset) == 40, "DLTensor.byte_offset at 40");
WEFT_DLPACK_ASSERT_(sizeof(DLManagedTensor) == 64, "DLManagedTensor is 64 bytes");
WEFT_DLPACK_ASSERT_(offsetof(DLManagedTensor, dl_tensor) == 0, "DLManagedTensor.dl_tensor at 0");
WEFT_DLPACK_ASSERT_(offsetof(DLManagedTensor, manager_ctx) == 48,
                    "DLManagedTensor.manager_ctx at 48");
WEFT_DLPACK_ASSERT_(offsetof(DLManagedTensor, deleter) == 56, "DLManagedTensor.deleter at 56");
WEFT_DLPACK_ASSERT_(sizeof(DLManagedTensorVersioned) == 80, "DLManagedTensorVersioned is 80 bytes");
WEFT_DLPACK_ASSERT_(offsetof(DLManagedTensorVersioned, version) == 0,
                    "DLManagedTensorVersioned.version at 0");
WEFT_DLPACK_ASSERT_(offsetof(DLManagedTensorVersioned, manager_ctx) == 8,
                    "DLManagedTensorVersioned.manager_ctx at 8");
WEFT_DLPACK_ASSERT_(offsetof(DLManagedTensorVersioned, deleter) == 16,
                    "DLManagedTensorVersioned.deleter at 16");
WEFT_DLPACK_ASSERT_(offsetof(DLManagedTensorVersioned, flags) == 24,
                    "DLManagedTensorVersioned.flags at 24");
WEFT_DLPACK_ASSERT_(offsetof(DLManagedTensorVersioned, dl_tensor) == 32,
                    "DLManagedTensorVersioned.dl_tensor at 32");
#undef WEFT_DLPACK_ASSERT_
#endif

#ifdef __cplusplus
}
#endif

#endif /* WEFT_DLPACK_COMPAT_H */
