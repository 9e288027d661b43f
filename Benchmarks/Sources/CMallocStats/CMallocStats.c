#include "CMallocStats.h"
// Before the test below: `__GLIBC__` comes from glibc's own headers (features.h, which every libc
// header includes), and CMallocStats.h includes only the compiler's stddef.h; without this
// the test failed, both functions compiled to the no-ops and every heap figure read 0.
#include <stdlib.h>
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
