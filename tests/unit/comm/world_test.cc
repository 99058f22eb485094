#include <gtest/gtest.h>

#include <map>
#include <string>

#include "comm/world.h"

namespace dtc::comm {
namespace {

EnvLookup fakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(World, NoLauncherIsOneProcess) {
  auto w = detectWorld(fakeEnv({}));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->rank, 0);
  EXPECT_EQ(w->size, 1);
  EXPECT_EQ(w->source, "single process");
}

TEST(World, ReadsEachLauncher) {
  auto mpi = detectWorld(fakeEnv({{"OMPI_COMM_WORLD_RANK", "3"},
                                  {"OMPI_COMM_WORLD_SIZE", "8"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
  ASSERT_TRUE(mpi.ok());
  EXPECT_EQ(mpi->rank, 3);
  EXPECT_EQ(mpi->size, 8);
  EXPECT_EQ(mpi->localRank, 1);
  EXPECT_EQ(mpi->source, "Open MPI");
  auto mpich =
      detectWorld(fakeEnv({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "2"}}));
  ASSERT_TRUE(mpich.ok());
  EXPECT_EQ(mpich->rank, 2);
  EXPECT_EQ(mpich->size, 4);
  EXPECT_EQ(mpich->localRank, 2);
  EXPECT_EQ(mpich->source, "MPICH");
  auto slurm = detectWorld(fakeEnv({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}}));
  ASSERT_TRUE(slurm.ok());
  EXPECT_EQ(slurm->rank, 5);
  EXPECT_EQ(slurm->localRank, 0);
  EXPECT_EQ(slurm->source, "Slurm");
  auto torchrun = detectWorld(fakeEnv({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}}));
  ASSERT_TRUE(torchrun.ok());
  EXPECT_EQ(torchrun->rank, 1);
  EXPECT_EQ(torchrun->source, "torchrun");
}

TEST(World, ReadsHowManyShareTheNode) {
  EXPECT_EQ(detectWorld(fakeEnv({}))->localSize, 1);
  auto mpi = detectWorld(fakeEnv({{"OMPI_COMM_WORLD_RANK", "3"},
                                  {"OMPI_COMM_WORLD_SIZE", "8"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
  ASSERT_TRUE(mpi.ok());
  EXPECT_EQ(mpi->localSize, 4);
  auto mpich =
      detectWorld(fakeEnv({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALNRANKS", "2"}}));
  ASSERT_TRUE(mpich.ok());
  EXPECT_EQ(mpich->localSize, 2);
  auto slurm = detectWorld(
      fakeEnv({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_NTASKS_PER_NODE", "3"}}));
  ASSERT_TRUE(slurm.ok());
  EXPECT_EQ(slurm->localSize, 3);
  auto torchrun = detectWorld(fakeEnv(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}}));
  ASSERT_TRUE(torchrun.ok());
  EXPECT_EQ(torchrun->localSize, 2);
  // Unsaid: unknown, not guessed.
  auto unsaid = detectWorld(fakeEnv({{"RANK", "1"}, {"WORLD_SIZE", "2"}}));
  ASSERT_TRUE(unsaid.ok());
  EXPECT_EQ(unsaid->localSize, 0);
}

TEST(World, OpenMpiWinsOverSlurm) {
  // mpirun inside a Slurm allocation: Slurm's variables describe the allocation, not the job.
  auto w = detectWorld(fakeEnv({{"OMPI_COMM_WORLD_RANK", "1"},
                                {"OMPI_COMM_WORLD_SIZE", "2"},
                                {"SLURM_PROCID", "0"},
                                {"SLURM_NTASKS", "1"}}));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->size, 2);
  EXPECT_EQ(w->source, "Open MPI");
}

TEST(World, RejectsInconsistentVariables) {
  struct Case {
    std::map<std::string, std::string> vars;
    std::string error;
  };
  const Case cases[] = {
      {{{"RANK", "0"}}, "torchrun sets RANK but not WORLD_SIZE"},
      {{{"WORLD_SIZE", "2"}}, "torchrun sets WORLD_SIZE but not RANK"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK=2 is not below WORLD_SIZE=2"},
      {{{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "RANK='x' is not a non-negative integer"},
      {{{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, "RANK='-1' is not a non-negative integer"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "0"}},
       "SLURM_PROCID=0 is not below SLURM_NTASKS=0"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}}, "LOCAL_RANK exceeds RANK"},
      {{{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}},
       "LOCAL_WORLD_SIZE=2 does not fit the job (WORLD_SIZE=4, LOCAL_RANK=2)"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "3"}},
       "LOCAL_WORLD_SIZE=3 does not fit the job (WORLD_SIZE=2, LOCAL_RANK=0)"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "0"}},
       "LOCAL_WORLD_SIZE=0 does not fit the job (WORLD_SIZE=2, LOCAL_RANK=0)"},
  };
  for (const Case& c : cases) {
    auto w = detectWorld(fakeEnv(c.vars));
    ASSERT_FALSE(w.ok()) << c.error;
    EXPECT_EQ(w.status().code(), StatusCode::kInvalidInput);
    EXPECT_EQ(w.status().message(), c.error);
  }
}

}  // namespace
}  // namespace dtc::comm
