import EventKernel

// Its own file, apart from EntityJSON, because the import fuzz target (scripts/fuzz.sh) compiles
// ActivityJSON with only the files it needs, and activity lines carry metadata too.
extension EventMetadata {
    /// Appends `,"metadata":{"correlationID":…,"actor":…}` to `buffer`, with the parts the event
    /// has; nothing when it has none. The one rendering of an event's metadata, for entity and
    /// activity lines (``EntityJSON/metadata(_:)`` reads it back).
    func writeJSONField(to buffer: inout JSONBuffer) {
        guard correlationID != nil || actor != nil else { return }
        buffer.appendRaw(",\"metadata\":{")
        if let correlationID {
            buffer.appendRaw("\"correlationID\":")
            buffer.appendString(correlationID)
        }
        if let actor {
            if correlationID != nil { buffer.appendByte(0x2C) }
            buffer.appendRaw("\"actor\":")
            buffer.appendString(actor)
        }
        buffer.appendByte(0x7D)
    }
}
