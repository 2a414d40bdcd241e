"""Run by tests/python.sh with the Python of a fresh virtual environment
into which `pip install .` put weft: the package imports from that
environment (not from the build tree), finds its bundled plugins without
WEFT_PLUGIN_PATH, works without NumPy, and `python -m weft.info` prints
what the build's weft-info prints.  argv[1]: the weft-info output of the
build (a file)."""

import os
import subprocess
import sys

from taplib import Skip, done, eq, raises, test

import weft


@test
def location():
    """weft and weft._C are imported from the virtual environment, with the type stub"""
    eq(weft.__file__.startswith(sys.prefix), True, weft.__file__)
    eq(weft._C.__file__.startswith(os.path.join(os.path.dirname(weft.__file__), "_C")), True,
       weft._C.__file__)
    eq("WEFT_PLUGIN_PATH" in os.environ, False)
    here = os.path.dirname(weft.__file__)
    eq([os.path.exists(os.path.join(here, f)) for f in ("_C.pyi", "py.typed")], [True, True],
       "the type stub and its marker are installed")


@test
def plugins_bundled():
    """the bundled CPU plugin is loaded from weft/_lib and computes"""
    loaded = [p["path"] for p in weft.plugins() if p["status"] == "loaded"]
    eq(any(p.startswith(os.path.dirname(weft.__file__)) for p in loaded), True, loaded)
    eq((weft.arange(4) * 2).tolist(), [0, 2, 4, 6])


@test
def without_numpy():
    """NumPy is optional: absent from this environment, and weft works"""
    with open(os.path.join(sys.prefix, "pyvenv.cfg")) as f:
        if "include-system-site-packages = true" in f.read():
            raise Skip("the offline fallback's environment sees the system's packages")
    raises(ImportError, __import__, "numpy")
    eq(weft.tensor([[1.5, 2]]).sum().item(), 3.5)


@test
def info():
    """python -m weft.info prints weft-info's report (same version line and operators)"""
    out = subprocess.run([sys.executable, "-m", "weft.info"], check=True, capture_output=True,
                         text=True).stdout
    with open(sys.argv[1]) as f:
        expected = f.read()
    eq(out.splitlines()[0], expected.splitlines()[0])
    eq(out[out.index("\noperators"):], expected[expected.index("\noperators"):])
    bad = subprocess.run([sys.executable, "-m", "weft.info", "--op", "no_such_op"],
                         capture_output=True, text=True)
    eq(bad.returncode, 1)
    eq("no_such_op" in bad.stderr, True, bad.stderr)


done()
