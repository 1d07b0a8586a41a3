// Data sources: where a configuration's images come from (--data). A source is
// its own files plus one line in source_registry() (data/source.cpp); the
// protocols that split it (data/protocol.h) name it in Protocol::source.
// Code outside data/ asks a configuration's source (source_of) for what it
// needs, so it names no source; tests/test_source.cpp runs every registered
// source through the shape, class-name and determinism tests.
#pragma once
#include <string>
#include <vector>

#include "core/image_shape.h"

namespace vg {

struct DataConfig;

struct Source {
  // As --data names it: a word ("synthetic", "toys"), or a prefix that takes a
  // directory ("norb:", "idx:").
  const char* name = nullptr;
  // What it is, for --data's help: "smallNORB's six NYU files in DIR".
  const char* help = nullptr;
  // Drawn by the renderer, whose flags (--shapes, --n-per-combo,
  // --n-eval-per-combo, --noise) then shape its images; elsewhere they do nothing.
  bool rendered = false;
  // Its samples carry a viewpoint (an azimuth and an elevation); false: none
  // (the IDX sets), so only a protocol that holds out no viewpoint splits it.
  bool viewpoints = false;
  // Flags only this source reads ("data" for one that takes a directory): set
  // under another source they are refused, and a sweep hashes them only when
  // this source is chosen, so sweeps made before them keep their hash.
  std::vector<const char*> flags{};
  // The version of the data where the source draws it (the toys' generator),
  // 0 where it reads files. A sweep hashes it when above 0, so that cells
  // drawn by another version of the generator never resume or merge beside
  // its own (the flags alone would not tell them apart).
  int version = 0;
  // Whether configured cfg reads this source (the one test of it: source_of).
  bool (*holds)(const DataConfig& cfg) = nullptr;
  // The shape of every image it gives under cfg and its classes (each split's
  // Split::shape()), known before the data is made: the models are built for it.
  ImageShape (*shape)(const DataConfig& cfg) = nullptr;
  // Class cls's name under cfg, cls in [0, shape(cfg).classes).
  const char* (*class_name)(const DataConfig& cfg, int cls) = nullptr;
  // --data as it chose cfg ("norb:DIR"), for messages.
  std::string (*data_text)(const DataConfig& cfg) = nullptr;

  bool takes_dir() const;  // a prefix: "norb:" takes norb:DIR
  bool reads(const std::string& data_flag) const;  // does --data `data_flag` name it?
  std::string form() const;    // as messages write it: "norb:DIR", "toys"
  std::string record() const;  // as the run JSON's "source" records it: "norb", "toys"
};

// Every source, the default (--data's when not given) first.
const std::vector<Source>& source_registry();
// The registered source of that name (Protocol::source); std::logic_error if none.
const Source& source_named(const std::string& name);
// The source configured cfg reads.
const Source& source_of(const DataConfig& cfg);

// ---- The sources, each defined beside its protocols.
Source synthetic_source();      // protocol_synthetic.cpp: the rendered shapes
Source norb_source();           // protocol_norb.cpp: smallNORB's files
Source toys_source();           // protocol_norb.cpp: the toys, in smallNORB's format
Source fashion_mnist_source();  // protocol_idx.cpp: Debian's Fashion-MNIST
Source idx_source();            // protocol_idx.cpp: any IDX set

}  // namespace vg
