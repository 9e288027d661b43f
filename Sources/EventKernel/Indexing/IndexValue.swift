public import Foundation

/// One component of an index key: the value of an indexed property, in a form the kernel can
/// order without running domain code.
///
/// Values of one property are always the same case (a property has one Swift type), except
/// ``null`` for `nil`, which sorts first. Numbers order numerically, strings by their UTF-8
/// bytes (as ``EntityID`` compares), UUIDs by their bytes, dates by time. NaN (every NaN, any
/// sign or payload) equals NaN and sorts after +infinity, as index keys' encodings order it.
public enum IndexValue: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// `nil`: sorts before every other value.
    case null
    /// A Boolean: `false` before `true`.
    case bool(Bool)
    /// A signed integer (any `BinaryInteger` that fits in 64 bits).
    case int(Int64)
    /// An unsigned integer that does not fit `Int64`.
    case uint(UInt64)
    /// A floating-point number, or a date as seconds since 2001-01-01.
    case double(Double)
    /// A string, ordered by its UTF-8 bytes.
    case string(String)
    /// A UUID, ordered by its bytes.
    case uuid(UUID)

    @usableFromInline
    var rank: Int {
        switch self {
        case .null: 0
        case .bool: 1
        case .int, .uint, .double: 2
        case .string: 3
        case .uuid: 4
        }
    }

    /// Orders values as described on the type.
    public static func < (lhs: IndexValue, rhs: IndexValue) -> Bool {
        compare(lhs, rhs) < 0
    }

    public static func == (lhs: IndexValue, rhs: IndexValue) -> Bool {
        compare(lhs, rhs) == 0
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0 as UInt8)
        case .bool(let b): hasher.combine(b)
        // Numbers equal across cases hash alike.
        case .int(let i): hasher.combine(Double(i))
        case .uint(let u): hasher.combine(Double(u))
        // Every NaN equals every other, so all hash as one.
        case .double(let d): hasher.combine(d.isNaN ? .nan : d)
        case .string(let s): hasher.combine(s)
        case .uuid(let u): hasher.combine(u)
        }
    }

    /// -1, 0 or 1 as `lhs` sorts before, with or after `rhs`.
    @inlinable
    public static func compare(_ lhs: IndexValue, _ rhs: IndexValue) -> Int {
        switch (lhs, rhs) {
        case (.double(let a), .double(let b)):
            // NaN as the encoding orders it (one NaN, after +infinity): "greater both ways" made
            // whole keys inconsistently ordered, and a removal by binary search missed its entry.
            if a.isNaN || b.isNaN { return a.isNaN == b.isNaN ? 0 : (a.isNaN ? 1 : -1) }
            return a < b ? -1 : (a == b ? 0 : 1)
        case (.int(let a), .int(let b)): return a < b ? -1 : (a == b ? 0 : 1)
        case (.uuid(let a), .uuid(let b)): return compareBytes(a, b)
        case (.string(let a), .string(let b)):
            // By bytes, as documented (and as index keys' encodings order them): `==` would
            // call canonically equivalent strings equal, which then order apart from a third.
            if a.utf8.elementsEqual(b.utf8) { return 0 }
            return a.utf8.lexicographicallyPrecedes(b.utf8) ? -1 : 1
        case (.bool(let a), .bool(let b)): return a == b ? 0 : (!a ? -1 : 1)
        case (.uint(let a), .uint(let b)): return a < b ? -1 : (a == b ? 0 : 1)
        case (.null, .null): return 0
        default:
            let (ra, rb) = (lhs.rank, rhs.rank)
            if ra != rb { return ra < rb ? -1 : 1 }
            return compareNumbers(lhs, rhs)
        }
    }

    /// Numbers of different cases (a property typed `Int` compared with a literal bound typed
    /// `Double` never happens through the typed API, but a mixed comparison must still be a
    /// total order).
    ///
    /// Compared exactly, not through `Double`: beyond 2^53 converting an integer rounds it, so
    /// `2^53 + 1` and `2^53` would both equal the double `2^53` while differing from each
    /// other, and a sort or a merge relying on transitivity would misplace them. NaN sorts after
    /// every integer, as in the `.double` case.
    @usableFromInline
    static func compareNumbers(_ lhs: IndexValue, _ rhs: IndexValue) -> Int {
        switch (lhs, rhs) {
        case (.int(let a), .uint(let b)): return a < 0 || UInt64(a) < b ? -1 : (UInt64(a) == b ? 0 : 1)
        case (.uint, .int): return -compareNumbers(rhs, lhs)
        case (.int(let a), .double(let d)): return d.isNaN ? -1 : compare(integer: a, d)
        case (.uint(let a), .double(let d)): return d.isNaN ? -1 : compare(integer: a, d)
        case (.double(let d), .int(let a)): return d.isNaN ? 1 : -compare(integer: a, d)
        case (.double(let d), .uint(let a)): return d.isNaN ? 1 : -compare(integer: a, d)
        default:
            let (a, b) = (lhs.doubleValue, rhs.doubleValue)
            return a < b ? -1 : (a == b ? 0 : 1)
        }
    }

    /// `a` against a double that is not NaN, exactly: the double's integral part is compared
    /// as an integer when it fits the integer's type, its fraction breaks a tie.
    @usableFromInline
    static func compare<I: FixedWidthInteger>(integer a: I, _ d: Double) -> Int {
        // Both bounds are powers of two (or zero), so exact as doubles: I.max + 1 and I.min.
        let upper = Double(sign: .plus, exponent: I.bitWidth - (I.isSigned ? 1 : 0), significand: 1)
        let lower = I.isSigned ? -upper : 0
        if d >= upper { return -1 }
        if d < lower { return 1 }
        let whole = d.rounded(.towardZero)
        let integral = I(whole)
        if a != integral { return a < integral ? -1 : 1 }
        let fraction = d - whole
        return fraction > 0 ? -1 : (fraction < 0 ? 1 : 0)
    }

    @usableFromInline
    var doubleValue: Double {
        switch self {
        case .int(let i): Double(i)
        case .uint(let u): Double(u)
        case .double(let d): d
        default: .nan
        }
    }

    @inlinable
    static func compareBytes(_ a: UUID, _ b: UUID) -> Int {
        let (ah, al) = words(a), (bh, bl) = words(b)
        if ah != bh { return ah < bh ? -1 : 1 }
        return al < bl ? -1 : (al == bl ? 0 : 1)
    }

    @inlinable
    static func words(_ id: UUID) -> (UInt64, UInt64) {
        withUnsafeBytes(of: id.uuid) { raw in
            (UInt64(bigEndian: raw.loadUnaligned(as: UInt64.self)),
             UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        }
    }

    public var description: String {
        switch self {
        case .null: "nil"
        case .bool(let b): String(b)
        case .int(let i): String(i)
        case .uint(let u): String(u)
        case .double(let d): String(d)
        case .string(let s): String(reflecting: s)
        case .uuid(let u): u.uuidString
        }
    }
}

/// A property type that can be indexed and queried: the kernel turns its values into
/// ``IndexValue``s and orders them.
///
/// Conforming: `Bool`, the standard integer types, `Double`, `Float`, `String`, `UUID`, `Date`,
/// `Optional` of any of these, and every `RawRepresentable` whose raw value conforms (declare
/// `extension Category: IndexValueConvertible {}` for a string enum).
public protocol IndexValueConvertible: Sendable {
    /// This value as an index key component.
    var indexValue: IndexValue { get }
}

extension Bool: IndexValueConvertible {
    public var indexValue: IndexValue { .bool(self) }
}

extension Int: IndexValueConvertible {
    public var indexValue: IndexValue { .int(Int64(self)) }
}

extension Int64: IndexValueConvertible {
    public var indexValue: IndexValue { .int(self) }
}

extension Int32: IndexValueConvertible {
    public var indexValue: IndexValue { .int(Int64(self)) }
}

extension Int16: IndexValueConvertible {
    public var indexValue: IndexValue { .int(Int64(self)) }
}

extension Int8: IndexValueConvertible {
    public var indexValue: IndexValue { .int(Int64(self)) }
}

extension UInt: IndexValueConvertible {
    public var indexValue: IndexValue { UInt64(self).indexValue }
}

extension UInt64: IndexValueConvertible {
    public var indexValue: IndexValue { self <= UInt64(Int64.max) ? .int(Int64(self)) : .uint(self) }
}

extension UInt32: IndexValueConvertible {
    public var indexValue: IndexValue { .int(Int64(self)) }
}

extension UInt16: IndexValueConvertible {
    public var indexValue: IndexValue { .int(Int64(self)) }
}

extension UInt8: IndexValueConvertible {
    public var indexValue: IndexValue { .int(Int64(self)) }
}

extension Double: IndexValueConvertible {
    public var indexValue: IndexValue { .double(self) }
}

extension Float: IndexValueConvertible {
    public var indexValue: IndexValue { .double(Double(self)) }
}

extension String: IndexValueConvertible {
    public var indexValue: IndexValue { .string(self) }
}

extension UUID: IndexValueConvertible {
    public var indexValue: IndexValue { .uuid(self) }
}

extension Date: IndexValueConvertible {
    /// Seconds since 2001-01-01, so dates order by time.
    public var indexValue: IndexValue { .double(timeIntervalSinceReferenceDate) }
}

extension Optional: IndexValueConvertible where Wrapped: IndexValueConvertible {
    /// The wrapped value's, or ``IndexValue/null``.
    public var indexValue: IndexValue { self?.indexValue ?? .null }
}

extension IndexValueConvertible where Self: RawRepresentable, RawValue: IndexValueConvertible {
    /// The raw value's.
    public var indexValue: IndexValue { rawValue.indexValue }
}
