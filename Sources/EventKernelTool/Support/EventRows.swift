import Activities
import EventKernel
import EventLog
import Foundation

/// The rows of events that `history` and `tail` list, in every ``OutputFormat`` through one
/// ``Listing``: position, recording time (the log's nanoseconds, as export writes it), version,
/// event, activity id, and the activity's fields. Their JSON object is the export schema plus
/// `version` (so jsonl output imports back); CSV and the table are flat.
enum EventRows {
    static let columns: [Column] = [
        Column("position", right: true), Column("recordedAt", header: "recorded at"), Column("version", right: true),
        Column("event"), Column("id"),
        Column("type", inTable: false), Column("startDate", inTable: false), Column("endDate", inTable: false),
        Column("at", inTable: false),
        Column("details", inMachineFormats: false, tableNull: ""),
    ]

    /// An empty listing with the event columns.
    static var listing: Listing { Listing(columns: columns) }

    /// One activity event's row; `metadata` goes into its JSON object as export writes it.
    static func row(_ event: ActivityEvent, position: LogPosition, recordedAt: LogTimestamp, version: UInt64, metadata: EventMetadata = .none) -> Listing.Row {
        var model: ActivityModel?
        var at: Date?
        switch event {
        case .added(let m), .updated(let m): model = m
        case .ended(_, let date): at = date
        case .deleted: break
        }
        return Listing.Row([
            .uint(position), .string(ISODate.format(recordedAt)), .uint(version), .string(ActivityJSON.name(event)),
            .string(event.activityID.uuidString), .optional(model?.type.rawValue), .optional(model.map { ISODate.format($0.startDate) }),
            .optional(model?.endDate.map(ISODate.format)), .optional(at.map(ISODate.format)),
            .string(ActivityJSON.details(event)),
        ], object: .raw(ActivityJSON.event(event, position: position, recordedAt: recordedAt, version: version, metadata: metadata)))
    }

    /// The row of an event that is not an activity event (another entity's, or one that no longer
    /// decodes): its type name stands in the event column, its stream in the id column, its
    /// decoded data (or why it is not decoded) in the details; its object is its export line.
    static func row(other envelope: EventEnvelope) -> Listing.Row {
        let (line, payload) = EntityJSON.line(envelope)
        let details: String = switch payload {
        case .none: ""
        case .binary(let value), .json(_, let value): value.text
        case .bytes(let reason, _): "(\(envelope.payload.count) bytes, not decoded: \(reason))"
        }
        return Listing.Row([
            .uint(envelope.position), .string(ISODate.format(envelope.timestamp)), .uint(envelope.entityVersion),
            .string(envelope.eventType), .string(envelope.stream.description), .null, .null, .null, .null, .string(details),
        ], object: .raw(line))
    }
}
