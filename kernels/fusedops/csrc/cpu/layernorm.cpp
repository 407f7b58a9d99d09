// CPU rms_norm and fused_add_rms_norm, one row per inner loop, rows split across threads.
//
// Two passes per row: the first reads the row once for the sum of squares (fused with
// the residual add for fused_add_rms_norm), the second re-reads it from cache and
// writes the result. A hidden row (8192 x 4 bytes) fits in L1/L2, so DRAM sees each
// byte once: read input, write output (and read + write residual). fp32 rows are
// worked on in place; half rows go through fp32 staging blocks (see fusedops.h).
#include "fusedops.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <memory>

namespace fusedops {
namespace {

using cpu::F32;

// Partial sums per lane: a single float accumulator cannot be vectorized without
// reassociating the additions (-ffast-math, which the fp16 conversions must not see),
// and it would serialize on the add latency. 32 lanes = 4 AVX2 registers in flight.
constexpr int kLanes = 32;

FUSEDOPS_INLINE float reduce_lanes(float (&acc)[kLanes]) {
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int j = 0; j < width; ++j) {
      acc[j] += acc[j + width];
    }
  }
  return acc[0];
}

FUSEDOPS_INLINE float inv_rms(float sum_sq, int64_t n, float eps) {
  return 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps);
}

// Sum of squares of n fp32 values.
FUSEDOPS_INLINE float sum_squares(const float* x, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      acc[j] += x[i + j] * x[i + j];
    }
  }
  float tail = 0.0f;
  for (; i < n; ++i) {
    tail += x[i] * x[i];
  }
  return reduce_lanes(acc) + tail;
}

// Weight as fp32, converted once per task instead of once per row.
template <typename D, cpu::Isa I>
struct WeightF32 {
  explicit WeightF32(const void* w, int64_t n) : buf(new float[n]) {
    cpu::load_block<I, D>(static_cast<const typename D::storage*>(w), buf.get(), n);
  }
  std::unique_ptr<float[]> buf;
};

template <typename D, cpu::Isa I>
FUSEDOPS_INLINE void rms_norm_rows(
    const RmsNormArgs& a, void* out, const void* in, const void* weight, float eps, int64_t begin, int64_t end) {
  using S = typename D::storage;
  const int64_t n = a.input.cols;
  if constexpr (std::is_same_v<D, F32>) {
    const float* w = static_cast<const float*>(weight);
    for (int64_t r = begin; r < end; ++r) {
      const float* x = static_cast<const float*>(in) + r * a.input.stride;
      float* o = static_cast<float*>(out) + r * a.out.stride;
      const float scale = inv_rms(sum_squares(x, n), n, eps);
      for (int64_t k = 0; k < n; ++k) {
        o[k] = x[k] * scale * w[k];
      }
    }
  } else {
    const WeightF32<D, I> w(weight, n);
    float buf[cpu::kBlock];
    for (int64_t r = begin; r < end; ++r) {
      const S* x = static_cast<const S*>(in) + r * a.input.stride;
      S* o = static_cast<S*>(out) + r * a.out.stride;
      float ss = 0.0f;
      for (int64_t i0 = 0; i0 < n; i0 += cpu::kBlock) {
        const int64_t len = std::min(cpu::kBlock, n - i0);
        cpu::load_block<I, D>(x + i0, buf, len);
        ss += sum_squares(buf, len);
      }
      const float scale = inv_rms(ss, n, eps);
      // The row is still in cache; converting it again is cheaper than keeping an
      // fp32 copy of an arbitrarily long row.
      for (int64_t i0 = 0; i0 < n; i0 += cpu::kBlock) {
        const int64_t len = std::min(cpu::kBlock, n - i0);
        cpu::load_block<I, D>(x + i0, buf, len);
        const float* wb = w.buf.get() + i0;
        for (int64_t k = 0; k < len; ++k) {
          buf[k] = buf[k] * scale * wb[k];
        }
        cpu::store_block<I, D>(buf, o + i0, len);
      }
    }
  }
}

template <typename D, cpu::Isa I>
FUSEDOPS_INLINE void fused_add_rms_norm_rows(
    const FusedAddRmsNormArgs& a, void* in, void* res, const void* weight, float eps, int64_t begin, int64_t end) {
  using S = typename D::storage;
  const int64_t n = a.input.cols;
  if constexpr (std::is_same_v<D, F32>) {
    const float* w = static_cast<const float*>(weight);
    for (int64_t r = begin; r < end; ++r) {
      float* x = static_cast<float*>(in) + r * a.input.stride;
      float* h = static_cast<float*>(res) + r * a.residual.stride;
      // Pass 1: residual <- x + residual, fused with the sum of squares.
      float acc[kLanes] = {};
      int64_t i = 0;
      for (; i + kLanes <= n; i += kLanes) {
        for (int j = 0; j < kLanes; ++j) {
          const float z = x[i + j] + h[i + j];
          h[i + j] = z;
          acc[j] += z * z;
        }
      }
      float tail = 0.0f;
      for (; i < n; ++i) {
        const float z = x[i] + h[i];
        h[i] = z;
        tail += z * z;
      }
      const float scale = inv_rms(reduce_lanes(acc) + tail, n, eps);
      // Pass 2: the residual row is still in cache.
      for (int64_t k = 0; k < n; ++k) {
        x[k] = h[k] * scale * w[k];
      }
    }
  } else {
    const WeightF32<D, I> w(weight, n);
    float xb[cpu::kBlock];
    float hb[cpu::kBlock];
    for (int64_t r = begin; r < end; ++r) {
      S* x = static_cast<S*>(in) + r * a.input.stride;
      S* h = static_cast<S*>(res) + r * a.residual.stride;
      float ss = 0.0f;
      for (int64_t i0 = 0; i0 < n; i0 += cpu::kBlock) {
        const int64_t len = std::min(cpu::kBlock, n - i0);
        cpu::load_block<I, D>(x + i0, xb, len);
        cpu::load_block<I, D>(h + i0, hb, len);
        for (int64_t k = 0; k < len; ++k) {
          hb[k] += xb[k];
        }
        // The norm is taken of the residual as stored (rounded to its dtype), the
        // same values the next layer adds to; reading them back gets the rounding.
        cpu::store_block<I, D>(hb, h + i0, len);
        cpu::load_block<I, D>(h + i0, hb, len);
        ss += sum_squares(hb, len);
      }
      const float scale = inv_rms(ss, n, eps);
      for (int64_t i0 = 0; i0 < n; i0 += cpu::kBlock) {
        const int64_t len = std::min(cpu::kBlock, n - i0);
        cpu::load_block<I, D>(h + i0, hb, len);
        const float* wb = w.buf.get() + i0;
        for (int64_t k = 0; k < len; ++k) {
          hb[k] = hb[k] * scale * wb[k];
        }
        cpu::store_block<I, D>(hb, x + i0, len);
      }
    }
  }
}

using RmsNormRowsFn = void (*)(const RmsNormArgs&, void*, const void*, const void*, float, int64_t, int64_t);
using FusedAddRowsFn = void (*)(const FusedAddRmsNormArgs&, void*, void*, const void*, float, int64_t, int64_t);

// Out-of-line copies per ISA, as in activation.cpp: the AVX2 copies are vectorized
// 8 floats wide with FMA, the base copies use the baseline ISA.
template <typename D>
void rms_norm_rows_base(
    const RmsNormArgs& a, void* out, const void* in, const void* w, float eps, int64_t begin, int64_t end) {
  rms_norm_rows<D, cpu::Isa::kBase>(a, out, in, w, eps, begin, end);
}

template <typename D>
void fused_add_rms_norm_rows_base(
    const FusedAddRmsNormArgs& a, void* in, void* res, const void* w, float eps, int64_t begin, int64_t end) {
  fused_add_rms_norm_rows<D, cpu::Isa::kBase>(a, in, res, w, eps, begin, end);
}

#if FUSEDOPS_HAVE_AVX2_PATH
template <typename D>
FUSEDOPS_TARGET_AVX2 void rms_norm_rows_avx2(
    const RmsNormArgs& a, void* out, const void* in, const void* w, float eps, int64_t begin, int64_t end) {
  rms_norm_rows<D, cpu::Isa::kAvx2>(a, out, in, w, eps, begin, end);
}

template <typename D>
FUSEDOPS_TARGET_AVX2 void fused_add_rms_norm_rows_avx2(
    const FusedAddRmsNormArgs& a, void* in, void* res, const void* w, float eps, int64_t begin, int64_t end) {
  fused_add_rms_norm_rows<D, cpu::Isa::kAvx2>(a, in, res, w, eps, begin, end);
}
#endif

}  // namespace

void rms_norm_cpu(at::Tensor& out, const at::Tensor& input, const at::Tensor& weight, double epsilon) {
  const RmsNormArgs args = check_rms_norm(out, input, weight);
  if (args.input.rows == 0 || args.input.cols == 0) {
    return;
  }
  RmsNormRowsFn fn = nullptr;
  cpu::dispatch_dtype(input.scalar_type(), [&](auto tag) {
    using D = decltype(tag);
#if FUSEDOPS_HAVE_AVX2_PATH
    fn = cpu_use_avx2() ? &rms_norm_rows_avx2<D> : &rms_norm_rows_base<D>;
#else
    fn = &rms_norm_rows_base<D>;
#endif
  });
  void* out_ptr = out.mutable_data_ptr();
  const void* in_ptr = input.const_data_ptr();
  const void* w_ptr = weight.const_data_ptr();
  const float eps = static_cast<float>(epsilon);
  at::parallel_for(0, args.input.rows, cpu::row_grain(args.input.cols), [&](int64_t begin, int64_t end) {
    fn(args, out_ptr, in_ptr, w_ptr, eps, begin, end);
  });
}

void fused_add_rms_norm_cpu(
    at::Tensor& input, at::Tensor& residual, const at::Tensor& weight, double epsilon) {
  const FusedAddRmsNormArgs args = check_fused_add_rms_norm(input, residual, weight);
  if (args.input.rows == 0 || args.input.cols == 0) {
    return;
  }
  FusedAddRowsFn fn = nullptr;
  cpu::dispatch_dtype(input.scalar_type(), [&](auto tag) {
    using D = decltype(tag);
#if FUSEDOPS_HAVE_AVX2_PATH
    fn = cpu_use_avx2() ? &fused_add_rms_norm_rows_avx2<D> : &fused_add_rms_norm_rows_base<D>;
#else
    fn = &fused_add_rms_norm_rows_base<D>;
#endif
  });
  void* in_ptr = input.mutable_data_ptr();
  void* res_ptr = residual.mutable_data_ptr();
  const void* w_ptr = weight.const_data_ptr();
  const float eps = static_cast<float>(epsilon);
  at::parallel_for(0, args.input.rows, cpu::row_grain(args.input.cols), [&](int64_t begin, int64_t end) {
    fn(args, in_ptr, res_ptr, w_ptr, eps, begin, end);
  });
}

}  // namespace fusedops
