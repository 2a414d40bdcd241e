"""setup.py — how `pip install .` builds weft (pyproject.toml names
setuptools as the backend).

The wheel is self-contained: it bundles the libweft and the device plugins
that ./configure && make built (weft/_lib/libweft.so.N and
weft/_lib/weft/plugins/, the layout libweft searches beside itself), and
compiles the extension weft._C against that libweft with an $ORIGIN run
path, so the package works in any virtual environment of this machine's
Python without LD_LIBRARY_PATH or WEFT_PLUGIN_PATH.

The build tree is $WEFT_BUILDDIR, else the source tree itself when it was
configured in place; when neither holds a built libweft, this script runs
./configure and make in build/pip (minutes).
"""

import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

SRC = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(SRC, "configure.ac")) as f:
        return re.search(r"AC_INIT\(\[weft\], \[([^]]+)\]", f.read()).group(1)


def built_libweft(builddir):
    return sorted(glob.glob(os.path.join(builddir, ".libs", "libweft.so.*")), key=len)


def build_tree():
    """The directory holding a built libweft (building one when none is)."""
    builddir = os.environ.get("WEFT_BUILDDIR") or SRC
    if built_libweft(builddir):
        return os.path.abspath(builddir)
    builddir = os.path.join(SRC, "build", "pip")
    if not built_libweft(builddir):
        print("setup.py: no built libweft found; running configure and make in %s" % builddir)
        if not os.path.exists(os.path.join(SRC, "configure")):
            subprocess.check_call(["autoreconf", "-fi"], cwd=SRC)
        os.makedirs(builddir, exist_ok=True)
        subprocess.check_call([os.path.join(SRC, "configure"), "--disable-python",
                               "PYTHON=" + sys.executable], cwd=builddir)
        subprocess.check_call(["make", "-j%d" % (os.cpu_count() or 1), "pip-libs"],
                              cwd=builddir)
    return builddir


class BuildExt(build_ext):
    """Copies libweft (with its soname) and the plugins into weft/_lib of
    the build, then compiles weft._C as usual."""

    def run(self):
        builddir = build_tree()
        lib = built_libweft(builddir)
        soname = os.path.basename(lib[0])  # libweft.so.1, the name the extension asks for
        real = os.path.realpath(lib[0])
        dest = os.path.join(self.build_lib, "weft", "_lib")
        plugins = os.path.join(dest, "weft", "plugins")
        os.makedirs(plugins, exist_ok=True)
        shutil.copyfile(real, os.path.join(dest, soname))
        for plugin in glob.glob(os.path.join(builddir, ".libs", "libweft-*.so")):
            shutil.copyfile(plugin, os.path.join(plugins, os.path.basename(plugin)))
        # the type stub of weft._C, from the operator table
        subprocess.check_call([sys.executable, os.path.join(SRC, "python", "gen_stubs.py"),
                               os.path.join(SRC, "dispatch", "operators.def"),
                               os.path.join(self.build_lib, "weft", "_C.pyi")])
        for ext in self.extensions:
            ext.include_dirs += [os.path.join(SRC, "include"), os.path.join(builddir, "include")]
            ext.library_dirs.append(os.path.join(builddir, ".libs"))
        super().run()


_C = Extension(
    "weft._C",
    sources=sorted(glob.glob(os.path.join("python", "*.c"))) + ["tools/info_report.c"],
    libraries=["weft"],
    extra_compile_args=["-std=gnu11", "-fvisibility=hidden", "-fno-strict-aliasing"],
    extra_link_args=["-Wl,-rpath,$ORIGIN/_lib"],
)

setup(
    version=version(),
    packages=find_packages(where="python"),
    package_dir={"": "python"},
    package_data={"weft": ["py.typed"]},
    ext_modules=[_C],
    cmdclass={"build_ext": BuildExt},
    zip_safe=False,
)
