// The CUDA ops' torch side: argument checks (shared with the other backends), the device guard,
// the current stream and the element type, then the launchers (launchers.cu), and registration.
// Host C++: compiled once, not once per arch.
#include "fusedops.h"
#include "launchers.cuh"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdint>
#include <limits>
#include <string>

namespace fusedops {
namespace {

cuda::Dtype element_type(const char* op, at::ScalarType dtype) {
  switch (dtype) {
    case at::ScalarType::Float:
      return cuda::Dtype::kFloat;
    case at::ScalarType::BFloat16:
      return cuda::Dtype::kBFloat16;
    case at::ScalarType::Half:
      return cuda::Dtype::kHalf;
    default:
      TORCH_INTERNAL_ASSERT(false, op, ": unchecked dtype ", dtype);
  }
}

void check_grid(const char* op, int64_t rows) {
  TORCH_CHECK(rows <= std::numeric_limits<int32_t>::max(), op, ": too many rows for one launch (", rows, ")");
}

void and_mul(const char* op, cuda::Activation activation, at::Tensor& out, const at::Tensor& input) {
  const AndMulArgs a = check_and_mul(op, out, input);
  if (a.out.rows == 0 || a.out.cols == 0) {
    return;
  }
  check_grid(op, a.out.rows);
  const c10::cuda::CUDAGuard device_guard(input.device());
  C10_CUDA_CHECK(cuda::and_mul(element_type(op, input.scalar_type()), activation, out.mutable_data_ptr(),
                               input.const_data_ptr(), a.out.rows, a.out.cols, a.input.stride, a.out.stride,
                               c10::cuda::getCurrentCUDAStream()));
}

void silu_and_mul_cuda(at::Tensor& out, const at::Tensor& input) {
  and_mul("fusedops::silu_and_mul", cuda::Activation::kSilu, out, input);
}

void gelu_and_mul_cuda(at::Tensor& out, const at::Tensor& input, const std::string& approximate) {
  const bool tanh = parse_gelu_approximate(approximate) == GeluApprox::kTanh;
  and_mul("fusedops::gelu_and_mul", tanh ? cuda::Activation::kGeluTanh : cuda::Activation::kGeluErf, out, input);
}

void rms_norm_cuda(at::Tensor& out, const at::Tensor& input, const at::Tensor& weight, double epsilon) {
  const char* op = "fusedops::rms_norm";
  const RmsNormArgs a = check_rms_norm(out, input, weight);
  if (a.input.rows == 0 || a.input.cols == 0) {
    return;
  }
  check_grid(op, a.input.rows);
  const c10::cuda::CUDAGuard device_guard(input.device());
  C10_CUDA_CHECK(cuda::rms_norm(element_type(op, input.scalar_type()), out.mutable_data_ptr(),
                                input.const_data_ptr(), weight.const_data_ptr(), a.input.rows, a.input.cols,
                                a.input.stride, a.out.stride, static_cast<float>(epsilon),
                                c10::cuda::getCurrentCUDAStream()));
}

void fused_add_rms_norm_cuda(at::Tensor& input, at::Tensor& residual, const at::Tensor& weight, double epsilon) {
  const char* op = "fusedops::fused_add_rms_norm";
  const FusedAddRmsNormArgs a = check_fused_add_rms_norm(input, residual, weight);
  if (a.input.rows == 0 || a.input.cols == 0) {
    return;
  }
  check_grid(op, a.input.rows);
  const c10::cuda::CUDAGuard device_guard(input.device());
  C10_CUDA_CHECK(cuda::fused_add_rms_norm(element_type(op, input.scalar_type()), input.mutable_data_ptr(),
                                          residual.mutable_data_ptr(), weight.const_data_ptr(), a.input.rows,
                                          a.input.cols, a.input.stride, a.residual.stride,
                                          static_cast<float>(epsilon), c10::cuda::getCurrentCUDAStream()));
}

}  // namespace
}  // namespace fusedops

FUSEDOPS_LIBRARY_IMPL(CUDA, m) {
  m.impl("silu_and_mul", &fusedops::silu_and_mul_cuda);
  m.impl("gelu_and_mul", &fusedops::gelu_and_mul_cuda);
  m.impl("rms_norm", &fusedops::rms_norm_cuda);
  m.impl("fused_add_rms_norm", &fusedops::fused_add_rms_norm_cuda);
}
