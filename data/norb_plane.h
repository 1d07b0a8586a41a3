// The in-plane protocols (--split translation, rotation, scale, shear) on
// smallNORB's files (--data norb:DIR): train on every image of the training
// instances under in-plane changes within the training range, test on the
// test instances under changes beyond it (docs/smallnorb.md, docs/protocols.md).
//
// A change acts on the 48 x 48 image (data/norb.h: the 96 -> 48 downsample)
// and the model sees its 32 x 32 centre window:
// - a shift by whole pixels (tx, ty) is the crop moved by (-tx, -ty), so the
//   object moves by (tx, ty) as a rendered one does; the 48 x 48 image holds
//   the crop within 8 pixels of the centre, so a shift is at most 8;
// - a turn, a scale or a shear is the image resampled (bilinear) under the
//   same PlaneTransform the renderer uses, about the image's centre
//   (23.5, 23.5); where the source point falls outside the image it reads the
//   mean of the image's border ring (its background), not a black frame a
//   model could key on.
#pragma once
#include "data/plane_views.h"

namespace vg {

// The largest magnitude of factor f on smallNORB's images (8 pixels for a
// shift; the factor's own limit otherwise).
double norb_plane_limit(const PlaneFactor& f);

// The mean of the border ring (rows 0 and 47, columns 0 and 47) of a 48 x 48 image.
float norb_border_mean(const float* src48);
// The 32 x 32 centre window of the 48 x 48 image `src48` under t, as the file
// comment says: a whole-pixel shift (t's matrix the identity) is the crop
// itself, bit for bit; anything else is resampled, reading `background` outside.
void norb_plane_window(const float* src48, const PlaneTransform& t, float background, float* dst32);
// One pair under t: channels x 32 x 32 (each camera's own background).
void norb_plane_sample(const uint8_t* pair, NorbCameras cameras, const PlaneTransform& t, float* dst);

// The in-plane protocol of factor f on smallNORB's files, named `name`
// (e.g. "norb-translation"), whose --split is f's. `configure` must call
// configure_norb_plane(f, ...); norb_plane_protocol<F>(name) makes it.
Protocol norb_plane_protocol(const PlaneFactor& f, const char* name,
                             void (*configure)(const FlagSource&, DataConfig*));
void configure_norb_plane(const PlaneFactor& f, const FlagSource& flags, DataConfig* cfg);
template <const PlaneFactor& F>
Protocol norb_plane_protocol(const char* name) {
  return norb_plane_protocol(F, name, [](const FlagSource& flags, DataConfig* cfg) { configure_norb_plane(F, flags, cfg); });
}

// The smallNORB protocols' shared flag handling (data/protocol_norb.cpp): the
// directory of --data norb:DIR, the cameras and jitter, and the refusal of
// every flag the files replace (the rendering's) or cannot serve (a
// validation split, --dump). FlagError names the first bad flag. `window`: the
// toys' window split, which reads --train-azimuths and --test-azimuths itself.
NorbConfig configure_norb_source(const FlagSource& flags, DataConfig* cfg, bool window = false);

// The in-plane protocols on smallNORB's files, each a registry line
// (data/protocol.cpp), defined beside its synthetic twin.
Protocol norb_translation_protocol();  // protocol_translation.cpp
Protocol norb_rotation_protocol();     // protocol_affine.cpp
Protocol norb_scale_protocol();        // protocol_affine.cpp
Protocol norb_shear_protocol();        // protocol_affine.cpp
Protocol norb_affine_protocol();       // protocol_affnist.cpp

}  // namespace vg
