#if Viewer
/// What the viewer asks of a store. The `eventkernel` tool implements it over a store's log
/// (`StoreBrowser`), so this target holds only the web part: HTTP, pages and access.
///
/// Every method returns what one page shows, formatted for display; none writes. An unknown
/// type, stream or position throws ``ViewerError`` with ``ViewerError/Code/notFound``.
package protocol StoreBrowsing: Sendable {
    /// Counts, the events over time, the files and the last integrity check; `checking`: run
    /// the check again first (it reads the whole log, so only when asked).
    func overview(checking: Bool) async throws -> ViewerOverview
    /// One page of the streams of `type`, in id order, after `cursor`; those whose id contains
    /// `search` (case-insensitive) when it is given.
    func streams(ofType type: String, matching search: String?, after cursor: String?, limit: Int) async throws -> ViewerStreamList
    /// A stream's events as a timeline (one page of them, starting at version `fromVersion`)
    /// and its state at `moment`. `stringID`: the stream whose id is the text `id` even when
    /// that reads as a UUID (a type can hold both a UUID stream and a string stream of one text;
    /// otherwise the UUID one is meant).
    func entity(type: String, id: String, stringID: Bool, fromVersion: UInt64?, at moment: ViewerMoment?) async throws -> ViewerEntity
    /// The event at `position`: envelope, decoded payload, raw bytes.
    func event(at position: UInt64) async throws -> ViewerEvent
}

/// A moment to show an entity's state at.
package enum ViewerMoment: Sendable, Equatable {
    /// Right after the event that made this version of the stream.
    case version(UInt64)
    /// What the store knew at this recording time (the last event recorded at or before it).
    case recordedAt(String)
}

/// A count of something with a name.
package struct ViewerCount: Sendable, Equatable {
    package var name: String
    package var count: Int
    package init(name: String, count: Int) { self.name = name; self.count = count }
}

/// The overview page.
package struct ViewerOverview: Sendable {
    /// The store's directory, or its PostgreSQL log.
    package var store: String
    package var events: Int
    package var streams: Int
    /// The position the next event will get.
    package var nextPosition: UInt64
    /// The first and last recording times, formatted (`nil`: no event).
    package var firstRecordedAt: String?
    package var lastRecordedAt: String?
    /// Per entity type: its events and streams.
    package var types: [ViewerTypeSummary]
    /// Per event type (`Note.added`, `$purged`): its events.
    package var eventTypes: [ViewerCount]
    /// Events per period, oldest first, and the period's name (`day`, `month`).
    package var histogram: [ViewerCount]
    package var histogramPeriod: String
    /// The log's files (empty for a PostgreSQL log).
    package var segments: [ViewerFile]
    package var snapshots: [ViewerFile]
    /// The integrity check's result and when it ran.
    package var integrity: String

    package init(
        store: String, events: Int, streams: Int, nextPosition: UInt64, firstRecordedAt: String?, lastRecordedAt: String?,
        types: [ViewerTypeSummary], eventTypes: [ViewerCount], histogram: [ViewerCount], histogramPeriod: String,
        segments: [ViewerFile], snapshots: [ViewerFile], integrity: String
    ) {
        self.store = store
        self.events = events
        self.streams = streams
        self.nextPosition = nextPosition
        self.firstRecordedAt = firstRecordedAt
        self.lastRecordedAt = lastRecordedAt
        self.types = types
        self.eventTypes = eventTypes
        self.histogram = histogram
        self.histogramPeriod = histogramPeriod
        self.segments = segments
        self.snapshots = snapshots
        self.integrity = integrity
    }
}

/// An entity type's counts.
package struct ViewerTypeSummary: Sendable, Equatable {
    package var name: String
    package var events: Int
    package var streams: Int
    package init(name: String, events: Int, streams: Int) { self.name = name; self.events = events; self.streams = streams }
}

/// A file of the store: a segment or a snapshot.
package struct ViewerFile: Sendable, Equatable {
    package var name: String
    package var bytes: Int
    /// What else to say of it (`positions 0-41,999, sealed`; `through position 9,999`).
    package var detail: String
    package init(name: String, bytes: Int, detail: String) { self.name = name; self.bytes = bytes; self.detail = detail }
}

/// A page of the streams of one type.
package struct ViewerStreamList: Sendable {
    package var type: String
    package var search: String?
    /// How many streams of the type match (all pages).
    package var matching: Int
    package var streams: [ViewerStreamRow]
    /// The cursor of the next page (`nil`: this is the last).
    package var next: String?
    package init(type: String, search: String?, matching: Int, streams: [ViewerStreamRow], next: String?) {
        self.type = type
        self.search = search
        self.matching = matching
        self.streams = streams
        self.next = next
    }
}

/// One stream in a list.
package struct ViewerStreamRow: Sendable, Equatable {
    package var id: String
    /// Whether the id is a string whose text reads as a UUID (its link must say so).
    package var stringLookingLikeUUID: Bool = false
    package var version: UInt64
    package var events: Int
    package var lastEvent: String
    package var lastRecordedAt: String
    package init(id: String, version: UInt64, events: Int, lastEvent: String, lastRecordedAt: String) {
        self.id = id
        self.version = version
        self.events = events
        self.lastEvent = lastEvent
        self.lastRecordedAt = lastRecordedAt
    }
}

/// The entity page: a stream's timeline and its state at a moment.
package struct ViewerEntity: Sendable {
    package var type: String
    package var id: String
    /// The stream's last version, and its number of events.
    package var version: UInt64
    package var events: Int
    /// The first and last recording times of its events.
    package var firstRecordedAt: String
    package var lastRecordedAt: String
    /// One page of its events, oldest first.
    package var timeline: [ViewerTimelineEntry]
    /// The version the page before and after this one start at (`nil`: none).
    package var previousPage: UInt64?
    package var nextPage: UInt64?
    /// The state at the moment asked for (the last version's when none was).
    package var state: ViewerState
    package init(
        type: String, id: String, version: UInt64, events: Int, firstRecordedAt: String, lastRecordedAt: String,
        timeline: [ViewerTimelineEntry], previousPage: UInt64?, nextPage: UInt64?, state: ViewerState
    ) {
        self.type = type
        self.id = id
        self.version = version
        self.events = events
        self.firstRecordedAt = firstRecordedAt
        self.lastRecordedAt = lastRecordedAt
        self.timeline = timeline
        self.previousPage = previousPage
        self.nextPage = nextPage
        self.state = state
    }
}

/// One event of a stream's timeline.
package struct ViewerTimelineEntry: Sendable, Equatable {
    package var position: UInt64
    package var version: UInt64
    package var recordedAt: String
    package var event: String
    /// What changed, field by field (empty when nothing did, or when `note` says why not known).
    package var changes: [ViewerChange]
    /// Why the changes are not shown (an event the tool cannot fold), or `nil`.
    package var note: String?
    package init(position: UInt64, version: UInt64, recordedAt: String, event: String, changes: [ViewerChange], note: String?) {
        self.position = position
        self.version = version
        self.recordedAt = recordedAt
        self.event = event
        self.changes = changes
        self.note = note
    }
}

/// One field-level change.
package struct ViewerChange: Sendable, Equatable {
    /// Where (`owner.name`, `tags[1]`; empty: the entity itself).
    package var path: String
    /// `added`, `removed` or `changed`.
    package var kind: String
    package var from: String?
    package var to: String?
    package init(path: String, kind: String, from: String?, to: String?) {
        self.path = path
        self.kind = kind
        self.from = from
        self.to = to
    }
}

/// An entity's state at a moment.
package struct ViewerState: Sendable, Equatable {
    /// The moment, in words (`after version 3, recorded 2026-11-28T07:00:00Z`).
    package var moment: String
    /// The version the state is of (0: before the stream's first event).
    package var version: UInt64
    /// The state as indented JSON, or `nil` when there is none (`note` says why).
    package var json: String?
    package var note: String?
    package init(moment: String, version: UInt64, json: String?, note: String?) {
        self.moment = moment
        self.version = version
        self.json = json
        self.note = note
    }
}

/// The event page.
package struct ViewerEvent: Sendable, Equatable {
    package var position: UInt64
    package var recordedAt: String
    package var streamType: String
    package var streamID: String
    /// Whether the stream's id is a string whose text reads as a UUID (its link must say so).
    package var stringLookingLikeUUID: Bool = false
    package var version: UInt64
    package var event: String
    package var schemaVersion: Int
    /// Actor and correlation id, when the event has them.
    package var metadata: [ViewerField]
    /// How the payload was decoded (`binary`, `json`, `activity`, `none`, `bytes`).
    package var codec: String
    /// The decoded payload as indented JSON (`nil`: nothing decoded; `note` says why).
    package var payload: String?
    package var note: String?
    /// The payload's bytes as a hex dump (offset, 16 bytes, their ASCII), at most the first
    /// 64 KiB of them.
    package var hex: String
    package var byteCount: Int
    package init(
        position: UInt64, recordedAt: String, streamType: String, streamID: String, version: UInt64, event: String,
        schemaVersion: Int, metadata: [ViewerField], codec: String, payload: String?, note: String?, hex: String, byteCount: Int
    ) {
        self.position = position
        self.recordedAt = recordedAt
        self.streamType = streamType
        self.streamID = streamID
        self.version = version
        self.event = event
        self.schemaVersion = schemaVersion
        self.metadata = metadata
        self.codec = codec
        self.payload = payload
        self.note = note
        self.hex = hex
        self.byteCount = byteCount
    }
}

/// A named text value.
package struct ViewerField: Sendable, Equatable {
    package var name: String
    package var value: String
    package init(name: String, value: String) { self.name = name; self.value = value }
}
#endif
