# Cross build for 64-bit ARM Linux on a Debian x86-64 host (scripts/test-aarch64.sh):
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# Needs gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu and the arm64 (multiarch) -dev packages
# of the dependencies; headers come from /usr/include, libraries and .pc files from
# /usr/lib/aarch64-linux-gnu.
# Test programs run under qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR), so ctest works as is.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(KZ_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${KZ_CROSS_TRIPLE}-gcc)
# tests/ compile the public header as C++ too; without a cross g++, check_language(CXX)
# would pick the host's compiler.
set(CMAKE_CXX_COMPILER ${KZ_CROSS_TRIPLE}-g++)

# Libraries and headers only from the target's multiarch directories and sysroot;
# programs (python3, pkg-config) from the host.
set(CMAKE_FIND_ROOT_PATH /usr/${KZ_CROSS_TRIPLE} /usr/lib/${KZ_CROSS_TRIPLE} /)
set(CMAKE_LIBRARY_ARCHITECTURE ${KZ_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config reads only the arm64 .pc files (multiarch), never the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${KZ_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# The loader and libc must come from one glibc build: the multiarch libc6:arm64 when it is
# installed (/lib/ld-linux-aarch64.so.1), else the cross sysroot. Mixing the sysroot's
# ld.so (qemu -L) with the multiarch libc.so.6 it then finds hangs in pthread_create.
find_program(KZ_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(KZ_QEMU_AARCH64)
    if(EXISTS /lib/ld-linux-aarch64.so.1)
        set(CMAKE_CROSSCOMPILING_EMULATOR ${KZ_QEMU_AARCH64})
    else()
        set(CMAKE_CROSSCOMPILING_EMULATOR ${KZ_QEMU_AARCH64} -L /usr/${KZ_CROSS_TRIPLE})
    endif()
endif()
