// The CUDA ops' kernel launchers: pointers, sizes and a stream in, no torch. They and the kernels
// (kernels.cuh) compile in launchers.cu, the one unit nvcc builds for every arch; the torch side
// (argument checks, device guard, stream, dtype, registration) is host C++ in ops.cpp, compiled
// once. With torch's headers in the .cu units, nvcc parsed them again for every arch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fusedops {
namespace cuda {

enum class Dtype { kFloat, kHalf, kBFloat16 };
enum class Activation { kSilu, kGeluErf, kGeluTanh };

// out[r, i] = act(in[r, i]) * in[r, d + i] for r < rows, i < d; strides in elements.
cudaError_t and_mul(Dtype dtype, Activation activation, void* out, const void* in, int64_t rows, int64_t d,
                    int64_t in_stride, int64_t out_stride, cudaStream_t stream);

// out[r] = in[r] * rsqrt(mean(in[r]^2) + eps) * weight, rows of n elements.
cudaError_t rms_norm(Dtype dtype, void* out, const void* in, const void* weight, int64_t rows, int64_t n,
                     int64_t in_stride, int64_t out_stride, float eps, cudaStream_t stream);

// residual[r] += input[r]; input[r] = rms_norm(residual[r]) * weight, in place.
cudaError_t fused_add_rms_norm(Dtype dtype, void* input, void* residual, const void* weight, int64_t rows,
                               int64_t n, int64_t in_stride, int64_t res_stride, float eps, cudaStream_t stream);

}  // namespace cuda
}  // namespace fusedops
