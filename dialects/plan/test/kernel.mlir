// RUN: dtc-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// plan.kernel calls are held to their kernel's declaration in runtime/ops/kernels.def.

// CHECK-LABEL: func.func @calls
func.func @calls(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: plan.kernel "gelu"(%arg0) {approximate_tanh = true}
  %0 = plan.kernel "gelu"(%x) {approximate_tanh = true} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @unknown(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{runs 'swish', which the kernel registry (runtime/ops/kernels.def) does not declare}}
  %0 = plan.kernel "swish"(%x) {} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @undeclared(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{kernel 'relu' does not read parameter 'slope' (declare it in runtime/ops/kernels.def)}}
  %0 = plan.kernel "relu"(%x) {slope = 0.1 : f32} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @wrong_kind(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{parameter 'approximate_tanh' of 'gelu' is not a Int: "yes"}}
  %0 = plan.kernel "gelu"(%x) {approximate_tanh = "yes"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
