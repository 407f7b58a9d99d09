// Shared declarations of the ${name} kernels: the namespace macros, the argument checks every
// backend runs and the CPU entry points registered in registration.cpp.
#pragma once

#ifndef ${macro}
// wheelfactory and the ${name} runtime define it per build, e.g. -D${macro}=_${name}_cpu_1a2b3c4d.
#error "${macro} is not defined: compile with -D${macro}=<op namespace>"
#endif

#include <ATen/core/Tensor.h>

// TORCH_LIBRARY and TORCH_LIBRARY_IMPL paste their namespace argument into symbol names as a token,
// which would paste the macro's name, not its value. One more macro level expands it first.
#define ${prefix}_LIBRARY_EXPAND_(ns, m) TORCH_LIBRARY(ns, m)
#define ${prefix}_LIBRARY_IMPL_EXPAND_(ns, k, m) TORCH_LIBRARY_IMPL(ns, k, m)
#define ${prefix}_LIBRARY(m) ${prefix}_LIBRARY_EXPAND_(${macro}, m)
#define ${prefix}_LIBRARY_IMPL(k, m) ${prefix}_LIBRARY_IMPL_EXPAND_(${macro}, k, m)

namespace ${ns} {

// Throws c10::Error (RuntimeError in Python) naming the op and the offending argument.
void check_${op}(const char* op, const at::Tensor& out, const at::Tensor& input, const at::Tensor& other);

// out = input + alpha * other, elementwise.
void ${op}_cpu(at::Tensor& out, const at::Tensor& input, const at::Tensor& other, double alpha);

}  // namespace ${ns}
