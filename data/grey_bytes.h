// Drawn pixels as bytes, as every writer of images in data/ stores them (the
// toys, export-norb's synthetic files).
#pragma once
#include <cstdint>

namespace vg {

// dst[p] = clean[p] x gain + noise[p] rounded half away from zero and clamped
// to 0..255: exactly uint8_t(clamp(lround(v), 0, 255)) wherever lround is
// defined (|v| < 2^63; 255 above, 0 below), in arithmetic a compiler
// vectorises (lround is a libm call per pixel, a fifth of drawing a toys set).
// grey_byte is one pixel's.
void grey_bytes(const float* clean, float gain, const float* noise, int n, uint8_t* dst);
uint8_t grey_byte(float v);

}  // namespace vg
