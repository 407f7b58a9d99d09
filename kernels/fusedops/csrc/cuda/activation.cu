// CUDA silu_and_mul / gelu_and_mul: out[r, i] = act(in[r, i]) * in[r, d + i].
//
// One block per row; each thread moves 16 bytes per load/store when the row length,
// row strides and base pointers allow it, else one element. Math in fp32.
#include "fusedops.h"
#include "kernels.cuh"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace fusedops {
namespace {

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <typename T, Act A>
void launch_and_mul(const AndMulArgs& a, at::Tensor& out, const at::Tensor& input) {
  constexpr int64_t N = 16 / sizeof(T);
  T* out_ptr = static_cast<T*>(out.mutable_data_ptr());
  const T* in_ptr = static_cast<const T*>(input.const_data_ptr());
  const int64_t d = a.out.cols;
  // 128-bit accesses need every row start (and the up half) 16-byte aligned.
  const bool vec = d % N == 0 && a.input.stride % N == 0 && a.out.stride % N == 0 && aligned16(out_ptr) &&
      aligned16(in_ptr);
  const int64_t items = vec ? d / N : d;
  const int threads = static_cast<int>(std::min<int64_t>(1024, std::max<int64_t>(32, (items + 31) / 32 * 32)));
  const dim3 grid(static_cast<unsigned>(a.out.rows));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (vec) {
    and_mul_kernel<T, A, true><<<grid, threads, 0, stream>>>(out_ptr, in_ptr, d, a.input.stride, a.out.stride);
  } else {
    and_mul_kernel<T, A, false><<<grid, threads, 0, stream>>>(out_ptr, in_ptr, d, a.input.stride, a.out.stride);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <Act A>
void and_mul(const char* op, at::Tensor& out, const at::Tensor& input) {
  const AndMulArgs args = check_and_mul(op, out, input);
  if (args.out.rows == 0 || args.out.cols == 0) {
    return;
  }
  TORCH_CHECK(
      args.out.rows <= std::numeric_limits<int32_t>::max(), op, ": too many rows for one launch (",
      args.out.rows, ")");
  const c10::cuda::CUDAGuard device_guard(input.device());
  switch (input.scalar_type()) {
    case at::ScalarType::Float:
      launch_and_mul<float, A>(args, out, input);
      break;
    case at::ScalarType::BFloat16:
      launch_and_mul<c10::BFloat16, A>(args, out, input);
      break;
    case at::ScalarType::Half:
      launch_and_mul<c10::Half, A>(args, out, input);
      break;
    default:
      TORCH_INTERNAL_ASSERT(false, op, ": unchecked dtype ", input.scalar_type());
  }
}

void silu_and_mul_cuda(at::Tensor& out, const at::Tensor& input) {
  and_mul<Act::kSilu>("fusedops::silu_and_mul", out, input);
}

void gelu_and_mul_cuda(at::Tensor& out, const at::Tensor& input, const std::string& approximate) {
  if (parse_gelu_approximate(approximate) == GeluApprox::kTanh) {
    and_mul<Act::kGeluTanh>("fusedops::gelu_and_mul", out, input);
  } else {
    and_mul<Act::kGeluErf>("fusedops::gelu_and_mul", out, input);
  }
}

}  // namespace
}  // namespace fusedops

FUSEDOPS_LIBRARY_IMPL(CUDA, m) {
  m.impl("silu_and_mul", &fusedops::silu_and_mul_cuda);
  m.impl("gelu_and_mul", &fusedops::gelu_and_mul_cuda);
}
