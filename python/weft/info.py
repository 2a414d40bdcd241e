"""python -m weft.info [--ops] [--op NAME] [--plugin PATH]...: what the weft-info
program prints (the same C code writes both), for the weft this Python
imports: its version, plugins, devices, memory statistics and operators."""

import argparse
import sys

from . import _C, load_plugin


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m weft.info", description=__doc__.split(":")[0])
    parser.add_argument("--ops", action="store_true", help="list every operator's schema")
    parser.add_argument("--op", metavar="NAME", help="print the computed kernel table of operator NAME")
    parser.add_argument("--plugin", metavar="PATH", action="append", default=[],
                        help="load this plugin file too")
    args = parser.parse_args(argv)
    status = 0
    for path in args.plugin:
        try:
            load_plugin(path)
        except RuntimeError as e:
            print("weft-info: %s" % e, file=sys.stderr)
            status = 1
    try:
        sys.stdout.write(_C._info(args.op, args.ops))
    except RuntimeError as e:
        print("weft-info: %s" % e, file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
