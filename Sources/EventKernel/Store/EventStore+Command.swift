public import Foundation

extension EventStore {
    /// How many times ``execute(maxAttempts:_:)`` decides again after losing a version check,
    /// by default. Each retry after the first waits until the append it lost to has committed,
    /// so under contention every round commits one writer's events; 64 rounds cover 64
    /// writers of one stream at once.
    public static let defaultCommandAttempts = 64

    /// Runs a command: the one write path every repository uses.
    ///
    /// `decide` reads what it needs through ``CommandContext/read(_:_:)``, which reads each
    /// stream's version *before* its state, and appends the events it decides on. They are
    /// appended atomically (one log batch), each stream's first event expecting the version
    /// read. If another writer changed a read stream in between, the append conflicts and
    /// nothing is written; the command then waits for that writer's append to commit and runs
    /// `decide` again on the new state, up to `maxAttempts` times.
    ///
    /// ```swift
    /// try await store.execute { command in
    ///     let existing = command.read(stream) { projection.read { $0.entities[id] } }
    ///     guard existing == nil else { throw RepositoryError.alreadyExists(id) }
    ///     command.append(encodedAddedEvent)
    /// }
    /// ```
    ///
    /// Why version first: the store folds a commit into projections before it publishes the
    /// new versions, so a version read before the state can only be older than that state,
    /// never newer; a decision made on a state the version does not describe then always
    /// conflicts. (Read in the other order, two concurrent adds of one id could both pass.)
    ///
    /// `decide` runs outside every store and projection lock, so it may read any repository.
    ///
    /// - Parameters:
    ///   - maxAttempts: How many times to decide at most (at least 1).
    ///   - decide: Reads state and appends events; its errors propagate (nothing is written).
    ///     May run several times: keep it free of side effects other than the context's.
    /// - Returns: What `decide` returned on the attempt that committed (or appended nothing).
    /// - Throws: What `decide` throws; ``RepositoryError/conflict(stream:expected:actual:)``
    ///   when every attempt lost, or at once for an expected version the caller gave
    ///   (``CommandContext/append(_:expectedVersion:metadata:recordedAt:)``); and whatever
    ///   ``append(_:)-([PendingEvent])`` throws.
    /// - Complexity: O(events) per attempt, plus `decide`.
    @discardableResult
    public func execute<Output>(
        maxAttempts: Int = EventStore.defaultCommandAttempts,
        _ decide: (inout CommandContext) throws -> Output
    ) async throws -> Output {
        try await executeCommitting(maxAttempts: maxAttempts, decide).output
    }

    /// ``execute(maxAttempts:_:)``, also returning the committed envelopes (positions and
    /// versions), for callers that report what was written (`eventkernel delete`, `purge`).
    package func executeCommitting<Output>(
        maxAttempts: Int = EventStore.defaultCommandAttempts,
        _ decide: (inout CommandContext) throws -> Output
    ) async throws -> (output: Output, envelopes: [EventEnvelope]) {
        var lastConflict: RepositoryError?
        let attempts = Swift.max(1, maxAttempts)
        for attempt in 0..<attempts {
            var context = CommandContext(store: self)
            let output = try decide(&context)
            guard !context.events.isEmpty else { return (output, []) }
            do {
                let envelopes = try await append(context.events, basis: context.basis, planned: context.plannedVersions)
                return (output, envelopes)
            } catch let error as RepositoryError {
                if case .conflict(let stream, _, _) = error {
                    instrumentation?.commandConflicted(
                        entityType: stream.entityType, retrying: context.isRetryable(stream) && attempt + 1 < attempts)
                }
                guard case .conflict(let stream, _, _) = error, context.isRetryable(stream) else { throw error }
                lastConflict = error
                await versions.waitUntilSettled(stream)
                catchUpAfterConflict()
            }
        }
        // Still contended after every attempt: report the last conflict as it was seen.
        throw lastConflict!
    }
}

/// What a command (``EventStore/execute(maxAttempts:_:)``) reads and appends.
///
/// The rule "a stream's version is read before its state" lives here: ``read(_:_:)`` is the
/// only way a command learns a version, and it reads it before running the state reader.
public struct CommandContext {
    /// The store the command runs on.
    public let store: EventStore
    /// The events appended so far, in order.
    public private(set) var events: [PendingEvent] = []

    private struct Read {
        var version: UInt64
        /// Whether the command appended to the stream expecting this version (then a conflict
        /// on it is retried).
        var appended = false
        var explicit = false
        /// Whether ``version`` was read from the store (not given by the caller).
        var known = true
        /// How many events the command appended to the stream so far.
        var count: UInt64 = 0
    }

    /// The version table's commit count before the command's first read of a version; with
    /// ``plannedVersions``, what lets an append whose reads still hold skip every check
    /// (``VersionTable/reserve(_:basis:planned:)``).
    private(set) var basis: UInt64?
    /// Each event's version, derived from the versions the command read; `nil` once an event's
    /// stream was not read (an unconditional append) or was given an expected version that is
    /// not the one read.
    private(set) var plannedVersions: [UInt64]? = []

    // The common command reads one stream: kept inline, so it allocates no table.
    private var firstStream: StreamID?
    private var first = Read(version: 0)
    private var more: [StreamID: Read] = [:]
    /// Streams appended to unconditionally, before any read of them: so that
    /// ``isAppending(to:)`` is a hash lookup, not a scan of the batch (which made a batch of
    /// n adds O(n²)).
    private var unreadAppends: Set<StreamID> = []

    init(store: EventStore) { self.store = store }

    /// Reserves room for a command that touches about `streams` streams and appends about as
    /// many events (a batch import), so that its tables never grow while it runs.
    /// - Parameter streams: The expected number of streams and events.
    public mutating func reserveCapacity(_ streams: Int) {
        events.reserveCapacity(streams)
        plannedVersions?.reserveCapacity(streams)
        more.reserveCapacity(streams)
    }

    private func lookup(_ stream: StreamID) -> Read? {
        if let firstStream, firstStream == stream { return first }
        return more.isEmpty ? nil : more[stream]
    }

    private mutating func set(_ stream: StreamID, _ read: Read) {
        if firstStream == nil || firstStream! == stream {
            firstStream = stream
            first = read
        } else {
            more[stream] = read
        }
    }

    /// Reads `stream`'s committed version, then runs `state` (which reads the state the
    /// decision depends on, typically from a projection). The first read of a stream in a
    /// command fixes the version its first appended event expects.
    /// - Parameters:
    ///   - stream: The stream the state belongs to.
    ///   - state: Reads the state; it runs after the version is read.
    /// - Returns: What `state` returned.
    /// - Throws: What `state` throws; ``RepositoryError/storage(_:)`` when the version must be
    ///   read from the log and that fails (see ``EventStore/version(of:)``).
    /// - Complexity: O(1) plus `state`.
    public mutating func read<State>(_ stream: StreamID, _ state: () throws -> State) throws -> State {
        let store = self.store
        try recordVersionIfFirstRead(stream) { () throws -> (UInt64, UInt64?) in
            let (version, basis) = try store.versionAndBasis(of: stream)
            return (version, basis)
        }
        return try state()
    }

    /// Reads `stream`'s state and version together, from a projection that keeps each
    /// entity's version with its state (a ``StreamVersionSource``: one lookup for both, under
    /// one lock). The version table's commit count is read first, so the pair serves as the
    /// command's read as ``read(_:_:)`` does.
    /// - Parameters:
    ///   - stream: The stream.
    ///   - body: Returns the state and the stream's committed version, read at once.
    /// - Returns: The state `body` returned.
    package mutating func read<State>(_ stream: StreamID, versioned body: () throws -> (State, UInt64)) rethrows -> State {
        let basis = store.versions.commitBasis
        let (state, version) = try body()
        recordVersionIfFirstRead(stream) { (version, basis) }
        return state
    }

    /// Records `stream`'s version (from `version`, with the commit count read before it)
    /// unless the command read it already: one hash lookup.
    private mutating func recordVersionIfFirstRead<E: Error>(_ stream: StreamID, _ version: () throws(E) -> (UInt64, UInt64?)) throws(E) {
        func record(_ read: (version: UInt64, basis: UInt64?)) -> Read {
            if let readBasis = read.basis {
                // The earliest read's count: every read since must still hold.
                if basis == nil { basis = readBasis }
            } else {
                plannedVersions = nil
            }
            return Read(version: read.version)
        }
        guard let firstStream else {
            self.firstStream = stream
            first = record(try version())
            return
        }
        if firstStream == stream { return }
        let index = more.index(forKey: stream)
        if index == nil { more[stream] = record(try version()) }
    }

    /// Records that the command decides on `stream`'s state as of `stateVersion`, a version
    /// the state itself carries (a projection that keeps each entity's stream version). It
    /// stands for ``read(_:_:)`` when the state was read first, by a scan: expecting the exact
    /// version of what was read is the same check, so a change since conflicts and retries.
    public mutating func read(_ stream: StreamID, stateVersion: UInt64) {
        // When the state was read is not known here: no fast path for this command.
        recordVersionIfFirstRead(stream) { (stateVersion, nil) }
    }

    /// The version this command read for `stream` (reading it now if it was not read yet).
    /// - Throws: ``RepositoryError/storage(_:)`` when the version must be read from the log
    ///   and that fails (see ``EventStore/version(of:)``).
    public mutating func version(of stream: StreamID) throws -> UInt64 {
        if let read = lookup(stream) { return read.version }
        let store = self.store
        try recordVersionIfFirstRead(stream) { () throws -> (UInt64, UInt64?) in
            let (version, basis) = try store.versionAndBasis(of: stream)
            return (version, basis)
        }
        return lookup(stream)!.version
    }

    /// Whether the command already appends an event to `stream`.
    public func isAppending(to stream: StreamID) -> Bool {
        if let read = lookup(stream), read.appended || read.explicit { return true }
        return !unreadAppends.isEmpty && unreadAppends.contains(stream)
    }

    /// Appends an event. Its first event of a stream that was read expects the version read;
    /// later events of that stream follow it in the batch. An event of a stream that was not
    /// read is appended unconditionally.
    /// - Parameters:
    ///   - event: The encoded event.
    ///   - metadata: Audit context.
    ///   - recordedAt: The recorded-at time; `nil`: the time of the append.
    public mutating func append(_ event: EncodedEvent, metadata: EventMetadata = .none, recordedAt: Date? = nil) {
        var expected: UInt64?
        var planned: UInt64?
        func claim(_ read: inout Read) {
            read.count += 1
            if read.known { planned = read.version + read.count }
            guard !read.appended, !read.explicit else { return }
            expected = read.version
            read.appended = true
        }
        // In place: one hash lookup for a stream the command read.
        if let firstStream, firstStream == event.stream {
            claim(&first)
        } else if !more.isEmpty, let index = more.index(forKey: event.stream) {
            claim(&more.values[index])
        } else {
            unreadAppends.insert(event.stream)
        }
        plan(planned)
        events.append(PendingEvent(event, expectedVersion: expected, metadata: metadata, recordedAt: recordedAt))
    }

    /// Records the next event's planned version, or that the batch has none.
    private mutating func plan(_ version: UInt64?) {
        if let version { plannedVersions?.append(version) } else { plannedVersions = nil }
    }

    /// Appends an event that expects the version the caller gives (`nil`: unconditionally).
    /// A conflict on it is the caller's to handle: the command fails at once, without a retry.
    /// - Parameters:
    ///   - event: The encoded event.
    ///   - expectedVersion: The stream version expected before this event.
    ///   - metadata: Audit context.
    ///   - recordedAt: The recorded-at time; `nil`: the time of the append.
    public mutating func append(
        _ event: EncodedEvent, expectedVersion: UInt64?, metadata: EventMetadata = .none, recordedAt: Date? = nil
    ) {
        var read = lookup(event.stream) ?? Read(version: expectedVersion ?? 0, known: false)
        // Planned only when the version read is the one the caller expects: otherwise the
        // version table decides (a conflict, most likely).
        plan(read.known && expectedVersion == read.version + read.count ? read.version + read.count + 1 : nil)
        read.explicit = true
        read.count += 1
        set(event.stream, read)
        events.append(PendingEvent(event, expectedVersion: expectedVersion, metadata: metadata, recordedAt: recordedAt))
    }

    /// Whether a conflict on `stream` is the command's to retry: it expected the version it
    /// read, or appended without reading (only a shared log refuses that: this instance had
    /// not seen the stream's latest version), but not a version the caller gave.
    func isRetryable(_ stream: StreamID) -> Bool {
        guard let read = lookup(stream) else { return unreadAppends.contains(stream) }
        return read.appended && !read.explicit
    }
}
