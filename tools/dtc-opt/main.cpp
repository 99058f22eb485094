// dtc-opt: mlir-opt for dtc's dialects and passes; drives the lit tests.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "driver/TrainingPipeline.h"
#include "graph/IR/GraphOps.h"
#include "plan/IR/PlanDialect.h"

int main(int argc, char** argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, dtc::graph::GraphDialect, dtc::dist::DistDialect,
                  dtc::plan::PlanDialect>();
  dtc::registerDTCPasses();
  dtc::registerTrainingPipeline();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "dtc optimizer driver\n", registry));
}
