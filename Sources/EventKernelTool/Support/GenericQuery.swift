import EventKernel
import Foundation

/// `query --type TYPE --where …` on a generic repository's entity type: its entities folded from
/// the log (``EntityReplay/fold(_:store:type:through:label:)``), filtered by their decoded
/// fields, each value compared as the kind the entity stores (a `{"$date":…}` as a date, a
/// number or `{"$decimal":…}` as a number), never as text.
enum GenericQuery {
    /// A comparison of `--where`.
    enum Operator: String, CaseIterable {
        // Two-character ones first: `>=` must not read as `>` and a value `=…`.
        case greaterOrEqual = ">=", lessOrEqual = "<=", notEqual = "!=", equal = "=", greater = ">", less = "<"

        var isRange: Bool { ![.equal, .notEqual].contains(self) }

        func holds(_ order: ComparisonResult) -> Bool {
            switch self {
            case .equal: order == .orderedSame
            case .notEqual: order != .orderedSame
            case .greater: order == .orderedDescending
            case .greaterOrEqual: order != .orderedAscending
            case .less: order == .orderedAscending
            case .lessOrEqual: order != .orderedDescending
            }
        }
    }

    /// One `--where field OP value`.
    struct Condition {
        var text: String
        /// Member names from the entity (`owner.name`).
        var path: [String]
        var op: Operator
        var value: String

        var field: String { path.joined(separator: ".") }

        /// Parses `field OP value`.
        /// - Throws: ``ToolError`` (exit 1) for text without an operator or a field.
        init(_ text: String) throws {
            self.text = text
            guard let start = text.firstIndex(where: { "<>=!".contains($0) }) else {
                throw ToolError(.badInput, "--where \(text): expected FIELD=VALUE, FIELD!=VALUE, FIELD>=VALUE, FIELD>VALUE, FIELD<=VALUE or FIELD<VALUE")
            }
            let rest = text[start...]
            guard let op = Operator.allCases.first(where: { rest.hasPrefix($0.rawValue) }) else {
                throw ToolError(.badInput, "--where \(text): unknown comparison at \"\(rest.prefix(2))\" (=, !=, >=, >, <=, <)")
            }
            let field = text[..<start].trimmingCharacters(in: .whitespaces)
            guard !field.isEmpty else { throw ToolError(.badInput, "--where \(text): no field before \(op.rawValue)") }
            path = GenericQuery.path(field)
            self.op = op
            // Spaces around the operator read as part of it (`note = hi`), as around the field.
            value = rest.dropFirst(op.rawValue.count).trimmingCharacters(in: .whitespaces)
            if value == "null", op.isRange {
                throw ToolError(.badInput, "--where \(text): null has no order (FIELD=null or FIELD!=null)")
            }
        }
    }

    /// A stored value, typed by its JSON rendering (``EntityJSON/json(_:)``).
    enum Typed {
        case date(Date), number(Number), string(String), bool(Bool), uuid(UUID), null, other(String)

        init(_ tree: JSONTree) {
            switch tree {
            case .null: self = .null
            case .bool(let b): self = .bool(b)
            case .string(let s): self = .string(s)
            case .number(let n): self = Number(n).map { Typed.number($0) } ?? .other("number")
            case .object(let members):
                // The tag by its key and the value by JSONTree's subscript: reading the
                // members' labelled tuples here made Swift 6.3.1's incremental build of this
                // file fail with "circular reference" (JSONTree), a clean build not.
                let tags = members.map(\.key)
                if tags.count == 1, tags[0].hasPrefix("$") {
                    self = Self.tagged(tags[0], tree)
                } else {
                    self = .other("object")
                }
            case .array: self = .other("array")
            }
        }

        /// A tagged value (`{"$date":…}`).
        private static func tagged(_ tag: String, _ tree: JSONTree) -> Typed {
            let value = tree[tag] ?? .null
            var text: String?
            var number: String?
            if case .string(let s) = value { text = s }
            if case .number(let n) = value { number = n }
            switch tag {
            case "$date":
                if let text { return ISODate.tryParse(text).map { Typed.date($0) } ?? .other("date") }
                if let number, let seconds = Double(number) { return .date(Date(timeIntervalSinceReferenceDate: seconds)) }
                return .other("date")
            case "$decimal", "$uint", "$float":
                guard let digits = text ?? number, let n = Number(digits) else { return .other("number") }
                return .number(n)
            case "$uuid":
                return text.flatMap { UUID(uuidString: $0) }.map { Typed.uuid($0) } ?? .other("UUID")
            default:
                return .other(tag)
            }
        }

        /// Why a date field may hold numbers, in messages.
        static let jsonCodecDates = "a type written with EntitySchema(codec: .json) stores a Date as a plain number (JSONEncoder's default, seconds since 2001), which the tool cannot tell from any other number; compare it as one"

        /// What the value is, in messages.
        var kind: String {
            switch self {
            case .date: "dates"
            case .number: "numbers"
            case .string: "strings"
            case .bool: "true or false"
            case .uuid: "UUIDs"
            case .null: "null"
            case .other(let what): what == "object" || what == "array" ? "\(what)s" : "\(what) values"
            }
        }

        /// The order of this stored value and the text `value` read as the same kind.
        /// - Throws: ``ToolError`` (exit 1) when the text is not of that kind, or the kind has
        ///   no order and `op` asks for one.
        func compare(to value: String, op: Operator, condition: Condition) throws -> ComparisonResult {
            func refuse(_ why: String) -> ToolError {
                ToolError(.badInput, "--where \(condition.text): \(condition.field) holds \(kind), \(why)")
            }
            func cmp<T: Comparable>(_ a: T, _ b: T) -> ComparisonResult { a < b ? .orderedAscending : a > b ? .orderedDescending : .orderedSame }
            switch self {
            case .date(let d):
                guard let moment = ISODate.tryParseMoment(value) else { throw refuse("and \"\(value)\" is not an ISO 8601 date or date-time") }
                // The stored date against the moment: `order(of:)` says where d falls.
                switch moment.order(of: d) {
                case .orderedAscending: return .orderedAscending
                case .orderedDescending: return .orderedDescending
                case .orderedSame: return .orderedSame
                }
            case .number(let n):
                if ISODate.tryParse(value) != nil { throw refuse("and \"\(value)\" is a date: \(Self.jsonCodecDates)") }
                guard let other = Number(value) else { throw refuse("and \"\(value)\" is not a number it compares exactly (plain decimal text, at most 38 significant digits)") }
                return n.compare(other)
            case .string(let s):
                guard !op.isRange else { throw refuse("which have no range here (ranges are on dates and numbers)") }
                return s == value ? .orderedSame : .orderedAscending
            case .bool(let b):
                guard !op.isRange else { throw refuse("which have no range") }
                guard let other = ["true": true, "false": false][value] else { throw refuse("and \"\(value)\" is neither") }
                return b == other ? .orderedSame : .orderedAscending
            case .uuid(let u):
                guard !op.isRange else { throw refuse("which have no range") }
                guard let other = UUID(uuidString: value) else { throw refuse("and \"\(value)\" is not a UUID") }
                return u == other ? .orderedSame : .orderedAscending
            case .null:
                return .orderedAscending
            case .other:
                throw refuse("which --where does not compare (dates, numbers, strings, true/false and UUIDs)")
            }
        }

        /// The order of two stored values for `--order` (`nil` when they are of different kinds).
        static func order(_ a: Typed, _ b: Typed) -> ComparisonResult? {
            func cmp<T: Comparable>(_ a: T, _ b: T) -> ComparisonResult { a < b ? .orderedAscending : a > b ? .orderedDescending : .orderedSame }
            switch (a, b) {
            case (.date(let x), .date(let y)): return cmp(x, y)
            case (.number(let x), .number(let y)): return x.compare(y)
            case (.string(let x), .string(let y)): return cmp(x, y)
            case (.bool(let x), .bool(let y)): return cmp(x ? 1 : 0, y ? 1 : 0)
            case (.uuid(let x), .uuid(let y)): return cmp(x.uuidString, y.uuidString)
            case (.null, .null): return .orderedSame
            // Nulls (and absent fields) last.
            case (.null, _): return .orderedDescending
            case (_, .null): return .orderedAscending
            default: return nil
            }
        }
    }

    /// A field's member names (`owner.name`), the one reading for `--where`, `--order`,
    /// `--date-field` and `--end-field`: empty parts kept (`a..b` names no field, and says so).
    static func path(_ field: String) -> [String] {
        field.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    }

    /// Whether a state has a value at `path` (an explicit null counts).
    static func has(_ state: JSONTree?, _ path: [String]) -> Bool {
        if case .some = value(state, path) { return true }
        return false
    }

    /// A number as stored or typed: decimal text (`12`, `-3.5`, `87.75`, `1e-300`), compared
    /// exactly as a `Decimal` whenever both numbers are one (its exponent reaches ±127, its
    /// digits 38; an integer stored as an `Int64` or `UInt64` fits), and as a `Double` only
    /// when one is beyond a `Decimal`'s exponent, where the two numbers' magnitudes tell them
    /// apart.
    struct Number {
        var text: String
        /// `nil`: beyond a `Decimal`'s exponent.
        var decimal: Decimal?
        var double: Double

        /// `nil` for text that is not plain decimal (`0x10`, `inf`, `1.`, a `Decimal` prefix),
        /// that has more significant digits than a `Decimal` holds (it would round them), or
        /// that a `Double` reads as 0 or infinity but a `Decimal` cannot read (never read as 0).
        init?(_ text: String) {
            let bytes = Array(text.utf8)
            var i = 0
            var mantissa: [UInt8] = []
            if i < bytes.count, bytes[i] == UInt8(ascii: "-") || bytes[i] == UInt8(ascii: "+") { i += 1 }
            func digits(keep: Bool) -> Int {
                let start = i
                while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) {
                    if keep { mantissa.append(bytes[i]) }
                    i += 1
                }
                return i - start
            }
            guard digits(keep: true) > 0 else { return nil }
            if i < bytes.count, bytes[i] == UInt8(ascii: ".") { i += 1; guard digits(keep: true) > 0 else { return nil } }
            if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
                i += 1
                if i < bytes.count, bytes[i] == UInt8(ascii: "-") || bytes[i] == UInt8(ascii: "+") { i += 1 }
                guard digits(keep: false) > 0 else { return nil }
            }
            guard i == bytes.count, let double = Double(text), double.isFinite else { return nil }
            let zero = UInt8(ascii: "0")
            let significant = mantissa.drop(while: { $0 == zero }).reversed().drop(while: { $0 == zero }).count
            guard significant <= 38 else { return nil }
            self.text = text
            self.double = double
            if let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) {
                self.decimal = decimal
            } else if significant == 0 {
                decimal = 0
            } else {
                // Beyond a Decimal's exponent: the double, unless it lost the number.
                guard double != 0 else { return nil }
                decimal = nil
            }
        }

        func compare(_ other: Number) -> ComparisonResult {
            func cmp<T: Comparable>(_ a: T, _ b: T) -> ComparisonResult { a < b ? .orderedAscending : a > b ? .orderedDescending : .orderedSame }
            if let a = decimal, let b = other.decimal { return cmp(a, b) }
            return cmp(double, other.double)
        }
    }

    /// The value at `path` in a state (`nil`: absent, as an optional the encoder left out).
    static func value(_ state: JSONTree?, _ path: [String]) -> JSONTree? {
        var node = state
        for name in path { node = node?[name] }
        return node
    }

    /// The entities whose fields meet every condition (AND).
    /// - Parameters:
    ///   - entities: The entities, decoded states beside them.
    ///   - conditions: The `--where`s.
    ///   - known: Every entity's state at the moment asked about, before any filter
    ///     (`--valid-at`'s): a field is checked against them, not against what is left.
    /// - Throws: ``ToolError`` (exit 1): a field no entity has (naming the fields they have), a
    ///   value not of the kind the field stores, a range on a kind without one.
    static func filter(_ entities: [(entity: EntityReplay.Entity, state: JSONTree?)], _ conditions: [Condition], type: String, known: [JSONTree?]) throws -> [(entity: EntityReplay.Entity, state: JSONTree?)] {
        for condition in conditions {
            try requireField(condition.path, flag: "--where \(condition.text)", in: known, type: type)
        }
        return try entities.filter { item in
            try conditions.allSatisfy { condition in
                // Absent: an optional the encoder left out, so null.
                let typed = value(item.state, condition.path).map { Typed($0) } ?? .null
                let isNull = if case .null = typed { true } else { false }
                // `null` is asked before any kind is read: a field of dates is null or not too.
                if condition.value == "null" { return isNull == (condition.op == .equal) }
                if isNull { return condition.op == .notEqual }
                return condition.op.holds(try typed.compare(to: condition.value, op: condition.op, condition: condition))
            }
        }
    }

    /// Refuses a field that no entity has (almost always a misspelling; an empty answer would
    /// say "none match" when the question was wrong).
    /// With no entities at the moment asked about there is nothing to check against: the
    /// answer is empty whatever the field.
    static func requireField(_ path: [String], flag: String, in states: [JSONTree?], type: String) throws {
        guard !states.isEmpty, !states.contains(where: { has($0, path) }) else { return }
        var names: Set<String> = []
        for case .object(let members)? in states { for member in members { names.insert(member.key) } }
        let known = names.isEmpty ? "its entities hold no fields" : "its fields: " + names.sorted().joined(separator: ", ")
        let field = path.joined(separator: ".")
        throw ToolError(.badInput, "\(flag): no entity of \(type) has a field \"\(field)\"; \(known)")
    }
}
