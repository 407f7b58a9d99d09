// CPU silu_and_mul / gelu_and_mul: out[r, i] = act(in[r, i]) * in[r, d + i].
//
// One read of the input and one write of the output per element, computed in fp32
// (half types through fp32 staging blocks, see fusedops.h). The activations use our
// own branch-free exp/erf so the element loop vectorizes (std::exp/std::erf are
// scalar libm calls that keep the loop scalar).
#include "fusedops.h"

#include <ATen/Parallel.h>

#include <algorithm>

namespace fusedops {
namespace {

using cpu::F32;

// exp(x) within ~1.5 ulp (Cephes expf: x = n ln2 + r, degree-6 polynomial in r, 2^n
// built in the exponent bits). x is clamped to [-126 ln2, 128 ln2]: below, 2^n stays a
// normal float and the result saturates at ~2^-126; above, 2^128 is the bit pattern of
// +inf, so large x overflows to inf as it should. NaN becomes a finite value, which is
// harmless here: every caller computes x * f(exp(...)), so x carries the NaN.
FUSEDOPS_INLINE float exp_f32(float x) {
  // The clamp works on the bits (see cpu::clamp_abs): the limit depends on the sign.
  const uint32_t u = cpu::f32_bits(x);
  const uint32_t mag = u & 0x7FFFFFFFu;
  const uint32_t lim = cpu::select_bits((u >> 31) != 0, cpu::f32_bits(87.3365447f), cpu::f32_bits(88.7228394f));
  x = cpu::f32_from_bits((u & 0x80000000u) | (mag < lim ? mag : lim));
  // Round x*log2(e) to the nearest integer with the 1.5*2^23 trick: a vectorizable
  // float add instead of a floor/round call; the integer lands in the low mantissa bits.
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const float n = shifted - 12582912.0f;
  const int32_t ni = static_cast<int32_t>(cpu::f32_bits(shifted)) - 0x4B400000;
  // Cody-Waite: ln2 split in two so r = x - n*ln2 keeps its low bits.
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * cpu::f32_from_bits(static_cast<uint32_t>(ni + 127) << 23);
}

// erf(x) as an odd/even rational function on [-4, 4] (the Eigen/XLA float erf; erf is
// +-1 in float beyond that). Max abs error ~5e-7, no exp needed.
FUSEDOPS_INLINE float erf_f32(float x) {
  x = cpu::clamp_abs(x, 4.0f);
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 - 2.10102402082508e-06f;
  p = p * x2 - 5.69250639462346e-05f;
  p = p * x2 - 7.34990630326855e-04f;
  p = p * x2 - 2.95459980854025e-03f;
  p = p * x2 - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 - 2.13374055278905e-04f;
  q = q * x2 - 1.68282697438203e-03f;
  q = q * x2 - 7.37332916720468e-03f;
  q = q * x2 - 1.42647390514189e-02f;
  return x * p / q;
}

enum class Act { kSilu, kGeluErf, kGeluTanh };

template <Act A>
FUSEDOPS_INLINE float act(float x) {
  if constexpr (A == Act::kSilu) {
    return x / (1.0f + exp_f32(-x));
  } else if constexpr (A == Act::kGeluTanh) {
    // 0.5 * (1 + tanh(u)) == sigmoid(2u): one exp, and accurate where tanh(u) ~ -1.
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.0f + exp_f32(-2.0f * u));
  } else {
    return 0.5f * x * (1.0f + erf_f32(x * 0.7071067811865476f));
  }
}

template <typename D, Act A, cpu::Isa I>
FUSEDOPS_INLINE void and_mul_rows(const AndMulArgs& a, void* out, const void* in, int64_t begin, int64_t end) {
  using S = typename D::storage;
  const int64_t d = a.out.cols;
  for (int64_t r = begin; r < end; ++r) {
    const S* gate = static_cast<const S*>(in) + r * a.input.stride;
    const S* up = gate + d;
    S* o = static_cast<S*>(out) + r * a.out.stride;
    if constexpr (std::is_same_v<D, F32>) {
      for (int64_t i = 0; i < d; ++i) {
        o[i] = act<A>(gate[i]) * up[i];
      }
    } else {
      float g[cpu::kBlock];
      float u[cpu::kBlock];
      for (int64_t i0 = 0; i0 < d; i0 += cpu::kBlock) {
        const int64_t n = std::min(cpu::kBlock, d - i0);
        cpu::load_block<I, D>(gate + i0, g, n);
        cpu::load_block<I, D>(up + i0, u, n);
        for (int64_t k = 0; k < n; ++k) {
          g[k] = act<A>(g[k]) * u[k];
        }
        cpu::store_block<I, D>(g, o + i0, n);
      }
    }
  }
}

using AndMulRowsFn = void (*)(const AndMulArgs&, void*, const void*, int64_t, int64_t);

// One out-of-line copy of the row loop per ISA: the vectorizer works on each copy with
// that copy's target, so the AVX2 one gets 8-wide FMA code.
template <typename D, Act A>
void and_mul_rows_base(const AndMulArgs& a, void* out, const void* in, int64_t begin, int64_t end) {
  and_mul_rows<D, A, cpu::Isa::kBase>(a, out, in, begin, end);
}

#if FUSEDOPS_HAVE_AVX2_PATH
template <typename D, Act A>
FUSEDOPS_TARGET_AVX2 void and_mul_rows_avx2(
    const AndMulArgs& a, void* out, const void* in, int64_t begin, int64_t end) {
  and_mul_rows<D, A, cpu::Isa::kAvx2>(a, out, in, begin, end);
}
#endif

template <Act A>
void and_mul(const char* op, at::Tensor& out, const at::Tensor& input) {
  const AndMulArgs args = check_and_mul(op, out, input);
  if (args.out.rows == 0 || args.out.cols == 0) {
    return;
  }
  AndMulRowsFn fn = nullptr;
  cpu::dispatch_dtype(input.scalar_type(), [&](auto tag) {
    using D = decltype(tag);
#if FUSEDOPS_HAVE_AVX2_PATH
    fn = cpu_use_avx2() ? &and_mul_rows_avx2<D, A> : &and_mul_rows_base<D, A>;
#else
    fn = &and_mul_rows_base<D, A>;
#endif
  });
  void* out_ptr = out.mutable_data_ptr();
  const void* in_ptr = input.const_data_ptr();
  at::parallel_for(0, args.out.rows, cpu::row_grain(args.out.cols), [&](int64_t begin, int64_t end) {
    fn(args, out_ptr, in_ptr, begin, end);
  });
}

}  // namespace

void silu_and_mul_cpu(at::Tensor& out, const at::Tensor& input) {
  and_mul<Act::kSilu>("fusedops::silu_and_mul", out, input);
}

void gelu_and_mul_cpu(at::Tensor& out, const at::Tensor& input, const std::string& approximate) {
  if (parse_gelu_approximate(approximate) == GeluApprox::kTanh) {
    and_mul<Act::kGeluTanh>("fusedops::gelu_and_mul", out, input);
  } else {
    and_mul<Act::kGeluErf>("fusedops::gelu_and_mul", out, input);
  }
}

}  // namespace fusedops
