// The op schemas, the argument checks every backend shares, and the CPU registrations.
// The CUDA kernels register themselves in csrc/cuda/*.cu.
#include "${name}.h"

#include <torch/library.h>

namespace ${ns} {

void check_${op}(const char* op, const at::Tensor& out, const at::Tensor& input, const at::Tensor& other) {
  TORCH_CHECK(
      input.device() == other.device() && input.device() == out.device(), op,
      ": out, input and other must be on one device, got ", out.device(), ", ", input.device(), " and ",
      other.device());
  const at::ScalarType dtype = input.scalar_type();
  TORCH_CHECK(
      dtype == at::ScalarType::Float || dtype == at::ScalarType::Double || dtype == at::ScalarType::Half ||
          dtype == at::ScalarType::BFloat16,
      op, ": unsupported dtype ", dtype, "; expected float32, float64, float16 or bfloat16");
  TORCH_CHECK(
      other.scalar_type() == dtype && out.scalar_type() == dtype, op,
      ": out, input and other must have the same dtype, got ", out.scalar_type(), ", ", dtype, " and ",
      other.scalar_type());
  TORCH_CHECK(
      other.sizes() == input.sizes() && out.sizes() == input.sizes(), op,
      ": out, input and other must have the same shape, got ", out.sizes(), ", ", input.sizes(), " and ",
      other.sizes());
  TORCH_CHECK(out.is_contiguous(), op, ": out must be contiguous");
}

}  // namespace ${ns}

// The schema of every op, once. "Tensor(a!) out": the op writes to out (torch.compile and the
// dispatcher rely on the annotation). Each op name here is also in kernel.toml's [kernel] ops.
${prefix}_LIBRARY(m) {
  m.def("${op}(Tensor(a!) out, Tensor input, Tensor other, float alpha) -> ()");
}

${prefix}_LIBRARY_IMPL(CPU, m) {
  m.impl("${op}", &${ns}::${op}_cpu);
}
