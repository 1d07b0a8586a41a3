// New files written as one (export-norb's six): every path judged before any
// work, nothing replaced, and on any failure what was made goes again, so a
// reader never finds part of a set.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace vg {

// Why the files cannot be written, before anything was (the caller names the flag at fault).
struct NewFilesRefused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Writes one file of the set, atomically (harness/output.h: write_file_atomic).
using PutFile = std::function<void(const std::string& path, std::span<const uint8_t> bytes)>;

// Judges first: `dir` made if absent; none of `paths` there yet; a file can be
// created beside each (made and removed again: no permission test stands in
// for that, as a directory root may write by its mode takes no files in
// /proc); `bytes` free on dir's file system. Throws NewFilesRefused, having
// left nothing. Then runs write(put); if it throws, the files put and the
// directories made go again and the exception passes on.
void write_new_files(const std::string& dir, const std::vector<std::string>& paths, double bytes,
                     const std::function<void(const PutFile& put)>& write);

}  // namespace vg
