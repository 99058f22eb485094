#ifndef DTC_PLAN_DIALECT_TD
#define DTC_PLAN_DIALECT_TD

include "mlir/IR/OpBase.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let cppNamespace = "::dtc::plan";
  let summary = "The device-level plan: where every value lives in a device's memory";
  let description = [{
    Holds the memory plan the plan writer serialises: the persistent state region
    (`plan.state_layout`, `plan.state_bytes`), each function's arena (`plan.arena_bytes`,
    `plan.arg_offsets`, `plan.arg_regions`) and every op's result placement (`plan.offsets`,
    `plan.regions`), and the backend the module is compiled for (`plan.device`). Its attributes
    are declared in PlanAttributes.def and verified where they appear.
  }];
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

#endif // DTC_PLAN_DIALECT_TD
