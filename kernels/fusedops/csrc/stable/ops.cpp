// The four ops against torch's stable ABI only (torch/csrc/stable, torch/headeronly): one
// binary serves every torch from TORCH_TARGET_VERSION (2.10) on, where the regular build is
// tied to one torch minor. The price is speed: plain scalar loops over rows in parallel (no
// AVX2 paths, which live in the ATen build), computed in fp32.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/Half.h>

#include <cmath>
#include <cstdint>
#include <string>

#ifndef FUSEDOPS_NAMESPACE
#error "FUSEDOPS_NAMESPACE must be defined (the factory sets it per build)"
#endif

namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

constexpr int64_t kGrainRows = 16;

void check_rows(const Tensor& t, const char* name) {
  STD_TORCH_CHECK(t.is_cpu(), "fusedops (stable ABI build): ", name, " must be a CPU tensor");
  STD_TORCH_CHECK(t.dim() >= 1 && t.stride(t.dim() - 1) == 1, "fusedops: ", name,
                  " must have a contiguous last dimension");
}

int64_t rows_of(const Tensor& t) { return t.dim() == 0 ? 1 : t.numel() / t.size(t.dim() - 1); }

// Row r of a tensor whose leading dims may be strided but collapse to one row stride.
int64_t row_stride(const Tensor& t) { return t.dim() >= 2 ? t.stride(t.dim() - 2) : 0; }

template <typename T>
float load(const T* p, int64_t i) { return static_cast<float>(p[i]); }
template <typename T>
void store(T* p, int64_t i, float v) { p[i] = static_cast<T>(v); }

template <typename Fn>
void dispatch(ScalarType dtype, Fn&& fn) {
  switch (dtype) {
    case ScalarType::Float: fn(float{}); break;
    case ScalarType::BFloat16: fn(torch::headeronly::BFloat16{}); break;
    case ScalarType::Half: fn(torch::headeronly::Half{}); break;
    default: STD_TORCH_CHECK(false, "fusedops: unsupported dtype (float32, bfloat16, float16 are)");
  }
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

template <float (*Act)(float)>
void gated(Tensor& out, const Tensor& input) {
  check_rows(input, "input");
  check_rows(out, "out");
  const int64_t d = input.size(input.dim() - 1) / 2;
  STD_TORCH_CHECK(out.size(out.dim() - 1) == d && rows_of(out) == rows_of(input),
                  "fusedops: out must have the input's shape with the last dimension halved");
  STD_TORCH_CHECK(out.scalar_type() == input.scalar_type(), "fusedops: out and input dtypes differ");
  dispatch(input.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(input.const_data_ptr());
    T* dst = static_cast<T*>(out.mutable_data_ptr());
    const int64_t in_rs = row_stride(input), out_rs = row_stride(out);
    torch::stable::parallel_for(0, rows_of(input), kGrainRows, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* x = in + r * in_rs;
        T* y = dst + r * out_rs;
        for (int64_t i = 0; i < d; ++i) store(y, i, Act(load(x, i)) * load(x, d + i));
      }
    });
  });
}

void silu_and_mul(Tensor out, Tensor input) { gated<silu>(out, input); }

void gelu_and_mul(Tensor out, Tensor input, std::string approximate) {
  STD_TORCH_CHECK(approximate == "none" || approximate == "tanh",
                  "fusedops: approximate must be 'none' or 'tanh', got '", approximate, "'");
  if (approximate == "tanh") gated<gelu_tanh>(out, input);
  else gated<gelu>(out, input);
}

// out = x * rsqrt(mean(x^2) + eps) * w, optionally after residual <- x + residual (then x <- out).
template <bool kAddResidual>
void norm(Tensor& out, const Tensor& input, Tensor* residual, const Tensor& weight, double epsilon) {
  check_rows(input, "input");
  check_rows(out, "out");
  const int64_t d = input.size(input.dim() - 1);
  STD_TORCH_CHECK(weight.dim() == 1 && weight.size(0) == d && weight.stride(0) == 1,
                  "fusedops: weight must be a contiguous vector of the hidden size");
  STD_TORCH_CHECK(weight.scalar_type() == input.scalar_type(), "fusedops: weight and input dtypes differ");
  dispatch(input.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* w = static_cast<const T*>(weight.const_data_ptr());
    const T* in = static_cast<const T*>(input.const_data_ptr());
    T* dst = static_cast<T*>(out.mutable_data_ptr());
    T* res = residual ? static_cast<T*>(residual->mutable_data_ptr()) : nullptr;
    const int64_t in_rs = row_stride(input), out_rs = row_stride(out);
    const int64_t res_rs = residual ? row_stride(*residual) : 0;
    const float eps = static_cast<float>(epsilon);
    torch::stable::parallel_for(0, rows_of(input), kGrainRows, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* x = in + r * in_rs;
        T* y = dst + r * out_rs;
        T* z = kAddResidual ? res + r * res_rs : nullptr;
        float sum = 0.0f;
        for (int64_t i = 0; i < d; ++i) {
          float v = load(x, i);
          if (kAddResidual) {
            v += load(z, i);
            store(z, i, v);
            v = load(z, i);  // normalise the rounded sum, as the eager composition does
          }
          sum += v * v;
        }
        const float scale = 1.0f / std::sqrt(sum / static_cast<float>(d) + eps);
        for (int64_t i = 0; i < d; ++i) {
          const float v = kAddResidual ? load(z, i) : load(x, i);
          store(y, i, v * scale * load(w, i));
        }
      }
    });
  });
}

void rms_norm(Tensor out, Tensor input, Tensor weight, double epsilon) {
  norm<false>(out, input, nullptr, weight, epsilon);
}

void fused_add_rms_norm(Tensor input, Tensor residual, Tensor weight, double epsilon) {
  check_rows(residual, "residual");
  STD_TORCH_CHECK(residual.scalar_type() == input.scalar_type(), "fusedops: residual and input dtypes differ");
  norm<true>(input, input, &residual, weight, epsilon);
}

}  // namespace

STABLE_TORCH_LIBRARY(FUSEDOPS_NAMESPACE, m) {
  m.def("silu_and_mul(Tensor(a!) out, Tensor input) -> ()");
  m.def("gelu_and_mul(Tensor(a!) out, Tensor input, str approximate) -> ()");
  m.def("rms_norm(Tensor(a!) out, Tensor input, Tensor weight, float epsilon) -> ()");
  m.def("fused_add_rms_norm(Tensor(a!) input, Tensor(b!) residual, Tensor weight, float epsilon) -> ()");
}

STABLE_TORCH_LIBRARY_IMPL(FUSEDOPS_NAMESPACE, CPU, m) {
  m.impl("silu_and_mul", TORCH_BOX(&silu_and_mul));
  m.impl("gelu_and_mul", TORCH_BOX(&gelu_and_mul));
  m.impl("rms_norm", TORCH_BOX(&rms_norm));
  m.impl("fused_add_rms_norm", TORCH_BOX(&fused_add_rms_norm));
}
