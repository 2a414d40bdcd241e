"""DLPack between weft and PyTorch on the GPU (kDLCUDA), both directions,
with the array API's stream semantics: weft exports after the work queued
on its current stream, and asks a CUDA producer to order its work before
weft's stream.  Runs in full with a GPU that both weft and torch see; the
parts that need no GPU (weft's refusal of stream 0 for CUDA only applies
to CUDA tensors, so here: a cpu tensor refuses a stream) run everywhere,
and the rest SKIPs with the reason."""
import weft
from taplib import Skip, done, eq, raises, test

try:
    import torch
    torch_cuda = torch.cuda.is_available()
    why_not = None if torch_cuda else "torch.cuda is not available (torch %s)" % torch.__version__
except ImportError as e:
    torch, torch_cuda, why_not = None, False, "torch is not importable: %s" % e
weft_cuda = "cuda:0" in weft.devices()
if not weft_cuda:
    why_not = why_not or "weft sees no CUDA device"
elif not torch_cuda:
    why_not = why_not or "torch sees no CUDA device"


def need_gpu():
    if why_not:
        raise Skip(why_not)


@test
def cpu_refuses_stream():
    """a cpu tensor's __dlpack__ refuses a stream other than -1"""
    t = weft.zeros([3])
    raises(BufferError, t.__dlpack__, stream=1, contains="stream")


@test
def weft_to_torch():
    """weft cuda -> torch.from_dlpack: same memory, same values, writes seen both ways"""
    need_gpu()
    t = weft.arange(0, 24, dtype=weft.float32).reshape([4, 6]).to("cuda")
    p = torch.from_dlpack(t)
    eq(p.device.type, "cuda")
    eq(p.data_ptr(), t.data_ptr(), "same address")
    eq(p.cpu().tolist(), t.to("cpu").tolist(), "values")
    p[0, 0] = 99.0
    torch.cuda.synchronize()
    eq(t.to("cpu").tolist()[0][0], 99.0, "a write in torch is seen by weft")


@test
def torch_to_weft():
    """torch cuda (on a side stream) -> weft.from_dlpack: torch's work comes first"""
    need_gpu()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        a = torch.full((1 << 22,), 3.0, device="cuda")
        a.mul_(2.0)  # queued on s; weft must see 6.0 without a host sync here
    w = weft.from_dlpack(a)
    eq(w.device, "cuda:0")
    eq(w.data_ptr(), a.data_ptr(), "same address")
    total = w.sum().to("cpu").item()
    eq(total, 6.0 * (1 << 22), "the sum weft computes sees torch's write")


@test
def stream_zero_refused():
    """a weft cuda tensor refuses stream 0 (ambiguous on CUDA)"""
    if not weft_cuda:
        raise Skip("weft sees no CUDA device")
    t = weft.zeros([2]).to("cuda")
    raises(BufferError, t.__dlpack__, stream=0, contains="stream 0")


@test
def round_trip_transposed():
    """a transposed weft cuda view keeps its strides through torch and back"""
    need_gpu()
    t = weft.arange(0, 12, dtype=weft.float32).reshape([3, 4]).to("cuda").t()
    p = torch.from_dlpack(t)
    eq(tuple(p.stride()), (1, 4))
    back = weft.from_dlpack(p)
    eq(back.to("cpu").tolist(), t.to("cpu").tolist())


done()
