# The lit suite configuration for dtc (loaded by the generated lit.site.cfg.py; not named
# lit.cfg.py so that lit does not mistake tests/lit for a suite of its own): FileCheck tests beside the dialects and passes (dialects/*/test,
# compiler/test, frontends/*/test) and tool-level tests here (tests/lit).
import os

import lit.formats

config.name = "dtc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = config.dtc_source_dir
config.test_exec_root = os.path.join(config.dtc_binary_dir, "lit")

# Only these folders hold tests; everything else in the tree is skipped.
test_dirs = {"dialects", "compiler", "frontends", "tests"}
config.excludes = [d for d in os.listdir(config.dtc_source_dir) if d not in test_dirs]
config.excludes += ["unit", "e2e", "Inputs"]

config.environment["PATH"] = os.pathsep.join(
    [config.dtc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
config.substitutions.append(("%python", "/usr/bin/python3"))
config.substitutions.append(("%inputs", os.path.join(config.dtc_source_dir, "tests", "lit", "Inputs")))
config.substitutions.append(("%expect_exit", os.path.join(config.dtc_source_dir, "tests", "lit", "Inputs", "expect_exit.sh")))
# The plan schema as the build assembles it (with the kernel enum generated from the registry),
# for tests that edit plans as JSON with flatc.
config.substitutions.append(("%plan_schema", os.path.join(config.dtc_binary_dir, "runtime", "schema", "plan.fbs")))
