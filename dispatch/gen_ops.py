#!/usr/bin/env python3
"""Generates weft's operator entry points from dispatch/operators.def.

Outputs (all derived; never edit them by hand):
  include/weft/ops.h   public prototypes, each documented with its schema
  dispatch/ops_gen.h   internal: the operator ids (WF_OP_<name>)
  dispatch/ops_gen.c   internal: the schema table and the C entry points,
                       which box their arguments and call the dispatcher

The core parses the same schema strings at start-up (dispatch/schema.c), so
argument checking and boxed calls follow this table too.

usage: gen_ops.py operators.def OUTDIR
"""
import os
import re
import sys

TYPE_RE = re.compile(r"^(Tensor\(a!\)|Tensor\?\[\]|Tensor\[\]|Tensor\?|Tensor|Scalar\?|Scalar|float\[\]\?|float\[\]|float\?|float|int\[\]\?|int\[\]|int\?|int|bool|ScalarType\?|Generator\?|str\?|str)\s+(\w+)(?:=(\S+))?$")


class Arg:
    def __init__(self, typ, name, default, kwonly):
        self.typ, self.name, self.default, self.kwonly = typ, name, default, kwonly

    def c_params(self):
        t, n = self.typ, self.name
        return {
            "Tensor(a!)": [f"weft_tensor *{n}"],
            "Tensor": [f"const weft_tensor *{n}"],
            "Tensor?": [f"const weft_tensor *{n}"],
            "Tensor[]": [f"weft_tensor *const *{n}", f"int {n}_len"],
            # Tensor?[]: the same list, whose NULL entries are None
            "Tensor?[]": [f"weft_tensor *const *{n}", f"int {n}_len"],
            "Scalar": [f"double {n}"],
            "float": [f"double {n}"],
            "int": [f"int64_t {n}"],
            "bool": [f"bool {n}"],
            "int[]": [f"const int64_t *{n}", f"int {n}_len"],
            "int[]?": [f"const int64_t *{n}", f"int {n}_len"],
            "float[]": [f"const double *{n}", f"int {n}_len"],
            "float[]?": [f"const double *{n}", f"int {n}_len"],
            "ScalarType?": [f"weft_dtype {n}"],
            "Generator?": [f"weft_generator *{n}"],
            # optional numbers: NULL is None
            "Scalar?": [f"const double *{n}"],
            "float?": [f"const double *{n}"],
            "int?": [f"const int64_t *{n}"],
            "str": [f"const char *{n}"],
            "str?": [f"const char *{n}"],
        }[t]

    def c_default(self):
        d = self.default
        if d is None:
            raise ValueError(f"keyword-only argument {self.name} needs a default")
        if self.typ in ("Scalar", "float"):
            return [repr(float(d))]
        if self.typ == "int":
            return [str(int(d))]
        if self.typ == "bool":
            return ["true" if d == "True" else "false"]
        if self.typ in ("str", "str?") and len(d) >= 2 and d[0] == d[-1] == "'":
            return ['"' + d[1:-1] + '"']
        if d == "None":
            if self.typ == "ScalarType?":
                return ["WEFT_DTYPE_UNSET"]
            if self.typ in ("int[]?", "int[]", "float[]?", "float[]"):
                return ["NULL", "0"]
            return ["NULL"]
        raise ValueError(f"unsupported default {d} for {self.name}")

    def box(self, slot):
        t, n = self.typ, self.name
        if t in ("Tensor", "Tensor(a!)"):
            return f"{slot}.tag = WEFT_VALUE_TENSOR; {slot}.u.tensor = (weft_tensor *){n};"
        if t == "Tensor?":
            return f"{slot}.tag = {n} ? WEFT_VALUE_TENSOR : WEFT_VALUE_NONE; {slot}.u.tensor = (weft_tensor *){n};"
        if t in ("Tensor[]", "Tensor?[]"):
            return f"{slot}.tag = WEFT_VALUE_TENSOR_LIST; {slot}.len = {n}_len; {slot}.u.tensors = {n};"
        if t in ("Scalar", "float"):
            return f"{slot}.tag = WEFT_VALUE_DOUBLE; {slot}.u.d = {n};"
        if t == "int":
            return f"{slot}.tag = WEFT_VALUE_INT; {slot}.u.i = {n};"
        if t == "bool":
            return f"{slot}.tag = WEFT_VALUE_BOOL; {slot}.u.b = {n};"
        if t == "int[]":
            return f"{slot}.tag = WEFT_VALUE_INT_LIST; {slot}.len = {n}_len; {slot}.u.ints = {n};"
        if t == "int[]?":
            return f"{slot}.tag = {n} ? WEFT_VALUE_INT_LIST : WEFT_VALUE_NONE; {slot}.len = {n}_len; {slot}.u.ints = {n};"
        if t == "float[]":
            return f"{slot}.tag = WEFT_VALUE_DOUBLE_LIST; {slot}.len = {n}_len; {slot}.u.doubles = {n};"
        if t == "float[]?":
            return f"{slot}.tag = {n} ? WEFT_VALUE_DOUBLE_LIST : WEFT_VALUE_NONE; {slot}.len = {n}_len; {slot}.u.doubles = {n};"
        if t == "ScalarType?":
            return f"{slot}.tag = {n} == WEFT_DTYPE_UNSET ? WEFT_VALUE_NONE : WEFT_VALUE_DTYPE; {slot}.u.dtype = {n};"
        if t in ("Scalar?", "float?"):
            return f"{slot}.tag = {n} ? WEFT_VALUE_DOUBLE : WEFT_VALUE_NONE; {slot}.u.d = {n} ? *{n} : 0;"
        if t == "int?":
            return f"{slot}.tag = {n} ? WEFT_VALUE_INT : WEFT_VALUE_NONE; {slot}.u.i = {n} ? *{n} : 0;"
        if t == "str":
            return f"{slot}.tag = WEFT_VALUE_STRING; {slot}.u.string = {n};"
        if t == "str?":
            return f"{slot}.tag = {n} ? WEFT_VALUE_STRING : WEFT_VALUE_NONE; {slot}.u.string = {n};"
        if t == "Generator?":
            return f"{slot}.tag = {n} ? WEFT_VALUE_GENERATOR : WEFT_VALUE_NONE; {slot}.u.generator = {n};"
        raise ValueError(t)


class Op:
    def __init__(self, schema):
        m = re.match(r"^(\w+)\((.*)\)\s*->\s*(.*)$", schema)
        if not m:
            raise ValueError(f"bad schema: {schema}")
        self.schema = schema
        self.name = m.group(1)
        self.args = []
        kwonly = False
        body = m.group(2).strip()
        for part in [p.strip() for p in body.split(",")] if body else []:
            if part == "*":
                kwonly = True
                continue
            am = TYPE_RE.match(part)
            if not am:
                raise ValueError(f"{self.name}: bad argument '{part}'")
            self.args.append(Arg(am.group(1), am.group(2), am.group(3), kwonly))
        rets = m.group(3).strip()
        # a list result is one boxed value (WEFT_VALUE_TENSOR_LIST); in C it
        # comes back as an array the caller frees with weft_tensor_list_free
        self.list_result = rets == "Tensor[]"
        if rets == "()":
            self.nrets = 0
        elif rets in ("Tensor", "Tensor[]"):
            self.nrets = 1
        else:
            rm = re.match(r"^\((Tensor(?:,\s*Tensor)*)\)$", rets)
            if not rm:
                raise ValueError(f"{self.name}: bad results '{rets}'")
            self.nrets = rm.group(1).count("Tensor")
        self.mutating = bool(self.args) and self.args[0].typ == "Tensor(a!)"
        if self.mutating != (self.nrets == 0):
            raise ValueError(f"{self.name}: an operator either writes its first argument or returns tensors")
        if self.name.endswith("_") or self.name.endswith("_out"):
            if not self.mutating:
                raise ValueError(f"{self.name}: in-place and out= operators take Tensor(a!) first")

    def ex_name(self):
        if self.name.endswith("_"):
            return self.name[:-1] + "_ex_"
        return self.name + "_ex"

    def has_kwonly(self):
        return any(a.kwonly for a in self.args)

    def result_params(self):
        if self.list_result:
            return ["weft_tensor ***out", "int *out_len"]
        if self.nrets == 1:
            return ["weft_tensor **out"]
        return [f"weft_tensor **out{i}" for i in range(self.nrets)]

    def params(self, include_kwonly):
        ps = self.result_params()
        for a in self.args:
            if a.kwonly and not include_kwonly:
                continue
            ps += a.c_params()
        return ps


def proto(name, params):
    return f"WEFT_API int weft_{name}({', '.join(params)})"


def gen(ops, outdir):
    h = ["/* Generated by dispatch/gen_ops.py from dispatch/operators.def: do not edit. */",
         "#ifndef WEFT_OPS_H", "#define WEFT_OPS_H", "", "#include <weft/weft.h>", "",
         "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
         "/* Every operator returns 0 or a negative WEFT_E* code.  Functional forms",
         " * put a new reference into their out-pointers (left NULL on error);",
         " * an operator returning Tensor[] puts an array of *out_len new references",
         " * into *out, which the caller gives back with weft_tensor_list_free",
         " * (left NULL and 0 on error);",
         " * in-place (NAME_) and out= (NAME_out) forms write their first argument.",
         " * NAME_ex takes the keyword-only arguments too.  Thread-safe. */", ""]
    ih = ["/* Generated by dispatch/gen_ops.py: do not edit. */",
          "#ifndef WF_OPS_GEN_H", "#define WF_OPS_GEN_H", "", "enum {"]
    c = ["/* Generated by dispatch/gen_ops.py from dispatch/operators.def: do not edit. */",
         '#include "dispatch/dispatcher.h"', "",
         "const char *const wd__op_schemas[WF_OP_COUNT] = {"]
    for op in ops:
        ih.append(f"    WF_OP_{op.name},")
        c.append(f'    "{op.schema}",')
    ih += ["    WF_OP_COUNT", "};", "", "extern const char *const wd__op_schemas[WF_OP_COUNT];", "", "#endif", ""]
    c += ["};", ""]
    for op in ops:
        h.append(f"/* {op.schema} */")
        h.append(proto(op.name, op.params(False)) + ";")
        if op.has_kwonly():
            h.append(proto(op.ex_name(), op.params(True)) + ";")
        h.append("")
        full = op.ex_name() if op.has_kwonly() else op.name
        # the full entry point boxes and dispatches
        c.append(proto(full, op.params(True)).replace("WEFT_API ", "WEFT_API ") + "\n{")
        outs = ["out"] if op.nrets == 1 else [f"out{i}" for i in range(op.nrets)]
        if op.list_result:
            outs = ["out", "out_len"]
        for o in outs:
            c.append(f"    if (!{o})")
            c.append(f'        return weft_set_error(WEFT_EINVAL, "{op.name}: the result pointer \'{o}\' is NULL");')
            c.append(f"    *{o} = {'0' if o == 'out_len' else 'NULL'};")
        c.append(f"    weft_value args[{max(len(op.args), 1)}];")
        for i, a in enumerate(op.args):
            c.append(f"    args[{i}].len = 0;")
            c.append("    " + a.box(f"args[{i}]"))
        if op.nrets:
            c.append(f"    weft_value rets[{op.nrets}];")
            c.append(f"    int rc = wd__dispatch(WF_OP_{op.name}, args, {len(op.args)}, rets, {op.nrets});")
            c.append("    if (rc == 0) {")
            if op.list_result:
                # the dispatcher has checked the tag; the array is the
                # core's (weft_tensor_list_new), so the caller may free it
                c.append("        *out = (weft_tensor **)rets[0].u.tensors;")
                c.append("        *out_len = rets[0].len;")
            else:
                for i, o in enumerate(outs):
                    c.append(f"        *{o} = rets[{i}].u.tensor;")
            c.append("    }")
            c.append("    return rc;")
        else:
            c.append(f"    return wd__dispatch(WF_OP_{op.name}, args, {len(op.args)}, NULL, 0);")
        c.append("}")
        c.append("")
        if op.has_kwonly():
            c.append(proto(op.name, op.params(False)) + "\n{")
            call = [o for o in outs]
            for a in op.args:
                if a.kwonly:
                    call += a.c_default()
                else:
                    call += [p.split()[-1].lstrip("*") for p in a.c_params()]
            c.append(f"    return weft_{op.ex_name()}({', '.join(call)});")
            c.append("}")
            c.append("")
    h += ["#ifdef __cplusplus", "}", "#endif", "", "#endif", ""]
    write(os.path.join(outdir, "include", "weft", "ops.h"), h)
    write(os.path.join(outdir, "dispatch", "ops_gen.h"), ih)
    write(os.path.join(outdir, "dispatch", "ops_gen.c"), c)


def write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    text = "\n".join(lines)
    try:
        with open(path) as f:
            if f.read() == text:
                return  # keep the timestamp: nothing to rebuild
    except OSError:
        pass
    with open(path, "w") as f:
        f.write(text)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ops, names = [], set()
    with open(sys.argv[1]) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                op = Op(line)
            except ValueError as e:
                sys.exit(f"{sys.argv[1]}:{lineno}: {e}")
            if op.name in names:
                sys.exit(f"{sys.argv[1]}:{lineno}: duplicate operator {op.name}")
            names.add(op.name)
            ops.append(op)
    gen(ops, sys.argv[2])


if __name__ == "__main__":
    main()
