#include "harness/cluster.h"

#include "harness/mpi_module.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace vg {

namespace {
// What launchers set: Open MPI's mpirun, and srun through PMIx or PMI-2.
const char* const kRankVars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
}  // namespace

bool launched_by_mpi() {
  for (const char* v : kRankVars)
    if (std::getenv(v) != nullptr) return true;
  return false;
}

int launcher_rank() {
  for (const char* v : kRankVars)
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return 0;
}


std::unique_ptr<Cluster> Cluster::join() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string path = (exe.parent_path() / "libviewgap_mpi.so").string();
  if (ec || !std::filesystem::exists(path, ec))
    throw std::runtime_error("started by an MPI launcher, but this build has no MPI module (" + path +
                             "; build with Open MPI installed: bash tools/deps.sh)");
  // RTLD_GLOBAL: Open MPI's own plugins resolve libmpi's symbols globally.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (h == nullptr) throw std::runtime_error(std::string("cannot load the MPI module: ") + dlerror());
  using Entry = const vg_mpi_module* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(h, "vg_mpi_module_v1"));
  if (entry == nullptr || entry()->version != 1) throw std::runtime_error("'" + path + "' is not viewgap's MPI module");
  std::unique_ptr<Cluster> c(new Cluster);
  c->m_ = entry();
  if (c->m_->init(&c->rank_, &c->size_) != 0) throw std::runtime_error("MPI_Init_thread failed");
  return c;
}

Cluster::~Cluster() {
  if (m_ != nullptr) m_->finalize();
}

void Cluster::send(int dest, int tag, const std::string& bytes) {
  if (bytes.size() > size_t(INT_MAX)) throw std::runtime_error("an MPI message over 2 GB");
  if (m_->send(dest, tag, bytes.data(), int(bytes.size())) != 0)
    throw std::runtime_error("MPI_Send to rank " + std::to_string(dest) + " failed");
}

bool Cluster::poll(int* source, int* tag, std::string* bytes) {
  int n = 0;
  if (!m_->poll(source, tag, &n)) return false;
  bytes->assign(size_t(n), '\0');
  if (m_->recv(*source, *tag, bytes->data(), n) != 0)
    throw std::runtime_error("MPI_Recv from rank " + std::to_string(*source) + " failed");
  return true;
}

void Cluster::abort(int code) {
  m_->abort_job(code);
  std::_Exit(code);
}

}  // namespace vg
