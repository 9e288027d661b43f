import KernelPrimitives

/// A domain event that sets one stored property of an existing entity, beside the repository's
/// `added`, `updated` and `deleted`: an activity's `ended` sets its end date, a ticket's
/// `assigned` its assignee. The log then says what happened in the domain's words, and the event
/// carries the one value rather than the whole entity.
///
/// Declare it once, register it on the repository's schema, and append it with
/// ``EventSourcedRepository/apply(_:_:to:expectedVersion:)``:
///
/// ```swift
/// static let ended = FieldEvent<Activity, Date?>("ended", sets: \.endDate)
///
/// let repository = try EventSourcedRepository<Activity>(
///     store: store, typeName: "activity", schema: EntitySchema().recording(Self.ended))
/// try await repository.apply(Self.ended, Date(), to: id)
/// ```
///
/// The event's type in the log is `"<typeName>.<name>"`; its payload is the value alone. Folding
/// it writes the property of the entity the projection holds and files the entity under its new
/// index keys: the property must be a stored one (checked when the event is registered), so that
/// the write runs no code of the domain's; the declared indexes' properties are read again
/// for the new keys, as for any other change.
public struct FieldEvent<Entity: Sendable, Value: Sendable>: Sendable {
    /// The event's name: its type in the log is `"<typeName>.<name>"`.
    public let name: String
    /// The property the event sets.
    public let keyPath: any WritableKeyPath<Entity, Value> & Sendable
    let encode: @Sendable (Value, inout [UInt8]) throws -> Void
    let decode: @Sendable (UnsafeRawBufferPointer, UInt16) throws -> Value

    /// A field event whose payload a codec of the domain's writes and reads (an existing log's
    /// format, say).
    /// - Parameters:
    ///   - name: The event's name (`added`, `updated` and `deleted` are the repository's own).
    ///   - keyPath: The stored property the event sets.
    ///   - encode: Appends the value's payload to the bytes.
    ///   - decode: Reads a payload written at a schema version (the second argument).
    public init(
        _ name: String, sets keyPath: any WritableKeyPath<Entity, Value> & Sendable,
        encode: @escaping @Sendable (Value, inout [UInt8]) throws -> Void,
        decode: @escaping @Sendable (UnsafeRawBufferPointer, UInt16) throws -> Value
    ) {
        self.name = name
        self.keyPath = keyPath
        self.encode = encode
        self.decode = decode
    }
}

extension FieldEvent where Value: Codable {
    /// A field event whose payload is the value in the binary entity format, as a keyed
    /// container with one field, `value` (so that tools decode it without the domain's code).
    /// - Parameters:
    ///   - name: The event's name (`added`, `updated` and `deleted` are the repository's own).
    ///   - keyPath: The stored property the event sets.
    public init(_ name: String, sets keyPath: any WritableKeyPath<Entity, Value> & Sendable) {
        self.init(name, sets: keyPath, encode: { value, bytes in
            bytes += try BinaryEntityEncoder().encode(FieldEventPayload(value: value))
        }, decode: { payload, _ in
            try BinaryEntityDecoder().decode(FieldEventPayload<Value>.self, from: Array(payload)).value
        })
    }
}

/// The payload of a `Codable` field event.
private struct FieldEventPayload<Value: Codable>: Codable {
    var value: Value
}

/// A field event registered on a schema, its value type erased: decoding a payload gives the
/// write that folding applies.
struct RegisteredFieldEvent<Entity: Sendable>: Sendable {
    let name: String
    let keyPath: any AnyKeyPath & Sendable
    /// Decodes a payload (outside every lock) into the write of its value.
    let decode: @Sendable ([UInt8], UInt16) throws -> FieldWrite<Entity>
}

/// A decoded field event: sets the property to the value. Built by the kernel around a key path
/// (never the domain's closure), so it may run under the projection's lock.
struct FieldWrite<Entity: Sendable>: Sendable {
    let apply: @Sendable (inout Entity) -> Void
}

extension EntitySchema {
    /// This schema with `event` registered: the repository can append it and its projection
    /// folds it.
    ///
    /// - Parameter event: The field event. Its name must be new to the schema and not
    ///   `added`, `updated` or `deleted`; its property must be stored (a computed property's
    ///   setter would run the domain's code under the projection's lock).
    /// - Returns: The schema with the event.
    public func recording<Value>(_ event: FieldEvent<Entity, Value>) -> Self {
        precondition(!["added", "updated", "deleted"].contains(event.name),
                     "\"\(event.name)\" is a repository's own event; a field event needs another name")
        precondition(!event.name.isEmpty && !event.name.contains("."), "a field event's name is one word without dots: \"\(event.name)\"")
        precondition(fieldEvents[event.name] == nil, "the field event \"\(event.name)\" is registered twice")
        precondition(MemoryLayout<Entity>.offset(of: event.keyPath) != nil,
                     "the field event \"\(event.name)\" sets \(event.keyPath), which is not a stored property of \(Entity.self)")
        var copy = self
        let keyPath = event.keyPath, decode = event.decode
        copy.fieldEvents[event.name] = RegisteredFieldEvent(name: event.name, keyPath: keyPath) { payload, schemaVersion in
            let value = try payload.withUnsafeBytes { try decode($0, schemaVersion) }
            return FieldWrite { $0[keyPath: keyPath] = value }
        }
        return copy
    }

    /// The names of the registered field events.
    public var fieldEventNames: [String] { fieldEvents.keys.sorted() }
}
