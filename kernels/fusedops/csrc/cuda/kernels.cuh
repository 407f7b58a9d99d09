// The device code of the CUDA ops, free of torch: kernels and their helpers, templated on the
// element type (float, c10::Half, c10::BFloat16 at the launch sites). The launchers in
// launchers.cu include it; so does device_instances.cu, the unit a ROCm compile check
// hipifies and builds for gfx targets where no ROCm torch is reachable.
#pragma once

#include <cstdint>

namespace fusedops {
namespace {  // each translation unit keeps its own copy, as when these lived in the .cu files

enum class Act { kSilu, kGeluErf, kGeluTanh };

template <Act A>
__device__ __forceinline__ float act(float x) {
  if constexpr (A == Act::kSilu) {
    return x / (1.0f + __expf(-x));
  } else if constexpr (A == Act::kGeluTanh) {
    // 0.5 * (1 + tanh(u)) == sigmoid(2u), as on the CPU: one exp, no cancellation.
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.0f + __expf(-2.0f * u));
  } else {
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
  }
}

// N elements in one 16-byte aligned bundle, so a copy is a single 128-bit access.
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <typename T, Act A, bool kVec>
__global__ void and_mul_kernel(
    T* __restrict__ out, const T* __restrict__ in, int64_t d, int64_t in_stride, int64_t out_stride) {
  const int64_t row = blockIdx.x;
  const T* gate = in + row * in_stride;
  const T* up = gate + d;
  T* o = out + row * out_stride;
  if constexpr (kVec) {
    constexpr int N = 16 / sizeof(T);
    using P = Pack<T, N>;
    const P* gate_p = reinterpret_cast<const P*>(gate);
    const P* up_p = reinterpret_cast<const P*>(up);
    P* o_p = reinterpret_cast<P*>(o);
    for (int64_t i = threadIdx.x; i < d / N; i += blockDim.x) {
      const P g = gate_p[i];
      const P u = up_p[i];
      P r;
#pragma unroll
      for (int k = 0; k < N; ++k) {
        r.v[k] = static_cast<T>(act<A>(static_cast<float>(g.v[k])) * static_cast<float>(u.v[k]));
      }
      o_p[i] = r;
    }
  } else {
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      o[i] = static_cast<T>(act<A>(static_cast<float>(gate[i])) * static_cast<float>(up[i]));
    }
  }
}

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

}  // namespace
}  // namespace fusedops
