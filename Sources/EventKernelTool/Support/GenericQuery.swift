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
            case .number(let n):
                // An integer is an Int's (exact); a fraction or exponent a Double's.
                let double = n.contains { $0 == "." || $0 == "e" || $0 == "E" }
                self = Number(n, domain: double ? .double : .exact).map { Typed.number($0) } ?? .other("number")
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
                guard let digits = text ?? number, let n = Number(digits, domain: tag == "$float" ? .float : .exact) else { return .other("number") }
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
                guard let other = Number(value) else { throw refuse("and \"\(value)\" is not a number (plain decimal text: digits, an optional fraction and exponent)") }
                return n.compare(literal: other)
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

    /// A number as stored or typed, compared by its exact value: no rounding, no digit or
    /// exponent limit (`Decimal` rounds below an exponent of about −128 and a `Double` beyond
    /// 17 digits, so neither is used). A stored `Double` (a plain number with a fraction or an
    /// exponent, as the binary format's doubles and JSON codecs' numbers are written) or
    /// `{"$float":…}` is the binary value the application reads, not its shortest text: see
    /// ``compare(literal:)``.
    struct Number {
        /// How the stored text is read.
        enum Domain { case exact, double, float }
        var text: String
        /// The value: the text's, or for a double or float the exact binary value's.
        var value: ExactDecimal
        var domain: Domain

        /// `nil` for text that is not plain decimal (`0x10`, `inf`, `1.`, `.5`), an exponent
        /// beyond ±10⁹, or in the `double`/`float` domain a value that is not finite there.
        /// - Parameters:
        ///   - text: The number's text.
        ///   - domain: `.exact` for a typed value, `$decimal`, `$uint` and plain integers.
        init?(_ text: String, domain: Domain = .exact) {
            guard let exact = ExactDecimal(text) else { return nil }
            self.text = text
            self.domain = domain
            switch domain {
            case .exact:
                value = exact
            case .double:
                guard let d = Double(text), d.isFinite else { return nil }
                value = ExactDecimal(d)
            case .float:
                guard let f = Float(text), f.isFinite else { return nil }
                value = ExactDecimal(Double(f))
            }
        }

        /// The order of two stored numbers (`--order`): their exact values.
        func compare(_ other: Number) -> ComparisonResult { value.compare(other.value) }

        /// The order of this stored number and a typed one (`--where`). Against a stored double
        /// a literal that is that binary type's shortest text of a value (`0.1`, what `query`
        /// shows) stands for that value, so `n=0.1` finds the double `0.1`; any other literal
        /// is compared with the double's exact value (`1.2345678901234568e-125` is not the
        /// double shown as `1.2345678901234567e-125`, though it rounds to it).
        func compare(literal: Number) -> ComparisonResult {
            switch domain {
            case .exact:
                break
            case .double:
                if let d = Double(literal.text), d.isFinite, ExactDecimal("\(d)") == literal.value {
                    return value.compare(ExactDecimal(d))
                }
            case .float:
                if let f = Float(literal.text), f.isFinite, ExactDecimal("\(f)") == literal.value {
                    return value.compare(ExactDecimal(Double(f)))
                }
            }
            return value.compare(literal.value)
        }
    }

    /// A decimal number held exactly: `0.digits × 10^exponent`, the digits without leading or
    /// trailing zeros (none: zero, never negative), so equal values are equal structures.
    struct ExactDecimal: Equatable {
        var negative: Bool
        var digits: [UInt8]
        var exponent: Int

        /// Plain decimal text, `[+-]digits[.digits][(e|E)[+-]digits]`; `nil` otherwise, or for
        /// an exponent beyond ±10⁹.
        init?(_ text: String) {
            let bytes = Array(text.utf8)
            let zero = UInt8(ascii: "0")
            var i = 0
            var negative = false
            if i < bytes.count, bytes[i] == UInt8(ascii: "-") || bytes[i] == UInt8(ascii: "+") { negative = bytes[i] == UInt8(ascii: "-"); i += 1 }
            func digits() -> ArraySlice<UInt8> {
                let start = i
                while i < bytes.count, (zero...UInt8(ascii: "9")).contains(bytes[i]) { i += 1 }
                return bytes[start..<i]
            }
            let whole = digits()
            guard !whole.isEmpty else { return nil }
            var fraction: ArraySlice<UInt8> = []
            if i < bytes.count, bytes[i] == UInt8(ascii: ".") { i += 1; fraction = digits(); guard !fraction.isEmpty else { return nil } }
            var power = 0
            if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
                i += 1
                var sign = 1
                if i < bytes.count, bytes[i] == UInt8(ascii: "-") || bytes[i] == UInt8(ascii: "+") { sign = bytes[i] == UInt8(ascii: "-") ? -1 : 1; i += 1 }
                let written = digits()
                let e = written.drop { $0 == zero }
                guard !written.isEmpty, e.count <= 9 else { return nil }
                power = sign * e.reduce(0) { $0 * 10 + Int($1 - zero) }
            }
            guard i == bytes.count else { return nil }
            let mantissa = Array(whole) + Array(fraction)
            let leading = mantissa.prefix { $0 == zero }.count
            let significant = mantissa.dropFirst(leading)
            let trailing = significant.reversed().prefix { $0 == zero }.count
            self.digits = significant.dropLast(trailing).map { $0 - zero }
            self.negative = negative && !self.digits.isEmpty
            self.exponent = self.digits.isEmpty ? 0 : whole.count - leading + power
        }

        /// A finite double's exact value (`m·2^e` has a finite decimal expansion: `m·5^−e / 10^−e`).
        init(_ d: Double) {
            precondition(d.isFinite)
            negative = d.sign == .minus && d != 0
            let bits = d.bitPattern
            let biased = Int((bits >> 52) & 0x7FF)
            let fraction = bits & ((1 << 52) - 1)
            let m = biased == 0 ? fraction : fraction | (1 << 52)
            let e = biased == 0 ? -1074 : biased - 1075
            guard m != 0 else { digits = []; exponent = 0; return }
            // Little-endian limbs of 10^9.
            var limbs: [UInt64] = [m % 1_000_000_000, m / 1_000_000_000 % 1_000_000_000, m / 1_000_000_000_000_000_000]
            func multiply(_ factor: UInt64) {
                var carry: UInt64 = 0
                for k in limbs.indices {
                    let product = limbs[k] * factor + carry
                    limbs[k] = product % 1_000_000_000
                    carry = product / 1_000_000_000
                }
                while carry > 0 { limbs.append(carry % 1_000_000_000); carry /= 1_000_000_000 }
            }
            var remaining = abs(e)
            if e >= 0 {
                while remaining > 0 { let step = min(remaining, 30); multiply(1 << UInt64(step)); remaining -= step }
            } else {
                while remaining > 0 { let step = min(remaining, 13); var f: UInt64 = 1; for _ in 0..<step { f *= 5 }; multiply(f); remaining -= step }
            }
            while limbs.count > 1, limbs.last == 0 { limbs.removeLast() }
            var text = String(limbs.last!)
            for limb in limbs.dropLast().reversed() {
                let part = String(limb)
                text += String(repeating: "0", count: 9 - part.count) + part
            }
            let all = text.utf8.map { $0 - UInt8(ascii: "0") }
            let trailing = all.reversed().prefix { $0 == 0 }.count
            digits = Array(all.dropLast(trailing))
            // N·10^e for e ≥ 0 (digits of N·2^e), else N·5^−e / 10^−e.
            exponent = all.count + (e >= 0 ? 0 : e)
        }

        func compare(_ other: ExactDecimal) -> ComparisonResult {
            func sign(_ x: ExactDecimal) -> Int { x.digits.isEmpty ? 0 : x.negative ? -1 : 1 }
            let a = sign(self), b = sign(other)
            if a != b { return a < b ? .orderedAscending : .orderedDescending }
            if a == 0 { return .orderedSame }
            var magnitude: ComparisonResult
            if exponent != other.exponent {
                magnitude = exponent < other.exponent ? .orderedAscending : .orderedDescending
            } else if digits == other.digits {
                magnitude = .orderedSame
            } else {
                magnitude = digits.lexicographicallyPrecedes(other.digits) ? .orderedAscending : .orderedDescending
            }
            if a < 0 {
                magnitude = magnitude == .orderedAscending ? .orderedDescending : magnitude == .orderedDescending ? .orderedAscending : .orderedSame
            }
            return magnitude
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
