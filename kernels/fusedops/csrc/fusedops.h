// Shared declarations for the fusedops kernels: the namespace macros, the argument
// checks every backend runs, and the CPU entry points registered in registration.cpp.
#pragma once

#ifndef FUSEDOPS_NAMESPACE
#error "FUSEDOPS_NAMESPACE is not defined: compile with -DFUSEDOPS_NAMESPACE=<op namespace>, e.g. -DFUSEDOPS_NAMESPACE=_fusedops_cpu_1a2b3c4d (the factory and the runtime pick it per build)"
#endif

#include <ATen/core/Tensor.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

// ---------------------------------------------------------------------------------
// Helpers for the CPU kernels. The kernels are plain loops over rows written so the
// compiler vectorizes them; each is compiled twice in one translation unit, once for
// the baseline ISA and once with target("avx2,fma,f16c") for x86-64 CPUs that have it,
// and cpu_use_avx2() picks one at run time. That keeps one portable binary (no
// -march flags in the wheel) while the hot loops still run 256-bit wide.
// ---------------------------------------------------------------------------------
#if defined(__GNUC__) || defined(__clang__)
#define FUSEDOPS_INLINE inline __attribute__((always_inline))
#else
#define FUSEDOPS_INLINE inline
#endif

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDACC__) && !defined(__HIPCC__)
#define FUSEDOPS_HAVE_AVX2_PATH 1
#define FUSEDOPS_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#else
#define FUSEDOPS_HAVE_AVX2_PATH 0
#endif

#if FUSEDOPS_HAVE_AVX2_PATH
#include <immintrin.h>
#endif

// TORCH_LIBRARY/TORCH_LIBRARY_IMPL token-paste their namespace argument, which would
// glue the literal token FUSEDOPS_NAMESPACE into the symbol names. Passing it through
// one more macro level makes the preprocessor expand it first.
#define FUSEDOPS_LIBRARY_EXPAND_(ns, m) TORCH_LIBRARY(ns, m)
#define FUSEDOPS_LIBRARY_IMPL_EXPAND_(ns, k, m) TORCH_LIBRARY_IMPL(ns, k, m)
#define FUSEDOPS_LIBRARY(m) FUSEDOPS_LIBRARY_EXPAND_(FUSEDOPS_NAMESPACE, m)
#define FUSEDOPS_LIBRARY_IMPL(k, m) FUSEDOPS_LIBRARY_IMPL_EXPAND_(FUSEDOPS_NAMESPACE, k, m)

namespace fusedops {

// A tensor seen as `rows` rows of `cols` contiguous elements, `stride` elements apart.
// Every op works row by row, so this is the only layout the kernels need: it covers
// contiguous tensors and row-strided views (e.g. a [:, :h] slice of a wider buffer).
struct RowView {
  int64_t rows;
  int64_t cols;
  int64_t stride;
};

struct AndMulArgs {
  RowView out;
  RowView input;  // cols == 2 * out.cols: gate half, then up half
};

struct RmsNormArgs {
  RowView out;
  RowView input;
};

struct FusedAddRmsNormArgs {
  RowView input;
  RowView residual;
};

enum class GeluApprox { kNone, kTanh };

// Argument checks shared by every backend (CPU, CUDA, Meta). Each throws a
// c10::Error (RuntimeError in Python) that names the op and the offending tensor.
AndMulArgs check_and_mul(const char* op, const at::Tensor& out, const at::Tensor& input);
GeluApprox parse_gelu_approximate(const std::string& approximate);
RmsNormArgs check_rms_norm(const at::Tensor& out, const at::Tensor& input, const at::Tensor& weight);
FusedAddRmsNormArgs check_fused_add_rms_norm(
    const at::Tensor& input, const at::Tensor& residual, const at::Tensor& weight);

// CPU kernels (csrc/cpu). They validate their arguments themselves.
void silu_and_mul_cpu(at::Tensor& out, const at::Tensor& input);
void gelu_and_mul_cpu(at::Tensor& out, const at::Tensor& input, const std::string& approximate);
void rms_norm_cpu(at::Tensor& out, const at::Tensor& input, const at::Tensor& weight, double epsilon);
void fused_add_rms_norm_cpu(
    at::Tensor& input, at::Tensor& residual, const at::Tensor& weight, double epsilon);

// True when the CPU kernels should take their AVX2+FMA code path: the CPU has the
// instructions and ATen's own capability (which honours ATEN_CPU_CAPABILITY=default)
// is at least AVX2. Decided once per process.
bool cpu_use_avx2();

namespace cpu {

FUSEDOPS_INLINE uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

FUSEDOPS_INLINE float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// c ? a : b without a branch. GCC sinks the float math feeding a ?: into its arms and
// then, with -ftrapping-math, refuses to if-convert (float ops may trap), which leaves
// control flow in the loop and no vectorization. A mask select keeps it straight-line.
FUSEDOPS_INLINE uint32_t select_bits(bool c, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  return (a & mask) | (b & ~mask);
}

// Clamps |x| to `limit` (> 0), keeping the sign; NaN becomes +-limit. Integer ops on
// the bits because float compares block vectorization (see BF16::store).
FUSEDOPS_INLINE float clamp_abs(float x, float limit) {
  const uint32_t u = f32_bits(x);
  const uint32_t mag = u & 0x7FFFFFFFu;
  const uint32_t lim = f32_bits(limit);
  return f32_from_bits((u & 0x80000000u) | (mag < lim ? mag : lim));
}

// Element types as load/store policies over their raw storage. The conversions are
// branch-free bit manipulation (no lookup tables, no libm), so loops over them vectorize.
struct F32 {
  using storage = float;
  static FUSEDOPS_INLINE float load(float v) { return v; }
  static FUSEDOPS_INLINE float store(float v) { return v; }
};

struct BF16 {
  using storage = uint16_t;
  static FUSEDOPS_INLINE float load(uint16_t v) { return f32_from_bits(uint32_t(v) << 16); }
  // Round to nearest even, as c10::BFloat16 does; NaN stays a quiet NaN. The NaN test
  // is on the bits: with the default -ftrapping-math GCC will not if-convert a float
  // compare, and control flow left in a loop stops it from being vectorized.
  static FUSEDOPS_INLINE uint16_t store(float f) {
    const uint32_t u = f32_bits(f);
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    return uint16_t(select_bits((u & 0x7FFFFFFFu) > 0x7F800000u, 0x7FC0u, rounded));
  }
};

// IEEE half <-> float, the branch-free algorithms of the FP16 library that c10::Half
// also uses; they rely on exact IEEE float rounding, so never build with -ffast-math.
struct F16 {
  using storage = uint16_t;
  static FUSEDOPS_INLINE float load(uint16_t h) {
    const uint32_t w = uint32_t(h) << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    const float normalized = f32_from_bits((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    const float denormalized = f32_from_bits((two_w >> 17) | (126u << 23)) - 0.5f;
    const uint32_t bits = select_bits(two_w < (1u << 27), f32_bits(denormalized), f32_bits(normalized));
    return f32_from_bits(sign | bits);
  }
  static FUSEDOPS_INLINE uint16_t store(float f) {
    float base = (std::fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
    const uint32_t w = f32_bits(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    bias = bias < 0x71000000u ? 0x71000000u : bias;
    base = f32_from_bits((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = f32_bits(base);
    const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
    return uint16_t((sign >> 16) | select_bits(shl1_w > 0xFF000000u, 0x7E00u, nonsign));
  }
};

// Calls f(F32{}), f(BF16{}) or f(F16{}); the caller has already checked the dtype.
template <typename Fn>
void dispatch_dtype(at::ScalarType dtype, Fn&& f) {
  switch (dtype) {
    case at::ScalarType::Float:
      f(F32{});
      break;
    case at::ScalarType::BFloat16:
      f(BF16{});
      break;
    case at::ScalarType::Half:
      f(F16{});
      break;
    default:
      TORCH_INTERNAL_ASSERT(false, "fusedops: unchecked dtype ", dtype);
  }
}

// ---------------------------------------------------------------------------------
// Half-precision rows are processed in blocks: convert a block to fp32 in a stack
// buffer, do the math there, convert the result back. Separate conversion loops
// vectorize cleanly and let the AVX2 build use F16C / 256-bit integer shuffles; doing
// the conversion inside the math loop measured 1.5x (bf16) to 3x (fp16) slower.
// ---------------------------------------------------------------------------------
enum class Isa { kBase, kAvx2 };

constexpr int64_t kBlock = 512;  // fp32 elements per staging buffer (2 KiB)

#if FUSEDOPS_HAVE_AVX2_PATH
// Called, not always-inlined, from the ISA-generic kernel bodies: GCC refuses to
// inline target("avx2") code into a function without that target, even one that is
// itself inlined into an AVX2 function later. One call per block costs nothing.
FUSEDOPS_TARGET_AVX2 inline void bf16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
  }
  for (; i < n; ++i) {
    dst[i] = BF16::load(src[i]);
  }
}

FUSEDOPS_TARGET_AVX2 inline void f32_to_bf16_avx2(const float* src, uint16_t* dst, int64_t n) {
  const __m256i rounding_bias = _mm256_set1_epi32(0x7FFF);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i inf_bits = _mm256_set1_epi32(0x7F800000);
  const __m256i quiet_nan = _mm256_set1_epi32(0x7FC0);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src + i));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, rounding_bias), lsb), 16);
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf_bits);
    r = _mm256_blendv_epi8(r, quiet_nan, is_nan);
    // Every lane is < 2^16, so the saturating pack is exact.
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), packed);
  }
  for (; i < n; ++i) {
    dst[i] = BF16::store(src[i]);
  }
}

FUSEDOPS_TARGET_AVX2 inline void f16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) {
    dst[i] = F16::load(src[i]);
  }
}

FUSEDOPS_TARGET_AVX2 inline void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) {
    dst[i] = F16::store(src[i]);
  }
}
#endif  // FUSEDOPS_HAVE_AVX2_PATH

// dst[0:n] = fp32(src[0:n]).
template <Isa I, typename D>
FUSEDOPS_INLINE void load_block(const typename D::storage* src, float* dst, int64_t n) {
#if FUSEDOPS_HAVE_AVX2_PATH
  if constexpr (I == Isa::kAvx2 && std::is_same_v<D, BF16>) {
    bf16_to_f32_avx2(src, dst, n);
    return;
  } else if constexpr (I == Isa::kAvx2 && std::is_same_v<D, F16>) {
    f16_to_f32_avx2(src, dst, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = D::load(src[i]);
  }
}

// dst[0:n] = D(src[0:n]), rounding to nearest even.
template <Isa I, typename D>
FUSEDOPS_INLINE void store_block(const float* src, typename D::storage* dst, int64_t n) {
#if FUSEDOPS_HAVE_AVX2_PATH
  if constexpr (I == Isa::kAvx2 && std::is_same_v<D, BF16>) {
    f32_to_bf16_avx2(src, dst, n);
    return;
  } else if constexpr (I == Isa::kAvx2 && std::is_same_v<D, F16>) {
    f32_to_f16_avx2(src, dst, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = D::store(src[i]);
  }
}

// Rows per at::parallel_for task: enough elements per task that thread hand-off
// costs stay small next to the work, and short inputs run inline on one thread.
FUSEDOPS_INLINE int64_t row_grain(int64_t cols) {
  constexpr int64_t kMinElementsPerTask = 16384;
  return cols >= kMinElementsPerTask ? 1 : kMinElementsPerTask / (cols > 0 ? cols : 1);
}

}  // namespace cpu
}  // namespace fusedops
