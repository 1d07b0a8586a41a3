// <immintrin.h> for the AVX-512 kernel files. GCC 12's AVX-512 intrinsics pass
// _mm512_undefined_ps() (deliberately uninitialised) as the pass-through of
// masked operations and then warn about it (GCC bug 105593): silenced for the
// header only, so the kernels' own code keeps the warning.
#pragma once
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
