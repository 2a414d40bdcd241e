"""Layouts from Python (issue 13): Tensor.layout, weft.strided, the
conversions with autograd through them, the refusals (DLPack's is a
BufferError), printing, and weft.layouts(), with the constant-valued test
layout (tests/plugins/constlayout.c)."""
import os
import subprocess
import sys

import weft
from taplib import Skip, done, eq, raises, test

plugin = os.path.join(os.environ.get("WEFT_TEST_PLUGIN_DIR", ""), "test-constlayout.so")


def needs_plugin():
    if not os.path.exists(plugin):
        raise Skip("the test plugin %s is not built (make check builds it)" % plugin)
    if "constant" not in [l.name for l, _ in weft.layouts()]:
        weft.load_plugin(plugin)


@test
def strided_is_built_in():
    """a tensor's layout is weft.strided, which prints and compares as torch's do"""
    t = weft.ones(2, 3)
    eq(t.layout is weft.strided, True)
    eq(repr(t.layout), "weft.strided")
    eq(t.layout == "strided", True)
    eq(t.to_strided() is not None, True)
    eq([(l.name, p) for l, p in weft.layouts()][0], ("strided", "core"))


@test
def bad_targets():
    """to_layout with an unknown name is a RuntimeError naming it; a wrong type is a TypeError"""
    t = weft.ones(2)
    raises(RuntimeError, t.to_layout, "no_such_layout", contains="no layout named 'no_such_layout'")
    raises(TypeError, t.to_layout, 3)
    raises(TypeError, weft.layout, 3)


@test
def a_plugin_layout():
    """a plugin's layout: conversion both ways, its own kernel, printing, layouts()"""
    needs_plugin()
    c = weft.full((2, 3), 2.5).to_layout("constant")
    eq(c.layout == "constant", True)
    eq(repr(c.layout), "weft.constant")
    eq(c.layout is weft.layout("constant"), True)
    eq(c.shape, (2, 3))
    eq(c.to_strided().tolist(), [[2.5] * 3] * 2)
    eq(c.to_dense().tolist(), [[2.5] * 3] * 2)
    eq((-c).layout == "constant", True, "neg is the plugin's own kernel")
    eq(c.sum().item(), 15.0)
    eq("layout=constant (value 2.5)" in repr(c), True, repr(c))
    eq(("constant", "constlayout") in [(l.name, p) for l, p in weft.layouts()], True)


@test
def refusals():
    """what has no kernel for the layout is a RuntimeError naming both; DLPack is a BufferError"""
    needs_plugin()
    c = weft.full((4,), 1.0).to_layout("constant")
    raises(RuntimeError, weft.exp, c, contains="exp: no kernel for layout 'constant'")
    raises(RuntimeError, c.transpose, 0, 0, contains="layout 'constant'")
    raises(BufferError, c.__dlpack__, contains="layout 'constant'")
    raises(RuntimeError, weft.arange(4.0).to_layout, "constant", contains="not a constant tensor")


@test
def assignment_refused_where_views_copy():
    """t[i] = x on a plugin layout that declares WEFT_LAYOUT_VIEWS_COPY: a TypeError naming it, the tensor unchanged"""
    needs_plugin()
    # the flag is read at the plugin's load, so a process of its own loads it
    # with CONSTLAYOUT_VIEWS_COPY set
    code = """
import weft
weft.load_plugin(%r)
c = weft.full((2, 3), 2.5).to_layout("constant")
for key in (0, (slice(None), 1), Ellipsis):
    try:
        c[key] = 5.0
        print("assigned")
    except TypeError as e:
        print("TypeError:", e)
print(c.to_strided().tolist())
""" % plugin
    env = dict(os.environ, CONSTLAYOUT_VIEWS_COPY="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    eq(r.returncode, 0, r.stderr)
    lines = r.stdout.splitlines()
    want = ("TypeError: Cannot assign to a tensor of layout 'constant': its views are copies "
            "(convert it with to_dense() first)")
    eq(lines[:3], [want] * 3, r.stdout)
    eq(lines[3], str([[2.5] * 3] * 2), "the tensor is unchanged")
    # without the flag the same assignment reaches select, which refuses
    # the layout by name (a RuntimeError, not a silent write)
    c = weft.full((2, 3), 2.5).to_layout("constant")
    raises(RuntimeError, c.__setitem__, 0, 5.0, contains="layout 'constant'")
    eq(c.to_strided().tolist(), [[2.5] * 3] * 2)


@test
def autograd_through_conversions():
    """the gradient flows back through to_layout and to_strided"""
    needs_plugin()
    x = weft.full((3,), 2.0, requires_grad=True)
    y = (x.to_layout("constant").to_strided() * 3).sum()
    y.backward()
    eq(x.grad.tolist(), [3.0, 3.0, 3.0])


done()
