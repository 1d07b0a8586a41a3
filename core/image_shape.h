// The input a data source gives a model: images of `channels` x side x side
// floats (row-major, channel planes one after another) and scores over
// `classes` classes. The data says it (data/dataset.h: image_shape, and
// Split::shape), the registry builds every model for it (models/registry.h:
// make_model), so no model hard-codes the synthetic shapes' 32 x 32 and 5.
#pragma once
#include <cstddef>
#include <string>

namespace vg {

struct ImageShape {
  int channels = 1;  // 1 rendered; smallNORB: 2 cameras, or 1
  int side = 32;     // the rendered frame's, smallNORB's crops; the translation protocol's --canvas
  int classes = 5;
  size_t pixels() const { return size_t(channels) * size_t(side) * size_t(side); }  // floats per image
  bool operator==(const ImageShape&) const = default;
  // "1 x 40 x 40, 5 classes", for messages.
  std::string text() const {
    return std::to_string(channels) + " x " + std::to_string(side) + " x " + std::to_string(side) + ", " +
           std::to_string(classes) + " classes";
  }
};

}  // namespace vg
