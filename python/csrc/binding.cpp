// PyTorch binding of the FlashKDA C API: the only file of the project that includes PyTorch.
//
// Registers three torch.library ops (schemas below):
//   flash_kda::fwd                 CUDA (and CPU, only to reject CPU tensors by name); returns ()
//   flash_kda::get_workspace_size  shape-only query, any device (also meta), returns int
//   flash_kda::build_info          "key=value;..." facts about this build
// and, from binding_cp.inc, the building blocks of context parallelism across GPUs.
// and, when built against Python's headers (FLASH_KDA_PYTHON_MODULE), the module init PyInit__C, so
// that `from flash_kda import _C` loads the library and runs the registrations. Without the
// headers the same code is a plain shared library that flash_kda loads with torch.ops.load_library.
//
// With Python's headers and libtorch_python (FLASH_KDA_EAGER_FAST_PATH), the module also has
// _C._fwd_eager: the eager fast path of flash_kda.fwd. It calls the same `fwd` function as the
// op's CUDA kernel, without the Python-side layout checks and the torch.ops dispatcher, when the
// call is one the dispatcher would hand straight to that kernel with exactly these tensors; in
// every other case it returns NotImplemented having done nothing, and flash_kda.fwd takes the
// torch.ops path (see the comment above fwd_eager below).
//
// Classic TORCH_LIBRARY API rather than the LibTorch stable ABI: the op needs the current CUDA
// stream, a device guard and a caching-allocator allocation, which the classic API gives directly
// (the stable shim hides its current-stream query behind USE_CUDA; FA3 re-declares it by hand), and
// it is the best-trodden path for torch.library.opcheck and auto-functionalization. The price is a
// rebuild per torch version; flash_kda.build_info() records the torch the module was built against.
//
// Checks that need torch (CPU tensors, tensors on another GPU, workspace dtype) happen here with the
// argument's name; every shape/dtype/stride/value rule is the C API's (kda_fwd validates before
// any kernel runs), and its status is raised as ValueError (bad argument, unsupported size,
// workspace too small) or RuntimeError (device not SM90, CUDA error), prefixed "flash_kda.fwd: ".
#ifdef FLASH_KDA_PYTHON_MODULE
#include <Python.h>
#endif

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#if defined(FLASH_KDA_PYTHON_MODULE) && defined(FLASH_KDA_EAGER_FAST_PATH)
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/record_function.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cmath>
#include <vector>
#endif

#include <cstdint>
#include <optional>
#include <string>

#include "flash_kda/flash_kda.h"

namespace {

using OptTensor = std::optional<at::Tensor>;

// Stand-in data pointer for views that are only validated (kda_fwd_workspace_size reads shapes,
// never memory) or that have no elements. Never dereferenced.
void* const kPlaceholder = reinterpret_cast<void*>(uintptr_t{4096});

bool has(const OptTensor& t) { return t.has_value() && t->defined(); }

kda_dtype to_kda_dtype(const char* fn, const char* name, const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kBFloat16: return KDA_DTYPE_BF16;
    case at::kFloat: return KDA_DTYPE_F32;
    case at::kInt: return KDA_DTYPE_I32;
    case at::kLong: return KDA_DTYPE_I64;
    case at::kHalf: return KDA_DTYPE_F16;
    case at::kDouble: return KDA_DTYPE_F64;
    default: break;
  }
  TORCH_CHECK_VALUE(false, fn, ": ", name, ": dtype ", t.scalar_type(),
                    " is not supported (q/k/v/out: bfloat16; g/beta: bfloat16 or float32; A_log/dt_bias: "
                    "float32; states: float32 or bfloat16; cu_seqlens: int32 or int64)");
  return KDA_DTYPE_NONE;
}

// A strided view of `t`. `use_data` false: shapes only (placeholder pointer).
kda_tensor view(const char* fn, const char* name, const at::Tensor& t, bool use_data) {
  kda_tensor v{};
  TORCH_CHECK_VALUE(t.dim() <= 4, fn, ": ", name, ": expected at most 4 dimensions, got ", t.dim(),
                    "-D with shape ", t.sizes());
  void* data = use_data ? t.data_ptr() : nullptr;
  v.data = data != nullptr ? data : kPlaceholder;
  v.dtype = to_kda_dtype(fn, name, t);
  v.ndim = static_cast<int32_t>(t.dim());
  for (int64_t d = 0; d < t.dim(); ++d) {
    v.shape[d] = t.size(d);
    v.stride[d] = t.stride(d);
  }
  return v;
}

kda_tensor opt_view(const char* fn, const char* name, const OptTensor& t, bool use_data) {
  if (!has(t)) return kda_tensor{};  // data NULL: absent
  return view(fn, name, *t, use_data);
}

void throw_on_error(const char* fn, const kda_status& s) {
  if (s.code == KDA_OK) return;
  const bool bad_argument = s.code == KDA_ERROR_INVALID_ARGUMENT || s.code == KDA_ERROR_UNSUPPORTED ||
                            s.code == KDA_ERROR_WORKSPACE_TOO_SMALL;
  TORCH_CHECK_VALUE(!bad_argument, fn, ": ", s.message, " [", kda_status_code_name(s.code), "]");
  TORCH_CHECK(false, fn, ": ", s.message, " [", kda_status_code_name(s.code), "]");
}

struct Args {
  const at::Tensor &q, &k, &v, &g, &beta;
  const at::Tensor* out;  // null: shape query (out is then v's shape in bf16)
  const OptTensor &A_log, &dt_bias;
  std::optional<double> lower_bound;
  const OptTensor &initial_state, &final_state, &cu_seqlens;
  double scale;
  bool beta_sigmoid, qk_l2norm, gate_in_kernel, allow_neg_eigval, check_cu_seqlens;
  int64_t context_split, context_method, single_pass;
};

kda_fwd_params make_params(const char* fn, const Args& a, bool use_data) {
  kda_fwd_params p;
  kda_fwd_params_init(&p);
  p.q = view(fn, "q", a.q, use_data);
  p.k = view(fn, "k", a.k, use_data);
  p.v = view(fn, "v", a.v, use_data);
  p.g = view(fn, "g", a.g, use_data);
  p.beta = view(fn, "beta", a.beta, use_data);
  if (a.out != nullptr) {
    p.out = view(fn, "out", *a.out, use_data);
  } else {
    p.out = p.v;  // same shape as v, bf16, row-major strides of v's shape
    p.out.dtype = KDA_DTYPE_BF16;
    int64_t stride = 1;
    for (int d = p.out.ndim - 1; d >= 0; --d) {
      p.out.stride[d] = stride;
      stride *= p.out.shape[d];
    }
  }
  p.A_log = opt_view(fn, "A_log", a.A_log, use_data);
  p.dt_bias = opt_view(fn, "dt_bias", a.dt_bias, use_data);
  p.initial_state = opt_view(fn, "initial_state", a.initial_state, use_data);
  p.final_state = opt_view(fn, "final_state", a.final_state, use_data);
  p.cu_seqlens = opt_view(fn, "cu_seqlens", a.cu_seqlens, use_data);
  p.scale = a.scale;
  if (!a.gate_in_kernel) {
    p.gate = KDA_GATE_PREACTIVATED;
  } else if (a.lower_bound.has_value()) {
    p.gate = KDA_GATE_BOUNDED;
    p.lower_bound = *a.lower_bound;
  } else {
    p.gate = KDA_GATE_SOFTPLUS;
  }
  p.beta_sigmoid = a.beta_sigmoid ? 1 : 0;
  p.qk_l2norm = a.qk_l2norm ? 1 : 0;
  p.allow_neg_eigval = a.allow_neg_eigval ? 1 : 0;
  p.check_cu_seqlens = a.check_cu_seqlens ? 1 : 0;
  // Out of int32 range: passed on as an invalid value, so that the C API names the argument.
  auto to_i32 = [](int64_t x) { return x < INT32_MIN || x > INT32_MAX ? int32_t{-1} : static_cast<int32_t>(x); };
  p.context_split = to_i32(a.context_split);
  p.context_method = to_i32(a.context_method);
  p.single_pass = to_i32(a.single_pass);
  return p;
}

void check_same_device(const char* fn, const char* name, const at::Tensor& t, const at::Device& dev) {
  TORCH_CHECK_VALUE(t.is_cuda(), fn, ": ", name, ": expected a CUDA tensor on ", dev,
                    " (the device of q), got a tensor on ", t.device());
  TORCH_CHECK_VALUE(t.device() == dev, fn, ": ", name, ": expected a tensor on ", dev,
                    " (the device of q), got a tensor on ", t.device());
}

void fwd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
         const at::Tensor& beta, double scale, const at::Tensor& out, const OptTensor& A_log,
         const OptTensor& dt_bias, std::optional<double> lower_bound, const OptTensor& initial_state,
         const OptTensor& final_state, const OptTensor& cu_seqlens, const OptTensor& workspace,
         bool beta_sigmoid, bool qk_l2norm, bool gate_in_kernel, bool allow_neg_eigval,
         bool check_cu_seqlens, int64_t context_split, int64_t context_method, int64_t single_pass) {
  constexpr const char* fn = "flash_kda.fwd";
  TORCH_CHECK_VALUE(q.is_cuda(), fn, ": q: expected a CUDA tensor, got a tensor on ", q.device(),
                    " (flash_kda runs on CUDA GPUs of compute capability 9.0 only)");
  const at::Device dev = q.device();
  check_same_device(fn, "k", k, dev);
  check_same_device(fn, "v", v, dev);
  check_same_device(fn, "g", g, dev);
  check_same_device(fn, "beta", beta, dev);
  check_same_device(fn, "out", out, dev);
  const struct {
    const char* name;
    const OptTensor& t;
  } optional_args[] = {{"A_log", A_log},           {"dt_bias", dt_bias},         {"initial_state", initial_state},
                       {"final_state", final_state}, {"cu_seqlens", cu_seqlens}, {"workspace", workspace}};
  for (const auto& e : optional_args)
    if (has(e.t)) check_same_device(fn, e.name, *e.t, dev);

  const c10::cuda::CUDAGuard guard(dev);
  const Args args{q,       k,           v,         g,          beta,         &out,         A_log,
                  dt_bias, lower_bound, initial_state, final_state, cu_seqlens, scale,   beta_sigmoid,
                  qk_l2norm, gate_in_kernel, allow_neg_eigval, check_cu_seqlens, context_split, context_method,
                  single_pass};

  // Shape validation first (no memory touched); this also sizes the workspace.
  const kda_fwd_params shapes = make_params(fn, args, /*use_data=*/false);
  size_t needed = 0;
  throw_on_error(fn, kda_fwd_workspace_size(&shapes, &needed));

  if (q.numel() == 0) {
    // No tokens (B*T == 0): nothing to launch; each final state is its initial state (or zeros).
    if (has(final_state)) {
      if (has(initial_state)) final_state->copy_(*initial_state);
      else final_state->zero_();
    }
    return;
  }

  kda_fwd_params p = make_params(fn, args, /*use_data=*/true);
  void* ws_ptr = nullptr;
  size_t ws_bytes = 0;
  c10::DataPtr owned_ws;  // freed (back to the cache, stream-ordered) when fwd returns
  // The size for these tensors: with their own pointers the query sees a call the single pass covers
  // (no records, design.md §3.5) where the stand-ins, all one address, looked in place.
  if (!has(workspace)) throw_on_error(fn, kda_fwd_workspace_size(&p, &needed));
  if (has(workspace)) {
    TORCH_CHECK_VALUE(workspace->scalar_type() == at::kByte, fn,
                      ": workspace: expected a torch.uint8 tensor (flash_kda.get_workspace_size bytes), got ",
                      workspace->scalar_type());
    TORCH_CHECK_VALUE(workspace->is_contiguous(), fn, ": workspace: expected a contiguous tensor, got strides ",
                      workspace->strides());
    ws_ptr = workspace->numel() > 0 ? workspace->data_ptr() : nullptr;
    ws_bytes = static_cast<size_t>(workspace->numel());
  } else if (needed > 0) {
    // PyTorch's CUDA caching allocator, the one at::empty uses on this device (the guard above made
    // it current), called directly rather than through a tensor factory: stream-ordered on the
    // current stream, and served from the graph's private pool under capture.
    owned_ws = c10::cuda::CUDACachingAllocator::get()->allocate(needed);
    ws_ptr = owned_ws.get();
    ws_bytes = needed;
  }

  // Every tensor was checked above to be a CUDA tensor on q's device, now the current one; the
  // workspace is that device's caching allocator's: the C API's pointer queries would only repeat it.
  p.trusted_pointers = 1;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(dev.index()).stream();
  throw_on_error(fn, kda_fwd(&p, ws_ptr, ws_bytes, stream));
}

int64_t get_workspace_size(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                           const at::Tensor& beta, const OptTensor& A_log, const OptTensor& dt_bias,
                           std::optional<double> lower_bound, const OptTensor& initial_state,
                           const OptTensor& final_state, const OptTensor& cu_seqlens, bool beta_sigmoid,
                           bool qk_l2norm, bool gate_in_kernel, bool allow_neg_eigval, int64_t context_split,
                           int64_t context_method, int64_t single_pass) {
  constexpr const char* fn = "flash_kda.get_workspace_size";
  const Args args{q,       k,           v,         g,          beta,         nullptr,     A_log,
                  dt_bias, lower_bound, initial_state, final_state, cu_seqlens, 1.0,   beta_sigmoid,
                  qk_l2norm, gate_in_kernel, allow_neg_eigval, false, context_split, context_method, single_pass};
  const kda_fwd_params p = make_params(fn, args, /*use_data=*/false);
  size_t bytes = 0;
  throw_on_error(fn, kda_fwd_workspace_size(&p, &bytes));
  return static_cast<int64_t>(bytes);
}

std::string build_info() {
  return std::string("version=") + kda_version_string() + ";cuda_version=" + std::to_string(kda_build_cuda_version()) +
         ";architectures=" + kda_build_architectures() + ";torch_version=" FLASH_KDA_TORCH_VERSION
         ";torch_cuda_version=" FLASH_KDA_TORCH_CUDA_VERSION;
}

}  // namespace

TORCH_LIBRARY(flash_kda, m) {
  m.def(
      "fwd(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, float scale, Tensor(a!) out, "
      "Tensor? A_log=None, Tensor? dt_bias=None, float? lower_bound=None, Tensor? initial_state=None, "
      "Tensor(b!)? final_state=None, Tensor? cu_seqlens=None, Tensor(c!)? workspace=None, "
      "bool beta_sigmoid=True, bool qk_l2norm=True, bool gate_in_kernel=True, bool allow_neg_eigval=False, "
      "bool check_cu_seqlens=False, int context_split=0, int context_method=0, int single_pass=0) -> ()");
  // Catch-all kernel: reads shapes only, so it also serves meta / CPU tensors.
  m.def(
      "get_workspace_size(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, Tensor? A_log=None, "
      "Tensor? dt_bias=None, float? lower_bound=None, Tensor? initial_state=None, Tensor? final_state=None, "
      "Tensor? cu_seqlens=None, bool beta_sigmoid=True, bool qk_l2norm=True, bool gate_in_kernel=True, "
      "bool allow_neg_eigval=False, int context_split=0, int context_method=0, int single_pass=0) -> int",
      &get_workspace_size);
  m.def("build_info() -> str", &build_info);
}

// flash_kda::segment_transition, transition_workspace_size, fwd_prepared, combine_transitions.
#include "binding_cp.inc"  // NOLINT(build/include)

TORCH_LIBRARY_IMPL(flash_kda, CUDA, m) { m.impl("fwd", &fwd); }

// All-CPU calls dispatch here; fwd then rejects them with the argument's name.
TORCH_LIBRARY_IMPL(flash_kda, CPU, m) { m.impl("fwd", &fwd); }

// flash_kda::decode: decode and speculative verify over an indexed state pool.
#include "binding_decode.inc"  // NOLINT(build/include)

// ---- Python module flash_kda._C: importing it runs the registrations above. ----
#ifdef FLASH_KDA_PYTHON_MODULE
namespace {

#ifdef FLASH_KDA_EAGER_FAST_PATH
// _C._fwd_eager: the eager fast path of flash_kda.fwd, and the helpers both fast paths share.
#include "binding_fwd_eager.inc"  // NOLINT(build/include)

// _C._decode_eager: the eager fast path of flash_kda.decode.
#include "binding_decode_eager.inc"  // NOLINT(build/include)

PyMethodDef kMethods[] = {
    {"_decode_eager", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(&decode_eager)), METH_FASTCALL,
     "Eager fast path of flash_kda.decode (internal): out when it ran, NotImplemented when the call needs the "
     "torch.ops path."},
    {"_fwd_eager", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(&fwd_eager)), METH_FASTCALL,
     "Eager fast path of flash_kda.fwd (internal): None when it ran, NotImplemented when the call needs "
     "the torch.ops path."},
    {nullptr, nullptr, 0, nullptr}};
#else
PyMethodDef kMethods[] = {{nullptr, nullptr, 0, nullptr}};
#endif  // FLASH_KDA_EAGER_FAST_PATH

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_C", "FlashKDA PyTorch ops (torch.ops.flash_kda)", -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};
}  // namespace

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&kModule); }
#endif
