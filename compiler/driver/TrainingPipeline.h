// The training pipeline: the passes that turn an imported model into the program each device
// runs, registered as `dtc-training-pipeline` so that `dtc-opt` reproduces `dtc compile` on
// textual IR.
#pragma once

#include <string>

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include "driver/PipelineOptions.h"

namespace dtc {

// A real-valued option printed with every digit (MLIR prints doubles with six), so that the
// printed pipeline reproduces a compile exactly.
struct Real {
  double value = 0.0;
};
llvm::raw_ostream& operator<<(llvm::raw_ostream& os, const Real& real);

}  // namespace dtc

template <>
class llvm::cl::parser<dtc::Real> : public llvm::cl::basic_parser<dtc::Real> {
 public:
  using basic_parser::basic_parser;
  bool parse(Option& option, StringRef name, StringRef text, dtc::Real& real);
  StringRef getValueName() const override { return "number"; }
  void printOptionDiff(const Option& option, dtc::Real real, const OptionValue<dtc::Real>&,
                       size_t width) const;
};

namespace dtc {

// The pipeline option types of each kind (driver/PipelineOptions.def), and their defaults.
using PipelineString = std::string;
using PipelineReal = Real;
using PipelineInt = int64_t;
using PipelineBool = bool;
inline std::string pipelineInitString(const char* value) { return value; }
inline Real pipelineInitReal(double value) { return Real{value}; }
inline int64_t pipelineInitInt(int64_t value) { return value; }
inline bool pipelineInitBool(bool value) { return value; }
inline constexpr bool PipelineIsIntInt = true, PipelineIsIntReal = false,
                      PipelineIsIntString = false, PipelineIsIntBool = false;

// `dtc-training-pipeline`'s options: driver/PipelineOptions.def's, in its order.
struct TrainingPipelineOptions : mlir::PassPipelineOptions<TrainingPipelineOptions> {
#define DTC_OPTION(Kind, field, name, flag, initial, min, max, help) \
  Option<Pipeline##Kind> field{*this, name, llvm::cl::desc(help),    \
                               llvm::cl::init(pipelineInit##Kind(initial))};
#define DTC_LIST_OPTION(field, name, help) \
  ListOption<std::string> field{*this, name, llvm::cl::desc(help)};
#include "driver/PipelineOptions.def"
};

// The impossible combinations and values out of range (driver/PipelineOptions.def's): one line
// through `error`, and failure.
mlir::LogicalResult validatePipelineOptions(
    const TrainingPipelineOptions& options,
    llvm::function_ref<mlir::LogicalResult(const llvm::Twine&)> error);

// Adds the training passes to `pm` in order. An impossible combination of options is reported
// through `error` (one line) and fails.
mlir::LogicalResult buildTrainingPipeline(
    mlir::OpPassManager& pm, const TrainingPipelineOptions& options,
    llvm::function_ref<mlir::LogicalResult(const llvm::Twine&)> error);

// Registers `dtc-training-pipeline` for dtc-opt.
void registerTrainingPipeline();

}  // namespace dtc
