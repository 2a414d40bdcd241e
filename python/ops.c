/* ops.c — every operator of the operator table (plugin operators included)
 * as a function weft.NAME(...) and, when its first argument is `self`, as a
 * Tensor method, bound from its schema string (weft_op_schema) and called
 * through weft_call_boxed.  Nothing here names an operator: the table is
 * the single source of truth.
 *
 * Overloads: the table spells PyTorch's overloads as suffixes (add_scalar,
 * div_mode, div_scalar_mode, max_dim, split_with_sizes, bernoulli_tensor_) and `out=` as NAME_out.  Operators
 * that differ only by those suffixes form one Python function that tries
 * each schema in table order and calls the first whose arguments fit. */
#include "weftpy.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* the operators whose two results torch names (values, indices), by schema
 * name, with torch's type name */
static const struct {
    const char *op, *type;
} named_returns[] = {
    {"max_dim", "weft.return_types.max"}, {"min_dim", "weft.return_types.min"},
    {"sort", "weft.return_types.sort"},   {"topk", "weft.return_types.topk"},
    {"cummax", "weft.return_types.cummax"}, {"cummin", "weft.return_types.cummin"},
};
#define NAMED_RETURNS ((int)(sizeof named_returns / sizeof *named_returns))

static int named_return_index(const char *op)
{
    for (int i = 0; i < NAMED_RETURNS; i++)
        if (!strcmp(op, named_returns[i].op))
            return i;
    return -1;
}

enum arg_type {
    A_TENSOR, A_TENSOR_OPT, A_TENSOR_MUT, A_TENSOR_LIST, A_SCALAR, A_FLOAT, A_INT, A_BOOL,
    A_INT_LIST, A_INT_LIST_OPT, A_DTYPE_OPT, A_GENERATOR_OPT, A_SCALAR_OPT, A_FLOAT_OPT,
    A_INT_OPT, A_STRING, A_STRING_OPT, A_TENSOR_LIST_OPT, A_FLOAT_LIST, A_FLOAT_LIST_OPT
};

static const struct {
    const char *text;
    enum arg_type type;
} type_names[] = {
    {"Tensor", A_TENSOR},        {"Tensor?", A_TENSOR_OPT},         {"Tensor(a!)", A_TENSOR_MUT},
    {"Tensor[]", A_TENSOR_LIST}, {"Scalar", A_SCALAR},              {"float", A_FLOAT},
    {"int", A_INT},              {"bool", A_BOOL},                  {"int[]", A_INT_LIST},
    {"int[]?", A_INT_LIST_OPT},  {"ScalarType?", A_DTYPE_OPT},      {"Generator?", A_GENERATOR_OPT},
    {"Scalar?", A_SCALAR_OPT},   {"float?", A_FLOAT_OPT},           {"int?", A_INT_OPT},
    {"str", A_STRING},           {"str?", A_STRING_OPT},
    {"Tensor?[]", A_TENSOR_LIST_OPT}, /* entries may be None: NULL in the list */
    {"float[]", A_FLOAT_LIST},   {"float[]?", A_FLOAT_LIST_OPT},
};

#define MAX_ARGS 32

typedef struct {
    char *name;
    enum arg_type type;
    bool kwonly;
    bool has_default;
    weft_value deflt; /* strings point into the schema copy */
} arg_desc;

typedef struct sig {
    const weft_op *op;
    char *text; /* a private copy of the schema: names and defaults point into it */
    const char *name;
    int nargs, nrets;
    arg_desc args[MAX_ARGS];
    bool inplace, out_form;
    int named; /* index in named_returns, or -1: results a plain tuple */
    struct sig *next; /* the next overload of the same group */
} sig;

typedef struct {
    char *name;  /* the Python name */
    sig *first;  /* functional and in-place overloads */
    sig *outs;   /* NAME_out forms, for out= */
    PyMethodDef def;
    char *doc;
} group;

static PyObject *sig_by_name;   /* C name -> capsule(sig) */
static PyObject *group_by_name; /* Python name -> capsule(group) */
static int bound_count;

/* ---------------------------------------------------------------- schemas */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static int parse_default(arg_desc *a, char *text)
{
    weft_value *v = &a->deflt;
    v->len = 0;
    if (!strcmp(text, "None")) {
        v->tag = WEFT_VALUE_NONE;
    } else if (!strcmp(text, "True") || !strcmp(text, "False")) {
        v->tag = WEFT_VALUE_BOOL;
        v->u.b = text[0] == 'T';
    } else if (text[0] == '\'' || text[0] == '"') {
        size_t n = strlen(text);
        if (n < 2)
            return -1;
        text[n - 1] = '\0';
        v->tag = WEFT_VALUE_STRING;
        v->u.string = text + 1;
    } else {
        char *end;
        bool real = strpbrk(text, ".eEn") != NULL || a->type == A_FLOAT || a->type == A_FLOAT_OPT;
        if (real) {
            v->tag = WEFT_VALUE_DOUBLE;
            v->u.d = strtod(text, &end);
        } else {
            v->tag = WEFT_VALUE_INT;
            v->u.i = strtoll(text, &end, 10);
        }
        if (*end)
            return -1;
    }
    a->has_default = true;
    return 0;
}

/* Parses "NAME(ARGS) -> RESULTS" into s; returns -1 for a schema this
 * binding does not understand (the operator is then not bound). */
static int parse_schema(sig *s, const weft_op *op)
{
    s->op = op;
    s->text = strdup(weft_op_schema(op));
    if (!s->text)
        return -1;
    char *p = strchr(s->text, '(');
    if (!p)
        return -1;
    *p++ = '\0';
    s->name = trim(s->text);
    s->named = named_return_index(s->name);
    /* the argument list ends at the parenthesis that closes the first */
    int depth = 1;
    char *q = p;
    for (; *q && depth; q++)
        depth += *q == '(' ? 1 : *q == ')' ? -1 : 0;
    if (depth)
        return -1;
    q[-1] = '\0';
    char *rets = strstr(q, "->");
    rets = rets ? trim(rets + 2) : "()";
    if (!strcmp(rets, "()"))
        s->nrets = 0;
    else {
        s->nrets = 1;
        for (char *c = rets; *c; c++)
            s->nrets += *c == ',';
    }
    bool kwonly = false;
    s->nargs = 0;
    char *save = NULL;
    for (char *tok = strtok_r(p, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        tok = trim(tok);
        if (!*tok)
            continue;
        if (!strcmp(tok, "*")) {
            kwonly = true;
            continue;
        }
        if (s->nargs == MAX_ARGS)
            return -1;
        arg_desc *a = &s->args[s->nargs++];
        memset(a, 0, sizeof *a);
        a->kwonly = kwonly;
        char *eq = strchr(tok, '=');
        if (eq)
            *eq = '\0';
        char *space = strrchr(trim(tok), ' ');
        if (!space)
            return -1;
        *space = '\0';
        a->name = trim(space + 1);
        char *type = trim(tok);
        size_t i;
        for (i = 0; i < sizeof type_names / sizeof *type_names; i++)
            if (!strcmp(type, type_names[i].text))
                break;
        if (i == sizeof type_names / sizeof *type_names)
            return -1;
        a->type = type_names[i].type;
        if (eq && parse_default(a, trim(eq + 1)) < 0)
            return -1;
    }
    size_t n = strlen(s->name);
    s->out_form = n > 4 && !strcmp(s->name + n - 4, "_out");
    s->inplace = !s->out_form && n > 1 && s->name[n - 1] == '_' && s->name[0] != '_';
    return 0;
}

/* The Python name of an operator's group: the C name without the overload
 * suffixes, keeping a trailing "_" of the in-place forms. */
static void group_name(const sig *s, char *out, size_t size)
{
    snprintf(out, size, "%s", s->name);
    size_t n = strlen(out);
    if (s->out_form)
        out[n -= 4] = '\0';
    else if (s->inplace)
        out[--n] = '\0';
    static const char *suffixes[] = {"_scalar_mode", "_scalar", "_mode", "_dim", "_with_sizes",
                                     "_tensor"};
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        size_t k = strlen(suffixes[i]);
        if (n > k && !strcmp(out + n - k, suffixes[i])) {
            /* an overload only when the shorter name is an operator too: a
             * plugin's sparse_coo_tensor or sparse_dim keeps its name */
            char base[128];
            const weft_op *found;
            snprintf(base, sizeof base, "%.*s", (int)(n - k), out);
            bool overload = weft_op_find(&found, base) == 0;
            if (!overload && strlen(base) + 1 < sizeof base) {
                strcat(base, "_");
                overload = weft_op_find(&found, base) == 0;
            }
            if (overload)
                out[n -= k] = '\0';
            break;
        }
    }
    if (s->inplace && n + 1 < size) {
        out[n] = '_';
        out[n + 1] = '\0';
    }
}

/* ---------------------------------------------------------------- binding */

typedef struct {
    weft_value values[MAX_ARGS];
    PyObject *objects[MAX_ARGS]; /* the Python argument of each (borrowed) */
    int64_t ints[MAX_ARGS][WEFT_MAX_DIMS];
    double doubles[MAX_ARGS][WEFT_MAX_DIMS];
    weft_tensor **lists[MAX_ARGS];
} bound_args;

static void bound_free(bound_args *b, int n)
{
    for (int i = 0; i < n; i++)
        PyMem_Free(b->lists[i]);
}

static bool is_int(PyObject *o)
{
    return !PyBool_Check(o) && (PyLong_Check(o) || (PyIndex_Check(o) && !wpy_tensor_check(o)));
}

/* A Python float or int (not bool), as a float argument takes. */
static bool is_float(PyObject *o)
{
    return !PyBool_Check(o) && (PyFloat_Check(o) || PyLong_Check(o));
}

/* int[] and float[] arguments: a number stands for a list of one (torch's
 * int[] and float[] accept one: interpolate's scale_factor=2.0), else a
 * list or tuple of at most WEFT_MAX_DIMS numbers, stored in ints or
 * doubles as `floats` says.  Returns 0 (count in *n), 1 when an entry is
 * of the wrong kind (why set), NOT_A_LIST when o is neither form (the
 * caller's general message), -1 on a Python error. */
enum { NOT_A_LIST = 2 };
static int number_list(PyObject *o, bool floats, int64_t *ints, double *doubles, Py_ssize_t *n,
                       const char *name, char *why, size_t why_size)
{
    bool (*fits)(PyObject *) = floats ? is_float : is_int;
    PyObject *single[1] = {o};
    PyObject *const *items = single;
    *n = 1;
    if (!fits(o)) {
        if (!PyList_Check(o) && !PyTuple_Check(o))
            return NOT_A_LIST;
        *n = PySequence_Fast_GET_SIZE(o);
        if (*n > WEFT_MAX_DIMS)
            return NOT_A_LIST;
        items = PySequence_Fast_ITEMS(o);
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        if (!fits(items[i])) {
            snprintf(why, why_size, floats ? "'%s' must be a float or a tuple of floats"
                                           : "'%s' must be a tuple of ints",
                     name);
            return 1;
        }
        if (floats)
            doubles[i] = PyFloat_AsDouble(items[i]);
        else
            ints[i] = PyLong_AsLongLong(items[i]);
    }
    return PyErr_Occurred() ? -1 : 0;
}

/* Converts one Python argument; returns 0, 1 when it does not fit the type
 * (why in `why`), -1 on a Python error. */
static int convert(const arg_desc *a, PyObject *o, weft_value *v, bound_args *b, int slot,
                   char *why, size_t why_size)
{
    v->len = 0;
    bool optional = a->type == A_TENSOR_OPT || a->type == A_INT_LIST_OPT ||
                    a->type == A_DTYPE_OPT || a->type == A_GENERATOR_OPT ||
                    a->type == A_SCALAR_OPT || a->type == A_FLOAT_OPT || a->type == A_INT_OPT ||
                    a->type == A_STRING_OPT || a->type == A_FLOAT_LIST_OPT;
    if (o == Py_None && optional) {
        v->tag = WEFT_VALUE_NONE;
        return 0;
    }
    switch (a->type) {
    case A_TENSOR:
    case A_TENSOR_OPT:
    case A_TENSOR_MUT:
        if (!wpy_tensor_check(o))
            break;
        v->tag = WEFT_VALUE_TENSOR;
        v->u.tensor = WPY_T(o);
        return 0;
    case A_TENSOR_LIST:
    case A_TENSOR_LIST_OPT: {
        if (!PyList_Check(o) && !PyTuple_Check(o))
            break;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        weft_tensor **list = PyMem_Malloc(sizeof *list * (size_t)(n ? n : 1));
        if (!list) {
            PyErr_NoMemory();
            return -1;
        }
        b->lists[slot] = list;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(o, i);
            if (item == Py_None && a->type == A_TENSOR_LIST_OPT) {
                list[i] = NULL;
                continue;
            }
            if (!wpy_tensor_check(item)) {
                snprintf(why, why_size, "'%s' must hold only Tensors%s", a->name,
                         a->type == A_TENSOR_LIST_OPT ? " or None" : "");
                return 1;
            }
            list[i] = WPY_T(item);
        }
        v->tag = WEFT_VALUE_TENSOR_LIST;
        v->len = (int32_t)n;
        v->u.tensors = list;
        return 0;
    }
    case A_SCALAR:
    case A_SCALAR_OPT:
        if (wpy_scalar_value(o, v) == 0)
            return 0;
        break;
    case A_FLOAT:
    case A_FLOAT_OPT:
        if (PyBool_Check(o) || !(PyFloat_Check(o) || PyLong_Check(o)))
            break;
        v->tag = WEFT_VALUE_DOUBLE;
        v->u.d = PyFloat_AsDouble(o);
        return PyErr_Occurred() ? -1 : 0;
    case A_INT:
    case A_INT_OPT:
        if (!is_int(o))
            break;
        v->tag = WEFT_VALUE_INT;
        v->u.i = PyLong_AsLongLong(o);
        return PyErr_Occurred() ? -1 : 0;
    case A_BOOL:
        if (!PyBool_Check(o))
            break;
        v->tag = WEFT_VALUE_BOOL;
        v->u.b = o == Py_True;
        return 0;
    case A_INT_LIST:
    case A_INT_LIST_OPT:
    case A_FLOAT_LIST:
    case A_FLOAT_LIST_OPT: {
        const bool floats = a->type == A_FLOAT_LIST || a->type == A_FLOAT_LIST_OPT;
        Py_ssize_t n;
        int rc = number_list(o, floats, b->ints[slot], b->doubles[slot], &n, a->name, why,
                             why_size);
        if (rc == NOT_A_LIST)
            break;
        if (rc != 0)
            return rc;
        v->tag = floats ? WEFT_VALUE_DOUBLE_LIST : WEFT_VALUE_INT_LIST;
        v->len = (int32_t)n;
        if (floats)
            v->u.doubles = b->doubles[slot];
        else
            v->u.ints = b->ints[slot];
        return 0;
    }
    case A_DTYPE_OPT:
        if (!PyObject_TypeCheck(o, &wpy_dtype_type))
            break;
        v->tag = WEFT_VALUE_DTYPE;
        v->u.dtype = ((wpy_dtype *)o)->dtype;
        return 0;
    case A_GENERATOR_OPT:
        break;
    case A_STRING:
    case A_STRING_OPT:
        if (!PyUnicode_Check(o))
            break;
        v->tag = WEFT_VALUE_STRING;
        v->u.string = PyUnicode_AsUTF8(o);
        return v->u.string ? 0 : -1;
    }
    snprintf(why, why_size, "argument '%s' got %.100s", a->name, Py_TYPE(o)->tp_name);
    return 1;
}

static int find_arg(const sig *s, const char *name)
{
    for (int i = 0; i < s->nargs; i++)
        if (!strcmp(s->args[i].name, name))
            return i;
    return -1;
}

/* The value of an argument left out that has no default in the schema:
 * PyTorch's defaults (optional types None, keepdim False, stride the
 * kernel size of pooling, else 1, padding 0, dilation 1). */
static int implicit_default(const sig *s, int i, bound_args *b)
{
    const arg_desc *a = &s->args[i];
    weft_value *v = &b->values[i];
    v->len = 0;
    switch (a->type) {
    case A_TENSOR_OPT: case A_INT_LIST_OPT: case A_DTYPE_OPT: case A_GENERATOR_OPT:
    case A_SCALAR_OPT: case A_FLOAT_OPT: case A_INT_OPT: case A_STRING_OPT:
    case A_FLOAT_LIST_OPT:
        v->tag = WEFT_VALUE_NONE;
        return 0;
    case A_BOOL:
        if (strcmp(a->name, "keepdim"))
            return -1;
        v->tag = WEFT_VALUE_BOOL;
        v->u.b = false;
        return 0;
    case A_INT_LIST: {
        int k = find_arg(s, "kernel_size");
        if (!strcmp(a->name, "stride") && k >= 0 && k < i) {
            *v = b->values[k];
            return 0;
        }
        int64_t one = !strcmp(a->name, "stride") || !strcmp(a->name, "dilation") ? 1
                      : !strcmp(a->name, "padding")                               ? 0
                                                                                   : -1;
        if (one < 0)
            return -1;
        b->ints[i][0] = one;
        v->tag = WEFT_VALUE_INT_LIST;
        v->len = 1;
        v->u.ints = b->ints[i];
        return 0;
    }
    default:
        return -1;
    }
}

/* Binds Python arguments to s: 0, 1 when they do not fit (why), -1 on a
 * Python error.  `prefix` is an argument placed before args (self of a
 * method call is already in args; the out= tensor is the prefix). */
static int bind(const sig *s, PyObject *prefix, PyObject *args, PyObject *kwargs,
                bound_args *b, char *why, size_t why_size)
{
    bool set[MAX_ARGS] = {false};
    memset(b->lists, 0, sizeof b->lists);
    Py_ssize_t npos = PyTuple_GET_SIZE(args) + (prefix ? 1 : 0);
    int positional = 0;
    while (positional < s->nargs && !s->args[positional].kwonly)
        positional++;
    /* torch takes the one int list of a method whose only other argument is
     * self as varargs too: x.repeat(2, 1), x.flip(0, 1), x.tile(2, 1)
     * (its parser's allow_varargs_intlist).  The same function serves
     * weft.flip(x, 0, 1), which torch refuses: a harmless superset. */
    bool varargs = !prefix && positional == 2 && npos > 2 && s->args[1].type == A_INT_LIST;
    if (varargs) {
        PyObject *packed = PyTuple_GetSlice(args, 1, npos);
        if (!packed)
            return -1;
        int rc = convert(&s->args[1], packed, &b->values[1], b, 1, why, why_size);
        Py_DECREF(packed); /* the ints are copied into b */
        if (rc)
            return rc;
        b->objects[1] = NULL;
        set[1] = true;
        npos = 1;
    } else if (npos > positional) {
        snprintf(why, why_size, "takes %d positional arguments but %zd were given", positional,
                 npos);
        return 1;
    }
    for (Py_ssize_t i = 0; i < npos; i++) {
        PyObject *o = prefix ? (i == 0 ? prefix : PyTuple_GET_ITEM(args, i - 1))
                             : PyTuple_GET_ITEM(args, i);
        int rc = convert(&s->args[i], o, &b->values[i], b, (int)i, why, why_size);
        if (rc)
            return rc;
        b->objects[i] = o;
        set[i] = true;
    }
    if (kwargs) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(kwargs, &pos, &key, &value)) {
            const char *k = PyUnicode_AsUTF8(key);
            if (!k)
                return -1;
            if (!strcmp(k, "out"))
                continue;
            int i = find_arg(s, k);
            if (i < 0 || set[i]) {
                snprintf(why, why_size, i < 0 ? "unexpected keyword argument '%s'"
                                              : "got multiple values for argument '%s'", k);
                return 1;
            }
            int rc = convert(&s->args[i], value, &b->values[i], b, i, why, why_size);
            if (rc)
                return rc;
            b->objects[i] = value;
            set[i] = true;
        }
    }
    for (int i = 0; i < s->nargs; i++) {
        if (set[i])
            continue;
        b->objects[i] = NULL;
        if (s->args[i].has_default) {
            b->values[i] = s->args[i].deflt;
        } else if (implicit_default(s, i, b) < 0) {
            snprintf(why, why_size, "missing required argument '%s'", s->args[i].name);
            return 1;
        }
    }
    return 0;
}

/* A Tensor[] result as a tuple (torch.split and friends return tuples).
 * Consumes the list whatever happens; NULL with an exception set when
 * `failed` already or when wrapping fails. */
static PyObject *wrap_list(const weft_value *v, bool failed)
{
    weft_tensor **list = (weft_tensor **)v->u.tensors;
    PyObject *tuple = failed ? NULL : PyTuple_New(v->len);
    for (int i = 0; tuple && i < v->len; i++) {
        PyObject *o = wpy_wrap(list[i]); /* takes the reference, also on failure */
        list[i] = NULL;
        if (!o) {
            Py_CLEAR(tuple);
            break;
        }
        PyTuple_SET_ITEM(tuple, i, o);
    }
    weft_tensor_list_free(list, v->len);
    return tuple;
}

/* torch.return_types: the (values, indices) pairs that torch returns as
 * named tuples, so that x.max(1).values and sort(x).indices work (a plain
 * tuple has neither); still tuples, so unpacking is unchanged.  The type
 * names are string literals: a struct sequence type keeps the pointer. */
static PyTypeObject *named_type(int i)
{
    static PyTypeObject *types[NAMED_RETURNS];
    static PyStructSequence_Field fields[] = {
        {"values", "the values"},
        {"indices", "their indices along dim (int64)"},
        {NULL, NULL},
    };
    if (!types[i]) {
        PyStructSequence_Desc desc = {(char *)named_returns[i].type,
                                      "(values, indices), as torch.return_types", fields, 2};
        types[i] = PyStructSequence_NewType(&desc);
    }
    return types[i];
}

/* Calls op and turns its results into Python objects; the GIL is released
 * while the kernel runs. */
static PyObject *call(const sig *s, const weft_value *args, PyObject *first)
{
    weft_value rets[8];
    int nrets = s->nrets < 8 ? s->nrets : 8;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = weft_call_boxed(s->op, args, s->nargs, rets, nrets);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return wpy_raise(rc);
    if (nrets == 0) {
        if (first) {
            Py_INCREF(first);
            return first;
        }
        Py_RETURN_NONE;
    }
    PyObject *objects[8] = {NULL};
    bool failed = false;
    for (int i = 0; i < nrets; i++) {
        if (rets[i].tag == WEFT_VALUE_TENSOR) {
            objects[i] = failed ? NULL : wpy_wrap(rets[i].u.tensor);
            if (failed)
                weft_tensor_release(rets[i].u.tensor);
        } else if (rets[i].tag == WEFT_VALUE_TENSOR_LIST) {
            objects[i] = wrap_list(&rets[i], failed);
        } else if (rets[i].tag == WEFT_VALUE_INT) {
            objects[i] = PyLong_FromLongLong(rets[i].u.i);
        } else if (rets[i].tag == WEFT_VALUE_DOUBLE) {
            objects[i] = PyFloat_FromDouble(rets[i].u.d);
        } else if (rets[i].tag == WEFT_VALUE_BOOL) {
            objects[i] = PyBool_FromLong(rets[i].u.b);
        } else {
            objects[i] = Py_None;
            Py_INCREF(Py_None);
        }
        failed = failed || !objects[i];
    }
    if (failed) {
        for (int i = 0; i < nrets; i++)
            Py_XDECREF(objects[i]);
        return NULL;
    }
    if (nrets == 1)
        return objects[0];
    if (s->named >= 0 && nrets == 2) {
        PyTypeObject *type = named_type(s->named);
        PyObject *r = type ? PyStructSequence_New(type) : NULL;
        for (int i = 0; i < nrets; i++) {
            if (r)
                PyStructSequence_SET_ITEM(r, i, objects[i]);
            else
                Py_DECREF(objects[i]);
        }
        return r;
    }
    PyObject *tuple = PyTuple_New(nrets);
    if (!tuple) {
        for (int i = 0; i < nrets; i++)
            Py_DECREF(objects[i]);
        return NULL;
    }
    for (int i = 0; i < nrets; i++)
        PyTuple_SET_ITEM(tuple, i, objects[i]);
    return tuple;
}

static PyObject *group_call(PyObject *capsule, PyObject *args, PyObject *kwargs)
{
    group *g = PyCapsule_GetPointer(capsule, "weft.group");
    if (!g)
        return NULL;
    PyObject *out = kwargs ? PyDict_GetItemString(kwargs, "out") : NULL;
    bool use_out = out && out != Py_None;
    char why[256] = "";
    char first_why[256] = "";
    bound_args *b = PyMem_Malloc(sizeof *b);
    if (!b)
        return PyErr_NoMemory();
    for (sig *s = use_out ? g->outs : g->first; s; s = s->next) {
        int rc = bind(s, use_out ? out : NULL, args, kwargs, b, why, sizeof why);
        if (rc == 0) {
            PyObject *r = call(s, b->values, s->inplace ? b->objects[0] : use_out ? out : NULL);
            bound_free(b, s->nargs);
            PyMem_Free(b);
            return r;
        }
        bound_free(b, s->nargs);
        if (rc < 0) {
            PyMem_Free(b);
            return NULL;
        }
        if (!first_why[0])
            snprintf(first_why, sizeof first_why, "%s", why);
    }
    PyMem_Free(b);
    if (use_out && !g->outs)
        return PyErr_Format(PyExc_TypeError, "%s() has no out= form", g->name);
    PyObject *types = PyList_New(0);
    for (Py_ssize_t i = 0; types && i < PyTuple_GET_SIZE(args); i++) {
        PyObject *n = PyUnicode_FromString(Py_TYPE(PyTuple_GET_ITEM(args, i))->tp_name);
        if (n)
            PyList_Append(types, n);
        Py_XDECREF(n);
    }
    PyErr_Format(PyExc_TypeError,
                 "%s() received an invalid combination of arguments - got (%S): %s; expected "
                 "one of:\n%s",
                 g->name, types ? types : Py_None, first_why, g->doc);
    Py_XDECREF(types);
    return NULL;
}

PyObject *wpy_call_op(const char *name, const weft_value *args, int nargs)
{
    PyObject *capsule = PyDict_GetItemString(sig_by_name, name);
    if (!capsule)
        return PyErr_Format(PyExc_NotImplementedError, "no operator '%s' in the table", name);
    const sig *s = PyCapsule_GetPointer(capsule, "weft.sig");
    if (nargs > s->nargs)
        return PyErr_Format(PyExc_TypeError, "%s: too many arguments", name);
    weft_value full[MAX_ARGS];
    memcpy(full, args, sizeof *args * (size_t)nargs);
    for (int i = nargs; i < s->nargs; i++) {
        if (!s->args[i].has_default)
            return PyErr_Format(PyExc_TypeError, "%s: missing argument '%s'", name,
                                s->args[i].name);
        full[i] = s->args[i].deflt;
    }
    return call(s, full, NULL);
}

/* --------------------------------------------------------------- the table */

static group *group_for(const char *name)
{
    PyObject *capsule = PyDict_GetItemString(group_by_name, name);
    if (capsule)
        return PyCapsule_GetPointer(capsule, "weft.group");
    group *g = calloc(1, sizeof *g);
    if (!g || !(g->name = strdup(name))) {
        free(g);
        PyErr_NoMemory();
        return NULL;
    }
    capsule = PyCapsule_New(g, "weft.group", NULL);
    if (!capsule || PyDict_SetItemString(group_by_name, name, capsule) < 0) {
        Py_XDECREF(capsule);
        return NULL;
    }
    Py_DECREF(capsule);
    return g;
}

static void append(sig **list, sig *s)
{
    while (*list)
        list = &(*list)->next;
    *list = s;
}

/* The docstring: every schema of the group, one a line. */
static int make_doc(group *g)
{
    size_t size = 1;
    for (int pass = 0; pass < 2; pass++)
        for (sig *s = pass ? g->outs : g->first; s; s = s->next)
            size += strlen(weft_op_schema(s->op)) + 4;
    char *doc = malloc(size);
    if (!doc)
        return -1;
    doc[0] = '\0';
    for (int pass = 0; pass < 2; pass++)
        for (sig *s = pass ? g->outs : g->first; s; s = s->next) {
            strcat(doc, "  ");
            strcat(doc, weft_op_schema(s->op));
            strcat(doc, "\n");
        }
    free(g->doc);
    g->doc = doc;
    return 0;
}

int wpy_ops_init(PyObject *module)
{
    if (!sig_by_name && (!(sig_by_name = PyDict_New()) || !(group_by_name = PyDict_New())))
        return -1;
    int count = weft_op_count();
    PyObject *touched = PyList_New(0);
    if (!touched)
        return -1;
    for (int i = bound_count; i < count; i++) {
        const weft_op *op = weft_op_at(i);
        sig *s = calloc(1, sizeof *s);
        if (!s || parse_schema(s, op) < 0) {
            /* a schema this binding cannot read stays reachable from C only */
            if (s)
                free(s->text);
            free(s);
            continue;
        }
        PyObject *capsule = PyCapsule_New(s, "weft.sig", NULL);
        if (!capsule || PyDict_SetItemString(sig_by_name, s->name, capsule) < 0)
            goto fail;
        Py_DECREF(capsule);
        char name[128];
        group_name(s, name, sizeof name);
        group *g = group_for(name);
        if (!g)
            goto fail;
        append(s->out_form ? &g->outs : &g->first, s);
        PyObject *n = PyUnicode_FromString(name);
        if (!n || PyList_Append(touched, n) < 0)
            goto fail;
        Py_DECREF(n);
    }
    bound_count = count;
    PyObject *type_dict = wpy_tensor_type->tp_dict;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(touched); i++) {
        const char *name = PyUnicode_AsUTF8(PyList_GET_ITEM(touched, i));
        group *g = group_for(name);
        if (make_doc(g) < 0)
            goto fail;
        if (g->def.ml_name) {
            g->def.ml_doc = g->doc; /* already bound: new overloads are found through g */
            continue;
        }
        if (!g->first || PyObject_HasAttrString(module, name))
            continue; /* out= forms only, or a name the module defines itself */
        g->def.ml_name = g->name;
        g->def.ml_meth = (PyCFunction)(void (*)(void))group_call;
        g->def.ml_flags = METH_VARARGS | METH_KEYWORDS;
        g->def.ml_doc = g->doc;
        PyObject *capsule = PyDict_GetItemString(group_by_name, name);
        PyObject *fn = PyCFunction_NewEx(&g->def, capsule, NULL);
        if (!fn || PyModule_AddObject(module, name, fn) < 0) {
            Py_XDECREF(fn);
            goto fail;
        }
        bool method = false;
        for (sig *s = g->first; s; s = s->next)
            method = method || (s->nargs > 0 && !strcmp(s->args[0].name, "self"));
        if (method && !PyDict_GetItemString(type_dict, name)) {
            PyObject *m = PyInstanceMethod_New(fn);
            if (!m || PyObject_SetAttrString((PyObject *)wpy_tensor_type, name, m) < 0) {
                Py_XDECREF(m);
                goto fail;
            }
            Py_DECREF(m);
        }
    }
    Py_DECREF(touched);
    return 0;
fail:
    Py_DECREF(touched);
    return -1;
}
