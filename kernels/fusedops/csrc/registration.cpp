// Op schemas, the argument checks every backend shares, and the CPU and Meta
// registrations. The CUDA kernels register themselves in csrc/cuda/*.cu.
#include "fusedops.h"

#include <ATen/Version.h>
#include <torch/library.h>

#include <vector>

namespace fusedops {
namespace {

const char* dtype_name(at::ScalarType t) {
  switch (t) {
    case at::ScalarType::Float:
      return "float32";
    case at::ScalarType::BFloat16:
      return "bfloat16";
    case at::ScalarType::Half:
      return "float16";
    case at::ScalarType::Double:
      return "float64";
    default:
      return c10::toString(t);
  }
}

void check_same_device(
    const char* op, const at::Tensor& a, const char* a_name, const at::Tensor& b, const char* b_name) {
  TORCH_CHECK(
      a.device() == b.device(), op, ": all tensors must be on the same device, got ", a_name, " on ",
      a.device(), " and ", b_name, " on ", b.device());
}

// `ref` is the tensor whose dtype the op follows (always `input`).
void check_same_dtype(
    const char* op, const at::Tensor& ref, const char* ref_name, const at::Tensor& t, const char* name) {
  const at::ScalarType dt = ref.scalar_type();
  TORCH_CHECK(
      dt == at::ScalarType::Float || dt == at::ScalarType::BFloat16 || dt == at::ScalarType::Half, op,
      ": unsupported dtype ", dtype_name(dt), " for ", ref_name, "; expected float32, bfloat16 or float16");
  TORCH_CHECK(
      t.scalar_type() == dt, op, ": ", name, " and ", ref_name, " must have the same dtype, got ", name, " ",
      dtype_name(t.scalar_type()), " and ", ref_name, " ", dtype_name(dt));
}

void check_has_dim(const char* op, const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.dim() >= 1, op, ": ", name, " must have at least one dimension, got a 0-d tensor");
}

// Views `t` as evenly spaced contiguous rows. Supported: any tensor whose last dim has
// stride 1 and whose leading dims flatten into a single row dimension (contiguous
// tensors, row slices such as x[:, :h] or x[::2], the halves of a gate/up buffer).
// Rejected with a message: a strided last dim, or leading dims that do not flatten.
RowView row_view(const char* op, const at::Tensor& t, const char* name, bool written) {
  check_has_dim(op, t, name);
  const int64_t cols = t.size(-1);
  const int64_t numel = t.numel();
  RowView v{numel == 0 ? 0 : numel / cols, cols, cols};
  if (v.rows == 0) {
    return v;
  }
  TORCH_CHECK(
      cols == 1 || t.stride(-1) == 1, op, ": the last dimension of ", name,
      " must be contiguous (stride 1), got shape ", t.sizes(), " with strides ", t.strides(),
      "; call .contiguous() on it first");
  // The innermost leading dim of size > 1 sets the row stride; each dim outside it
  // must step over exactly the rows inside it, so one stride addresses every row.
  bool have_stride = false;
  int64_t span = 0;
  for (int64_t i = t.dim() - 2; i >= 0; --i) {
    const int64_t size = t.size(i);
    if (size == 1) {
      continue;
    }
    if (!have_stride) {
      v.stride = t.stride(i);
      span = v.stride * size;
      have_stride = true;
      continue;
    }
    TORCH_CHECK(
        t.stride(i) == span, op, ": the rows of ", name,
        " must be evenly spaced in memory (its leading dims must flatten into one), got shape ", t.sizes(),
        " with strides ", t.strides(), "; call .contiguous() on it first");
    span *= size;
  }
  TORCH_CHECK(
      !written || v.rows == 1 || v.stride >= cols, op, ": ", name, " is written to but its rows overlap (row stride ",
      v.stride, " < row length ", cols, ")");
  return v;
}

}  // namespace

AndMulArgs check_and_mul(const char* op, const at::Tensor& out, const at::Tensor& input) {
  check_same_device(op, out, "out", input, "input");
  check_same_dtype(op, input, "input", out, "out");
  check_has_dim(op, input, "input");
  TORCH_CHECK(
      input.size(-1) % 2 == 0, op, ": the last dim of input must be even (gate and up halves), got input of shape ",
      input.sizes());
  std::vector<int64_t> expected = input.sizes().vec();
  expected.back() /= 2;
  TORCH_CHECK(
      out.sizes() == at::IntArrayRef(expected), op, ": out must have shape ", at::IntArrayRef(expected),
      " (input's shape with the last dim halved), got ", out.sizes());
  return AndMulArgs{row_view(op, out, "out", /*written=*/true), row_view(op, input, "input", false)};
}

GeluApprox parse_gelu_approximate(const std::string& approximate) {
  if (approximate == "none") {
    return GeluApprox::kNone;
  }
  TORCH_CHECK(
      approximate == "tanh", "fusedops::gelu_and_mul: approximate must be 'none' or 'tanh', got '", approximate,
      "'");
  return GeluApprox::kTanh;
}

namespace {

void check_weight(const char* op, const at::Tensor& input, const at::Tensor& weight) {
  const int64_t hidden = input.size(-1);
  TORCH_CHECK(
      weight.dim() == 1 && weight.size(0) == hidden, op, ": weight must be 1-D with ", hidden,
      " elements (input's last dim), got shape ", weight.sizes());
  TORCH_CHECK(
      hidden <= 1 || weight.stride(0) == 1, op, ": weight must be contiguous, got stride ", weight.stride(0));
}

}  // namespace

RmsNormArgs check_rms_norm(const at::Tensor& out, const at::Tensor& input, const at::Tensor& weight) {
  const char* op = "fusedops::rms_norm";
  check_same_device(op, out, "out", input, "input");
  check_same_device(op, weight, "weight", input, "input");
  check_same_dtype(op, input, "input", out, "out");
  check_same_dtype(op, input, "input", weight, "weight");
  check_has_dim(op, input, "input");
  TORCH_CHECK(
      out.sizes() == input.sizes(), op, ": out must have the same shape as input ", input.sizes(), ", got ",
      out.sizes());
  check_weight(op, input, weight);
  return RmsNormArgs{row_view(op, out, "out", /*written=*/true), row_view(op, input, "input", false)};
}

FusedAddRmsNormArgs check_fused_add_rms_norm(
    const at::Tensor& input, const at::Tensor& residual, const at::Tensor& weight) {
  const char* op = "fusedops::fused_add_rms_norm";
  check_same_device(op, residual, "residual", input, "input");
  check_same_device(op, weight, "weight", input, "input");
  check_same_dtype(op, input, "input", residual, "residual");
  check_same_dtype(op, input, "input", weight, "weight");
  check_has_dim(op, input, "input");
  TORCH_CHECK(
      residual.sizes() == input.sizes(), op, ": residual must have the same shape as input ", input.sizes(),
      ", got ", residual.sizes());
  check_weight(op, input, weight);
  TORCH_CHECK(
      !input.is_same(residual), op,
      ": input and residual must be different tensors (both are updated in place)");
  return FusedAddRmsNormArgs{
      row_view(op, input, "input", /*written=*/true), row_view(op, residual, "residual", /*written=*/true)};
}

bool cpu_use_avx2() {
#if FUSEDOPS_HAVE_AVX2_PATH
  static const bool use = [] {
    __builtin_cpu_init();
    // ATen's capability honours ATEN_CPU_CAPABILITY, so `=default` also selects our
    // baseline path (the tests use that to cover it on AVX2 machines).
    const std::string aten = at::get_cpu_capability();
    return (aten == "AVX2" || aten == "AVX512") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  }();
  return use;
#else
  return false;
#endif
}

namespace {

// Meta kernels: shape/dtype/layout checks only, so the ops trace under FakeTensor /
// torch.compile and a device mismatch is reported by our checks, not the dispatcher.
void silu_and_mul_meta(at::Tensor& out, const at::Tensor& input) {
  check_and_mul("fusedops::silu_and_mul", out, input);
}

void gelu_and_mul_meta(at::Tensor& out, const at::Tensor& input, const std::string& approximate) {
  parse_gelu_approximate(approximate);
  check_and_mul("fusedops::gelu_and_mul", out, input);
}

void rms_norm_meta(at::Tensor& out, const at::Tensor& input, const at::Tensor& weight, double /*epsilon*/) {
  check_rms_norm(out, input, weight);
}

void fused_add_rms_norm_meta(
    at::Tensor& input, at::Tensor& residual, const at::Tensor& weight, double /*epsilon*/) {
  check_fused_add_rms_norm(input, residual, weight);
}

}  // namespace
}  // namespace fusedops

FUSEDOPS_LIBRARY(m) {
  m.def("silu_and_mul(Tensor(a!) out, Tensor input) -> ()");
  m.def("gelu_and_mul(Tensor(a!) out, Tensor input, str approximate) -> ()");
  m.def("rms_norm(Tensor(a!) out, Tensor input, Tensor weight, float epsilon) -> ()");
  m.def("fused_add_rms_norm(Tensor(a!) input, Tensor(b!) residual, Tensor weight, float epsilon) -> ()");
}

FUSEDOPS_LIBRARY_IMPL(CPU, m) {
  m.impl("silu_and_mul", &fusedops::silu_and_mul_cpu);
  m.impl("gelu_and_mul", &fusedops::gelu_and_mul_cpu);
  m.impl("rms_norm", &fusedops::rms_norm_cpu);
  m.impl("fused_add_rms_norm", &fusedops::fused_add_rms_norm_cpu);
}

FUSEDOPS_LIBRARY_IMPL(Meta, m) {
  m.impl("silu_and_mul", &fusedops::silu_and_mul_meta);
  m.impl("gelu_and_mul", &fusedops::gelu_and_mul_meta);
  m.impl("rms_norm", &fusedops::rms_norm_meta);
  m.impl("fused_add_rms_norm", &fusedops::fused_add_rms_norm_meta);
}
