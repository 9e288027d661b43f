// glibc heap statistics for the footprint benchmarks (malloc.h is not in Swift's Glibc module).
#include <stddef.h>
/// Bytes currently allocated from the heap (mallinfo2 uordblks + hblkhd); 0 where unavailable.
size_t ek_heap_allocated_bytes(void);
/// Returns free heap memory to the system (malloc_trim(0)); no-op where unavailable.
void ek_malloc_trim(void);
