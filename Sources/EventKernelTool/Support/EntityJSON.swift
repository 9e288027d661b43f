import EventKernel
import EventLog
import Foundation

/// Events of any entity type as JSON without the application's code (Docs/CLI.md, "Events of
/// any entity type"): the one place that renders a payload for export, history and tail, and
/// that takes an export line back for import.
///
/// A binary entity payload becomes a JSON tree; the values JSON has no type for become a
/// one-key object naming the type, so that import writes back the same tags:
/// `{"$date":"2025-03-01T08:30:15.25Z"}` (exact: the fewest digits that give the stored
/// `Double` back; a date beyond the ISO range as its seconds since 2001), `{"$uuid":"…"}`,
/// `{"$data":"<base64>"}`, `{"$decimal":"12.50"}`, `{"$url":"…"}`, `{"$float":1.5}`,
/// `{"$uint":5}`, and a non-finite double as `{"$double":"nan"|"inf"|"-inf"}` (a NaN other
/// than `Double.nan` with its bits, `"nan:fff8000000000000"`). A finite double is a JSON number
/// that always has a `.` or an exponent (`1.0`), an integer never has either. A keyed container
/// that happens to have one key starting with `$` is wrapped as `{"$object":{…}}`.
enum EntityJSON {
    /// What an event's payload is, as export shows it.
    enum Payload {
        /// No bytes (a delete).
        case none
        /// A binary entity payload, decoded.
        case binary(JSONTree)
        /// A JSON payload: its text exactly as stored, and its tree.
        case json(text: String, value: JSONTree)
        /// Bytes that are neither (a domain's hand-written payload codec, or damage): shown as
        /// base64, with why.
        case bytes(reason: String, damaged: Bool)

        /// The codec name export writes.
        var codec: String {
            switch self {
            case .none: "none"
            case .binary: "binary"
            case .json: "json"
            case .bytes: "bytes"
            }
        }

        /// The decoded state the payload holds (`nil` for none and bytes).
        var value: JSONTree? {
            switch self {
            case .binary(let v), .json(_, let v): v
            case .none, .bytes: nil
            }
        }
    }

    /// Classifies and decodes a payload.
    static func payload(_ bytes: [UInt8]) -> Payload {
        if bytes.isEmpty { return .none }
        if BinaryEntityValue.isBinary(bytes) {
            do {
                let tree = try BinaryEntityValue.decode(bytes)
                // Import writes the tree back through the encoder: bytes the encoder would not
                // write (another codec's that start with 0xFF and happen to decode) would change.
                guard (try? tree.encoded()) == bytes else {
                    return .bytes(reason: "decodes as the binary entity format, but the encoder writes that value otherwise (a payload codec whose bytes start with 0xFF?)", damaged: false)
                }
                return .binary(json(tree))
            } catch {
                // Starts as the binary format does but is not whole: the writer or the bytes are wrong.
                return .bytes(reason: "binary entity payload does not decode: \(describe(error))", damaged: true)
            }
        }
        do {
            let value = try JSONParser.parse(bytes)
            // A JSON Lines line holds no newline: a payload written with them is shown as bytes.
            if bytes.contains(0x0A) || bytes.contains(0x0D) {
                return .bytes(reason: "JSON payload spans several lines", damaged: false)
            }
            // A line's data is the value's text alone: whitespace around it would be lost.
            let space: Set<UInt8> = [0x20, 0x09]
            if space.contains(bytes.first!) || space.contains(bytes.last!) {
                return .bytes(reason: "JSON payload with whitespace before or after the value", damaged: false)
            }
            return .json(text: String(decoding: bytes, as: UTF8.self), value: value)
        } catch {
            return .bytes(reason: "not self-describing (neither the binary entity format nor JSON: a payload codec's bytes?)", damaged: false)
        }
    }

    /// Whether an event is a generic repository's (`TYPE.added`, `TYPE.updated`, `TYPE.deleted`
    /// of its stream's type), whose payload is the whole entity (none for a delete): the one
    /// rule for what replay folds and what history calls a state. Any other event's payload is
    /// data of the application's own meaning.
    static func isRepositoryEvent(_ envelope: EventEnvelope) -> Bool {
        isRepositoryEvent(envelope.eventType, of: envelope.stream.entityType)
    }

    /// ``isRepositoryEvent(_:)`` for an event type of a stream type. The kernel's tombstones
    /// (`$deleted`, `$purged`) count as a repository's delete: every repository folds them so.
    static func isRepositoryEvent(_ eventType: String, of type: String) -> Bool {
        if Tombstone(eventType: eventType) != nil { return true }
        return ownEventName(eventType, of: type).map { repositoryEventNames.contains($0) } ?? false
    }

    /// Whether an event ends its entity: a repository's `TYPE.deleted` (an activity's
    /// `activity.deleted`) or a kernel tombstone. The one rule for replay, history and import.
    static func isDeletion(_ eventType: String) -> Bool {
        eventType.hasSuffix(".deleted") || Tombstone(eventType: eventType) != nil
    }

    private static let repositoryEventNames: Set<Substring> = ["added", "updated", "deleted"]

    /// The name after `TYPE.` of an event of its stream's type (`nil`: another prefix, or a
    /// name with a dot, which no repository writes).
    private static func ownEventName(_ eventType: String, of type: String) -> Substring? {
        guard eventType.count > type.count + 1, eventType.hasPrefix(type), eventType.dropFirst(type.count).first == "." else { return nil }
        let name = eventType.dropFirst(type.count + 1)
        return name.contains(".") ? nil : name
    }

    /// The name of a field event (``FieldEvent``): an event `TYPE.name` of its stream's type
    /// other than the repository's own three, whose payload is not JSON. A generic repository
    /// of the type folds every such event as a field event (or fails on one it does not know),
    /// so in a type that has repository events this is what the event is; in a type of an
    /// application's own events it is only a name. A `Codable` field event's payload is always
    /// the binary entity format (``FieldEvent/init(_:sets:)``), so a JSON payload is an
    /// application's own event (`JSONEventCodec`'s `Person.created {"name":"C"}`), never a
    /// field event: the one rule for import, `history`, `replay --entity` and `query`.
    static func fieldEventName(_ eventType: String, of type: String, payload bytes: [UInt8]) -> Substring? {
        guard let name = ownEventName(eventType, of: type), !repositoryEventNames.contains(name) else { return nil }
        if !bytes.isEmpty, !BinaryEntityValue.isBinary(bytes), (try? JSONParser.parse(bytes)) != nil { return nil }
        return name
    }

    /// Whether an event shows that its stream's type is a generic repository's: a `TYPE.added`
    /// or `TYPE.updated` whose payload is a whole entity (the binary entity format's keyed
    /// container, or a JSON object). The one rule for import's field-event check. A name alone
    /// is no evidence: an application's own events may well be called `Person.created` and
    /// `Person.deleted` (a delete has no payload to tell them apart).
    static func showsRepositoryType(_ eventType: String, of type: String, payload bytes: [UInt8]) -> Bool {
        guard let name = ownEventName(eventType, of: type), name == "added" || name == "updated" else { return false }
        // Decoded only when it starts as an object does: a type whose adds are never objects
        // had every add and update decoded on each import.
        let objectStart = BinaryEntityValue.isBinary(bytes) ? BinaryEntityValue.startsKeyed(bytes) : bytes.first == UInt8(ascii: "{")
        guard objectStart else { return false }
        if case .object? = payload(bytes).value { return true }
        return false
    }

    /// Whether a payload is a `Codable` field event's (``FieldEvent/init(_:sets:)``): the binary
    /// entity format's keyed container with the one field `value` (a nil value too:
    /// `{"value":null}`). It holds the value alone, not the property it sets (the event's
    /// registration on the schema knows that). A shape, not evidence: an application's own
    /// event may have it too.
    static func isFieldEventPayload(_ bytes: [UInt8]) -> Bool {
        guard BinaryEntityValue.isBinary(bytes), case .keyed(let members)? = try? BinaryEntityValue.decode(bytes) else { return false }
        return members.count == 1 && members[0].key == "value"
    }

    static func describe(_ error: any Error) -> String {
        if case DecodingError.dataCorrupted(let context) = error { return context.debugDescription }
        return "\(error)"
    }

    // MARK: Binary tree → JSON

    private static func tagged(_ tag: String, _ value: JSONTree) -> JSONTree { .object([(tag, value)]) }

    /// The JSON rendering of a binary entity value (see the type's documentation).
    static func json(_ value: BinaryEntityValue) -> JSONTree {
        switch value {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .int(let v): return .number(String(v))
        // Tagged, as a plain integer is an int: the tag is what the application's decoder checks.
        case .uint(let v): return tagged("$uint", .number(String(v)))
        case .double(let d):
            guard d.isFinite else { return tagged("$double", .string(nonFiniteText(d))) }
            return .number(doubleText(d))
        case .float(let f):
            guard f.isFinite else { return tagged("$float", .string(nonFiniteText(f))) }
            return tagged("$float", .number(doubleText(Double(f), float: f)))
        case .string(let s): return .string(s)
        case .uuid(let u): return tagged("$uuid", .string(u.uuidString))
        case .date(let d):
            var text = ISODate.format(d)
            if !text.withUTF8({ isExactText($0, of: d) }) {
                let seconds = d.timeIntervalSinceReferenceDate
                return tagged("$date", seconds.isFinite ? .number(doubleText(seconds)) : .string(nonFiniteText(seconds)))
            }
            return tagged("$date", .string(text))
        case .data(let bytes): return tagged("$data", .string(Data(bytes).base64EncodedString()))
        case .decimal(let d): return tagged("$decimal", .string(d.isNaN ? "NaN" : d.description))
        case .url(let u): return tagged("$url", .string(u))
        case .keyed(let entries):
            let object = JSONTree.object(entries.map { ($0.key, json($0.value)) })
            if entries.count == 1, entries[0].key.hasPrefix("$") { return tagged("$object", object) }
            return object
        case .unkeyed(let values): return .array(values.map(json))
        }
    }

    /// The one rule for a `$date`'s form: its ISO 8601 text when that text reads back as the
    /// same `Double` (exact), else its seconds since 2001 as a number (or a non-finite's text).
    /// `json(_:)` and the binary walk's writer (`BinaryJSONWriter.visitDate`, which formats into
    /// its buffer) both ask it.
    /// - Parameters:
    ///   - text: The date's text as `ISODate.format` wrote it (`invalid` for no date).
    ///   - date: The date.
    static func isExactText(_ text: UnsafeBufferPointer<UInt8>, of date: Date) -> Bool {
        ISODate.tryParse(utf8: text)?.timeIntervalSinceReferenceDate.bitPattern == date.timeIntervalSinceReferenceDate.bitPattern
    }

    /// A non-finite double's text: `inf`, `-inf`, `nan` for the NaN `Double.nan` is, and any
    /// other NaN with its bits (`nan:fff8000000000000`, the sign and payload of `0.0 / 0.0`).
    static func nonFiniteText(_ d: Double) -> String {
        guard d.isNaN else { return d < 0 ? "-inf" : "inf" }
        return d.bitPattern == Double.nan.bitPattern ? "nan" : "nan:" + hex(d.bitPattern, digits: 16)
    }

    /// ``nonFiniteText(_:)-(Double)`` of a float: a NaN other than `Float.nan` with its 8 hex digits.
    static func nonFiniteText(_ f: Float) -> String {
        guard f.isNaN else { return f < 0 ? "-inf" : "inf" }
        return f.bitPattern == Float.nan.bitPattern ? "nan" : "nan:" + hex(UInt64(f.bitPattern), digits: 8)
    }

    private static func hex(_ value: UInt64, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }

    /// A finite double as JSON text that reads back as the same double and always shows it is
    /// one (a `.` or an exponent).
    static func doubleText(_ d: Double, float: Float? = nil) -> String {
        let text = float.map { "\($0)" } ?? "\(d)"
        return text.contains(".") || text.contains("e") ? text : text + ".0"
    }

    // MARK: JSON → binary tree

    struct ValueError: Error { var message: String }

    /// The binary entity value a rendering stands for (the inverse of ``json(_:)``).
    /// - Parameter path: Where the value is, for messages (`data.owner.id`).
    /// - Throws: ``ValueError`` naming the path and what is wrong.
    static func binary(_ value: JSONTree, path: String = "data", depth: Int = 0) throws(ValueError) -> BinaryEntityValue {
        // Deeper than the binary format reads: the stored payload would be damage.
        guard depth < BinaryEntityValue.maxDepth else {
            throw ValueError(message: "\(path): nested deeper than the binary entity format's \(BinaryEntityValue.maxDepth) levels")
        }
        switch value {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .string(let s): return .string(s)
        case .number(let text):
            if text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) {
                guard let d = Double(text), d.isFinite else { throw ValueError(message: "\(path): \(text) is not a finite double") }
                return .double(d)
            }
            if let v = Int64(text) { return .int(v) }
            if let v = UInt64(text) { return .uint(v) }
            throw ValueError(message: "\(path): the integer \(text) does not fit 64 bits")
        case .array(let values):
            var out: [BinaryEntityValue] = []
            for (i, v) in values.enumerated() { out.append(try binary(v, path: "\(path)[\(i)]", depth: depth + 1)) }
            return .unkeyed(out)
        case .object(let members):
            if members.count == 1, members[0].key.hasPrefix("$") { return try tagged(members[0].key, members[0].value, path: path, depth: depth) }
            var out: [(key: String, value: BinaryEntityValue)] = []
            for m in members { out.append((m.key, try binary(m.value, path: "\(path).\(m.key)", depth: depth + 1))) }
            return .keyed(out)
        }
    }

    private static func tagged(_ tag: String, _ value: JSONTree, path: String, depth: Int) throws(ValueError) -> BinaryEntityValue {
        func text() throws(ValueError) -> String {
            guard case .string(let s) = value else { throw ValueError(message: "\(path): \(tag) takes a string") }
            return s
        }
        func nonFinite(_ s: String) -> Double? {
            if s.hasPrefix("nan:"), s.count == 20, let bits = UInt64(s.dropFirst(4), radix: 16), Double(bitPattern: bits).isNaN {
                return Double(bitPattern: bits)
            }
            return ["nan": .nan, "inf": .infinity, "-inf": -.infinity][s]
        }
        switch tag {
        case "$date":
            switch value {
            case .string(let s):
                if let d = ISODate.tryParse(s) { return .date(d) }
                if let d = nonFinite(s) { return .date(Date(timeIntervalSinceReferenceDate: d)) }
                throw ValueError(message: "\(path): \"\(s)\" is not an ISO 8601 date")
            case .number(let n):
                // A number beyond a double's range reads as infinite: only "inf" spells that.
                guard let d = Double(n), d.isFinite else { throw ValueError(message: "\(path): \(n) is not a finite number of seconds (a non-finite date is \"nan\", \"inf\" or \"-inf\")") }
                return .date(Date(timeIntervalSinceReferenceDate: d))
            default: throw ValueError(message: "\(path): $date takes an ISO 8601 string or seconds since 2001")
            }
        case "$uuid":
            let s = try text()
            guard let u = UUID(uuidString: s) else { throw ValueError(message: "\(path): \"\(s)\" is not a UUID") }
            return .uuid(u)
        case "$data":
            let s = try text()
            guard let d = Data(base64Encoded: s) else { throw ValueError(message: "\(path): $data is not base64") }
            return .data(Array(d))
        case "$decimal":
            let s = try text()
            if s == "NaN" { return .decimal(.nan) }
            // Decimal(string:) reads a prefix ("12..5" is 12, "1e" is 1): the whole text must be
            // a decimal number, and read back from its own text as the same value (more digits
            // than a Decimal holds would be rounded).
            guard isDecimalText(s), let d = Decimal(string: s, locale: Locale(identifier: "en_US_POSIX")),
                  !d.isNaN, Decimal(string: d.description, locale: Locale(identifier: "en_US_POSIX")) == d else {
                throw ValueError(message: "\(path): \"\(s)\" is not a decimal (digits, an optional fraction and exponent: -12.50, 1.5e3) that a Decimal holds exactly")
            }
            return .decimal(d)
        case "$url":
            let s = try text()
            // A text URL reads only after changing it (a space escaped as %20) would be stored as
            // another URL.
            guard let url = URL(string: s), url.absoluteString == s else {
                throw ValueError(message: "\(path): \"\(s)\" is not a URL as written (a URL reads it as \"\(URL(string: s)?.absoluteString ?? "nothing")\")")
            }
            return .url(s)
        case "$float":
            switch value {
            case .number(let n):
                guard let f = Float(n), f.isFinite else { throw ValueError(message: "\(path): \(n) is not a finite float (a non-finite float is \"nan\", \"inf\" or \"-inf\")") }
                return .float(f)
            case .string(let s):
                if s.hasPrefix("nan:"), s.count == 12, let bits = UInt32(s.dropFirst(4), radix: 16), Float(bitPattern: bits).isNaN {
                    return .float(Float(bitPattern: bits))
                }
                guard let d = ["nan": Double.nan, "inf": .infinity, "-inf": -.infinity][s] else {
                    throw ValueError(message: "\(path): $float \"\(s)\" is not nan, nan:<8 hex digits>, inf or -inf")
                }
                return .float(Float(d))
            default: throw ValueError(message: "\(path): $float takes a number")
            }
        case "$double":
            let s = try text()
            guard let d = nonFinite(s) else { throw ValueError(message: "\(path): $double \"\(s)\" is not nan, nan:<16 hex digits>, inf or -inf (a finite double is a plain number)") }
            return .double(d)
        case "$uint":
            guard case .number(let n) = value, let v = UInt64(n) else { throw ValueError(message: "\(path): $uint takes an integer from 0 to \(UInt64.max)") }
            return .uint(v)
        case "$object":
            guard case .object(let members) = value else { throw ValueError(message: "\(path): $object takes an object") }
            var out: [(key: String, value: BinaryEntityValue)] = []
            for m in members { out.append((m.key, try binary(m.value, path: "\(path).\(m.key)", depth: depth + 1))) }
            return .keyed(out)
        default:
            throw ValueError(message: "\(path): unknown tag \"\(tag)\" (a one-key object whose key starts with $ is a typed value: $date, $uuid, $data, $decimal, $url, $float, $double, $uint; write a plain object with such a key as {\"$object\":{…}})")
        }
    }

    /// Whether `text` is a decimal number, `-?digits(.digits)?([eE][+-]?digits)?`, of at most 38
    /// significant digits.
    static func isDecimalText(_ text: String) -> Bool {
        var b = Substring(text).utf8[...]
        func digits() -> Bool {
            let before = b.count
            while let c = b.first, c >= 48, c <= 57 { b = b.dropFirst() }
            return b.count < before
        }
        if b.first == UInt8(ascii: "-") { b = b.dropFirst() }
        guard digits() else { return false }
        if b.first == UInt8(ascii: ".") {
            b = b.dropFirst()
            guard digits() else { return false }
        }
        if let e = b.first, e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
            b = b.dropFirst()
            if let sign = b.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { b = b.dropFirst() }
            guard digits() else { return false }
        }
        guard b.isEmpty else { return false }
        // A Decimal's mantissa holds 38 digits: more would be rounded away without a word.
        let mantissa = text.prefix { $0 != "e" && $0 != "E" }.filter(\.isNumber).drop { $0 == "0" }
        return mantissa.reversed().drop { $0 == "0" }.count <= 38
    }

    // MARK: Export lines

    /// One export line of an event that is not an activity event (or an activity event that
    /// does not decode), and its payload.
    static func line(_ envelope: EventEnvelope) -> (text: String, payload: Payload) {
        var buffer = JSONBuffer()
        let payload = payload(envelope.payload)
        write(envelope, payload: payload, to: &buffer)
        return (buffer.text, payload)
    }

    /// Appends ``line(_:)``'s line to `buffer`.
    /// - Parameters:
    ///   - envelope: The event.
    ///   - payload: How to show the payload, when the caller knows (an activity event its codec
    ///     refuses: bytes, with why); `nil`: as its bytes are (``payload(_:)``), a binary entity
    ///     payload written as it is walked (``appendBinary(_:to:)``), without a tree.
    /// - Returns: Why the payload was written as bytes, if it was.
    @discardableResult
    static func write(_ envelope: EventEnvelope, payload known: Payload? = nil, to buffer: inout JSONBuffer) -> (reason: String, damaged: Bool)? {
        if known == nil, BinaryEntityValue.isBinary(envelope.payload) {
            let mark = buffer.count
            writeHead(envelope, codec: "binary", to: &buffer)
            if appendBinary(envelope.payload, to: &buffer) {
                envelope.metadata.writeJSONField(to: &buffer)
                buffer.appendByte(0x7D)
                return nil
            }
            // Damaged, or not the encoder's form: the tree says which, and why.
            buffer.truncate(to: mark)
        }
        let payload = known ?? payload(envelope.payload)
        writeHead(envelope, codec: payload.codec, to: &buffer)
        var undecoded: (reason: String, damaged: Bool)?
        switch payload {
        case .none: buffer.appendRaw("null")
        case .binary(let value): value.write(to: &buffer)
        case .json(let text, _): buffer.appendRaw(text)
        case .bytes(let reason, let damaged):
            buffer.appendRaw("null,\"base64\":")
            buffer.appendString(Data(envelope.payload).base64EncodedString())
            buffer.appendRaw(",\"reason\":")
            buffer.appendString(reason)
            undecoded = (reason, damaged)
        }
        envelope.metadata.writeJSONField(to: &buffer)
        buffer.appendByte(0x7D)
        return undecoded
    }

    /// A line's fields up to `"data":`, the payload's codec named.
    private static func writeHead(_ envelope: EventEnvelope, codec: String, to buffer: inout JSONBuffer) {
        buffer.appendRaw("{\"position\":")
        buffer.appendInteger(envelope.position)
        buffer.appendRaw(",\"recordedAt\":")
        buffer.appendString(envelope.timestamp)
        buffer.appendRaw(",\"stream\":{\"type\":")
        buffer.appendString(envelope.stream.entityType)
        buffer.appendRaw(",\"id\":")
        switch envelope.stream.entityID {
        case .uuid(let u):
            buffer.appendString(u)
            buffer.appendRaw(",\"idType\":\"uuid\"}")
        case .string(let s):
            buffer.appendString(s)
            buffer.appendRaw(",\"idType\":\"string\"}")
        }
        buffer.appendRaw(",\"version\":")
        buffer.appendInteger(envelope.entityVersion)
        buffer.appendRaw(",\"event\":")
        buffer.appendString(envelope.eventType)
        buffer.appendRaw(",\"schemaVersion\":")
        buffer.appendInteger(envelope.schemaVersion)
        buffer.appendRaw(",\"codec\":\"")
        buffer.appendRaw(codec)
        buffer.appendRaw("\",\"data\":")
    }

    /// The metadata a line's `"metadata"` field holds (`.none` without one).
    /// - Throws: ``ActivityJSON/LineError`` when it is not an object of optional strings
    ///   `correlationID` and `actor`.
    static func metadata(_ value: JSONTree?) throws(ActivityJSON.LineError) -> EventMetadata {
        guard let value, value != .null else { return .none }
        guard case .object(let members) = value else { throw .init(message: "field \"metadata\" must be an object") }
        var metadata = EventMetadata()
        for m in members {
            let text: String?
            switch m.value {
            case .null: text = nil
            case .string(let s): text = s
            default: throw .init(message: "field \"metadata.\(m.key)\" must be a string")
            }
            switch m.key {
            case "correlationID": metadata.correlationID = text
            case "actor": metadata.actor = text
            default: throw .init(message: "unknown field \"\(m.key)\" in \"metadata\"; known fields: correlationID, actor")
            }
        }
        return metadata
    }

    /// The metadata of a line that import can store: none, or an earlier import's resume marker
    /// (bookkeeping of the tool, replaced by this import's). Any other metadata is refused
    /// rather than overwritten: import's resume marker takes the correlation id of every
    /// event it writes (Docs/CLI.md, "Import").
    /// - Throws: ``ActivityJSON/LineError`` naming what the line carries.
    static func requireStorableMetadata(_ metadata: EventMetadata) throws(ActivityJSON.LineError) {
        if metadata.actor == nil, metadata.correlationID == nil || ImportMarker.isMarker(metadata.correlationID!) { return }
        let parts = [metadata.correlationID.map { "correlationID \(ActivityJSON.escape($0))" }, metadata.actor.map { "actor \(ActivityJSON.escape($0))" }]
        throw .init(message: "the event carries metadata (\(parts.compactMap { $0 }.joined(separator: ", "))), which import cannot store: its resume marker takes every imported event's correlation id, so the metadata would be lost. A limitation of import today, tombstones included: a $deleted or $purged written with --actor or --correlation-id does not import back (remove its metadata from the line to import it without; Docs/Forgetting.md)")
    }

    /// The metadata field of an activity line, read on its own (the activity parser ignores
    /// it); the cheap test first, as activity imports are large.
    /// - Throws: ``ActivityJSON/LineError`` as ``metadata(_:)``.
    static func activityLineMetadata(_ line: Substring) throws(ActivityJSON.LineError) -> EventMetadata {
        guard line.utf8.contains(bytes: "\"metadata\"") else { return .none }
        // A line this reader refuses (a key twice) must not pass with its metadata unread.
        let members: [(key: String, value: JSONTree, range: Range<Int>)]
        do { members = try JSONParser.members(Array(line.utf8)) } catch { throw .init(message: error.description) }
        return try metadata(members.first { $0.key == "metadata" }?.value)
    }

    // MARK: Import lines

    /// The fields of a line of any entity type.
    static let fields = ["position", "recordedAt", "stream", "version", "event", "schemaVersion", "codec", "data", "base64", "reason", "metadata"]

    /// An event of any entity type read from an import line.
    struct ImportedEvent {
        var event: EncodedEvent
        /// The stream's version after the event, when the line gives it (export does).
        var version: UInt64?
        /// The recording time the line gives, to the nanosecond (export writes it).
        var recordedAt: LogTimestamp?
        /// The metadata the line gives.
        var metadata: EventMetadata = .none
    }

    /// Whether an import line is an event of any entity type (it has a top-level `"stream"`)
    /// rather than an activity line; the cheap test first, as activity imports are large.
    static func isEntityLine(_ line: Substring) -> Bool {
        guard line.utf8.contains(bytes: "\"stream\"") else { return false }
        // Not JSON (or a key twice): the entity parser says where, more precisely than the
        // activity parser would.
        guard let members = try? JSONParser.members(Array(line.utf8)) else { return true }
        return members.contains { $0.key == "stream" }
    }

    /// Parses one import line of any entity type.
    /// - Throws: ``ActivityJSON/LineError`` saying what is wrong.
    static func parseLine(_ line: Substring, lenient: Bool) throws(ActivityJSON.LineError) -> ImportedEvent {
        let bytes = Array(line.utf8)
        let members: [(key: String, value: JSONTree, range: Range<Int>)]
        do { members = try JSONParser.members(bytes) } catch { throw .init(message: error.description) }
        func field(_ key: String) -> (value: JSONTree, range: Range<Int>)? {
            members.first { $0.key == key }.map { ($0.value, $0.range) }
        }
        if !lenient, let unknown = members.map(\.key).filter({ !fields.contains($0) }).sorted().first {
            throw .init(message: "unknown field \"\(unknown)\" in an event line; known fields: \(fields.joined(separator: ", ")) (pass --lenient to ignore unknown fields)")
        }
        func string(_ value: JSONTree?, _ name: String) throws(ActivityJSON.LineError) -> String {
            guard let value else { throw .init(message: "missing field \"\(name)\"") }
            guard case .string(let s) = value else { throw .init(message: "field \"\(name)\" must be a string") }
            return s
        }
        func integer(_ value: JSONTree?, _ name: String, max: UInt64) throws(ActivityJSON.LineError) -> UInt64? {
            guard let value, value != .null else { return nil }
            guard case .number(let n) = value, let v = UInt64(n), v <= max else {
                throw .init(message: "field \"\(name)\" must be an integer from 0 to \(max)")
            }
            return v
        }
        guard let streamValue = field("stream")?.value, case .object = streamValue else { throw .init(message: "field \"stream\" must be an object") }
        let type = try string(streamValue["type"], "stream.type")
        guard !type.isEmpty else { throw .init(message: "field \"stream.type\" must not be empty") }
        let idText = try string(streamValue["id"], "stream.id")
        let id: EntityID
        switch streamValue["idType"].flatMap({ if case .string(let s) = $0 { s } else { nil } }) {
        case "uuid":
            guard let u = UUID(uuidString: idText) else { throw .init(message: "stream.id \"\(idText)\" is not a UUID (stream.idType is uuid)") }
            id = .uuid(u)
        case "string": id = .string(idText)
        case nil where streamValue["idType"] == nil: id = EntityID(parsing: idText)
        default: throw .init(message: "field \"stream.idType\" must be \"uuid\" or \"string\"")
        }
        if case .object(let streamMembers) = streamValue, !lenient,
           let unknown = streamMembers.map(\.key).first(where: { !["type", "id", "idType"].contains($0) }) {
            throw .init(message: "unknown field \"\(unknown)\" in \"stream\"; known fields: type, id, idType")
        }
        let eventType = try string(field("event")?.value, "event")
        guard !eventType.isEmpty else { throw .init(message: "field \"event\" must not be empty") }
        guard let schemaVersion = try integer(field("schemaVersion")?.value, "schemaVersion", max: UInt64(UInt16.max)) else {
            throw .init(message: "missing field \"schemaVersion\"")
        }
        let version = try integer(field("version")?.value, "version", max: UInt64(Int64.max))
        if version == 0 { throw .init(message: "field \"version\" must be at least 1 (a stream's first event is version 1)") }
        let codec = try string(field("codec")?.value, "codec")
        let data = field("data")
        // A field of another codec would be ignored, and the line could mean either.
        if codec != "bytes", let other = ["base64", "reason"].first(where: { field($0) != nil }) {
            throw .init(message: "field \"\(other)\" belongs to codec \"bytes\", not \"\(codec)\"")
        }
        if codec == "bytes", let data, data.value != .null {
            throw .init(message: "codec \"bytes\" takes its payload in \"base64\" (\"data\": null)")
        }
        let payload: [UInt8]
        switch codec {
        case "none":
            guard data == nil || data!.value == .null else { throw .init(message: "codec \"none\" takes no data (\"data\": null)") }
            payload = []
        case "binary":
            guard let data else { throw .init(message: "missing field \"data\" for codec \"binary\"") }
            do { payload = try binary(data.value).encoded() } catch let error as ValueError {
                throw .init(message: error.message)
            } catch { throw .init(message: "data: \(error)") }
        case "json":
            guard let data else { throw .init(message: "missing field \"data\" for codec \"json\"") }
            // The payload's text exactly as the line holds it.
            payload = Array(bytes[data.range])
        case "bytes":
            let text = try string(field("base64")?.value, "base64")
            guard let decoded = Data(base64Encoded: text) else { throw .init(message: "field \"base64\" is not base64") }
            payload = Array(decoded)
        default:
            throw .init(message: "unknown codec \"\(codec)\" (expected binary, json, bytes or none)")
        }
        var recordedAt: LogTimestamp?
        if let value = field("recordedAt")?.value, value != .null {
            guard case .string(let text) = value, let time = ISODate.parseRecordingTime(text) else {
                throw .init(message: "field \"recordedAt\" must be an ISO 8601 date-time with at most nine fraction digits, from 1678 to 2262 (as export writes it)")
            }
            recordedAt = time
        }
        let metadata = try metadata(field("metadata")?.value)
        return ImportedEvent(event: EncodedEvent(eventType: eventType, schemaVersion: UInt16(schemaVersion), stream: StreamID(type, id), payload: payload),
                             version: version, recordedAt: recordedAt, metadata: metadata)
    }
}

extension Substring.UTF8View {
    /// Whether `needle`'s bytes occur in these bytes: a byte search (Foundation's `contains` of
    /// a string compares characters through `NSString` and was a fifth of an import's time,
    /// asked twice of each line).
    func contains(bytes needle: StaticString) -> Bool {
        func search(_ haystack: UnsafeBufferPointer<UInt8>) -> Bool {
            let pattern = UnsafeBufferPointer(start: needle.utf8Start, count: needle.utf8CodeUnitCount)
            guard let first = pattern.first else { return true }
            guard haystack.count >= pattern.count else { return false }
            var i = 0
            while i <= haystack.count - pattern.count {
                if haystack[i] == first, memcmp(haystack.baseAddress! + i, pattern.baseAddress!, pattern.count) == 0 { return true }
                i += 1
            }
            return false
        }
        return withContiguousStorageIfAvailable(search) ?? Array(self).withUnsafeBufferPointer(search)
    }
}
