import EventLog
import Activities
import EventKernel
import Foundation

/// The JSON Lines schema of import and export (Docs/CLI.md, "JSON Lines").
enum ActivityJSON {
    /// `s` as a JSON string, quoted and escaped (``JSONBuffer/appendString(_:)-(String)``).
    static func escape(_ s: String) -> String {
        var buffer = JSONBuffer(capacity: s.utf8.count + 2)
        buffer.appendString(s)
        return buffer.text
    }

    /// `{"id":…,"startDate":…,"endDate":…|null,"type":…}` with a fixed key order.
    static func activity(_ model: ActivityModel) -> String {
        var buffer = JSONBuffer(capacity: 128)
        write(model, to: &buffer)
        return buffer.text
    }

    /// Appends ``activity(_:)``'s object to `buffer`.
    static func write(_ model: ActivityModel, to buffer: inout JSONBuffer) {
        buffer.appendRaw("{\"id\":")
        buffer.appendString(model.id)
        buffer.appendRaw(",\"startDate\":")
        buffer.appendString(model.startDate)
        buffer.appendRaw(",\"endDate\":")
        if let end = model.endDate { buffer.appendString(end) } else { buffer.appendRaw("null") }
        buffer.appendRaw(",\"type\":")
        buffer.appendString(model.type.rawValue)
        buffer.appendByte(0x7D)
    }

    /// One event line; `position` and `recordedAt` lead when given (export).
    static func event(_ event: ActivityEvent, position: UInt64? = nil, recordedAt: LogTimestamp? = nil, version: UInt64? = nil, metadata: EventMetadata = .none) -> String {
        var buffer = JSONBuffer(capacity: 256)
        write(event, position: position, recordedAt: recordedAt, version: version, metadata: metadata, to: &buffer)
        return buffer.text
    }

    /// Appends ``event(_:position:recordedAt:version:metadata:)``'s line to `buffer`.
    static func write(_ event: ActivityEvent, position: UInt64? = nil, recordedAt: LogTimestamp? = nil, version: UInt64? = nil, metadata: EventMetadata = .none, to buffer: inout JSONBuffer) {
        buffer.appendByte(0x7B)
        var first = true
        func key(_ name: StaticString) {
            if !first { buffer.appendByte(0x2C) }
            first = false
            buffer.appendRaw(name)
        }
        if let position { key("\"position\":"); buffer.appendInteger(position) }
        if let recordedAt { key("\"recordedAt\":"); buffer.appendString(recordedAt) }
        if let version { key("\"version\":"); buffer.appendInteger(version) }
        switch event {
        case .added(let model):
            key("\"event\":\"added\",\"activity\":")
            write(model, to: &buffer)
        case .updated(let model):
            key("\"event\":\"updated\",\"activity\":")
            write(model, to: &buffer)
        case .ended(let id, let at):
            key("\"event\":\"ended\",\"id\":")
            buffer.appendString(id)
            buffer.appendRaw(",\"at\":")
            buffer.appendString(at)
        case .deleted(let id):
            key("\"event\":\"deleted\",\"id\":")
            buffer.appendString(id)
        }
        metadata.writeJSONField(to: &buffer)
        buffer.appendByte(0x7D)
    }

    static func name(_ event: ActivityEvent) -> String {
        switch event {
        case .added: "added"
        case .updated: "updated"
        case .ended: "ended"
        case .deleted: "deleted"
        }
    }

    static func details(_ event: ActivityEvent) -> String {
        switch event {
        case .added(let m), .updated(let m):
            "\(m.type) \(ISODate.format(m.startDate)) → \(m.endDate.map(ISODate.format) ?? "(active)")"
        case .ended(_, let at): "at \(ISODate.format(at))"
        case .deleted: ""
        }
    }

    struct LineError: Error { var message: String }

    /// The fields an activity object may hold.
    static let activityFields = ["id", "startDate", "endDate", "type"]
    /// The fields export writes beside an event and import ignores (the log assigns them).
    static let exportOnlyFields = ["position", "recordedAt", "version", "metadata"]
    /// The fields of each event kind, besides ``exportOnlyFields``.
    static let eventFields: [String: [String]] = [
        "added": ["event", "activity"], "updated": ["event", "activity"],
        "ended": ["event", "id", "at"], "deleted": ["event", "id"],
    ]

    /// An object's members, looked up by a linear search: a line has a handful, and hashing
    /// each key into a dictionary cost more than comparing it.
    struct Fields {
        var members: [(key: String, value: JSONTree)]

        init(_ members: [(key: String, value: JSONTree)]) { self.members = members }

        subscript(key: String) -> JSONTree? {
            for member in members where member.key == key { return member.value }
            return nil
        }
    }

    /// Parses one import line: an event object (with `"event"`) or a bare activity (an add).
    /// The line is read by the tool's strict JSON parser (``JSONParser``: a key given twice is
    /// refused, not silently resolved).
    /// - Parameters:
    ///   - line: One line of JSON, without its newline.
    ///   - lenient: Ignore fields the schema does not know. Off by default: a misspelt
    ///     `"enddate"` would otherwise store a finished activity as running, without a word.
    /// - Throws: ``LineError`` saying what is wrong with the line.
    static func parseLine(_ line: Substring, lenient: Bool = false) throws(LineError) -> ActivityEvent {
        if let event = scanLine(line) { return event }
        return try parseLineByTree(line, lenient: lenient)
    }

    /// ``parseLine(_:lenient:)`` through the JSON tree: every line ``scanLine(_:)`` leaves, and
    /// the one that says what is wrong with a line.
    static func parseLineByTree(_ line: Substring, lenient: Bool = false) throws(LineError) -> ActivityEvent {
        let dict: Fields
        do { dict = Fields(try JSONParser.members(Array(line.utf8)).map { ($0.key, $0.value) }) } catch {
            throw LineError(message: error.description)
        }
        guard let kind = dict["event"] else {
            if !lenient { try requireKnownFields(dict, known: activityFields + exportOnlyFields, in: "the activity line") }
            return .added(try model(dict, context: "activity"))
        }
        guard case .string(let kind) = kind else { throw LineError(message: "field \"event\" must be a string") }
        if !lenient, let known = eventFields[kind] {
            try requireKnownFields(dict, known: known + exportOnlyFields, in: "the \(kind) event")
        }
        switch kind {
        case "added", "updated":
            guard let inner = dict["activity"] else { throw LineError(message: "missing field \"activity\" for a \(kind) event") }
            guard case .object(let innerMembers) = inner else { throw LineError(message: "field \"activity\" must be an object") }
            let innerDict = Fields(innerMembers)
            if !lenient { try requireKnownFields(innerDict, known: activityFields, in: "\"activity\"") }
            let m = try model(innerDict, context: "activity")
            return kind == "added" ? .added(m) : .updated(m)
        case "ended":
            return .ended(id: try uuid(dict, "id"), at: try date(dict, "at"))
        case "deleted":
            return .deleted(id: try uuid(dict, "id"))
        default:
            throw LineError(message: "unknown event \"\(kind)\" (expected added, updated, ended or deleted)")
        }
    }

    /// Refuses the first field (in sorted order, so that the message is stable) not in `known`,
    /// naming the field meant when only its case differs.
    private static func requireKnownFields(_ dict: Fields, known: [String], in place: String) throws(LineError) {
        guard dict.members.contains(where: { !known.contains($0.key) }) else { return }
        guard let unknown = dict.members.map(\.key).filter({ !known.contains($0) }).sorted().first else { return }
        let meant = known.first { $0.lowercased() == unknown.lowercased() }.map { " (did you mean \"\($0)\"?)" } ?? ""
        throw LineError(message: "unknown field \"\(unknown)\" in \(place)\(meant); known fields: \(known.joined(separator: ", ")) (pass --lenient to ignore unknown fields)")
    }

    private static func string(_ dict: Fields, _ key: String) throws(LineError) -> String {
        guard let value = dict[key], value != .null else { throw LineError(message: "missing field \"\(key)\"") }
        guard case .string(let text) = value else { throw LineError(message: "field \"\(key)\" must be a string") }
        return text
    }

    private static func uuid(_ dict: Fields, _ key: String) throws(LineError) -> UUID {
        let text = try string(dict, key)
        guard let id = UUID(uuidString: text) else { throw LineError(message: "field \"\(key)\": \"\(text)\" is not a UUID") }
        return id
    }

    private static func date(_ dict: Fields, _ key: String) throws(LineError) -> Date {
        let text = try string(dict, key)
        guard let date = ISODate.tryParse(text) else { throw LineError(message: "bad date in \"\(key)\": \"\(text)\" is not ISO 8601") }
        return date
    }

    private static func model(_ dict: Fields, context: String) throws(LineError) -> ActivityModel {
        let id = try uuid(dict, "id")
        let start = try date(dict, "startDate")
        var end: Date? = nil
        if let value = dict["endDate"], value != .null {
            end = try date(dict, "endDate")
        }
        let type = try string(dict, "type")
        guard !type.isEmpty else { throw LineError(message: "field \"type\" must not be empty") }
        if let end, end < start {
            throw LineError(message: "end before start: endDate \(ISODate.format(end)) is before startDate \(ISODate.format(start)) of activity \(id)")
        }
        return ActivityModel(id: id, startDate: start, endDate: end, type: ActivityType(rawValue: type))
    }

    /// Checks parsed import lines against a state (the store's, plus the lines before): an add
    /// of an existing id, an update, end or delete of a missing one, an end before the start.
    /// The import command and the JSON Lines fuzzer (Fuzz/ImportFuzz) share it.
    struct ImportValidator {
        /// The store's activity with an id (`nil` when there is no store or no such activity).
        var stored: (UUID) -> ActivityModel?
        /// The state the checked lines left, by id: the start of an activity that exists (the
        /// one thing a later line is checked against: an end before it), `.some(nil)` for one
        /// deleted. Only the start, 32 bytes an activity with the key: an import checks every
        /// activity of a store before it writes any, and a whole model took 80 and more.
        private(set) var overlay: [UUID: Date?] = [:]

        init(stored: @escaping (UUID) -> ActivityModel?) { self.stored = stored }

        /// The start of activity `id` after the lines checked (`nil`: there is no such activity).
        func start(of id: UUID) -> Date? {
            if let known = overlay[id] { return known }
            return stored(id)?.startDate
        }

        /// Checks `event` and, when it is valid, applies it to the overlay.
        mutating func check(_ event: ActivityEvent) throws(LineError) {
            let id = event.activityID
            let start = start(of: id)
            switch event {
            case .added(let model):
                if start != nil { throw LineError(message: "duplicate id \(id.uuidString): the activity already exists") }
                overlay[id] = .some(model.startDate)
            case .updated(let model):
                if start == nil { throw LineError(message: "unknown id \(id.uuidString): no such activity to update") }
                overlay[id] = .some(model.startDate)
            case .ended(_, let at):
                guard let start else { throw LineError(message: "unknown id \(id.uuidString): no such activity to end") }
                if at < start {
                    throw LineError(message: "end before start: \(ISODate.format(at)) is before the start \(ISODate.format(start)) of activity \(id.uuidString)")
                }
            case .deleted:
                if start == nil { throw LineError(message: "unknown id \(id.uuidString): no such activity to delete") }
                overlay[id] = .some(nil)
            }
        }

        /// Records a kernel tombstone of activity `id` (`$deleted`, `$purged`, imported as an
        /// event line): the activity no longer exists after it, whether or not it did before
        /// (a purge of a soft-deleted activity).
        mutating func end(_ id: UUID) {
            overlay[id] = .some(nil)
        }
    }
}
