// The C table libviewgap_mpi.so (harness/mpi_module.cpp) exports and
// harness/cluster.cpp loads: MPI_COMM_WORLD's calls, each returning MPI_SUCCESS
// (0) or an error code. `version` changes whenever the table does.
#pragma once

extern "C" {
struct vg_mpi_module {
  int version;                               // 1
  int (*init)(int* rank, int* size);         // MPI_Init_thread (FUNNELED), errors returned
  int (*send)(int dest, int tag, const char* data, int n);
  int (*poll)(int* source, int* tag, int* n);  // 1: a message waits (its source, tag, length)
  int (*recv)(int source, int tag, char* data, int n);
  void (*abort_job)(int code);
  int (*finalize)();
};
}
