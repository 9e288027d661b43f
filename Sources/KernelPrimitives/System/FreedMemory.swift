#if canImport(Glibc)
import Glibc
#endif

/// Handing the memory the allocator holds free back to the operating system, after work that
/// allocates far more than it keeps (restoring a projection from its snapshot).
///
/// Why: glibc's malloc keeps freed memory resident unless it lies at the top of an arena, and
/// a restore frees its buffers (the snapshot's bytes, each part's entities and keys, the keys
/// joined, each index's sorted entries) interleaved with what it keeps, on the worker threads'
/// own arenas. Measured with `BenchProbe generic-activities 300000`: after an open, 321 bytes
/// per activity were live on the heap and 733 to 781 resident; `malloc_trim(0)` brought
/// resident to 335.
package enum FreedMemory {
    #if canImport(Glibc)
    /// `malloc_trim`, looked up at run time: `malloc.h` is not part of Swift's Glibc module.
    /// `nil` on a C library without it (musl), where releasing is left to the allocator, and
    /// when `malloc` is not glibc's own: under a replacement allocator (a sanitizer's, or
    /// jemalloc or tcmalloc preloaded) glibc's arenas were never set up, and walking them
    /// crashed (ThreadSanitizer: SEGV in `mtrim`).
    private static let trim: (@convention(c) (Int) -> Int32)? = {
        guard let global = dlopen(nil, RTLD_LAZY), let libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD),
              let inUse = dlsym(global, "malloc"), let glibcs = dlsym(libc, "malloc"), inUse == glibcs,
              let symbol = dlsym(libc, "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    }()
    #endif

    /// Whether ``release()`` does anything here: the C library has `malloc_trim` (glibc) and
    /// its allocator is the one in use.
    package static var isAvailable: Bool {
        #if canImport(Glibc)
        trim != nil
        #else
        false
        #endif
    }

    /// Returns the free memory of every malloc arena to the system (`malloc_trim(0)`), where
    /// the C library has it; elsewhere nothing.
    /// - Complexity: O(the arenas' free chunks): milliseconds after a restore of a million
    ///   entities, which is why it runs once per restore, not per operation.
    package static func release() {
        #if canImport(Glibc)
        _ = trim?(0)
        #endif
    }
}
