/*
 * nprocs_shim.c - LD_PRELOAD shim that sets qwentts.cpp's thread count.
 *
 * qwentts.cpp runs std::thread::hardware_concurrency() / 2 CPU threads and has no
 * option for it; libstdc++ reads the count from glibc's get_nprocs(). This returns
 * $KZ_PEER_NPROCS (default 4), so the peer runs half of that: 2 threads by default,
 * the same as kztts --threads 2 on a 2-core machine.
 *
 *   cc -O2 -shared -fPIC nprocs_shim.c -o nprocs_shim.so
 */
#include <stdlib.h>

int get_nprocs(void) {
    const char *e = getenv("KZ_PEER_NPROCS");
    return e ? atoi(e) : 4;
}
