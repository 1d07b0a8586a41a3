#pragma once
// The paths the tests need, defined in a file CMake generates
// (build/<preset>/generated/test_paths.cpp). They are not compile definitions
// so that no test file's compile command names the checkout or the build
// directory: ccache then serves the test files to any clone of the repository.
namespace vg::test::paths {
extern const char* const exe;         // the viewgap binary (behind the emulator in a cross build)
extern const char* const source_dir;  // the checkout
extern const char* const fault_shim;  // tools/fault_shim.c's library; "" where not built (cross builds)
extern const char* const mpirun;      // "" without MPI (then VIEWGAP_HAVE_MPIRUN is not defined)
extern const char* const python;      // Debian's python3 (VIEWGAP_HAVE_PYTHON), else "python3" from PATH
}  // namespace vg::test::paths
