# The two commands of the README. Both install what they need first (scripts/setup.sh).
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all setup build test demo bench clean

all: build

setup:
	@bash scripts/setup.sh

build: setup
	@mkdir -p $(BUILD)
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release > $(BUILD)/configure.log 2>&1 || (cat $(BUILD)/configure.log; exit 1)
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j 1

demo: build
	@bash scripts/demo.sh $(BUILD)

bench: build
	@bash bench/mlp_step.sh $(BUILD)
	@bash bench/gpt_step.sh $(BUILD)
	@bash bench/convnet_step.sh $(BUILD)
	@bash bench/gpt_gemm_bound.sh $(BUILD)
	@bash bench/dp_step.sh $(BUILD)
	@bash bench/pipeline_bubble.sh $(BUILD)

clean:
	rm -rf $(BUILD)
