"""taplib: the test helpers of tests/python/*.py.  Each test prints an
unnumbered TAP line ("ok - ...", "not ok - ...", "ok - ... # SKIP ...");
tests/python.sh numbers them and writes the plan."""
import gc
import sys
import threading
import traceback

failures = 0


def test(fn):
    """Runs fn at once as one test; its docstring (or name) describes it."""
    global failures
    desc = (fn.__doc__ or fn.__name__).strip().splitlines()[0]
    try:
        fn()
        print("ok - " + desc)
    except Skip as s:
        print("ok - %s # SKIP %s" % (desc, s))
    except Exception:
        failures += 1
        print("not ok - " + desc)
        for line in traceback.format_exc().splitlines():
            print("# " + line)
    sys.stdout.flush()
    return fn


class Skip(Exception):
    pass


def raises(exc_type, fn, *args, contains=None, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc_type as e:
        if contains and contains not in str(e):
            raise AssertionError("%s raised %r, which does not mention %r" % (fn, e, contains))
        return e
    except Exception as e:
        raise AssertionError("expected %s, got %s: %s" % (exc_type.__name__, type(e).__name__, e))
    raise AssertionError("expected %s, nothing was raised" % exc_type.__name__)


def eq(a, b, what=""):
    if a != b:
        raise AssertionError("%s%r != %r" % (what + ": " if what else "", a, b))


def on_thread(fn):
    """Runs fn on a new thread and waits for it (for "the last reference
    dies on another thread")."""
    err = []

    def run():
        try:
            fn()
        except BaseException as e:  # pragma: no cover
            err.append(e)

    th = threading.Thread(target=run)
    th.start()
    th.join()
    gc.collect()
    if err:
        raise err[0]


def done():
    sys.exit(1 if failures else 0)
