// CUDA rms_norm and fused_add_rms_norm: one block per row, fp32 accumulation.
//
// Pass 1 reads the row once (fused with the residual add) and block-reduces the sum of
// squares; pass 2 re-reads the row, which each thread touched itself moments ago (so
// it comes from L1/L2), and writes the result. 128-bit accesses when the row length,
// row strides and base pointers are 16-byte aligned.
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

int threads_for(int64_t items) {
  // A multiple of 32 (block_sum relies on it), at most 1024.
  return static_cast<int>(std::min<int64_t>(1024, std::max<int64_t>(32, (items + 31) / 32 * 32)));
}

template <typename Fn>
void dispatch_cuda_dtype(at::ScalarType dtype, const char* op, Fn&& f) {
  switch (dtype) {
    case at::ScalarType::Float:
      f(float{});
      break;
    case at::ScalarType::BFloat16:
      f(c10::BFloat16{});
      break;
    case at::ScalarType::Half:
      f(c10::Half{});
      break;
    default:
      TORCH_INTERNAL_ASSERT(false, op, ": unchecked dtype ", dtype);
  }
}

void check_grid(const char* op, int64_t rows) {
  TORCH_CHECK(rows <= std::numeric_limits<int32_t>::max(), op, ": too many rows for one launch (", rows, ")");
}

void rms_norm_cuda(at::Tensor& out, const at::Tensor& input, const at::Tensor& weight, double epsilon) {
  const RmsNormArgs a = check_rms_norm(out, input, weight);
  if (a.input.rows == 0 || a.input.cols == 0) {
    return;
  }
  check_grid("fusedops::rms_norm", a.input.rows);
  const c10::cuda::CUDAGuard device_guard(input.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  dispatch_cuda_dtype(input.scalar_type(), "fusedops::rms_norm", [&](auto tag) {
    using T = decltype(tag);
    constexpr int64_t N = 16 / sizeof(T);
    T* o = static_cast<T*>(out.mutable_data_ptr());
    const T* x = static_cast<const T*>(input.const_data_ptr());
    const T* w = static_cast<const T*>(weight.const_data_ptr());
    const int64_t n = a.input.cols;
    const bool vec = n % N == 0 && a.input.stride % N == 0 && a.out.stride % N == 0 && aligned16(o) &&
        aligned16(x) && aligned16(w);
    const dim3 grid(static_cast<unsigned>(a.input.rows));
    const float eps = static_cast<float>(epsilon);
    if (vec) {
      rms_norm_kernel<T, true><<<grid, threads_for(n / N), 0, stream>>>(o, x, w, n, a.input.stride, a.out.stride, eps);
    } else {
      rms_norm_kernel<T, false><<<grid, threads_for(n), 0, stream>>>(o, x, w, n, a.input.stride, a.out.stride, eps);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void fused_add_rms_norm_cuda(at::Tensor& input, at::Tensor& residual, const at::Tensor& weight, double epsilon) {
  const FusedAddRmsNormArgs a = check_fused_add_rms_norm(input, residual, weight);
  if (a.input.rows == 0 || a.input.cols == 0) {
    return;
  }
  check_grid("fusedops::fused_add_rms_norm", a.input.rows);
  const c10::cuda::CUDAGuard device_guard(input.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  dispatch_cuda_dtype(input.scalar_type(), "fusedops::fused_add_rms_norm", [&](auto tag) {
    using T = decltype(tag);
    constexpr int64_t N = 16 / sizeof(T);
    T* x = static_cast<T*>(input.mutable_data_ptr());
    T* h = static_cast<T*>(residual.mutable_data_ptr());
    const T* w = static_cast<const T*>(weight.const_data_ptr());
    const int64_t n = a.input.cols;
    const bool vec = n % N == 0 && a.input.stride % N == 0 && a.residual.stride % N == 0 && aligned16(x) &&
        aligned16(h) && aligned16(w);
    const dim3 grid(static_cast<unsigned>(a.input.rows));
    const float eps = static_cast<float>(epsilon);
    if (vec) {
      fused_add_rms_norm_kernel<T, true>
          <<<grid, threads_for(n / N), 0, stream>>>(x, h, w, n, a.input.stride, a.residual.stride, eps);
    } else {
      fused_add_rms_norm_kernel<T, false>
          <<<grid, threads_for(n), 0, stream>>>(x, h, w, n, a.input.stride, a.residual.stride, eps);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace
}  // namespace fusedops

FUSEDOPS_LIBRARY_IMPL(CUDA, m) {
  m.impl("rms_norm", &fusedops::rms_norm_cuda);
  m.impl("fused_add_rms_norm", &fusedops::fused_add_rms_norm_cuda);
}
