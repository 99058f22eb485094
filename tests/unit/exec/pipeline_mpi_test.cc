// A two-stage pipeline plan on two MPI processes (run by ctest under mpirun): each rank runs
// its stage's train_step through the Executor, the stages' sends and receives meet (both send
// first, large enough that blocking sends would deadlock; received in another order than sent;
// int64 and float32), and dtrun's --save gathers both stages' parameters on rank 0. Failures
// are summed so every rank exits with the verdict.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "exec/executor.h"
#include "io/safetensors.h"
#include "mpi_check.h"
#include "pipeline_plan.h"
#include "train/trainer.h"

using dtc::testing::expect;
using dtc::testing::expectOk;
using dtc::testing::verdict;

int main() {
  auto worldOr = dtc::comm::createMpiWorld();
  if (!worldOr.ok()) {
    std::fprintf(stderr, "%s\n", worldOr.status().message().c_str());
    return 1;
  }
  const int r = (*worldOr)->rank();
  if ((*worldOr)->size() != 2) {
    std::fprintf(stderr, "run on 2 processes\n");
    return 1;
  }
  auto meshOr = dtc::comm::DeviceMesh::create(std::move(worldOr).value(), {"pp"}, {2});
  if (!meshOr.ok()) return 1;
  dtc::comm::DeviceMesh& mesh = **meshOr;

  dtc::testing::PipelinePlanOptions options;
  options.n = int64_t(1) << 18;  // 1 MiB: past what MPI sends without a matching receive
  const int64_t n = options.n;
  auto plan = dtc::Plan::fromBytes(dtc::testing::buildPipelinePlan(options), "pipe.dtp");
  expectOk(plan.status(), "load", r);
  if (!plan.ok()) return 1;
  auto exOr = dtc::Executor::create(*plan, 1, &mesh, dtc::createCpuBackend());
  expectOk(exOr.status(), "create", r);
  if (!exOr.ok()) return 1;
  dtc::Executor& ex = **exOr;
  expect(ex.stage() == r, "stage is the pp coordinate", r);
  expectOk(ex.initializeState(), "initializeState", r);

  for (int call = 0; call < 2; ++call) {
    const std::string what = "call " + std::to_string(call) + ": ";
    if (r == 0) {
      dtc::TensorView x = ex.view("train_step", 0), ids = ex.view("train_step", 1);
      for (int64_t i = 0; i < n; ++i) x.f32()[i] = static_cast<float>(i % 7) - 3.0f + call;
      ids.i64()[0] = (int64_t(1) << 40) + call;
      ids.i64()[1] = -5;
      ids.i64()[2] = 7;
    }
    expectOk(ex.run("train_step"), what + "run", r);
    if (r == 0) {
      // g: stage 1's parameter v, values i/2.
      const float* g = ex.view("train_step", 2).f32();
      bool same = true;
      for (int64_t i = 0; i < n; ++i) same &= g[i] == static_cast<float>(i) / 2;
      expect(same, what + "g == stage 1's v", r);
    } else {
      const float* z = ex.view("train_step", 2).f32();
      const int64_t* ids = ex.view("train_step", 1).i64();
      bool same = true;
      for (int64_t i = 0; i < n; ++i)
        same &= z[i] == std::max(0.0f, static_cast<float>(i % 7) - 3.0f + call);
      expect(same, what + "z == relu(x)", r);
      expect(ids[0] == (int64_t(1) << 40) + call && ids[1] == -5 && ids[2] == 7,
             what + "int64 ids arrived", r);
    }
  }

  // Saving: rank 0 writes w (its own) and v (from stage 1), not the optimizer's step.
  char dir[] = "/tmp/dtc-pipeline-save-XXXXXX";
  if (r == 0 && !::mkdtemp(dir)) expect(false, "mkdtemp", r);
  auto second = dtc::comm::createMpiWorld();  // MPI is up: this one does not own it
  expectOk(second.status(), "second world", r);
  dtc::TrainOptions train;
  train.save.dir = dir;
  train.runtime.threads = 1;
  if (second.ok()) expectOk(dtc::train(*plan, train, std::move(second).value()), "train --save", r);
  if (r == 0) {
    auto file = dtc::io::SafetensorsFile::read(std::string(dir) + "/model.safetensors");
    expectOk(file.status(), "read model.safetensors", r);
    if (file.ok()) {
      expect(file->tensors().size() == 2, "two parameters saved", r);
      const dtc::io::TensorRef* w = file->find("w");
      const dtc::io::TensorRef* v = file->find("v");
      expect(
          w && w->shape == std::vector<int64_t>{2} && static_cast<const float*>(w->data)[1] == 1.0f,
          "w saved", r);
      bool same = v && v->shape == std::vector<int64_t>{n};
      for (int64_t i = 0; same && i < n; ++i)
        same &= static_cast<const float*>(v->data)[i] == static_cast<float>(i) / 2;
      expect(same, "v saved from stage 1", r);
    }
    std::remove((std::string(dir) + "/model.safetensors").c_str());
    std::remove(dir);
  }

  return verdict(mesh.world(), "pipeline plan on 2 ranks");
}
