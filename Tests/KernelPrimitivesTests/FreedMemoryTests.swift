import Testing
@testable import KernelPrimitives

@Suite struct FreedMemoryTests {
    /// The lookup by name finds glibc's `malloc_trim`: a misspelt symbol or a wrong handle
    /// would silently make every release a no-op and leave a restore's buffers resident.
    @Test func findsMallocTrimOnGlibc() {
        #if canImport(Glibc) && !canImport(Musl)
        #expect(FreedMemory.isAvailable)
        #else
        #expect(!FreedMemory.isAvailable)
        #endif
        FreedMemory.release()
    }
}
