public import EventKernel
import Foundation

/// The entity of the multi-process scale-out suite: written by many writers of several
/// instances (processes) sharing one PostgreSQL log.
public struct ScaleOutItem: Identifiable, Codable, Sendable, Equatable {
    public var id: String
    /// `<instance>-<writer>`, or the contested id's winner.
    public var writer: String
    public var value: Int

    public init(id: String, writer: String, value: Int) {
        self.id = id
        self.writer = writer
        self.value = value
    }

    /// The repository every instance opens on its store.
    /// - Throws: What the repository's init throws.
    public static func repository(on store: EventStore) throws -> EventSourcedRepository<ScaleOutItem> {
        try EventSourcedRepository<ScaleOutItem>(store: store, typeName: "ScaleOutItem", indexes: [.on(\.writer, \.value)])
    }

    /// The queries whose results the instances compare: every item by id, and one writer's
    /// items through the index. Each as `name count digest`, one line per query.
    /// - Throws: What the queries throw.
    public static func report(_ items: EventSourcedRepository<ScaleOutItem>) throws -> [String] {
        func line(_ name: String, _ found: [ScaleOutItem]) -> String {
            // FNV-1a over the items' fields: equal lines mean equal results.
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for item in found {
                for byte in "\(item.id)|\(item.writer)|\(item.value);".utf8 {
                    hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
                }
            }
            return "\(name) \(found.count) \(String(hash, radix: 16))"
        }
        return [
            line("all", try items.fetch(EntityQuery<ScaleOutItem>().orderBy(\.id))),
            line("writer", try items.fetch(EntityQuery<ScaleOutItem>().where(\.writer, equals: "B-3").orderBy(\.value))),
        ]
    }
}
