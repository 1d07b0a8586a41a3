# Cross-compiles viewgap for aarch64 (Linux) with Debian's cross toolchain
# (g++-aarch64-linux-gnu) against Debian's arm64 packages unpacked into a
# sysroot by tools/cross_arm64.sh (build/aarch64-sysroot by default), and runs
# the results (test discovery, ctest) under qemu-user with that sysroot.
#
# Why a sysroot and not multiarch (dpkg --add-architecture arm64): Debian 12's
# libdnnl-dev is Multi-Arch: same but ships a different dnnl_config.h for amd64
# (GPU runtime OpenCL) and arm64 (none), so dpkg refuses to co-install them.
#
# Use: cmake --preset aarch64   (or -DCMAKE_TOOLCHAIN_FILE=tools/aarch64-toolchain.cmake
#      -DVIEWGAP_ARM64_SYSROOT=DIR)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# The toolchain file is read again for every try_compile: pass the sysroot on.
if(NOT VIEWGAP_ARM64_SYSROOT)
  get_filename_component(VIEWGAP_ARM64_SYSROOT "${CMAKE_CURRENT_LIST_DIR}/../build/aarch64-sysroot" ABSOLUTE)
endif()
set(VIEWGAP_ARM64_SYSROOT "${VIEWGAP_ARM64_SYSROOT}" CACHE PATH "Unpacked Debian arm64 packages (tools/cross_arm64.sh)")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES VIEWGAP_ARM64_SYSROOT)
if(NOT EXISTS "${VIEWGAP_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu")
  message(FATAL_ERROR "no arm64 sysroot at ${VIEWGAP_ARM64_SYSROOT}: run bash tools/cross_arm64.sh")
endif()

# Headers, libraries and package configs from the sysroot only (never the
# host's amd64 ones); programs (qemu, python) from the host.
set(CMAKE_SYSROOT "${VIEWGAP_ARM64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# qemu-user runs aarch64 binaries (gtest discovery, ctest); -L makes the
# sysroot's dynamic loader and libraries the target's /.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L "${VIEWGAP_ARM64_SYSROOT}")
