// tests/dlpack_torch.cc — DLPack exchange with a real peer, libtorch
// 1.13 (at::toDLPack / at::fromDLPack), in both directions: values, zero
// copy (same address; a write on one side is seen on the other) and
// lifetime (the memory is freed exactly once, when both sides have dropped
// it, also when the last reference dies on another thread) for contiguous,
// transposed, sliced-with-offset, size-0 and 0-d tensors and every dtype
// both know.  This file sees only libtorch's dlpack.h; weft's DLPack calls
// go through tests/dlpack_torch_bridge.c.
#include <ATen/DLConvertor.h>
#include <torch/torch.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/dlpack_torch_bridge.h"

namespace {

std::atomic<int> weft_frees{0}, torch_frees{0};
std::atomic<std::thread::id> torch_free_thread;

void weft_blob_free(void *ctx)
{
    weft_frees++;
    std::free(ctx);
}

// A weft float32 tensor over malloc'd memory holding 0, 1, 2, ...; its
// release is counted in weft_frees.
weft_tensor *weft_iota(std::vector<int64_t> sizes)
{
    int64_t n = 1;
    for (int64_t s : sizes)
        n *= s;
    float *data = static_cast<float *>(std::malloc(sizeof(float) * (n ? n : 1)));
    for (int64_t i = 0; i < n; i++)
        data[i] = static_cast<float>(i);
    weft_tensor *t = nullptr;
    weft_from_blob(&t, data, sizes.data(), nullptr, static_cast<int>(sizes.size()), WEFT_FLOAT32,
                   WEFT_DEVICE_CPU, weft_blob_free, data);
    return t;
}

// A torch tensor over malloc'd memory holding 0, 1, 2, ... as float32;
// its release is counted in torch_frees.
at::Tensor torch_iota(std::vector<int64_t> sizes)
{
    int64_t n = 1;
    for (int64_t s : sizes)
        n *= s;
    float *data = static_cast<float *>(std::malloc(sizeof(float) * (n ? n : 1)));
    for (int64_t i = 0; i < n; i++)
        data[i] = static_cast<float>(i);
    return torch::from_blob(
        data, sizes,
        [](void *p) {
            torch_free_thread = std::this_thread::get_id();
            torch_frees++;
            std::free(p);
        },
        torch::kFloat32);
}

double torch_at(const at::Tensor &t, const std::vector<int64_t> &index)
{
    at::Tensor e = t;
    for (int64_t i : index)
        e = e.select(0, i);
    if (e.is_complex())
        e = at::real(e);
    return e.item<double>();
}

double weft_at(const weft_tensor *t, const std::vector<int64_t> &index)
{
    double v = NAN;
    weft_tensor_get(t, index.data(), &v);
    return v;
}

// Same shape, the same values at every index, and the same strides where
// they matter (dims of size > 1).
bool same_tensor(const weft_tensor *w, const at::Tensor &t)
{
    int ndim = weft_tensor_ndim(w);
    if (ndim != t.dim())
        return false;
    for (int d = 0; d < ndim; d++)
        if (weft_tensor_size(w, d) != t.size(d) ||
            (t.size(d) > 1 && weft_tensor_stride(w, d) != t.stride(d)))
            return false;
    std::vector<int64_t> index(ndim, 0);
    for (int64_t n = 0; n < t.numel(); n++) {
        if (weft_at(w, index) != torch_at(t, index))
            return false;
        for (int d = ndim - 1; d >= 0; d--) {
            if (++index[d] < t.size(d))
                break;
            index[d] = 0;
        }
    }
    return true;
}

// weft -> torch: export, import in torch, compare.
at::Tensor to_torch(weft_tensor *w, const char *what)
{
    void *m = nullptr;
    is_int(bridge_to_dlpack(&m, w), 0, "%s: weft_to_dlpack", what);
    at::Tensor t;
    try {
        t = at::fromDLPack(static_cast<DLManagedTensor *>(m));
    } catch (const std::exception &e) {
        diag("torch refused it: %.200s", e.what());
        bridge_delete(m);
        ok(false, "%s: at::fromDLPack", what);
        return t;
    }
    // (torch's data_ptr() of a tensor with no elements is always NULL)
    ok(t.data_ptr() == (t.numel() ? weft_tensor_data_ptr(w) : nullptr),
       "%s: torch sees the same address", what);
    ok(same_tensor(w, t), "%s: same shape, strides and values", what);
    return t;
}

// torch -> weft: export in torch, import in weft, compare.
weft_tensor *from_torch(const at::Tensor &t, const char *what)
{
    weft_tensor *w = nullptr;
    void *m = at::toDLPack(t);
    is_int(bridge_from_dlpack(&w, m), 0, "%s: weft_from_dlpack", what);
    if (!w) {
        diag("%s", weft_last_error());
        return nullptr;
    }
    ok(weft_tensor_data_ptr(w) == t.data_ptr(), "%s: weft sees the same address", what);
    ok(same_tensor(w, t), "%s: same shape, strides and values", what);
    return w;
}

void test_weft_to_torch()
{
    weft_frees = 0;
    weft_tensor *w = weft_iota({2, 3});
    at::Tensor t = to_torch(w, "weft -> torch contiguous");
    t.index_put_({1, 2}, 42.0);
    is_double(weft_at(w, {1, 2}), 42.0, 0, "a write in torch is seen by weft");
    static_cast<float *>(weft_tensor_data_ptr(w))[0] = -3.0f;
    is_double(t.index({0, 0}).item<double>(), -3.0, 0, "a write in weft is seen by torch");
    t.mul_(2);
    is_double(weft_at(w, {0, 1}), 2.0, 0, "torch's in-place operator writes weft's memory");
    weft_tensor_release(w);
    is_int(weft_frees.load(), 0, "weft dropped it: torch keeps the memory alive");
    is_double(t.index({1, 1}).item<double>(), 8.0, 0, "still readable in torch");
    t = at::Tensor();
    is_int(weft_frees.load(), 1, "torch dropped it too: freed exactly once");

    weft_frees = 0;
    weft_tensor *base = weft_iota({3, 6}), *view = nullptr;
    weft_t(&view, base);
    t = to_torch(view, "weft -> torch transposed");
    ok(t.stride(0) == 1 && t.stride(1) == 6, "transposed: torch has strides [1, 6]");
    weft_tensor_release(view);
    weft_slice(&view, base, 1, 1, 6, 2);
    at::Tensor sliced = to_torch(view, "weft -> torch sliced [:, 1:6:2]");
    is_double(sliced.index({2, 1}).item<double>(), 15.0, 0,
              "sliced: element [2, 1] is 15 (the offset is in data, not byte_offset)");
    weft_tensor_release(view);
    weft_tensor_release(base);
    t = at::Tensor();
    is_int(weft_frees.load(), 0, "the slice still holds the memory");
    // the last reference dies on another thread
    std::thread([s = std::move(sliced)]() mutable { s = at::Tensor(); }).join();
    is_int(weft_frees.load(), 1, "freed once when torch's last reference dies on another thread");

    weft_tensor *empty = weft_iota({2, 0, 3});
    t = to_torch(empty, "weft -> torch size-0");
    is_int(t.numel(), 0, "size-0: no elements in torch");
    weft_tensor_release(empty);
    t = at::Tensor();

    weft_tensor *scalar = weft_iota({});
    t = to_torch(scalar, "weft -> torch 0-d");
    is_int(t.dim(), 0, "0-d in torch");
    weft_tensor_release(scalar);
    t = at::Tensor();

    // every dtype torch 1.13 takes through DLPack
    struct {
        weft_dtype w;
        at::ScalarType t;
    } dtypes[] = {
        {WEFT_UINT8, at::kByte},          {WEFT_INT8, at::kChar},
        {WEFT_INT16, at::kShort},         {WEFT_INT32, at::kInt},
        {WEFT_INT64, at::kLong},          {WEFT_FLOAT16, at::kHalf},
        {WEFT_BFLOAT16, at::kBFloat16},   {WEFT_FLOAT32, at::kFloat},
        {WEFT_FLOAT64, at::kDouble},      {WEFT_COMPLEX64, at::kComplexFloat},
        {WEFT_COMPLEX128, at::kComplexDouble},
    };
    weft_tensor *src = weft_iota({2, 3});
    for (auto &d : dtypes) {
        weft_tensor *c = nullptr;
        weft_to_dtype(&c, src, d.w);
        std::string what = std::string("weft -> torch ") + weft_dtype_name(d.w);
        at::Tensor tt = to_torch(c, what.c_str());
        ok(tt.defined() && tt.scalar_type() == d.t, "%s: torch dtype %s", what.c_str(),
           c10::toString(d.t));
        weft_tensor_release(c);
    }
    // bool: torch 1.13 predates DLPack's bool code and refuses it cleanly
    weft_tensor *flags = nullptr;
    weft_to_dtype(&flags, src, WEFT_BOOL);
    void *m = nullptr;
    bridge_to_dlpack(&m, flags);
    bool refused = false;
    try {
        at::fromDLPack(static_cast<DLManagedTensor *>(m));
    } catch (const std::exception &) {
        refused = true;
    }
    ok(refused, "weft -> torch bool: torch 1.13 refuses DLPack's bool code (6) with an error");
    bridge_delete(m); // torch did not take it: it is still ours to give back
    weft_tensor_release(flags);
    weft_tensor_release(src);
}

void test_torch_to_weft()
{
    torch_frees = 0;
    at::Tensor t = torch_iota({2, 3});
    weft_tensor *w = from_torch(t, "torch -> weft contiguous");
    if (w) {
        static_cast<float *>(weft_tensor_data_ptr(w))[4] = 99.0f;
        is_double(t.index({1, 1}).item<double>(), 99.0, 0, "a write in weft is seen by torch");
        t.index_put_({0, 2}, -1.0);
        is_double(weft_at(w, {0, 2}), -1.0, 0, "a write in torch is seen by weft");
    }
    t = at::Tensor();
    is_int(torch_frees.load(), 0, "torch dropped it: weft keeps the memory alive");
    is_double(w ? weft_at(w, {1, 0}) : NAN, 3.0, 0, "still readable in weft");
    weft_tensor_release(w);
    is_int(torch_frees.load(), 1, "weft dropped it too: torch's deleter ran exactly once");

    torch_frees = 0;
    at::Tensor base = torch_iota({3, 6});
    weft_tensor *tr = from_torch(base.t(), "torch -> weft transposed");
    ok(tr && weft_tensor_stride(tr, 0) == 1 && weft_tensor_stride(tr, 1) == 6,
       "transposed: weft has strides [1, 6]");
    weft_tensor *sl = from_torch(base.slice(1, 1, 6, 2), "torch -> weft sliced [:, 1:6:2]");
    is_double(sl ? weft_at(sl, {2, 1}) : NAN, 15.0, 0, "sliced: element [2, 1] is 15");
    weft_tensor *nr = from_torch(base.select(0, 2).narrow(0, 3, 2), "torch -> weft offset 15");
    is_double(nr ? weft_at(nr, {1}) : NAN, 16.0, 0, "offset 15: element [1] is 16");
    weft_tensor *un = from_torch(base.unsqueeze(1).slice(2, 0, 1), "torch -> weft size-1 dims");
    weft_tensor_release(tr);
    weft_tensor_release(nr);
    weft_tensor_release(un);
    base = at::Tensor();
    is_int(torch_frees.load(), 0, "the weft slice still holds torch's memory");
    std::thread::id worker;
    std::thread th([sl, &worker]() {
        worker = std::this_thread::get_id();
        weft_tensor_release(sl);
    });
    th.join();
    is_int(torch_frees.load(), 1, "freed once when weft's last view dies on another thread");
    ok(torch_free_thread.load() == worker, "... on that thread");

    at::Tensor empty = torch::empty({2, 0, 3});
    weft_tensor *we = from_torch(empty, "torch -> weft size-0 (NULL data)");
    is_int(we ? weft_tensor_numel(we) : -1, 0, "size-0: no elements in weft");
    weft_tensor_release(we);

    at::Tensor scalar = torch::tensor(2.5);
    weft_tensor *ws = from_torch(scalar, "torch -> weft 0-d");
    double v = 0;
    is_int(ws ? weft_tensor_item(ws, &v) : -1, 0, "0-d: item");
    is_double(v, 2.5, 0, "0-d: the value");
    weft_tensor_release(ws);

    struct {
        at::ScalarType t;
        weft_dtype w;
    } dtypes[] = {
        {at::kByte, WEFT_UINT8},          {at::kChar, WEFT_INT8},
        {at::kShort, WEFT_INT16},         {at::kInt, WEFT_INT32},
        {at::kLong, WEFT_INT64},          {at::kHalf, WEFT_FLOAT16},
        {at::kBFloat16, WEFT_BFLOAT16},   {at::kFloat, WEFT_FLOAT32},
        {at::kDouble, WEFT_FLOAT64},      {at::kComplexFloat, WEFT_COMPLEX64},
        {at::kComplexDouble, WEFT_COMPLEX128},
    };
    for (auto &d : dtypes) {
        at::Tensor tt = torch::arange(6).reshape({2, 3}).to(d.t);
        std::string what = std::string("torch -> weft ") + c10::toString(d.t);
        weft_tensor *wt = from_torch(tt, what.c_str());
        ok(wt && weft_tensor_dtype(wt) == d.w, "%s: weft dtype %s", what.c_str(),
           weft_dtype_name(d.w));
        weft_tensor_release(wt);
    }
}

} // namespace

int main()
{
    test_weft_to_torch();
    test_torch_to_weft();
    return done_testing();
}
