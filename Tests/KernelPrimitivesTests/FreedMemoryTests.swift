import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import KernelPrimitives

@Suite struct FreedMemoryTests {
    /// The lookup by name finds glibc's `malloc_trim` when glibc's allocator is the one in use,
    /// and only then: a misspelt symbol or a wrong handle would silently make every release a
    /// no-op, and trimming glibc's arenas under another allocator (a sanitizer's) crashed.
    @Test func findsMallocTrimOnlyForGlibcsOwnAllocator() {
        #if canImport(Glibc) && !canImport(Musl)
        let libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD)
        let glibcsAllocatorInUse = libc.flatMap { dlsym($0, "malloc") } == dlsym(dlopen(nil, RTLD_LAZY), "malloc")
        #expect(FreedMemory.isAvailable == glibcsAllocatorInUse)
        #else
        #expect(!FreedMemory.isAvailable)
        #endif
        FreedMemory.release()
    }
}
