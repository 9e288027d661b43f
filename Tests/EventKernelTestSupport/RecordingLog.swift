public import Logging
import Synchronization

/// A swift-log destination that keeps every message, for asserting what a store logged (an
/// ignored snapshot, a skipped one).
public final class RecordingLog: Sendable {
    /// One logged message.
    public struct Entry: Sendable {
        public var level: Logger.Level
        public var message: String
        public var metadata: String
    }

    private let entries = Mutex<[Entry]>([])

    public init() {}

    /// A logger that records into this log.
    public var logger: Logger {
        Logger(label: "test") { _ in Handler(sink: self) }
    }
    /// Everything recorded so far.
    public var all: [Entry] { entries.withLock { $0 } }
    /// Forgets what was recorded.
    public func reset() { entries.withLock { $0.removeAll() } }

    fileprivate func append(_ entry: Entry) { entries.withLock { $0.append(entry) } }

    private struct Handler: LogHandler {
        let sink: RecordingLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.MetadataValue? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            sink.append(Entry(level: event.level, message: "\(event.message)", metadata: "\(event.metadata ?? [:])"))
        }
    }
}
