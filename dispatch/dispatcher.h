/* dispatch/dispatcher.h — internal: operators, parsed schemas, the flat
 * kernel tables and the registration records behind them. */
#ifndef WF_DISPATCHER_H
#define WF_DISPATCHER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "c10/core.h"
#include "dispatch/ops_gen.h"

/* Argument types of a schema. */
typedef enum wf_arg_type {
    WF_ARG_TENSOR,
    WF_ARG_TENSOR_OPT,
    WF_ARG_TENSOR_MUT, /* Tensor(a!) */
    WF_ARG_TENSOR_LIST,
    WF_ARG_SCALAR,
    WF_ARG_FLOAT,
    WF_ARG_INT,
    WF_ARG_BOOL,
    WF_ARG_INT_LIST,
    WF_ARG_INT_LIST_OPT,
    WF_ARG_DTYPE_OPT,
    WF_ARG_GENERATOR_OPT,
    WF_ARG_SCALAR_OPT, /* Scalar? */
    WF_ARG_FLOAT_OPT,  /* float? */
    WF_ARG_INT_OPT,    /* int? */
    WF_ARG_STRING,     /* str */
    WF_ARG_STRING_OPT, /* str? */
    WF_ARG_TENSOR_LIST_OPT, /* Tensor?[]: a list whose entries may be NULL (None) */
    WF_ARG_FLOAT_LIST,      /* float[] */
    WF_ARG_FLOAT_LIST_OPT,  /* float[]? */
} wf_arg_type;

#define WF_MAX_ARGS 16

typedef struct wf_arg {
    char name[24];
    uint8_t type;     /* wf_arg_type */
    bool kwonly;
    bool has_default;
    char default_text[16];
} wf_arg;

typedef struct wf_schema {
    char name[64];
    int nargs;
    int nrets;
    bool mutating; /* writes args[0] */
    bool list_result; /* "-> Tensor[]": rets[0] is a WEFT_VALUE_TENSOR_LIST */
    wf_arg args[WF_MAX_ARGS];
} wf_schema;

/* Parses PyTorch-style schema text (see dispatch/operators.def). */
int wd__schema_parse(wf_schema *out, const char *text);

/* The flat table: per-backend functionalities get one slot per device type,
 * the others one slot each. */
enum {
    WF_PER_BACKEND_FUNCS = 4, /* Dense, Quantized, Sparse, Autograd */
    WF_NUM_SLOTS = WF_PER_BACKEND_FUNCS * WEFT_MAX_DEVICE_TYPES + (WEFT_KEY_END - WEFT_KEY_DENSE - WF_PER_BACKEND_FUNCS)
};

/* Plugin layouts' keys get slots of their own past the fixed table, one
 * per layout key and device type, in a per-operator table allocated when
 * the first kernel for a layout is registered on it (most operators never
 * have one: no memory and no start-up work for them). */
enum {
    WF_LAYOUT_SLOTS = WEFT_MAX_LAYOUTS * WEFT_MAX_DEVICE_TYPES,
    WF_ALL_SLOTS = WF_NUM_SLOTS + WF_LAYOUT_SLOTS
};

#define WF_BACKEND_MASK ((WEFT_KEYSET_BIT(WEFT_MAX_DEVICE_TYPES)) - 1)
#define WF_FUNCTIONALITY_MASK (((WEFT_KEYSET_BIT(WEFT_KEY_END)) - 1) & ~WF_BACKEND_MASK)
/* The wrapper keys, above every layout (BackendSelect .. User4). */
#define WF_ABOVE_LAYOUT_MASK (WF_FUNCTIONALITY_MASK & ~(WEFT_KEYSET_BIT(WEFT_KEY_BACKEND_SELECT) - 1))
#define WF_LAYOUT_MASK \
    ((WEFT_KEYSET_BIT(WEFT_KEY_LAYOUT_LAST + 1) - 1) & ~(WEFT_KEYSET_BIT(WEFT_KEY_LAYOUT_FIRST) - 1))

typedef enum wf_kernel_kind {
    WF_KERNEL_DIRECT,
    WF_KERNEL_COMPOSITE,
    WF_KERNEL_FALLBACK,
    WF_KERNEL_FALLTHROUGH,
} wf_kernel_kind;

/* An immutable kernel record.  The hot tables point at these; a record is
 * never freed while the process may still read it (it is retired instead),
 * so readers need no lock. */
typedef struct wf_kernel {
    weft_kernel_fn fn;
    void *ctx;
    uint8_t kind; /* wf_kernel_kind */
    char owner[48]; /* the registering plugin's name */
} wf_kernel;

struct weft_op {
    int id;
    atomic_bool defined; /* false once a plugin that defined it is rolled back; read unlocked */
    const char *schema_text;
    wf_schema schema;
    uint32_t tensor_arg_mask; /* which args carry dispatch keys */
    _Atomic(const wf_kernel *) table[WF_NUM_SLOTS];
    /* the op's own kernels for plugin layouts (WF_LAYOUT_SLOTS entries),
     * NULL until one is registered; never freed (ops live for the process) */
    _Atomic(_Atomic(const wf_kernel *) *) layout_table;
    struct weft_registrar *definer; /* NULL for the built-in table */
    struct weft_registration *regs; /* every kernel registration, newest first (cold) */
    _Atomic uint64_t fallback_warned; /* device types the CPU fallback warned about */
};

/* The slot of plugin layout key func for ks's highest backend. */
static inline int wd__layout_slot(weft_keyset ks, int func)
{
    weft_keyset b = ks & WF_BACKEND_MASK;
    int backend = b ? 63 - __builtin_clzll(b) : 0;
    return WF_NUM_SLOTS + (func - WEFT_KEY_LAYOUT_FIRST) * WEFT_MAX_DEVICE_TYPES + backend;
}

/* Whether ks's call goes to a plugin layout's slot: a layout bit and no
 * wrapper key (those rank above every layout). */
static inline bool wd__layout_turn(weft_keyset ks)
{
    return __builtin_expect((ks & WF_LAYOUT_MASK) != 0, 0) && !(ks & WF_ABOVE_LAYOUT_MASK);
}

/* Slot of a key set without a plugin layout's turn (see wd__layout_turn),
 * or -1 if it has no functionality bit.  Priority: the wrapper keys, then
 * Sparse, Quantized, Dense, highest bit first. */
static inline int wd__slot_of(weft_keyset ks, int *functionality)
{
    weft_keyset f = ks & WF_FUNCTIONALITY_MASK;
    if (!f)
        return -1;
    int func = 63 - __builtin_clzll(f);
    *functionality = func;
    int rel = func - WEFT_KEY_DENSE;
    /* Dense, Quantized and Sparse are rel 0..2; Autograd takes block 3 */
    if (rel <= 2 || func == WEFT_KEY_AUTOGRAD) {
        weft_keyset b = ks & WF_BACKEND_MASK;
        int backend = b ? 63 - __builtin_clzll(b) : 0;
        int index = func == WEFT_KEY_AUTOGRAD ? 3 : rel;
        return index * WEFT_MAX_DEVICE_TYPES + backend;
    }
    /* non-per-backend functionalities after the per-backend block */
    int after = rel - 3 - (func > WEFT_KEY_AUTOGRAD ? 1 : 0);
    return WF_PER_BACKEND_FUNCS * WEFT_MAX_DEVICE_TYPES + after;
}

/* The fallbacks of the plugin layouts' slots (dispatch/registrar.c). */
extern _Atomic(const wf_kernel *) wd__layout_fallbacks[WF_LAYOUT_SLOTS];
/* Slot for a registration (key, device type); -1 if invalid. */
int wd__slot_for(int key, int device_type);

weft_op *wd__op_by_id(int id);
int wd__dispatch(int op_id, const weft_value *args, int nargs, weft_value *rets, int nrets);
/* The operator table under the registry lock (dispatch/dispatcher.c), for
 * the registrar: find by name, count, index, and define a new operator
 * (definer NULL for the built-in table). */
weft_op *wd__op_find_locked(const char *name);
int wd__op_total_locked(void);
weft_op *wd__op_at_locked(int i);
int wd__op_add_locked(weft_op **out, const char *schema_text, struct weft_registrar *definer);
/* Recomputes op's hot table from the registrations (registry lock held). */
void wd__op_recompute(weft_op *op);
/* The registrar's side of unloading (dispatch/registrar.c); the counters
 * live in its embedded c10 owner record. */
long wd__registrar_live_kind(struct weft_registrar *reg, int kind);
void wd__registrar_set_closing(struct weft_registrar *reg, bool closing);
/* While a plugin's init runs (set by the loader around it); clearing it
 * recomputes the tables so the plugin's CPU fallbacks appear at once. */
void wd__registrar_set_initializing(struct weft_registrar *reg, bool initializing);
const char *wd__registrar_name(const struct weft_registrar *reg);
int wd__registrar_new(weft_registrar **out, const char *name);
void wd__registrar_release_all(weft_registrar *reg);
long wd__registrar_release_unless_depended(weft_registrar *reg, char *buf, size_t size);
/* Which plugins are loaded and where the loader looked, for the "no kernel"
 * message: installed by the composition root (the loader is a layer above). */
extern void (*wd__loader_summary_hook)(char *buf, size_t size);
void wd__dispatch_init(void);
void wd__registry_lock(void);
void wd__registry_unlock(void);

/* The core registers its own kernels (ops/, autograd/) through this. */
extern weft_registrar *wd__core_registrar;

/* The kernel every device type gets for its Dense key at the lowest
 * priority, ctx being the device type: the CPU fallback (ops/cpu_fallback.c,
 * a layer above), installed by the composition root before any device type
 * is registered.  NULL: devices get no fallback. */
extern weft_kernel_fn wd__device_fallback_kernel;
/* The registered intra-op pool's loop, or NULL (dispatch/parallel.c). */
extern _Atomic(weft_parallel_for_fn) wd__parallel_for;
/* Sets the "no kernel for these keys" error for op and returns it. */
int wd__missing_kernel(const weft_op *op, weft_keyset ks);

/* Thread-local dispatch state. */
/* Initial-exec: read with one instruction instead of a __tls_get_addr call
 * on every dispatch.  16 bytes of static TLS, which glibc's surplus covers
 * even when libweft is dlopen'ed (Python) after start-up. */
#define WF_TLS_FAST __attribute__((tls_model("initial-exec")))
extern _Thread_local weft_keyset wd__tls_included WF_TLS_FAST;
extern _Thread_local weft_keyset wd__tls_excluded WF_TLS_FAST;

#endif
