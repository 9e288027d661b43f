import Activities
import Foundation

extension ActivityJSON {
    /// The event of an activity line in the form export writes (no white space, no escape in a
    /// string, only the schema's fields, each once), read straight from its bytes; `nil` for
    /// any other line, which ``parseLineByTree(_:lenient:)`` then reads.
    ///
    /// Why a second reader: import reads each line twice (checked, then appended), and going
    /// through a JSON tree (a `String` per key and value, an array per object, Foundation's
    /// UUID parser) was most of its time. This one allocates nothing but the type's name. It
    /// answers only where the tree reader would give the same event: a line it is unsure of (an
    /// unknown or repeated field, a missing one, a value of another kind, a date or id it does
    /// not read, an end before the start) is the tree reader's, which accepts it or says what
    /// is wrong. The fuzz target and `ActivityLineScanTests` hold the two to the same answers.
    static func scanLine(_ line: Substring) -> ActivityEvent? {
        line.utf8.withContiguousStorageIfAvailable { bytes in
            var scanner = LineScanner(bytes: bytes)
            return scanner.event()
        } ?? nil
    }
}

/// The byte reader behind ``ActivityJSON/scanLine(_:)``.
private struct LineScanner {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// The fields a line or an `"activity"` object may hold, as bits.
    private struct Seen: OptionSet {
        var rawValue: UInt16
        static let position = Seen(rawValue: 1 << 0), recordedAt = Seen(rawValue: 1 << 1), version = Seen(rawValue: 1 << 2)
        static let event = Seen(rawValue: 1 << 3), activity = Seen(rawValue: 1 << 4), id = Seen(rawValue: 1 << 5)
        static let at = Seen(rawValue: 1 << 6), startDate = Seen(rawValue: 1 << 7), endDate = Seen(rawValue: 1 << 8)
        static let type = Seen(rawValue: 1 << 9)
        static let exportOnly: Seen = [.position, .recordedAt, .version]
        static let model: Seen = [.id, .startDate, .endDate, .type]
    }

    /// What an object held: the byte ranges of its strings (an end date `null` or absent: none).
    private struct Object {
        var seen: Seen = []
        var event: Range<Int>?
        var id: Range<Int>?
        var at: Range<Int>?
        var startDate: Range<Int>?
        var endDate: Range<Int>?
        var type: Range<Int>?
        var activity: Model?
    }

    private struct Model {
        var id: UUID
        var start: Date
        var end: Date?
        var type: Range<Int>
    }

    mutating func event() -> ActivityEvent? {
        guard let top = object(nested: false), index == bytes.count else { return nil }
        guard let kind = top.event else {
            // A bare activity: an add.
            guard top.seen.isSubset(of: Seen.model.union(.exportOnly)), let model = model(top) else { return nil }
            return .added(activity(model))
        }
        switch text(kind) {
        case "added", "updated":
            guard top.seen.isSubset(of: Seen([.event, .activity]).union(.exportOnly)), let model = top.activity else { return nil }
            return text(kind) == "added" ? .added(activity(model)) : .updated(activity(model))
        case "ended":
            guard top.seen.isSubset(of: Seen([.event, .id, .at]).union(.exportOnly)),
                  let idRange = top.id, let id = uuid(idRange), let atRange = top.at, let at = date(atRange) else { return nil }
            return .ended(id: id, at: at)
        case "deleted":
            guard top.seen.isSubset(of: Seen([.event, .id]).union(.exportOnly)), let idRange = top.id, let id = uuid(idRange) else { return nil }
            return .deleted(id: id)
        default:
            return nil
        }
    }

    private func activity(_ model: Model) -> ActivityModel {
        ActivityModel(id: model.id, startDate: model.start, endDate: model.end, type: ActivityType(rawValue: text(model.type)))
    }

    private func text(_ range: Range<Int>) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    /// The model an object names, when every field reads as the tree reader would read it.
    private func model(_ object: Object) -> Model? {
        guard let idRange = object.id, let id = uuid(idRange), let startRange = object.startDate, let start = date(startRange),
              let type = object.type, !type.isEmpty else { return nil }
        var end: Date?
        if let endRange = object.endDate {
            guard let date = date(endRange), date >= start else { return nil }
            end = date
        }
        return Model(id: id, start: start, end: end, type: type)
    }

    private func date(_ range: Range<Int>) -> Date? {
        ISODate.tryParse(utf8: UnsafeBufferPointer(rebasing: bytes[range]))
    }

    /// A UUID in its 36-character form, hex digits of either case (as `UUID(uuidString:)` reads it).
    private func uuid(_ range: Range<Int>) -> UUID? {
        guard range.count == 36 else { return nil }
        var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let ok = withUnsafeMutableBytes(of: &raw) { out -> Bool in
            var j = range.lowerBound
            for i in 0..<16 {
                if i == 4 || i == 6 || i == 8 || i == 10 {
                    guard bytes[j] == 0x2D else { return false }
                    j += 1
                }
                guard let high = Self.hex(bytes[j]), let low = Self.hex(bytes[j + 1]) else { return false }
                out[i] = high << 4 | low
                j += 2
            }
            return true
        }
        return ok ? UUID(uuid: raw) : nil
    }

    private static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x37
        case 0x61...0x66: byte - 0x57
        default: nil
        }
    }

    private var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func expect(_ byte: UInt8) -> Bool {
        guard peek == byte else { return false }
        index += 1
        return true
    }

    /// A string without escapes or control characters: the range of its contents.
    private mutating func string() -> Range<Int>? {
        guard expect(0x22) else { return nil }
        let start = index
        while index < bytes.count {
            let b = bytes[index]
            if b == 0x22 {
                index += 1
                return start..<(index - 1)
            }
            guard b >= 0x20, b != 0x5C else { return nil }
            index += 1
        }
        return nil
    }

    /// A non-negative integer as JSON writes it (`0`, or no leading zero).
    private mutating func integer() -> Bool {
        guard let first = peek, first >= 0x30, first <= 0x39 else { return false }
        index += 1
        if first == 0x30 { return !(peek.map { $0 >= 0x30 && $0 <= 0x39 } ?? false) }
        while let b = peek, b >= 0x30, b <= 0x39 { index += 1 }
        return true
    }

    private mutating func null() -> Bool {
        guard index + 4 <= bytes.count, bytes[index] == 0x6E, bytes[index + 1] == 0x75, bytes[index + 2] == 0x6C, bytes[index + 3] == 0x6C else { return false }
        index += 4
        return true
    }

    /// An object whose fields are the schema's, each once: the line (`nested` false) or its
    /// `"activity"` (only the model's fields).
    private mutating func object(nested: Bool) -> Object? {
        guard expect(0x7B) else { return nil }
        var object = Object()
        if expect(0x7D) { return object }
        repeat {
            guard let keyRange = string(), expect(0x3A) else { return nil }
            guard let key = Self.field(bytes, keyRange), !object.seen.contains(key) else { return nil }
            if nested, !Seen.model.contains(key) { return nil }
            object.seen.insert(key)
            switch key {
            case .position, .version: guard integer() else { return nil }
            case .recordedAt: guard string() != nil else { return nil }
            case .event: guard let r = string() else { return nil }; object.event = r
            case .id: guard let r = string() else { return nil }; object.id = r
            case .at: guard let r = string() else { return nil }; object.at = r
            case .startDate: guard let r = string() else { return nil }; object.startDate = r
            case .endDate:
                if !null() {
                    guard let r = string() else { return nil }
                    object.endDate = r
                }
            case .type: guard let r = string() else { return nil }; object.type = r
            case .activity:
                guard !nested, let inner = self.object(nested: true), let model = model(inner) else { return nil }
                object.activity = model
            default: return nil
            }
        } while expect(0x2C)
        guard expect(0x7D) else { return nil }
        return object
    }

    /// The field a key names (`nil`: one the scanner leaves to the tree reader).
    private static func field(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Seen? {
        func equals(_ name: StaticString) -> Bool {
            guard name.utf8CodeUnitCount == range.count else { return false }
            return memcmp(name.utf8Start, bytes.baseAddress! + range.lowerBound, range.count) == 0
        }
        switch range.count {
        case 2: return equals("id") ? .id : equals("at") ? .at : nil
        case 4: return equals("type") ? .type : nil
        case 5: return equals("event") ? .event : nil
        case 7: return equals("version") ? .version : equals("endDate") ? .endDate : nil
        case 8: return equals("position") ? .position : equals("activity") ? .activity : nil
        case 9: return equals("startDate") ? .startDate : nil
        case 10: return equals("recordedAt") ? .recordedAt : nil
        default: return nil
        }
    }
}
