// Written by wheelfactory for kernel-builder projects: the macros their bindings include.
#pragma once
#include <Python.h>

#define _CONCAT(A, B) A##B
#define CONCAT(A, B) _CONCAT(A, B)
#define _STRINGIFY(A) #A
#define STRINGIFY(A) _STRINGIFY(A)

// TORCH_LIBRARY and TORCH_LIBRARY_IMPL paste their first argument: these expand it first, so it
// may be the TORCH_EXTENSION_NAME macro.
#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
#define TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)
#define STABLE_TORCH_LIBRARY_EXPAND(NAME, MODULE) STABLE_TORCH_LIBRARY(NAME, MODULE)
#define STABLE_TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) STABLE_TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)

// A module with no methods: importing it runs the library's static op registrations.
#define REGISTER_EXTENSION(NAME)                                                         \
  PyMODINIT_FUNC CONCAT(PyInit_, NAME)(void) {                                           \
    static struct PyModuleDef wheelfactory_module = {PyModuleDef_HEAD_INIT, STRINGIFY(NAME), \
                                                     NULL, 0, NULL};                      \
    return PyModule_Create(&wheelfactory_module);                                        \
  }
