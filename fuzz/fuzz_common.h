// What viewgap's libFuzzer targets share (fuzz/norb_fuzz.cpp, fuzz/idx_fuzz.cpp):
// the allocation watch, writing a seed file, and the --write-seeds=DIR start.
#pragma once
#include <sanitizer/allocator_interface.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fuzz {

// Allocation watch: the largest single malloc while `watch` is set (the reader runs).
inline bool watch = false;
inline size_t largest = 0;
inline void on_malloc(const volatile void*, size_t n) {
  if (watch && n > largest) largest = n;
}
inline void on_free(const volatile void*) {}

// A seed file; `target` names the fuzzer in the message of a failed write.
inline void write_file(const char* target, const std::filesystem::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  if (!f) {
    std::fprintf(stderr, "%s: cannot write %s\n", target, p.c_str());
    std::exit(1);
  }
}

// LLVMFuzzerInitialize's work: with --write-seeds=DIR, write the corpus and
// exit (libFuzzer ignores flags that start with "--"); else watch allocations.
inline void initialize(int argc, char** argv, void (*write_seeds)(const std::string& dir)) {
  const std::string flag = "--write-seeds=";
  for (int k = 1; k < argc; ++k)
    if (std::string a = argv[k]; a.rfind(flag, 0) == 0) {
      write_seeds(a.substr(flag.size()));
      std::exit(0);
    }
  __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}

}  // namespace fuzz
