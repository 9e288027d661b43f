import EventKernel

// Its own file, apart from EntityJSON, because the import fuzz target (scripts/fuzz.sh) compiles
// ActivityJSON with only the files it needs, and activity lines carry metadata too.
extension EventMetadata {
    /// `,"metadata":{"correlationID":…,"actor":…}` with the parts the event has; empty when it
    /// has none. The one rendering of an event's metadata, for entity and activity lines
    /// (``EntityJSON/metadata(_:)`` reads it back).
    var jsonField: String {
        var parts: [String] = []
        if let id = correlationID { parts.append("\"correlationID\":\(ActivityJSON.escape(id))") }
        if let actor { parts.append("\"actor\":\(ActivityJSON.escape(actor))") }
        return parts.isEmpty ? "" : ",\"metadata\":{" + parts.joined(separator: ",") + "}"
    }
}
