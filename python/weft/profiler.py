"""weft.profiler: where the time and memory of a program go, in torch.profiler's shape.

    with weft.profiler.profile(record_shapes=True, profile_memory=True) as prof:
        with weft.profiler.record_function("step"):
            loss = model(x).sum()
            loss.backward()
    prof.export_chrome_trace("trace.json")      # open in Perfetto / chrome://tracing
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))

A profile records the operators, backward functions, ranges and (with
profile_memory) storage allocations of the thread that enters it (the C
profiler of <weft/profiler.h>, through the Profiler dispatch key); other
threads are not recorded unless they enter a profile of their own.
"""

import functools

from . import _C

__all__ = ["profile", "record_function", "FunctionEventAvg", "EventList", "ProfilerActivity"]

# keys of FunctionEventAvg that table() can sort by, as torch names them
_SORT_KEYS = ("self_cpu_time_total", "cpu_time_total", "cpu_time", "count",
              "cpu_memory_usage", "self_cpu_memory_usage", "device_time_total",
              "cuda_time_total")


class ProfilerActivity:
    """What a profile records, as torch.profiler.ProfilerActivity: CPU (always),
    CUDA (the device time of operators on any device whose plugin has events)."""
    CPU = "cpu"
    CUDA = "cuda"


class FunctionEventAvg:
    """The totals of one name (and input shapes, when grouped): times in microseconds."""

    __slots__ = ("key", "input_shapes", "count", "cpu_time_total", "self_cpu_time_total",
                 "cpu_memory_usage", "self_cpu_memory_usage", "device_time_total")

    def __init__(self, row):
        (self.key, self.input_shapes, self.count, self.cpu_time_total,
         self.self_cpu_time_total, self.cpu_memory_usage, self.self_cpu_memory_usage,
         self.device_time_total) = row

    @property
    def cuda_time_total(self):
        """torch's name of device_time_total."""
        return self.device_time_total

    @property
    def cpu_time(self):
        """The average time of one call, in microseconds."""
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return ("<FunctionEventAvg key={} count={} cpu_time_total={:.3f}us "
                "self_cpu_time_total={:.3f}us>".format(self.key, self.count, self.cpu_time_total,
                                                      self.self_cpu_time_total))


class EventList(list):
    """key_averages(): a list of FunctionEventAvg with table()."""

    def __init__(self, rows, session, group_by_input_shape):
        super().__init__(FunctionEventAvg(r) for r in rows)
        self._session = session
        self._group = group_by_input_shape

    def table(self, sort_by=None, row_limit=100, **unused):
        """The rows as torch's key_averages().table() prints them.

        sort_by: one of self_cpu_time_total (the default), cpu_time_total,
        cpu_time, count, cpu_memory_usage, self_cpu_memory_usage,
        device_time_total or cuda_time_total (descending);
        row_limit: how many rows (all when <= 0).  Other keyword arguments of
        torch's table (max_name_column_width, header, ...) are accepted and
        ignored."""
        if sort_by is not None and sort_by not in _SORT_KEYS:
            raise ValueError("table: unknown sort_by {!r} (one of {})".format(
                sort_by, ", ".join(_SORT_KEYS)))
        return _C._profiler_table(self._session, sort_by, int(row_limit), self._group)


class profile:
    """Records the calling thread while inside a with block (or between start() and stop())."""

    def __init__(self, activities=None, record_shapes=False, profile_memory=False,
                 with_stack=False, **unused):
        self.record_shapes = bool(record_shapes)
        self.profile_memory = bool(profile_memory)
        # any activity besides CPU asks for device time, as torch's CUDA does
        self.record_device_time = any(
            str(getattr(a, "name", a)).lower() != "cpu" for a in (activities or ()))
        self._session = _C._profiler_create(self.record_shapes, self.profile_memory,
                                            self.record_device_time)
        self._running = False

    def start(self):
        """Starts recording this thread (RuntimeError when it records already)."""
        _C._profiler_start(self._session)
        self._running = True

    def stop(self):
        """Stops recording this thread."""
        if self._running:
            self._running = False
            _C._profiler_stop(self._session)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def export_chrome_trace(self, path):
        """Writes the Chrome trace JSON to path (OSError when it cannot be written;
        a file is never left half-written)."""
        _C._profiler_export(self._session, path)

    def key_averages(self, group_by_input_shape=False, **unused):
        """The totals per operator (and range, backward function) name."""
        rows = _C._profiler_key_averages(self._session, bool(group_by_input_shape))
        return EventList(rows, self._session, bool(group_by_input_shape))


class record_function:
    """A named range on the profiler's timeline: a context manager, or a decorator."""

    def __init__(self, name, args=None):
        if not isinstance(name, str):
            raise TypeError("record_function: name must be a str, got {}".format(
                type(name).__name__))
        self.name = name

    def __enter__(self):
        _C._range_push(self.name)
        return self

    def __exit__(self, *exc):
        _C._range_pop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapped
