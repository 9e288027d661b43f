#include "CMallocStats.h"
#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
size_t ek_heap_allocated_bytes(void) {
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}
void ek_malloc_trim(void) { malloc_trim(0); }
#else
size_t ek_heap_allocated_bytes(void) { return 0; }
void ek_malloc_trim(void) {}
#endif
