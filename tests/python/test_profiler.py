"""The profiler from Python (issue 19): weft.profiler.profile as torch's,
export_chrome_trace read back with json, key_averages() and its table (the
same columns as torch.profiler's where the peer has torch), record_function
as a context manager and a decorator, and the errors: started twice, a pop
without its push, an unwritable path, an unknown sort key."""
import json
import os
import tempfile

import weft
from taplib import Skip, done, eq, raises, test

try:
    import torch
    import torch.profiler
except ImportError:  # the peer without torch: the comparisons say SKIP
    torch = None


def program(lib):
    x = lib.ones(4, 3, requires_grad=True)
    w = lib.full((3, 2), 0.5)
    y = (x @ w).relu().sum()
    y.backward()
    return x


@test
def trace_of_a_step():
    """profile(record_shapes, profile_memory) records a step; its Chrome trace parses and links forward to backward"""
    with weft.profiler.profile(record_shapes=True, profile_memory=True) as prof:
        with weft.profiler.record_function("step"):
            program(weft)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    ev = trace["traceEvents"]
    xs = [e for e in ev if e["ph"] == "X"]
    names = [e["name"] for e in xs]
    eq(names.count("step"), 1, "one range")
    step = next(e for e in xs if e["name"] == "step")
    inside = [e["name"] for e in xs
              if e["tid"] == step["tid"] and step["ts"] <= e["ts"] <= step["ts"] + step["dur"]]
    for op in ("matmul", "relu", "sum"):
        assert op in inside, "%s is not inside the range: %s" % (op, sorted(set(inside)))
    eq("ReluBackward" in names or any(n.startswith("Relu") and "Backward" in n for n in names), True,
       "a backward function")
    flows = [e for e in ev if e["ph"] in ("s", "f")]
    assert flows and len(flows) % 2 == 0, "flow events come in pairs: %d" % len(flows)
    relu = next(e for e in xs if e["name"] == "relu")
    eq(relu["args"]["Input Dims"], [[4, 2]], "relu's input shape")
    mem = [e for e in ev if e["name"] == "[memory]"]
    assert mem, "memory events"
    counters = [e for e in ev if e["ph"] == "C"]
    eq(len(counters), len(mem), "a counter per memory event")


@test
def key_averages_table():
    """key_averages().table(sort_by="self_cpu_time_total", row_limit=10) as torch prints it"""
    with weft.profiler.profile(record_shapes=True, profile_memory=True) as prof:
        for _ in range(3):
            program(weft)
    rows = prof.key_averages()
    by = {r.key: r for r in rows}
    eq(by["relu"].count, 3, "relu calls")
    assert by["relu"].cpu_time_total >= by["relu"].self_cpu_time_total >= 0
    assert abs(by["relu"].cpu_time - by["relu"].cpu_time_total / 3) < 1e-9
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10)
    lines = table.splitlines()
    eq(len(lines), 10 + 5, "10 rows, 3 rules, a header and the total")
    assert lines[-1].startswith("Self CPU time total:"), lines[-1]
    header = lines[1].split("  ")
    header = [h.strip() for h in header if h.strip()]
    eq(header[0], "Name")
    grouped = prof.key_averages(group_by_input_shape=True)
    assert any(r.key == "relu" and r.input_shapes == "[[4, 2]]" for r in grouped)
    assert "Input Shapes" in grouped.table(sort_by="count", row_limit=0)
    if torch is None:
        raise Skip("torch is not importable here: the columns are not compared")
    with torch.profiler.profile(record_shapes=True, profile_memory=True) as tprof:
        program(torch)
    ttable = tprof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10)
    theader = [h.strip() for h in ttable.splitlines()[1].split("  ") if h.strip()]
    eq(header, theader, "the columns are torch's")


@test
def record_function_as_decorator():
    """record_function is a decorator too; its calls are counted"""
    @weft.profiler.record_function("forward")
    def f(x):
        return x * 2

    with weft.profiler.profile() as prof:
        for _ in range(4):
            f(weft.ones(2))
    by = {r.key: r for r in prof.key_averages()}
    eq(by["forward"].count, 4)
    eq(by["mul"].count if "mul" in by else by["mul_scalar"].count, 4)


@test
def activities():
    """profile(activities=[CPU, CUDA]) asks for device time; CPU tensors have none"""
    acts = [weft.profiler.ProfilerActivity.CPU, weft.profiler.ProfilerActivity.CUDA]
    with weft.profiler.profile(activities=acts) as prof:
        weft.ones(3).neg()
    eq(prof.record_device_time, True)
    by = {r.key: r for r in prof.key_averages()}
    eq(by["neg"].cuda_time_total, 0.0, "no device time on the CPU")
    assert "Device total" in prof.key_averages().table(sort_by="cuda_time_total")
    eq(weft.profiler.profile().record_device_time, False)


@test
def errors():
    """started twice, a pop without its push, an unwritable path, an unknown sort key"""
    prof = weft.profiler.profile()
    with prof:
        raises(RuntimeError, prof.start, contains="started twice")
        raises(RuntimeError, prof.export_chrome_trace, "/tmp/x.json", contains="weft_profiler_stop")
    raises(RuntimeError, weft._C._range_pop, contains="without its push")
    raises(OSError, prof.export_chrome_trace, "/nonexistent-weft-dir/t.json",
           contains="/nonexistent-weft-dir/t.json")
    raises(ValueError, prof.key_averages().table, sort_by="bogus")
    raises(TypeError, weft.profiler.record_function, 3)
    # the session still works after the errors
    with prof:
        weft.ones(2) + 1
    eq(any(r.key == "add_scalar" or r.key == "add" for r in prof.key_averages()), True)


done()
