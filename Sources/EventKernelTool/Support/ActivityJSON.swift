import EventLog
import Activities
import EventKernel
import Foundation

/// The JSON Lines schema of import and export (Docs/CLI.md, "JSON Lines").
enum ActivityJSON {
    static func escape(_ s: String) -> String {
        // Most strings (ids, dates, type names) need no escaping: one pass over the bytes.
        if !s.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) { return "\"" + s + "\"" }
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let c where c.value < 0x20: out += String(format: "\\u%04x", c.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// `{"id":…,"startDate":…,"endDate":…|null,"type":…}` with a fixed key order.
    static func activity(_ model: ActivityModel) -> String {
        let end = model.endDate.map { escape(ISODate.format($0)) } ?? "null"
        return "{\"id\":\(escape(model.id.uuidString)),\"startDate\":\(escape(ISODate.format(model.startDate))),\"endDate\":\(end),\"type\":\(escape(model.type.rawValue))}"
    }

    /// One event line; `position` and `recordedAt` lead when given (export).
    static func event(_ event: ActivityEvent, position: UInt64? = nil, recordedAt: LogTimestamp? = nil, version: UInt64? = nil, metadata: EventMetadata = .none) -> String {
        var fields: [String] = []
        if let position { fields.append("\"position\":\(position)") }
        if let recordedAt { fields.append("\"recordedAt\":\(escape(ISODate.format(recordedAt)))") }
        if let version { fields.append("\"version\":\(version)") }
        switch event {
        case .added(let model): fields += ["\"event\":\"added\"", "\"activity\":\(activity(model))"]
        case .updated(let model): fields += ["\"event\":\"updated\"", "\"activity\":\(activity(model))"]
        case .ended(let id, let at): fields += ["\"event\":\"ended\"", "\"id\":\(escape(id.uuidString))", "\"at\":\(escape(ISODate.format(at)))"]
        case .deleted(let id): fields += ["\"event\":\"deleted\"", "\"id\":\(escape(id.uuidString))"]
        }
        return "{" + fields.joined(separator: ",") + metadata.jsonField + "}"
    }

    /// For JSONSerialization-based output.
    static func object(_ model: ActivityModel) -> [String: Any] {
        ["id": model.id.uuidString, "startDate": ISODate.format(model.startDate),
         "endDate": model.endDate.map { ISODate.format($0) as Any } ?? NSNull(), "type": model.type.rawValue]
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

    /// Parses one import line: an event object (with `"event"`) or a bare activity (an add).
    /// - Parameters:
    ///   - line: One line of JSON, without its newline.
    ///   - lenient: Ignore fields the schema does not know. Off by default: a misspelt
    ///     `"enddate"` would otherwise store a finished activity as running, without a word.
    /// - Throws: ``LineError`` saying what is wrong with the line.
    static func parseLine(_ line: Substring, lenient: Bool = false) throws(LineError) -> ActivityEvent {
        let object: Any
        do { object = try JSONSerialization.jsonObject(with: Data(line.utf8)) } catch {
            throw LineError(message: "bad JSON: \((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "not valid JSON")")
        }
        guard let dict = object as? [String: Any] else { throw LineError(message: "bad JSON: expected an object") }
        guard let kind = dict["event"] else {
            if !lenient { try requireKnownFields(dict, known: activityFields + exportOnlyFields, in: "the activity line") }
            return .added(try model(dict, context: "activity"))
        }
        guard let kind = kind as? String else { throw LineError(message: "field \"event\" must be a string") }
        if !lenient, let known = eventFields[kind] {
            try requireKnownFields(dict, known: known + exportOnlyFields, in: "the \(kind) event")
        }
        switch kind {
        case "added", "updated":
            guard let inner = dict["activity"] else { throw LineError(message: "missing field \"activity\" for a \(kind) event") }
            guard let innerDict = inner as? [String: Any] else { throw LineError(message: "field \"activity\" must be an object") }
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
    private static func requireKnownFields(_ dict: [String: Any], known: [String], in place: String) throws(LineError) {
        guard let unknown = dict.keys.filter({ !known.contains($0) }).sorted().first else { return }
        let meant = known.first { $0.lowercased() == unknown.lowercased() }.map { " (did you mean \"\($0)\"?)" } ?? ""
        throw LineError(message: "unknown field \"\(unknown)\" in \(place)\(meant); known fields: \(known.joined(separator: ", ")) (pass --lenient to ignore unknown fields)")
    }

    private static func string(_ dict: [String: Any], _ key: String) throws(LineError) -> String {
        guard let value = dict[key], !(value is NSNull) else { throw LineError(message: "missing field \"\(key)\"") }
        guard let text = value as? String else { throw LineError(message: "field \"\(key)\" must be a string") }
        return text
    }

    private static func uuid(_ dict: [String: Any], _ key: String) throws(LineError) -> UUID {
        let text = try string(dict, key)
        guard let id = UUID(uuidString: text) else { throw LineError(message: "field \"\(key)\": \"\(text)\" is not a UUID") }
        return id
    }

    private static func date(_ dict: [String: Any], _ key: String) throws(LineError) -> Date {
        let text = try string(dict, key)
        guard let date = ISODate.tryParse(text) else { throw LineError(message: "bad date in \"\(key)\": \"\(text)\" is not ISO 8601") }
        return date
    }

    private static func model(_ dict: [String: Any], context: String) throws(LineError) -> ActivityModel {
        let id = try uuid(dict, "id")
        let start = try date(dict, "startDate")
        var end: Date? = nil
        if let value = dict["endDate"], !(value is NSNull) {
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
