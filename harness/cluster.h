// MPI for sweeps, loaded only when a launcher started us.
//
// viewgap is one binary for both launches. Started by mpirun or srun (seen in
// the environment the launcher sets), it loads libviewgap_mpi.so from its own
// directory, the only object linked against libmpi, and joins the job; started
// as a plain process it never touches MPI, so it runs where no MPI is
// installed. The module is a thin C table over six MPI calls; what the ranks
// say to each other is harness/sweep_runner_internal.h's.
#pragma once
#include <memory>
#include <string>

struct vg_mpi_module;  // harness/mpi_module.h

namespace vg {

// The rank the launcher gave this process (0 when not launched by MPI), read
// from the environment before MPI starts, so that only rank 0 prints errors.
int launcher_rank();
// True when mpirun (Open MPI) or srun (PMIx/PMI) started this process.
bool launched_by_mpi();

// MPI_COMM_WORLD through the module. Messages are byte strings with a tag.
class Cluster {
 public:
  // Loads the module and initialises MPI (MPI_THREAD_FUNNELED: only the thread
  // that calls join() may use the object). Throws std::runtime_error if this
  // build has no MPI module or it cannot be loaded.
  static std::unique_ptr<Cluster> join();
  ~Cluster();  // MPI_Finalize
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  void send(int dest, int tag, const std::string& bytes);
  // A waiting message from anyone, if there is one (never blocks).
  bool poll(int* source, int* tag, std::string* bytes);
  // Ends every rank of the job (MPI_Abort).
  [[noreturn]] void abort(int code);

 private:
  Cluster() = default;
  const vg_mpi_module* m_ = nullptr;
  int rank_ = 0, size_ = 1;
};

}  // namespace vg
