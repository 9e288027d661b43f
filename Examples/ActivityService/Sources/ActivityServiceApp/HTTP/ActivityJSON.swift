import Activities
import Foundation
import NIOCore

/// The service's JSON: what it writes (activities, pages, history, errors) and what it reads
/// (an activity in a POST or PUT body).
///
/// Writing is by hand into one buffer: a page of 50 activities through `JSONEncoder` costs more
/// than the query that found them, on both backends alike, and would hide their difference.
struct JSONWriter {
    private(set) var bytes: [UInt8] = []
    private var day = InternetDate.Day()

    init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    var buffer: ByteBuffer { ByteBuffer(bytes: bytes) }

    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func string(_ text: String) {
        bytes.append(34)
        var text = text
        text.withUTF8 { utf8 in
            // Most strings (types, messages) need no escaping: one copy.
            guard utf8.contains(where: { $0 < 32 || $0 == 34 || $0 == 92 }) else { return bytes.append(contentsOf: utf8) }
            for byte in utf8 {
                switch byte {
                case 34: bytes.append(contentsOf: [92, 34])
                case 92: bytes.append(contentsOf: [92, 92])
                case 0..<32: bytes.append(contentsOf: [92, 117, 48, 48, Self.hex[Int(byte >> 4)], Self.hex[Int(byte & 15)]])
                default: bytes.append(byte)
                }
            }
        }
        bytes.append(34)
    }

    private static let hex = Array("0123456789abcdef".utf8)

    mutating func number(_ value: some BinaryInteger) {
        bytes.append(contentsOf: String(value).utf8)
    }

    /// A UUID as `uuidString` spells it (upper-case, hyphenated), without its formatter
    /// (`snprintf` on Linux), filled in place and appended once.
    mutating func uuid(_ id: UUID) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 38) { out in
            out[0] = 34
            out[37] = 34
            var index = 1
            withUnsafeBytes(of: id.uuid) { raw in
                for (position, byte) in raw.enumerated() {
                    if position == 4 || position == 6 || position == 8 || position == 10 {
                        out[index] = 45
                        index += 1
                    }
                    let high = byte >> 4, low = byte & 15
                    out[index] = high < 10 ? 48 + high : 55 + high
                    out[index + 1] = low < 10 ? 48 + low : 55 + low
                    index += 2
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(out))
        }
    }

    mutating func date(_ date: Date?) {
        guard let date else { return raw("null") }
        bytes.append(34)
        InternetDate.write(date, into: &bytes, day: &day)
        bytes.append(34)
    }

    mutating func activity(_ activity: ActivityModel?) {
        guard let activity else { return raw("null") }
        raw("{\"id\":")
        uuid(activity.id)
        raw(",\"startDate\":")
        date(activity.startDate)
        raw(",\"endDate\":")
        date(activity.endDate)
        raw(",\"type\":")
        string(activity.type.rawValue)
        raw("}")
    }

    /// `{"activities":[...],"nextCursor":"..."|null}`
    mutating func page(_ activities: [ActivityModel], nextCursor: String?) {
        raw("{\"activities\":[")
        for (index, activity) in activities.enumerated() {
            if index > 0 { raw(",") }
            self.activity(activity)
        }
        raw("],\"nextCursor\":")
        if let nextCursor { string(nextCursor) } else { raw("null") }
        raw("}")
    }

    /// `{"changes":[{"version":1,"recordedAt":"...","kind":"added","activity":{...}}, ...]}`
    mutating func history(_ changes: [ActivityChange]) {
        raw("{\"changes\":[")
        for (index, change) in changes.enumerated() {
            if index > 0 { raw(",") }
            raw("{\"version\":")
            number(change.version)
            raw(",\"recordedAt\":")
            date(change.recordedAt)
            raw(",\"kind\":")
            string(change.kind.rawValue)
            raw(",\"activity\":")
            activity(change.activity)
            raw("}")
        }
        raw("]}")
    }

    /// `{"error":{"code":"...","message":"..."}}`
    mutating func error(code: String, message: String) {
        raw("{\"error\":{\"code\":")
        string(code)
        raw(",\"message\":")
        string(message)
        raw("}}")
    }
}

/// An activity as a POST or PUT body: `{"id"?, "startDate", "endDate"?, "type"}`. A POST
/// without an id gets a new one; a PUT takes its id from the path (a different one in the
/// body is refused).
struct ActivityInput: Decodable {
    var id: UUID?
    var startDate: Date
    var endDate: Date?
    var type: String

    private static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = InternetDate.parse(text) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "\"\(text)\" is not an RFC 3339 date such as 2025-03-01T07:30:00Z")
            }
            return date
        }
        return decoder
    }()

    /// Decodes a body.
    /// - Throws: ``APIError`` (400) saying which field is wrong and why.
    static func decode(_ body: ByteBuffer) throws -> ActivityInput {
        do {
            return try decoder.decode(ActivityInput.self, from: Data(body.readableBytesView))
        } catch let error as DecodingError {
            throw APIError.badRequest(Self.describe(error))
        }
    }

    func model(id: UUID) -> ActivityModel {
        ActivityModel(id: id, startDate: startDate, endDate: endDate, type: ActivityType(rawValue: type))
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.isEmpty ? "body" : codingPath.map(\.stringValue).joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context): return "\(path(context.codingPath + [key])) is missing"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "\(path(context.codingPath)) has the wrong type: \(context.debugDescription)"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "the body is not valid JSON" : "\(path(context.codingPath)): \(context.debugDescription)"
        @unknown default: return "the body does not decode: \(error)"
        }
    }
}
