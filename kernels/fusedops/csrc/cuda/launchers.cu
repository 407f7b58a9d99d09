// The launch sites of the CUDA ops (see launchers.cuh): silu_and_mul / gelu_and_mul with one
// block per row, each thread moving 16 bytes per load/store when the row length, row strides and
// base pointers allow it, else one element; rms_norm and fused_add_rms_norm with one block per
// row and fp32 accumulation. Math in fp32.
#include "launchers.cuh"

#include "kernels.cuh"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstdint>

namespace fusedops {
namespace cuda {
namespace {

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

int threads_for(int64_t items) {
  // A multiple of 32 (block_sum relies on it), at most 1024.
  return static_cast<int>(std::min<int64_t>(1024, std::max<int64_t>(32, (items + 31) / 32 * 32)));
}

template <typename Fn>
void with_element_type(Dtype dtype, Fn&& f) {
  switch (dtype) {
    case Dtype::kFloat:
      f(float{});
      break;
    case Dtype::kBFloat16:
      f(c10::BFloat16{});
      break;
    case Dtype::kHalf:
      f(c10::Half{});
      break;
  }
}

template <typename T, Act A>
void launch_and_mul(T* out, const T* in, int64_t rows, int64_t d, int64_t in_stride, int64_t out_stride,
                    cudaStream_t stream) {
  constexpr int64_t N = 16 / sizeof(T);
  // 128-bit accesses need every row start (and the up half) 16-byte aligned.
  const bool vec = d % N == 0 && in_stride % N == 0 && out_stride % N == 0 && aligned16(out) && aligned16(in);
  const dim3 grid(static_cast<unsigned>(rows));
  if (vec) {
    and_mul_kernel<T, A, true><<<grid, threads_for(d / N), 0, stream>>>(out, in, d, in_stride, out_stride);
  } else {
    and_mul_kernel<T, A, false><<<grid, threads_for(d), 0, stream>>>(out, in, d, in_stride, out_stride);
  }
}

}  // namespace

cudaError_t and_mul(Dtype dtype, Activation activation, void* out, const void* in, int64_t rows, int64_t d,
                    int64_t in_stride, int64_t out_stride, cudaStream_t stream) {
  with_element_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    const T* x = static_cast<const T*>(in);
    switch (activation) {
      case Activation::kSilu:
        launch_and_mul<T, Act::kSilu>(o, x, rows, d, in_stride, out_stride, stream);
        break;
      case Activation::kGeluErf:
        launch_and_mul<T, Act::kGeluErf>(o, x, rows, d, in_stride, out_stride, stream);
        break;
      case Activation::kGeluTanh:
        launch_and_mul<T, Act::kGeluTanh>(o, x, rows, d, in_stride, out_stride, stream);
        break;
    }
  });
  return cudaGetLastError();
}

cudaError_t rms_norm(Dtype dtype, void* out, const void* in, const void* weight, int64_t rows, int64_t n,
                     int64_t in_stride, int64_t out_stride, float eps, cudaStream_t stream) {
  with_element_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int64_t N = 16 / sizeof(T);
    T* o = static_cast<T*>(out);
    const T* x = static_cast<const T*>(in);
    const T* w = static_cast<const T*>(weight);
    const bool vec = n % N == 0 && in_stride % N == 0 && out_stride % N == 0 && aligned16(o) && aligned16(x) &&
        aligned16(w);
    const dim3 grid(static_cast<unsigned>(rows));
    if (vec) {
      rms_norm_kernel<T, true><<<grid, threads_for(n / N), 0, stream>>>(o, x, w, n, in_stride, out_stride, eps);
    } else {
      rms_norm_kernel<T, false><<<grid, threads_for(n), 0, stream>>>(o, x, w, n, in_stride, out_stride, eps);
    }
  });
  return cudaGetLastError();
}

cudaError_t fused_add_rms_norm(Dtype dtype, void* input, void* residual, const void* weight, int64_t rows,
                               int64_t n, int64_t in_stride, int64_t res_stride, float eps, cudaStream_t stream) {
  with_element_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int64_t N = 16 / sizeof(T);
    T* x = static_cast<T*>(input);
    T* h = static_cast<T*>(residual);
    const T* w = static_cast<const T*>(weight);
    const bool vec = n % N == 0 && in_stride % N == 0 && res_stride % N == 0 && aligned16(x) && aligned16(h) &&
        aligned16(w);
    const dim3 grid(static_cast<unsigned>(rows));
    if (vec) {
      fused_add_rms_norm_kernel<T, true>
          <<<grid, threads_for(n / N), 0, stream>>>(x, h, w, n, in_stride, res_stride, eps);
    } else {
      fused_add_rms_norm_kernel<T, false><<<grid, threads_for(n), 0, stream>>>(x, h, w, n, in_stride, res_stride, eps);
    }
  });
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace fusedops
