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
/// static let ended = FieldEvent<Job, Date?>("ended", sets: \.end)
///
/// let repository = try EventSourcedRepository<Job>(
///     store: store, typeName: "Job", schema: EntitySchema().recording(Self.ended))
/// try await repository.apply(Self.ended, Date(), to: id)
/// ```
///
/// The event's type in the log is `"<typeName>.<name>"`; its payload is the value alone, written
/// by the codec of the event registered on the schema (whichever `FieldEvent` value a caller
/// passes). Folding it writes the property of the entity the projection holds and files the
/// entity under its new index keys, none of the domain's code running under the projection's
/// lock: the property must be a stored one (checked when the event is registered), the new
/// value's index keys are computed before the lock, and the repository refuses indexes that a
/// field event would leave stale (a computed property, or one stored in part of the field's
/// bytes: ``Misuse/Code/fieldEventIndexConflict``). Changing the property's type needs a new
/// event name or the codec form, whose decoder is told the schema version; a payload written at
/// a schema version newer than the schema's is refused (``EntitySchemaError``).
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

/// A field event registered on a schema, its value type erased: the one encoder of its payloads
/// (whichever `FieldEvent` value a caller passes) and the one decoder.
struct RegisteredFieldEvent<Entity: Sendable>: Sendable {
    let name: String
    let keyPath: any AnyKeyPath & Sendable
    /// The bytes of the entity the property is stored in.
    let storage: Range<Int>
    /// Appends the payload of a value (of the property's type).
    let encode: @Sendable (any Sendable, inout [UInt8]) throws -> Void
    /// Decodes a payload written at a schema version (outside every lock): the value, and the
    /// write that sets it.
    let decode: @Sendable ([UInt8], UInt16) throws -> (value: any Sendable, apply: @Sendable (inout Entity) -> Void)
}

/// A decoded field event, ready to fold: the write (a key path's store, built by the kernel,
/// never the domain's closure) and the components of the row's keys that the property feeds,
/// with their new values (computed outside every lock), so that folding under the lock runs
/// none of the domain's code.
struct FieldWrite<Entity: Sendable>: Sendable {
    struct Splice: Sendable {
        /// The key in ``IndexedRows/upsert(id:version:keys:)``'s layout.
        var key: Int
        /// The component of that key.
        var component: Int
        var value: IndexValue
    }
    let apply: @Sendable (inout Entity) -> Void
    let splices: [Splice]
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
        guard let offset = MemoryLayout<Entity>.offset(of: event.keyPath) else {
            preconditionFailure("the field event \"\(event.name)\" sets \(event.keyPath), which is not a stored property of \(Entity.self)")
        }
        var copy = self
        let keyPath = event.keyPath, encode = event.encode, decode = event.decode
        let version = self.version, readable = readableVersions, entity = String(describing: Entity.self)
        copy.fieldEvents[event.name] = RegisteredFieldEvent(
            name: event.name, keyPath: keyPath, storage: offset..<offset + MemoryLayout<Value>.size,
            encode: { value, bytes in
                // The property's type: a `FieldEvent` of this name sets this key path.
                try encode(value as! Value, &bytes)
            },
            decode: { payload, schemaVersion in
                // A payload from a newer build may mean something this build does not know.
                guard schemaVersion <= version else {
                    throw EntitySchemaError(entity: entity, found: schemaVersion, current: version, readable: readable)
                }
                let value = try payload.withUnsafeBytes { try decode($0, schemaVersion) }
                return (value, { $0[keyPath: keyPath] = value })
            })
        return copy
    }

    /// The names of the registered field events.
    public var fieldEventNames: [String] { fieldEvents.keys.sorted() }
}
