// CUDA ${op}: out = input + alpha * other; a grid-stride loop, math in float32 for float16 and
// bfloat16. Registered here for the CUDA dispatch key; the schema is in registration.cpp.
#include "${name}.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>

namespace ${ns} {
namespace {

template <typename scalar_t>
__global__ void ${op}_kernel(
    scalar_t* out, const scalar_t* input, const scalar_t* other, at::opmath_type<scalar_t> alpha, int64_t n) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    out[i] = static_cast<scalar_t>(static_cast<opmath_t>(input[i]) + alpha * static_cast<opmath_t>(other[i]));
  }
}

void ${op}_cuda(at::Tensor& out, const at::Tensor& input, const at::Tensor& other, double alpha) {
  check_${op}("${name}::${op}", out, input, other);
  const int64_t n = out.numel();
  if (n == 0) {
    return;
  }
  const c10::cuda::CUDAGuard device_guard(out.device());
  const at::Tensor a = input.contiguous();
  const at::Tensor b = other.contiguous();
  constexpr int threads = 256;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((n + threads - 1) / threads, 65535));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, out.scalar_type(), "${op}_cuda", [&] {
    ${op}_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
        out.mutable_data_ptr<scalar_t>(), a.const_data_ptr<scalar_t>(), b.const_data_ptr<scalar_t>(),
        static_cast<at::opmath_type<scalar_t>>(alpha), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace
}  // namespace ${ns}

${prefix}_LIBRARY_IMPL(CUDA, m) {
  m.impl("${op}", &${ns}::${op}_cuda);
}
