import Foundation
import KernelPrimitives
/// The identity of an entity in a store: its type and its id. The unit of concurrency, history
/// and time travel, as a stream is in every event store.
///
/// Thread 100 and post 100 of a forum are two streams (`Thread/100`, `Post/100`): each has its
/// own version, so one batch may change both. Entity types compare byte for byte, like
/// ``EntityID``'s strings.
public struct StreamID: Hashable, Sendable, CustomStringConvertible {
    /// The entity type, e.g. `"activity"`, `"Account"`.
    public var entityType: String
    /// The entity's id within its type.
    public var entityID: EntityID

    /// Creates a stream identity.
    /// - Parameters:
    ///   - entityType: The entity type name.
    ///   - entityID: The id within that type.
    public init(_ entityType: String, _ entityID: EntityID) {
        self.entityType = entityType
        self.entityID = entityID
    }

    /// `<entityType>/<entityID>`, e.g. `Post/100`.
    public var description: String { "\(entityType)/\(entityID)" }

    public static func == (lhs: StreamID, rhs: StreamID) -> Bool {
        lhs.entityID == rhs.entityID && lhs.entityType.hasSameUTF8(as: rhs.entityType)
    }

    public func hash(into hasher: inout Hasher) {
        // The id tells streams apart; the type's length is enough for the few types sharing
        // an id. (Hashing the type itself would normalize it on every lookup, in the hot path
        // of every append.)
        hasher.combine(entityID)
        hasher.combine(entityType.utf8.count)
    }

    /// The entity type that records of envelope format 1 (which had no stream) belong to: the
    /// event type up to its last `.` (`"Account.added"` → `"Account"`), the naming every writer
    /// of that format used; the whole event type when it has no `.`.
    /// Whether `entityType` is what ``legacyEntityType(ofEventType:)`` derives from `eventType`
    /// (checked without building a string: it runs for every event written).
    static func isImplicit(entityType: String, ofEventType eventType: String) -> Bool {
        // On contiguous bytes, not the UTF-8 views' generic sequence operations (this runs for
        // every event appended).
        var type = entityType, event = eventType
        return type.withUTF8 { t in
            event.withUTF8 { e in
                guard e.count > t.count, e[t.count] == UInt8(ascii: "."),
                      t.isEmpty || memcmp(e.baseAddress!, t.baseAddress!, t.count) == 0 else { return false }
                var i = t.count + 1
                while i < e.count {
                    if e[i] == UInt8(ascii: ".") { return false }
                    i += 1
                }
                return true
            }
        }
    }

    static func legacyEntityType(ofEventType eventType: String) -> String {
        guard let dot = eventType.utf8.lastIndex(of: UInt8(ascii: ".")) else { return eventType }
        return String(eventType[..<dot])
    }

    /// ``legacyEntityType(ofEventType:)``, the result taken from `strings` when it repeats.
    static func legacyEntityType(ofEventType eventType: String, interning strings: inout StringInterner) -> String {
        var eventType = eventType
        return eventType.withUTF8 { bytes in
            guard let dot = bytes.lastIndex(of: UInt8(ascii: ".")) else { return nil }
            // A prefix of valid UTF-8 ending before an ASCII dot is valid UTF-8.
            return strings.string(UnsafeBufferPointer(rebasing: bytes[..<dot]))
        } ?? eventType
    }
}

extension String {
    /// Whether both strings hold the same UTF-8 bytes: identity for ids and type names, where
    /// `==` (canonical equivalence) would call `"é"` and `"e\u{301}"` the same.
    /// - Complexity: O(n); one `memcmp` for native strings.
    package func hasSameUTF8(as other: String) -> Bool {
        // The same storage, or the same small (inline) string: equal without reading either.
        // Strings are two words; equal words mean equal bytes (the converse need not hold).
        if unsafeBitCast(self, to: (UInt64, UInt64).self) == unsafeBitCast(other, to: (UInt64, UInt64).self) { return true }
        var a = self, b = other
        return a.withUTF8 { pa in
            b.withUTF8 { pb in
                pa.count == pb.count && (pa.isEmpty || memcmp(pa.baseAddress!, pb.baseAddress!, pa.count) == 0)
            }
        }
    }
}

/// A string as a dictionary key compared and hashed by its UTF-8 bytes (see
/// `String.hasSameUTF8(as:)`).
package struct ExactString: Hashable, Sendable {
    package let value: String

    package init(_ value: String) { self.value = value }

    package static func == (lhs: ExactString, rhs: ExactString) -> Bool { lhs.value.hasSameUTF8(as: rhs.value) }

    package func hash(into hasher: inout Hasher) {
        var value = value
        value.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
