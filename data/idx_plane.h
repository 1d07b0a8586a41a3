// The in-plane protocols (--split translation, rotation, scale, shear, affine)
// on an IDX set (--data fashion-mnist, --data idx:DIR): train on the training
// file under in-plane changes within the training range, test on the test file
// under changes beyond it. Seed 2's question asked of real photographs, as
// Sabour et al. 2017 asked it of MNIST with affNIST (docs/protocols.md).
//
// Every image sits at the centre of a canvas x canvas frame of the sets' own
// black background: --canvas N with --split translation (32 by default, as
// for the rendered shapes; N - side even, so that it sits on whole pixels;
// affNIST's is 40), else kIdxCanvasMargin pixels wider than the images
// (affNIST's 40 x 40 for MNIST's 28 x 28), so that a turn keeps the corners. A change acts about the
// canvas's centre, as the renderer's (PlaneTransform):
// - a shift moves whole pixels, exactly (no resampling blurs a training image
//   that a held-out one keeps sharp); its magnitudes are whole pixels;
// - a turn, a scale, a shear or their combination is resampled (bilinear),
//   reading the background (0) outside the image.
// Pixels are / 255 after the change, and standardised with --standardize on.
#pragma once
#include <cstdint>
#include <vector>

#include "data/plane_views.h"

namespace vg {

inline constexpr int kIdxCanvasMargin = 12;

// The IDX sources' shared flag handling (data/protocol_idx.cpp): --data's
// files read and checked, the flags they replace refused, --standardize, and
// the validation part a stopping rule takes (IdxConfig::validation_images).
void configure_idx_source(const FlagSource& flags, DataConfig* cfg);
// Records 0..n-1 of a file.
std::vector<int> idx_records(int n);
// The training file's records a configuration trains on, and the validation
// part a stopping rule takes out of it (IdxConfig::validation_images, drawn by
// the data seed; none without a rule), each in file order.
struct IdxTrainingParts {
  std::vector<int> train, validation;
};
IdxTrainingParts idx_training_parts(const DataConfig& cfg);

// Image `src` (side x side bytes) on a canvas x canvas frame under t, as above.
void idx_plane_image(const uint8_t* src, int side, int canvas, const PlaneTransform& t, bool standardize, float* dst);

// The in-plane protocol of factor f on IDX source `source` ("fashion-mnist",
// "idx:"), named `name`; its --split is f's. `configure` calls
// configure_idx_plane(f, ...); idx_plane_protocol<F>(name, source) makes it.
Protocol idx_plane_protocol(const PlaneFactor& f, const char* name, const char* source,
                            void (*configure)(const FlagSource&, DataConfig*));
void configure_idx_plane(const PlaneFactor& f, const FlagSource& flags, DataConfig* cfg);
template <const PlaneFactor& F>
Protocol idx_plane_protocol(const char* name, const char* source) {
  return idx_plane_protocol(F, name, source,
                            [](const FlagSource& flags, DataConfig* cfg) { configure_idx_plane(F, flags, cfg); });
}

// Each a registry line (data/protocol.cpp), defined beside its synthetic twin.
Protocol fashion_translation_protocol();  // protocol_translation.cpp
Protocol idx_translation_protocol();
Protocol fashion_rotation_protocol();  // protocol_affine.cpp
Protocol idx_rotation_protocol();
Protocol fashion_scale_protocol();
Protocol idx_scale_protocol();
Protocol fashion_shear_protocol();
Protocol idx_shear_protocol();
Protocol fashion_affine_protocol();  // protocol_affnist.cpp
Protocol idx_affine_protocol();

}  // namespace vg
