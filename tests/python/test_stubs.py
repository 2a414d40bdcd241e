"""weft/_C.pyi, generated from the operator table by python/gen_stubs.py:
it parses, declares every public function of weft._C and every public
Tensor method with the names they have at run time, and nothing that does
not exist; an operator's stub carries the schema's argument names."""
import ast
import os

import weft
from taplib import done, eq, test

stub_path = os.path.join(os.path.dirname(weft._C.__file__), "_C.pyi")


def declared():
    tree = ast.parse(open(stub_path).read())
    functions, methods = {}, {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions.setdefault(node.name, []).append(node)
        if isinstance(node, ast.ClassDef) and node.name == "Tensor":
            for member in node.body:
                if isinstance(member, ast.FunctionDef):
                    methods.setdefault(member.name, []).append(member)
                elif isinstance(member, ast.AnnAssign):
                    methods.setdefault(member.target.id, [])
    return functions, methods


@test
def stub_matches_module():
    """every public function of weft._C is in the stub, and every stub function exists"""
    functions, _ = declared()
    public = {n for n, v in vars(weft._C).items() if callable(v) and not n.startswith("_")
              and not isinstance(v, type)}
    eq(sorted(public - set(functions)), [], "missing from the stub")
    eq(sorted(n for n in functions if not callable(getattr(weft._C, n, None))), [],
       "in the stub but not in weft._C")


@test
def stub_matches_tensor():
    """every public Tensor method and attribute is in the stub, and every stub member exists"""
    _, methods = declared()
    public = {n for n in dir(weft.Tensor) if not n.startswith("_")}
    eq(sorted(public - set(methods)), [], "missing from the stub")
    eq(sorted(n for n in methods if not n.startswith("__") and not hasattr(weft.Tensor, n)), [],
       "in the stub but not on Tensor")


@test
def stub_arguments():
    """operators keep the schema's arguments: add's alpha and out, max's overloads, softmax's dim"""
    functions, methods = declared()
    add = functions["add"][0]
    eq([a.arg for a in add.args.args], ["self", "other"])
    eq([a.arg for a in add.args.kwonlyargs], ["alpha", "out"])
    eq(len(functions["max"]) > 1, True)
    eq([a.arg for a in methods["softmax"][0].args.args][:2], ["self", "dim"])


done()
