import Activities
import EventKernel
import EventLog
import Foundation
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
import EventKernelTestSupport

/// Shared pieces of the Activities reliability suites.
enum Reliability {
    /// Every activity, oldest first.
    static func all(_ repository: EventSourcedActivityRepository) throws -> [ActivityModel] {
        try repository.activities(matching: ActivityQuery(sortOrder: .oldestFirst))
    }

    /// The `<store>/snapshots/` files, sorted.
    static func snapshotFiles(_ store: URL, includingHidden: Bool = false) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: store.appending(path: "snapshots").path)) ?? []
        return names.filter { includingHidden || !$0.hasPrefix(".") }.sorted()
    }

    /// Whether this process can bypass file permissions (root, CAP_DAC_OVERRIDE).
    static var bypassesPermissions: Bool { geteuid() == 0 }
}
