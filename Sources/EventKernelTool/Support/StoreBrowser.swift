#if Viewer
import Activities
import EventKernel
import EventKernelViewer
import EventLog
import Foundation
import KernelPrimitives

/// What `eventkernel serve` shows (`StoreBrowsing`), read from a store's log without the
/// application's code: events decoded as `export` and `history` decode them (EntityJSON,
/// StreamHistory; activities by their codec).
///
/// It keeps a catalog of the log, built by one pass when it starts and extended by each page
/// from where it stopped (a read-only log `refresh`es first, so the pages follow a live
/// writer): per entity type its counts, per stream the positions of its events, per day the
/// events recorded. A page then reads only the events it shows, by position (a stream's
/// events; one event), never the whole log. The catalog holds 8 bytes per event and one entry
/// per stream.
actor StoreBrowser: StoreBrowsing {
    private let log: any SharedRecordLog
    /// The store's directory (`nil`: a PostgreSQL log, which has no files to list).
    private let directory: URL?
    private let name: String
    /// The integrity check's result, and its time (`SegmentedLog.verify` when the viewer
    /// started; a PostgreSQL log checks its records' checksums as they are read).
    private var integrity: String

    /// What the catalog keeps of a stream. Most streams of most stores are short (an activity
    /// has one to three events), so the first position is kept inline and only the others in an
    /// array (an empty array allocates nothing): at 1,000,000 activities that halved the
    /// catalog.
    fileprivate struct Stream {
        var first: LogPosition
        var rest: [LogPosition] = []
        var version: UInt64 = 0
        var lastEvent = ""
        var last = LogTimestamp(nanosecondsSince1970: 0)

        init(first: LogPosition) { self.first = first }

        var count: Int { 1 + rest.count }
        var positions: [LogPosition] { [first] + rest }
    }

    private struct TypeCounts {
        var events = 0
        var streams: [EntityID: Stream] = [:]
        /// The streams' ids in page order (``pageOrder``), rebuilt after a stream is added.
        var sorted: [EntityID]?
    }

    /// Everything the catalog folds from the log, in one value: forgetting it is
    /// `catalog = Catalog()`, so that a field added later cannot be left out of a reset.
    private struct Catalog {
        /// The position after the last event read.
        var next: LogPosition = 0
        var types: [String: TypeCounts] = [:]
        var eventTypes: [String: Int] = [:]
        /// Events per hour (hours since 1970, UTC), and per minute while the log spans few
        /// enough of them to keep (`nil` past 10,000 minutes): the chart's periods.
        var hours: [Int: Int] = [:]
        var minutes: [Int: Int]? = [:]
        var events = 0
        var first: LogTimestamp?
        var last: LogTimestamp?

        mutating func record(_ envelope: EventEnvelope) {
            let type = envelope.stream.entityType
            types[type, default: TypeCounts()].events += 1
            // In place: a copy out of the dictionary and back would copy `rest` on every append.
            types[type]!.streams[envelope.entityID, default: Stream(first: envelope.position)].record(envelope)
            if types[type]!.streams[envelope.entityID]!.count == 1 { types[type]!.sorted = nil }
            eventTypes[envelope.eventType, default: 0] += 1
            let minute = StoreBrowser.floorDivide(envelope.timestamp.nanosecondsSince1970, 60_000_000_000)
            hours[StoreBrowser.floorDivide(Int64(minute), 60), default: 0] += 1
            if minutes != nil {
                minutes![minute, default: 0] += 1
                if minutes!.count > 10_000 { minutes = nil }
            }
            events += 1
            if first == nil { first = envelope.timestamp }
            last = envelope.timestamp
            next = envelope.position + 1
        }
    }

    private var catalog = Catalog()

    /// - Parameters:
    ///   - log: The store's log, opened read-only (or a PostgreSQL log).
    ///   - directory: The store's directory, for its files; `nil` for a PostgreSQL log.
    ///   - name: What the pages call the store.
    ///   - integrity: The integrity check's result, to show on the overview.
    init(log: any SharedRecordLog, directory: URL?, name: String, integrity: String) {
        self.log = log
        self.directory = directory
        self.name = name
        self.integrity = integrity
    }

    /// The history epoch the catalog was read in (a `repair` advances it).
    private var epoch: UInt64?
    /// Reads what was appended since the last call into the catalog; reads the log again from
    /// its start when it was cut since (a `repair`: a new history epoch, or fewer positions) or
    /// a segment it read was rewritten (a compaction: `SegmentedLog.segmentReplacements`), since what the catalog
    /// holds from then may name events that are gone, or positions that now hold others.
    /// - Throws: ``ViewerError`` with ``ViewerError/Code/storage`` for damage or a failed read.
    func catchUp() throws(ViewerError) {
        do {
            let replacementsBefore = (log as? SegmentedLog)?.segmentReplacements
            let end = try log.refresh().nextPosition
            let rewritten = replacementsBefore != (log as? SegmentedLog)?.segmentReplacements
            if rewritten || epoch.map({ $0 != log.historyEpoch || end < catalog.next }) == true { catalog = Catalog() }
            epoch = log.historyEpoch
            guard catalog.next < end else { return }
            try log.forEachRecord(from: catalog.next, through: end - 1) { view in
                catalog.record(try EventEnvelope(view))
                return true
            }
            catalog.next = end
            damagedAt = nil
        } catch let error as LogError where error.code == .corruption {
            // A damaged log is what an audit looks at: the catalog holds what comes before the
            // damage (each page tries again from there), and the overview says where it is.
            damagedAt = error
        } catch {
            throw ViewerError(.storage, "reading \(name) from position \(catalog.next)", underlying: error)
        }
    }

    /// The damage that stopped the last ``catchUp()``, if it did: the catalog ends before it.
    private(set) var damagedAt: LogError?

    /// The segments as the last integrity check listed them.
    private var segments: [ViewerFile] = []
    /// What the last check said of each snapshot file, by name (decoded, checksums checked).
    private var checkedSnapshots: [String: String] = [:]

    /// Checks the log (`SegmentedLog.verify`: every record's checksum, the segments' chain) and
    /// keeps its result and segment list for the overview. A PostgreSQL log has no files: its
    /// records are checked as they are read.
    func check() {
        guard let directory else { return }
        let checked = ISODate.format(Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down)))
        do {
            let report = try SegmentedLog.verify(at: directory, acknowledgedElsewhere: StoreLocation.acknowledgedPositions(directory))
            segments = report.segments.map { s in
                let range = s.nextPosition > s.basePosition ? "positions \(Output.count(Int(s.basePosition)))–\(Output.count(Int(s.nextPosition - 1)))" : "empty"
                return ViewerFile(name: (s.file as NSString).lastPathComponent, bytes: Int(s.fileBytes),
                                  detail: "\(range), \(Output.count(Int(s.records))) events, \(s.sealed ? "sealed" : "active")")
            }
            let snapshots = StoreCheck.inspectSnapshots(directory, decodeState: false)
            checkedSnapshots = [:]
            for s in snapshots {
                var detail = s.projection.map { "\($0), " } ?? ""
                detail += s.nextPosition.map { $0 > 0 ? "through position \(Output.count(Int($0 - 1)))" : "empty log" } ?? "position unknown"
                if let error = s.error { detail += "; DAMAGED: \(error)" }
                checkedSnapshots[(s.file as NSString).lastPathComponent] = detail
            }
            let damagedSnapshots = snapshots.filter { $0.error != nil }.count
            if !report.isIntact {
                integrity = "DAMAGED: \(report.problems.first.map { "\($0)" } ?? "see `eventkernel verify`") (checked \(checked)); the pages show the events before the first damaged batch"
            } else if damagedSnapshots > 0 {
                integrity = "the log has no damage; \(damagedSnapshots) snapshot file\(damagedSnapshots == 1 ? " does" : "s do") not decode (an open replays instead; checked \(checked))"
            } else {
                integrity = "no damage found (checked \(checked))"
            }
        } catch {
            integrity = "the check failed: \(error) (\(checked))"
        }
    }

    func overview(checking: Bool) async throws -> ViewerOverview {
        try catchUp()
        if checking { check() }
        // The files there now (a writer adds and prunes snapshots), each with what the last
        // check said of it, else the position its name holds: no file is read for a page.
        var snapshots: [ViewerFile] = []
        if let directory {
            let folder = directory.appending(path: "snapshots")
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [])
                .filter { $0.hasSuffix(".snap") && !$0.hasPrefix(".") }.sorted()
            for name in names {
                let attributes = try? FileManager.default.attributesOfItem(atPath: folder.appending(path: name).path)
                let position = UInt64(name.prefix { $0.isNumber })
                let detail = checkedSnapshots[name]
                    ?? (position.map { $0 > 0 ? "through position \(Output.count(Int($0 - 1))), not checked yet" : "empty log, not checked yet" } ?? "not checked yet")
                snapshots.append(ViewerFile(name: name, bytes: (attributes?[.size] as? Int) ?? 0, detail: detail))
            }
        }
        let (histogram, period) = histogram()
        return ViewerOverview(
            store: name, events: catalog.events, streams: catalog.types.values.reduce(0) { $0 + $1.streams.count }, nextPosition: catalog.next,
            firstRecordedAt: catalog.first.map(ISODate.format), lastRecordedAt: catalog.last.map(ISODate.format),
            types: catalog.types.keys.sorted().map { ViewerTypeSummary(name: $0, events: catalog.types[$0]!.events, streams: catalog.types[$0]!.streams.count) },
            eventTypes: catalog.eventTypes.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.map { ViewerCount(name: $0.key, count: $0.value) },
            histogram: histogram, histogramPeriod: period, segments: segments, snapshots: snapshots, integrity: integrity)
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> Int {
        Int(a >= 0 ? a / b : (a + 1) / b - 1)
    }

    /// Events per period over the recorded span: the finest of minute, hour, day and month that
    /// needs at most 120 bars; every period in the span, empty ones too, so the bars' spacing is
    /// time.
    private func histogram() -> ([ViewerCount], String) {
        let (hours, minutes) = (catalog.hours, catalog.minutes)
        guard let low = hours.keys.min(), let high = hours.keys.max() else { return ([], "day") }
        func name(_ hour: Int, _ length: Int) -> String {
            String(ISODate.format(LogTimestamp(nanosecondsSince1970: Int64(hour) * 3_600_000_000_000)).prefix(length))
        }
        if let minutes, let a = minutes.keys.min(), let b = minutes.keys.max(), b - a < 120 {
            return ((a...b).map { m in
                ViewerCount(name: String(ISODate.format(LogTimestamp(nanosecondsSince1970: Int64(m) * 60_000_000_000)).prefix(16)),
                            count: minutes[m] ?? 0)
            }, "minute")
        }
        if high - low < 120 { return ((low...high).map { h in ViewerCount(name: name(h, 13) + "h", count: hours[h] ?? 0) }, "hour") }
        var days: [Int: Int] = [:]
        for (hour, count) in hours { days[Self.floorDivide(Int64(hour), 24), default: 0] += count }
        let (dayLow, dayHigh) = (Self.floorDivide(Int64(low), 24), Self.floorDivide(Int64(high), 24))
        if dayHigh - dayLow < 120 { return ((dayLow...dayHigh).map { d in ViewerCount(name: name(d * 24, 10), count: days[d] ?? 0) }, "day") }
        var months: [Int: Int] = [:]
        for (day, count) in days { months[Self.month(of: day), default: 0] += count }
        let (a, b) = (Self.month(of: dayLow), Self.month(of: dayHigh))
        return ((a...b).map { m in ViewerCount(name: String(format: "%04d-%02d", m / 12, m % 12 + 1), count: months[m] ?? 0) }, "month")
    }

    private static func month(of day: Int) -> Int {
        let (y, m, _) = ISODate.civilFromDays(day)
        return y * 12 + (m - 1)
    }

    func streams(ofType type: String, matching search: String?, after cursor: String?, limit: Int) async throws -> ViewerStreamList {
        try catchUp()
        guard catalog.types[type] != nil else { throw unknownType(type) }
        if catalog.types[type]!.sorted == nil { catalog.types[type]!.sorted = catalog.types[type]!.streams.keys.sorted(by: Self.pageOrder) }
        let counts = catalog.types[type]!
        let sorted = counts.sorted!
        // The first stream after the cursor: a binary search by the same order.
        var low = 0
        if let cursor {
            let after = Self.id(fromCursor: cursor)
            var high = sorted.count
            while low < high {
                let middle = (low + high) / 2
                if !Self.pageOrder(after, sorted[middle]) { low = middle + 1 } else { high = middle }
            }
        }
        // The limit + 1 first matches after the cursor (one more says there is a next page), and
        // with a search, every match counted: one pass over the ids' bytes, case folded, with no
        // string made per id (a UUID is spelled into one reused buffer).
        let needle = search.map { Array($0.utf8).map(Self.folded) }
        var page: [EntityID] = []
        var more = false
        var matching = needle == nil ? sorted.count : 0
        var spelled = [UInt8](repeating: 0, count: 36)
        for (i, id) in sorted.enumerated() {
            if let needle {
                guard Self.contains(id, needle, buffer: &spelled) else { continue }
                matching += 1
            }
            guard i >= low else { continue }
            if page.count < limit { page.append(id) } else {
                more = true
                if needle == nil { break }
            }
        }
        let rows = page.map { id in
            let s = counts.streams[id]!
            var row = ViewerStreamRow(id: id.description, version: s.version, events: s.count, lastEvent: s.lastEvent,
                                      lastRecordedAt: ISODate.format(s.last))
            if case .string(let text) = id, UUID(uuidString: text) != nil { row.stringLookingLikeUUID = true }
            return row
        }
        return ViewerStreamList(type: type, search: search, matching: matching, streams: rows,
                                next: more ? page.last.map(Self.cursor) : nil)
    }

    /// The order streams are listed in: by the id's text, a UUID stream before a string stream
    /// of the same text. Two UUIDs compare by their bytes, which orders them as their upper-case
    /// text does (hex digits in ASCII order, the dashes in the same places), making no string.
    static func pageOrder(_ a: EntityID, _ b: EntityID) -> Bool {
        switch (a, b) {
        case (.uuid(let x), .uuid(let y)):
            return withUnsafeBytes(of: x.uuid) { p in withUnsafeBytes(of: y.uuid) { q in p.lexicographicallyPrecedes(q) } }
        case (.string(let x), .string(let y)):
            return x.utf8.lexicographicallyPrecedes(y.utf8)
        case (.uuid, .string(let y)):
            let x = a.description
            return x == y || x.utf8.lexicographicallyPrecedes(y.utf8)
        case (.string(let x), .uuid):
            let y = b.description
            return x != y && x.utf8.lexicographicallyPrecedes(y.utf8)
        }
    }

    /// A page's cursor: the last id shown, and its kind (`u:` or `s:`).
    private static func cursor(_ id: EntityID) -> String {
        if case .uuid = id { return "u:" + id.description }
        return "s:" + id.description
    }

    private static func id(fromCursor cursor: String) -> EntityID {
        if cursor.hasPrefix("u:"), let uuid = UUID(uuidString: String(cursor.dropFirst(2))) { return .uuid(uuid) }
        return .string(cursor.hasPrefix("s:") ? String(cursor.dropFirst(2)) : cursor)
    }

    /// ASCII letters in lower case; every other byte as it is.
    private static func folded(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }

    /// Whether `id`'s text contains `needle` (folded), ASCII letters compared without case.
    private static func contains(_ id: EntityID, _ needle: [UInt8], buffer: inout [UInt8]) -> Bool {
        switch id {
        case .uuid(let uuid):
            let digits: [UInt8] = Array("0123456789abcdef".utf8)
            withUnsafeBytes(of: uuid.uuid) { bytes in
                var o = 0
                for (k, byte) in bytes.enumerated() {
                    if k == 4 || k == 6 || k == 8 || k == 10 { buffer[o] = 0x2D; o += 1 }
                    buffer[o] = digits[Int(byte >> 4)]
                    buffer[o + 1] = digits[Int(byte & 15)]
                    o += 2
                }
            }
            return buffer.withUnsafeBufferPointer { occurs(needle, in: $0) }
        case .string(let text):
            var text = text
            return text.withUTF8 { occurs(needle, in: $0) }
        }
    }

    /// Whether `needle` (folded) occurs in `haystack`, each of its bytes folded as compared.
    private static func occurs(_ needle: [UInt8], in haystack: UnsafeBufferPointer<UInt8>) -> Bool {
        guard !needle.isEmpty else { return true }
        guard haystack.count >= needle.count else { return false }
        outer: for start in 0...(haystack.count - needle.count) {
            for k in 0..<needle.count where folded(haystack[start + k]) != needle[k] { continue outer }
            return true
        }
        return false
    }

    func entity(type: String, id: String, stringID: Bool, fromVersion: UInt64?, at moment: ViewerMoment?) async throws -> ViewerEntity {
        try catchUp()
        guard let counts = catalog.types[type] else { throw unknownType(type) }
        // The id as typed, and as a UUID when it reads as one (the UUID stream first, as history)
        // unless the string stream is asked for.
        let candidates: [EntityID] = stringID ? [.string(id)] : UUID(uuidString: id).map { [.uuid($0), .string(id)] } ?? [.string(id)]
        guard let entityID = candidates.first(where: { counts.streams[$0] != nil }), var stream = counts.streams[entityID] else {
            throw ViewerError(.notFound, "no stream \(type) \(id) in \(name)")
        }
        var envelopes = try read(stream.positions)
        if !Self.areAll(envelopes, of: type, entityID, at: stream.positions) {
            // Events the catalog lists are gone (a compaction removed them while the viewer
            // ran): read the log again, then answer from what it holds now.
            catalog = Catalog()
            try catchUp()
            guard let current = catalog.types[type]?.streams[entityID] else { throw ViewerError(.notFound, "no stream \(type) \(id) in \(name)") }
            stream = current
            envelopes = try read(stream.positions)
            guard Self.areAll(envelopes, of: type, entityID, at: stream.positions) else {
                throw ViewerError(.storage, "the events of \(type) \(id) in \(name) changed while they were read (a compaction or repair at work?); load the page again")
            }
        }
        let entries = type == ActivityEventCodec.entityType ? activityEntries(envelopes) : StreamHistory.entries(envelopes, type: type).entries
        // The moment: a version, or the last event recorded at or before a time.
        var shown: Int?  // index of the entry whose state is shown; nil: before the first
        var momentText: String
        switch moment {
        case .version(let v)?:
            shown = entries.lastIndex { $0.envelope.entityVersion <= v }
            momentText = "after version \(v)"
        case .recordedAt(let text)?:
            let time: LogTimestamp
            do { time = try ISODate.timestamp(text) } catch { throw ViewerError(.badRequest, error.description) }
            shown = entries.lastIndex { $0.envelope.timestamp <= time }
            momentText = "as the store knew it at \(ISODate.format(time))"
        case nil:
            shown = entries.indices.last
            momentText = "now"
        }
        let state: ViewerState
        if let index = shown {
            let entry = entries[index]
            momentText += " (version \(entry.envelope.entityVersion), recorded \(ISODate.format(entry.envelope.timestamp)))"
            if entry.unknownAfter {
                state = ViewerState(moment: momentText, version: entry.envelope.entityVersion, json: nil,
                                    note: "unknown: " + (entry.note ?? "an event the viewer cannot fold") + (entry.knownAfter.version > 0 ? "; the last state known is version \(entry.knownAfter.version)'s" : ""))
            } else if let known = entry.knownAfter.state {
                state = ViewerState(moment: momentText, version: entry.envelope.entityVersion, json: known.indentedText, note: nil)
            } else {
                state = ViewerState(moment: momentText, version: entry.envelope.entityVersion, json: nil, note: "none: the entity was deleted (or not yet added)")
            }
        } else {
            let span = "its events were recorded \(ISODate.format(envelopes.first!.timestamp)) … \(ISODate.format(envelopes.last!.timestamp))"
            state = ViewerState(moment: momentText, version: 0, json: nil, note: "none yet: the stream's first event comes later (\(span))")
        }
        // One page of the timeline, 50 events from `fromVersion`.
        let pageSize = 50
        let start = fromVersion.map { v in entries.firstIndex { $0.envelope.entityVersion >= v } ?? entries.count } ?? 0
        let end = min(entries.count, start + pageSize)
        let timeline = entries[start..<end].map { e in
            ViewerTimelineEntry(
                position: e.envelope.position, version: e.envelope.entityVersion, recordedAt: ISODate.format(e.envelope.timestamp),
                event: e.envelope.eventType,
                changes: e.changes.map { ViewerChange(path: $0.path, kind: $0.kind.rawValue, from: $0.from?.text, to: $0.to?.text) },
                note: e.note.map { $0.hasPrefix("(") && $0.hasSuffix(")") ? String($0.dropFirst().dropLast()) : $0 }
                    ?? e.since.map { "changes since version \($0), the last state known" })
        }
        return ViewerEntity(
            type: type, id: entityID.description, version: stream.version, events: stream.count,
            firstRecordedAt: ISODate.format(envelopes.first!.timestamp), lastRecordedAt: ISODate.format(envelopes.last!.timestamp), timeline: timeline,
            previousPage: start > 0 ? entries[max(0, start - pageSize)].envelope.entityVersion : nil,
            nextPage: end < entries.count ? entries[end].envelope.entityVersion : nil, state: state)
    }

    /// An activity's events as history entries: its codec's events folded (added and updated
    /// hold the activity, ended sets its end, a delete or a tombstone ends it), each state as
    /// export writes an activity.
    private func activityEntries(_ envelopes: [EventEnvelope]) -> [StreamHistory.Entry] {
        let codec = ActivityEventCodec()
        var model: ActivityModel?
        var known: (state: JSONTree?, version: UInt64) = (nil, 0)
        var unknown = false
        return envelopes.map { envelope in
            var note: String?
            var data: JSONTree?
            if Tombstone(eventType: envelope.eventType) != nil {
                model = nil
            } else {
                do {
                    let event = try codec.decode(envelope)
                    data = try? JSONParser.parse(Array(ActivityJSON.event(event).utf8))
                    switch event {
                    case .added(let m), .updated(let m): model = m
                    case .ended(_, let at): model?.endDate = at
                    case .deleted: model = nil
                    }
                } catch {
                    note = "(activity event does not decode: \(EntityJSON.describe(error)))"
                }
            }
            var changes: [StreamHistory.Change] = []
            var since: UInt64?
            if note == nil {
                let state = model.flatMap { try? JSONParser.parse(Array(ActivityJSON.activity($0).utf8)) }
                changes = StreamHistory.diff(known.state, state)
                if unknown { since = known.version }
                known = (state, envelope.entityVersion)
                unknown = false
            } else {
                unknown = true
            }
            return StreamHistory.Entry(envelope: envelope, payload: .none, state: known.state, data: data, fieldEvent: nil,
                                       repositoryEvent: note == nil, changes: changes, note: note, since: since,
                                       knownAfter: known, unknownAfter: unknown)
        }
    }

    func event(at position: UInt64) async throws -> ViewerEvent {
        try catchUp()
        guard position < catalog.next, let envelope = try read([position]).first else {
            throw ViewerError(.notFound, catalog.next == 0 ? "\(name) holds no events" : "no event at position \(position) in \(name): its positions run to \(catalog.next - 1)" + " (compaction leaves gaps where it removed events)")
        }
        var codec = "none", payload: String?, note: String?
        if ActivityEventCodec.isActivityEvent(envelope), Tombstone(eventType: envelope.eventType) == nil {
            codec = "activity"
            do {
                let event = try ActivityEventCodec().decode(envelope)
                payload = (try? JSONParser.parse(Array(ActivityJSON.event(event).utf8))).map(\.indentedText)
            } catch {
                note = "the activity event does not decode: \(EntityJSON.describe(error))"
            }
        } else {
            let decoded = EntityJSON.payload(envelope.payload)
            codec = decoded.codec
            payload = decoded.value.map(\.indentedText)
            switch decoded {
            case .bytes(let reason, _): note = "not decoded: \(reason)"
            case .none: note = "no payload"
            default: break
            }
        }
        var metadata: [ViewerField] = []
        if let actor = envelope.metadata.actor { metadata.append(ViewerField(name: "actor", value: actor)) }
        if let correlation = envelope.metadata.correlationID { metadata.append(ViewerField(name: "correlation id", value: correlation)) }
        var event = ViewerEvent(
            position: envelope.position, recordedAt: ISODate.format(envelope.timestamp), streamType: envelope.stream.entityType,
            streamID: envelope.entityID.description, version: envelope.entityVersion, event: envelope.eventType,
            schemaVersion: Int(envelope.schemaVersion), metadata: metadata, codec: codec, payload: payload, note: note,
            hex: Self.hexDump(envelope.payload.prefix(Self.hexLimit)) + (envelope.payload.count > Self.hexLimit
                ? "\n… (the first \(Output.count(Self.hexLimit)) of \(Output.count(envelope.payload.count)) bytes)" : ""),
            byteCount: envelope.payload.count)
        if case .string(let text) = envelope.entityID, UUID(uuidString: text) != nil { event.stringLookingLikeUUID = true }
        return event
    }

    /// Whether `envelopes` are the events of stream `type`/`id` at exactly `positions`: what the
    /// catalog says a stream holds, still in the log.
    private static func areAll(_ envelopes: [EventEnvelope], of type: String, _ id: EntityID, at positions: [LogPosition]) -> Bool {
        envelopes.count == positions.count && !envelopes.isEmpty
            && zip(envelopes, positions).allSatisfy { $0.position == $1 && $0.stream.entityType == type && $0.entityID == id }
    }

    /// The events at `positions` (ascending), each read by position: a run of neighbours in
    /// one read.
    private func read(_ positions: [LogPosition]) throws(ViewerError) -> [EventEnvelope] {
        var out: [EventEnvelope] = []
        out.reserveCapacity(positions.count)
        var i = 0
        do {
            while i < positions.count {
                var j = i
                while j + 1 < positions.count && positions[j + 1] == positions[j] + 1 { j += 1 }
                let wanted = Set(positions[i...j])
                try log.forEachRecord(from: positions[i], through: positions[j]) { view in
                    if wanted.contains(view.position) { out.append(try EventEnvelope(view)) }
                    return true
                }
                i = j + 1
            }
        } catch {
            throw ViewerError(.storage, "reading \(name) at position \(positions[min(i, positions.count - 1)])", underlying: error)
        }
        return out
    }

    private func unknownType(_ type: String) -> ViewerError {
        let known = catalog.types.isEmpty ? "it holds no events" : "its entity types: \(catalog.types.keys.sorted().joined(separator: ", "))"
        return ViewerError(.notFound, "no events of entity type \"\(type)\" in \(name); \(known)")
    }

    /// How many of a payload's bytes the event page shows (a page stays small).
    static let hexLimit = 65_536

    /// `bytes` as lines of an offset, 16 bytes in hex and their printable ASCII.
    static func hexDump(_ bytes: ArraySlice<UInt8>) -> String {
        guard !bytes.isEmpty else { return "(no bytes)" }
        let digits = Array("0123456789abcdef")
        var out = ""
        let bytes = Array(bytes)
        for line in stride(from: 0, to: bytes.count, by: 16) {
            let offset = String(line, radix: 16)
            out += String(repeating: "0", count: max(0, 8 - offset.count)) + offset + "  "
            for k in 0..<16 {
                if line + k < bytes.count {
                    out.append(digits[Int(bytes[line + k] >> 4)])
                    out.append(digits[Int(bytes[line + k] & 15)])
                    out += " "
                } else {
                    out += "   "
                }
                if k == 7 { out += " " }
            }
            out += " |"
            for k in line..<min(line + 16, bytes.count) {
                let b = bytes[k]
                out.append(b >= 0x20 && b < 0x7F ? Character(Unicode.Scalar(b)) : ".")
            }
            out += "|"
            if line + 16 < bytes.count { out += "\n" }
        }
        return out
    }
}

extension StoreBrowser.Stream {
    mutating func record(_ envelope: EventEnvelope) {
        if envelope.position != first { rest.append(envelope.position) }
        version = envelope.entityVersion
        lastEvent = envelope.eventType
        last = envelope.timestamp
    }
}

#endif
