// libviewgap_mpi.so: the only object linked against libmpi (see harness/cluster.h).
// A C table over the MPI calls a sweep needs; viewgap loads it with dlopen only
// when a launcher started it. Each call returns MPI_SUCCESS or an error code.
// The C API only: Open MPI's mpi.h otherwise pulls in its C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "harness/mpi_module.h"

namespace {

int init(int* rank, int* size) {
  int provided = 0;
  int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  if (rc != MPI_SUCCESS) return rc;
  // Errors come back as codes (viewgap reports them), not as an abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if ((rc = MPI_Comm_rank(MPI_COMM_WORLD, rank)) != MPI_SUCCESS) return rc;
  return MPI_Comm_size(MPI_COMM_WORLD, size);
}

int send(int dest, int tag, const char* data, int n) {
  return MPI_Send(data, n, MPI_CHAR, dest, tag, MPI_COMM_WORLD);
}

// A waiting message: 1 with its source, tag and length; 0 if none.
int poll(int* source, int* tag, int* n) {
  int flag = 0;
  MPI_Status st;
  if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS || !flag) return 0;
  *source = st.MPI_SOURCE;
  *tag = st.MPI_TAG;
  MPI_Get_count(&st, MPI_CHAR, n);
  return 1;
}

int recv(int source, int tag, char* data, int n) {
  return MPI_Recv(data, n, MPI_CHAR, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

void abort_job(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

int finalize() { return MPI_Finalize(); }

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const vg_mpi_module* vg_mpi_module_v1() {
  static const vg_mpi_module m{1, init, send, poll, recv, abort_job, finalize};
  return &m;
}
}
