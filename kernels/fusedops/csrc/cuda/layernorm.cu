// CUDA rms_norm and fused_add_rms_norm: one block per row, fp32 accumulation.
//
// Pass 1 reads the row once (fused with the residual add) and block-reduces the sum of
// squares; pass 2 re-reads the row, which each thread touched itself moments ago (so
// it comes from L1/L2), and writes the result. 128-bit accesses when the row length,
// row strides and base pointers are 16-byte aligned.
#include "fusedops.h"

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

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

__device__ __forceinline__ float warp_sum(float v) {
  // Offsets below 32 keep the reduction inside aligned groups of 32 lanes, which is
  // also right on 64-wide AMD wavefronts after hipify.
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
#ifdef USE_ROCM
    v += __shfl_xor(v, offset);  // HIP's *_sync variants want a 64-bit lane mask
#else
    v += __shfl_xor_sync(0xffffffffu, v, offset);
#endif
  }
  return v;
}

// Sum over the block, returned to every thread. blockDim.x must be a multiple of 32.
__device__ float block_sum(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  const int lane = threadIdx.x % 32;
  const int group = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) {
    partial[group] = v;
  }
  __syncthreads();
  if (group == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : 0.0f;
    v = warp_sum(v);
    if (lane == 0) {
      total = v;
    }
  }
  __syncthreads();
  return total;
}

// Elements per thread access: a 16-byte bundle, or one element.
template <typename T, bool kVec>
constexpr int kWidth = kVec ? static_cast<int>(16 / sizeof(T)) : 1;

template <typename T, bool kVec>
__global__ void rms_norm_kernel(
    T* __restrict__ out, const T* __restrict__ in, const T* __restrict__ weight, int64_t n, int64_t in_stride,
    int64_t out_stride, float eps) {
  constexpr int N = kWidth<T, kVec>;
  using P = Pack<T, N>;
  const P* x = reinterpret_cast<const P*>(in + blockIdx.x * in_stride);
  const P* w = reinterpret_cast<const P*>(weight);
  P* o = reinterpret_cast<P*>(out + blockIdx.x * out_stride);
  const int64_t packs = n / N;

  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
    const P p = x[i];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float f = static_cast<float>(p.v[k]);
      ss += f * f;
    }
  }
  const float scale = rsqrtf(block_sum(ss) / static_cast<float>(n) + eps);

  for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
    const P p = x[i];
    const P wp = w[i];
    P r;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      r.v[k] = static_cast<T>(static_cast<float>(p.v[k]) * scale * static_cast<float>(wp.v[k]));
    }
    o[i] = r;
  }
}

template <typename T, bool kVec>
__global__ void fused_add_rms_norm_kernel(
    T* __restrict__ input, T* __restrict__ residual, const T* __restrict__ weight, int64_t n, int64_t in_stride,
    int64_t res_stride, float eps) {
  constexpr int N = kWidth<T, kVec>;
  using P = Pack<T, N>;
  P* x = reinterpret_cast<P*>(input + blockIdx.x * in_stride);
  P* h = reinterpret_cast<P*>(residual + blockIdx.x * res_stride);
  const P* w = reinterpret_cast<const P*>(weight);
  const int64_t packs = n / N;

  // residual <- x + residual, rounded to T; the norm is of the stored values.
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
    const P xp = x[i];
    P hp = h[i];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      hp.v[k] = static_cast<T>(static_cast<float>(xp.v[k]) + static_cast<float>(hp.v[k]));
      const float f = static_cast<float>(hp.v[k]);
      ss += f * f;
    }
    h[i] = hp;
  }
  const float scale = rsqrtf(block_sum(ss) / static_cast<float>(n) + eps);

  // Each thread re-reads only the residual packs it wrote itself: no sync needed.
  for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
    const P hp = h[i];
    const P wp = w[i];
    P r;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      r.v[k] = static_cast<T>(static_cast<float>(hp.v[k]) * scale * static_cast<float>(wp.v[k]));
    }
    x[i] = r;
  }
}

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
