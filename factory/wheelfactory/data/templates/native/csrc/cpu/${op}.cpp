// CPU ${op}: out = input + alpha * other, computed in float32 for float16 and bfloat16 (the
// reference op's numerics), in parallel over chunks of elements.
#include "${name}.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

namespace ${ns} {

void ${op}_cpu(at::Tensor& out, const at::Tensor& input, const at::Tensor& other, double alpha) {
  check_${op}("${name}::${op}", out, input, other);
  const at::Tensor a = input.contiguous();
  const at::Tensor b = other.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, out.scalar_type(), "${op}_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const scalar_t* x = a.const_data_ptr<scalar_t>();
    const scalar_t* y = b.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    const opmath_t scale = static_cast<opmath_t>(alpha);
    at::parallel_for(0, out.numel(), 32768, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        o[i] = static_cast<scalar_t>(static_cast<opmath_t>(x[i]) + scale * static_cast<opmath_t>(y[i]));
      }
    });
  });
}

}  // namespace ${ns}
