/// The kind of an activity, such as sleep or tummy time.
///
/// The set of types is open: apps define their own with a string literal
/// (`let bath: ActivityType = "bath"`). A type encodes as a single string so
/// that stored events stay readable and forward compatible.
public struct ActivityType: RawRepresentable, Hashable, Sendable, Codable,
    ExpressibleByStringLiteral, CustomStringConvertible
{
    /// The type's name; two types are equal exactly when their names are.
    public var rawValue: String

    /// Creates a type with the given name.
    ///
    /// - Parameter rawValue: The name of the type.
    /// - Complexity: O(1)
    @inlinable
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Creates a type from a string literal.
    ///
    /// - Parameter value: The name of the type.
    /// - Complexity: O(1)
    @inlinable
    public init(stringLiteral value: String) { self.rawValue = value }

    /// Decodes a type from a single string value.
    ///
    /// - Parameter decoder: The decoder to read from.
    /// - Throws: `DecodingError` if the value is not a string.
    public init(from decoder: any Decoder) throws {
        self.rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    /// Encodes the type as a single string value.
    ///
    /// - Parameter encoder: The encoder to write to.
    /// - Throws: Any error the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    /// The type's name.
    public var description: String { rawValue }

    /// Sleep, both naps and the night.
    public static let sleep: ActivityType = "sleep"

    /// Supervised time on the tummy.
    public static let tummyTime: ActivityType = "Tummy time"
}
