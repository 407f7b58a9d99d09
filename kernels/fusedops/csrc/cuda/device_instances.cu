// Every kernel the launchers use, instantiated with no torch beyond c10's element types: the unit
// a device-code compile check builds (ROCm: hipified, then hipcc for the gfx targets, where a
// ROCm torch to link against is not reachable). Not part of any wheel.
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "kernels.cuh"

namespace fusedops {
namespace {

#define FUSEDOPS_KERNELS_OF(T)                                                                  \
  reinterpret_cast<const void*>(&and_mul_kernel<T, Act::kSilu, true>),                          \
      reinterpret_cast<const void*>(&and_mul_kernel<T, Act::kSilu, false>),                     \
      reinterpret_cast<const void*>(&and_mul_kernel<T, Act::kGeluErf, true>),                   \
      reinterpret_cast<const void*>(&and_mul_kernel<T, Act::kGeluErf, false>),                  \
      reinterpret_cast<const void*>(&and_mul_kernel<T, Act::kGeluTanh, true>),                  \
      reinterpret_cast<const void*>(&and_mul_kernel<T, Act::kGeluTanh, false>),                 \
      reinterpret_cast<const void*>(&rms_norm_kernel<T, true>),                                 \
      reinterpret_cast<const void*>(&rms_norm_kernel<T, false>),                                \
      reinterpret_cast<const void*>(&fused_add_rms_norm_kernel<T, true>),                       \
      reinterpret_cast<const void*>(&fused_add_rms_norm_kernel<T, false>)

}  // namespace

// Taking the kernels' addresses makes the compiler emit device code for each of them.
extern const void* const kAllKernels[] = {FUSEDOPS_KERNELS_OF(float), FUSEDOPS_KERNELS_OF(c10::Half),
                                          FUSEDOPS_KERNELS_OF(c10::BFloat16)};

}  // namespace fusedops
