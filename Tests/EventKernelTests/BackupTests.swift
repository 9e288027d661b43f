@testable import EventKernel
@testable import EventLog
import EventKernelTestSupport
import Foundation
import KernelPrimitives
import Synchronization
import Testing

/// Online, incremental backups (issue 28, items 1 and 2): consistent at one position while a
/// writer goes on, checked and synced, incremental into an earlier backup of the same store,
/// refusing another store's or another history's, never trusting a backup cut short.
@Suite struct BackupTests {
    /// Small segments: a few hundred events seal several of them.
    static let configuration = SegmentedLog.Configuration(segmentSize: 16 << 10)

    /// 48 bytes that do not compress: segments fill and seal after a few hundred events.
    static func noise(_ i: Int) -> [UInt8] {
        var random = SplitMix64(seed: UInt64(i))
        return (0..<6).flatMap { _ in withUnsafeBytes(of: random.next()) { Array($0) } }
    }

    static func events(_ first: Int, _ count: Int) -> [PendingEvent] {
        (first..<first + count).map { i in
            PendingEvent(EncodedEvent(eventType: "Counted", schemaVersion: 1, stream: StreamID("Counted", .string("c\(i % 37)")),
                                      payload: Array("event \(i) ".utf8) + noise(i)))
        }
    }

    /// A store at `directory` holding `count` events (appended 10 at a time), closed.
    static func makeStore(_ directory: URL, count: Int, from first: Int = 0) async throws {
        let store = try EventStore.open(at: directory, log: configuration, snapshotPolicy: .never)
        for start in stride(from: first, to: first + count, by: 10) { try await store.append(events(start, 10)) }
        try await store.close()
    }

    /// Writes the snapshots of the store at `directory` at its end.
    static func writeSnapshots(_ directory: URL) async throws {
        let store = try EventStore.open(at: directory, log: configuration, snapshotPolicy: SnapshotPolicy(everyEvents: nil, onClose: false))
        try await store.writeSnapshots()
        try await store.close()
    }

    /// Every record below `end` as (position, timestamp, payload).
    static func records(_ directory: URL, below end: LogPosition? = nil) throws -> [(LogPosition, LogTimestamp, [UInt8])] {
        let log = try SegmentedLog.openReadOnly(at: directory)
        var found: [(LogPosition, LogTimestamp, [UInt8])] = []
        let last = (end ?? log.bounds.nextPosition)
        if last > 0 {
            try log.forEachRecord(from: 0, through: last - 1) { record in
                found.append((record.position, record.timestamp, Array(record.payload)))
                return true
            }
        }
        return found
    }

    static func expectSameRecords(_ backup: URL, _ source: URL, below end: LogPosition) throws {
        let copied = try records(backup)
        let original = try records(source, below: end)
        #expect(copied.count == Int(end))
        #expect(copied.count == original.count)
        for (a, b) in zip(copied, original) where a != b {
            Issue.record("the backup's record \(a.0) differs from the source's")
            break
        }
    }

    static func logError(_ error: any Error) -> LogError? {
        if let error = error as? LogError { return error }
        if case .storage(let failure) = error as? RepositoryError { return failure.logError }
        return nil
    }

    /// Backs up while a task appends without pause: the backup's first write waits until the
    /// writer has made 20 more appends, which it could not if the backup held the log's lock.
    @Test func backupWhileAWriterAppendsHoldsExactlyItsPrefix() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 400)
        let store = try EventStore.open(at: source, log: Self.configuration, snapshotPolicy: SnapshotPolicy(everyEvents: nil, onClose: true))
        try await store.writeSnapshots()
        let appends = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
        let writer = Task {
            var i = 400
            while !stop.load(ordering: .relaxed) {
                try await store.append(Self.events(i, 5))
                i += 5
                appends.add(1, ordering: .relaxed)
            }
        }
        while appends.load(ordering: .relaxed) < 5 { try await Task.sleep(for: .milliseconds(1)) }
        let gate = WaitingFileIO { appends.load(ordering: .relaxed) }
        let report = try await store.backup(to: destination, options: BackupOptions(fileIO: gate))
        stop.store(true, ordering: .relaxed)
        try await writer.value
        #expect(gate.waitedFor, "the writer made no append while the backup copied: it was blocked")
        try await store.close()

        let position = report.manifest.nextPosition
        #expect(position >= 400)
        #expect(!report.incremental)
        #expect(report.manifest.files.contains { $0.name.hasPrefix("snapshots/") })
        let verification = try SegmentedLog.verify(at: destination)
        #expect(verification.isIntact, "\(verification.problems)")
        try Self.expectSameRecords(destination, source, below: position)
        #expect(try Self.records(source).count > Int(position), "the writer appended past the backup's position")
        // The backup is a store: it opens (as a writer too) and holds its manifest's position.
        let reopened = try EventStore.open(at: destination, snapshotPolicy: .never)
        #expect(reopened.nextPosition == position)
        try await reopened.close()
    }

    /// The manifest's CRC32C of each file is combined from the checks the backup makes (each
    /// batch, a snapshot's header and body) rather than read again: it must be the checksum of
    /// the file's bytes exactly, for batches of either kind (under and over the 4 KiB from
    /// which a payload's checksum is combined), in a full backup and in an incremental one
    /// that appends a tail.
    @Test func theManifestsChecksumsAreThoseOfTheFilesBytes() async throws {
        let temp = TemporaryDirectory()
        let source = temp.url.appending(path: "store"), destination = temp.url.appending(path: "backup")
        let store = try EventStore.open(at: source, log: SegmentedLog.Configuration(segmentSize: 64 << 10), snapshotPolicy: .never)
        func appendMixed(from first: Int) async throws {
            for round in 0..<6 {
                // 10 events (about 600 bytes) and 150 (about 9 KiB, incompressible).
                try await store.append(Self.events(first + round * 160, 10))
                try await store.append(Self.events(first + round * 160 + 10, 150))
            }
        }
        try await appendMixed(from: 0)
        try await store.writeSnapshots()
        func expectChecksums(_ report: BackupReport) throws {
            #expect(!report.manifest.files.isEmpty)
            for file in report.manifest.files {
                let bytes = try Array(Data(contentsOf: destination.appending(path: file.name)))
                #expect(Int64(bytes.count) == file.size, "\(file.name)")
                #expect(CRC32C.checksum(bytes) == file.crc32c, "\(file.name)")
            }
        }
        let full = try await store.backup(to: destination)
        #expect(!full.incremental)
        try expectChecksums(full)
        try await appendMixed(from: 10_000)
        let incremental = try await store.backup(to: destination)
        #expect(incremental.incremental)
        try expectChecksums(incremental)
        try await store.close()
        _ = try BackupManifest.check(in: destination)
    }

    @Test func incrementalBackupWritesOnlyNewAndChangedFiles() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 600)
        let first = try await EventStore.backup(storeAt: source, to: destination)
        #expect(!first.incremental)
        let sealed = first.manifest.files.filter { $0.name.hasSuffix(".idx") }.map { $0.name.replacingOccurrences(of: ".idx", with: ".log") }
        #expect(sealed.count >= 2, "the test needs sealed segments")

        // Nothing new: nothing written.
        let again = try await EventStore.backup(storeAt: source, to: destination)
        #expect(again.incremental)
        #expect(again.copiedFiles.isEmpty)
        #expect(again.copiedBytes == 0)

        try await Self.makeStore(source, count: 50, from: 600)
        let second = try await EventStore.backup(storeAt: source, to: destination)
        #expect(second.incremental)
        // The sealed segments of the first backup are not written again.
        for name in sealed { #expect(second.unchangedFiles.contains(name), "\(name) was written again") }
        #expect(second.copiedBytes < first.copiedBytes / 2)
        // What the files grew by, or the new files' sizes: a grown file is appended to.
        let before = Dictionary(uniqueKeysWithValues: first.manifest.files.map { ($0.name, $0.size) })
        let newBytes = second.manifest.files.filter { second.copiedFiles.contains($0.name) }.reduce(Int64(0)) { $0 + $1.size - (before[$1.name] ?? 0) }
        #expect(newBytes == second.copiedBytes)
        #expect(try SegmentedLog.verify(at: destination).isIntact)
        try Self.expectSameRecords(destination, source, below: 650)
    }

    /// A sealed segment of the source replaced by other bytes of the same size under the same
    /// name (as a compaction that rewrites a segment would make) is written again: an
    /// incremental backup does not trust a sealed segment by its name and size.
    @Test func aFileChangedUnderTheSameNameIsCopiedAgain() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), twin = scratch.file("twin"), destination = scratch.file("backup")
        // The same events recorded at other times: the same sizes, other bytes.
        try await Self.makeStore(source, count: 600)
        try await Self.makeStore(twin, count: 600)
        let first = try await EventStore.backup(storeAt: source, to: destination)
        let name = "00000000000000000240.log"
        let original = try Data(contentsOf: source.appending(path: name))
        let other = try Data(contentsOf: twin.appending(path: name))
        try #require(original.count == other.count, "the test needs a segment of the same size")
        try #require(original != other)
        try other.write(to: source.appending(path: name))
        try FileManager.default.removeItem(at: source.appending(path: "00000000000000000240.idx"))
        let report = try await EventStore.backup(storeAt: source, to: destination)
        #expect(report.incremental)
        #expect(first.manifest.files.first { $0.name == name }?.headers != report.manifest.files.first { $0.name == name }?.headers)
        #expect(report.copiedFiles.contains(name))
        #expect(try Data(contentsOf: destination.appending(path: name)) == other)
        #expect(try BackupManifest.check(in: destination) == report.manifest)
    }

    /// With `link`, sealed segments and their indexes share the source's inode; the active
    /// segment is copied.
    @Test func linkHardLinksSealedFiles() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 600)
        let report = try await EventStore.backup(storeAt: source, to: destination, options: BackupOptions(link: true))
        let sealed = report.manifest.files.filter { $0.name.hasSuffix(".idx") }.count
        #expect(sealed >= 2)
        #expect(report.linkedFiles.count == 2 * sealed)
        for name in report.linkedFiles {
            let a = try FileManager.default.attributesOfItem(atPath: source.appending(path: name).path)
            let b = try FileManager.default.attributesOfItem(atPath: destination.appending(path: name).path)
            #expect(a[.systemFileNumber] as? Int == b[.systemFileNumber] as? Int)
        }
        let active = try #require(report.manifest.files.filter { $0.name.hasSuffix(".log") }.map(\.name).max())
        #expect(report.copiedFiles.contains(active))
        #expect(try SegmentedLog.verify(at: destination).isIntact)
    }

    @Test func refusesAnotherStoresBackupUnlessRestart() async throws {
        let scratch = TemporaryDirectory("backup")
        let one = scratch.file("one"), two = scratch.file("two"), destination = scratch.file("backup")
        try await Self.makeStore(one, count: 100)
        try await Self.makeStore(two, count: 120)
        let first = try await EventStore.backup(storeAt: one, to: destination)
        await #expect { try await EventStore.backup(storeAt: two, to: destination) } throws: { error in
            Self.logError(error)?.code == .backupMismatch && "\(error)".contains("another store")
        }
        // Refused: the earlier backup is untouched and complete.
        #expect(try BackupManifest.read(in: destination) == first.manifest)
        let restarted = try await EventStore.backup(storeAt: two, to: destination, options: BackupOptions(restart: true))
        #expect(!restarted.incremental)
        #expect(restarted.manifest.nextPosition == 120)
        #expect(restarted.manifest.storeIdentity != first.manifest.storeIdentity)
        try Self.expectSameRecords(destination, two, below: 120)
    }

    /// `restart` over a complete backup writes the new one into a hidden sibling and exchanges
    /// the two directories: while it writes, the destination still holds the old backup, whole;
    /// after it, the new one, and no sibling is left.
    @Test func aRestartKeepsTheCompleteBackupUntilItExchangesTheNewOne() async throws {
        let scratch = TemporaryDirectory("backup")
        let one = scratch.file("one"), two = scratch.file("two"), destination = scratch.file("backup")
        try await Self.makeStore(one, count: 100)
        try await Self.makeStore(two, count: 120)
        let first = try await EventStore.backup(storeAt: one, to: destination)
        let gate = GateFileIO()
        let restart = Task { try await EventStore.backup(storeAt: two, to: destination, options: BackupOptions(restart: true, fileIO: gate)) }
        #expect(try await eventually { gate.entered }, "the restarted backup never wrote")
        // Written elsewhere meanwhile: the old backup is untouched, with no marker over it.
        #expect(try BackupManifest.check(in: destination) == first.manifest)
        #expect(!FileManager.default.fileExists(atPath: destination.appending(path: BackupManifest.partialFileName).path))
        let hidden = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).filter { $0.hasPrefix(".backup.restarting-") }
        #expect(hidden.count == 1, "\(hidden)")
        gate.release()
        let restarted = try await restart.value
        #expect(!restarted.incremental)
        #expect(try BackupManifest.check(in: destination) == restarted.manifest)
        #expect(restarted.manifest.storeIdentity != first.manifest.storeIdentity)
        #expect(try SegmentedLog.verify(at: destination).isIntact)
        try Self.expectSameRecords(destination, two, below: 120)
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).filter { $0.hasPrefix(".") }.isEmpty)
    }

    /// A file put into the destination while a restart writes beside it is not a backup's: it
    /// leaves with the old backup at the exchange, and is kept (the old directory renamed to a
    /// visible `<name>.kept-…`), said in the report's warnings; the new backup is in place.
    @Test func aFilePutIntoTheDestinationDuringARestartIsKept() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 100)
        _ = try await EventStore.backup(storeAt: source, to: destination)
        let gate = GateFileIO()
        let restart = Task { try await EventStore.backup(storeAt: source, to: destination, options: BackupOptions(restart: true, fileIO: gate)) }
        #expect(try await eventually { gate.entered }, "the restarted backup never wrote")
        try Data("mine".utf8).write(to: destination.appending(path: "notes.txt"))
        gate.release()
        let report = try await restart.value
        #expect(report.warnings.count == 1 && report.warnings[0].contains("kept"), "\(report.warnings)")
        let kept = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).filter { $0.hasPrefix("backup.kept-") }
        #expect(kept.count == 1)
        if let kept = kept.first {
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.file(kept).path) == ["notes.txt"])
        }
        #expect(try BackupManifest.check(in: destination) == report.manifest)
        #expect(try SegmentedLog.verify(at: destination).isIntact)
    }

    /// `backups prune` finishes the leftovers of restarts cut short, but never the sibling of a
    /// restart that holds its destination now (the new backup being written there).
    @Test func leftoversOfARestartAreLeftWhileItHoldsItsDestination() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 50)
        _ = try await EventStore.backup(storeAt: source, to: destination)
        let sibling = scratch.file(".backup.restarting-abc123")
        try FileManager.default.createDirectory(at: sibling, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: sibling.appending(path: "00000000000000000000.log"))
        // A destination whose own name goes on with the infix has other siblings.
        #expect(BackupManifest.restartDestination(ofLeftover: ".backup.restarting-x.restarting-y") == "backup.restarting-x")
        #expect(BackupManifest.restartDestination(ofLeftover: ".backup.restarting-abc123") == "backup")
        #expect(BackupManifest.restartDestination(ofLeftover: ".backup.restarting-a.b") == nil)
        #expect(BackupManifest.restartDestination(ofLeftover: "backup.restarting-abc") == nil)
        #expect(BackupManifest.restartDestination(ofLeftover: ".backup.restarting-") == nil)
        do {
            let held = try DirectoryLock(directory: destination.path)
            defer { held.unlock() }
            #expect(try BackupManifest.removeLeftovers(in: scratch.url).isEmpty)
            #expect(FileManager.default.fileExists(atPath: sibling.path))
        }
        #expect(try BackupManifest.removeLeftovers(in: scratch.url) == [".backup.restarting-abc123"])
        #expect(!FileManager.default.fileExists(atPath: sibling.path))
        #expect(BackupManifest.state(of: destination) == .complete)
    }

    /// A restart that fails midway (a full disk) leaves the complete backup it was to replace,
    /// and no sibling.
    @Test func aRestartThatFailsLeavesTheCompleteBackup() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 300)
        let first = try await EventStore.backup(storeAt: source, to: destination)
        // The injected failure is ENOSPC: the error says that the new backup did not fit beside the old.
        await #expect { try await EventStore.backup(storeAt: source, to: destination, options: BackupOptions(restart: true, fileIO: FailingFileIO(failAfter: 1))) } throws: { error in
            Self.logError(error)?.systemErrorNumber == ENOSPC && "\(error)".contains("no room for both")
        }
        #expect(try BackupManifest.check(in: destination) == first.manifest)
        #expect(BackupManifest.state(of: destination) == .complete)
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).filter { $0.hasPrefix(".") }.isEmpty)
        #expect(try SegmentedLog.verify(at: destination).isIntact)
    }

    /// The active segment of a closed store, as a crash leaves it: no clean-close checkpoint.
    static func crashedActiveSegment(_ store: URL) throws -> URL {
        let names = try FileManager.default.contentsOfDirectory(atPath: store.path).sorted()
        for name in names where name.hasSuffix(".ckpt") { try FileManager.default.removeItem(at: store.appending(path: name)) }
        return store.appending(path: try #require(names.last { $0.hasSuffix(".log") }))
    }

    /// A writer's crash leaves a torn tail; the next writable open cuts it and starts a new
    /// history epoch. The cut removed only bytes the backup never held, so the backup goes on
    /// (incremental, in the new epoch) instead of asking for --restart (review item 1).
    @Test func aBackupGoesOnAfterATornTailIsCutInANewEpoch() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 100)
        let first = try await EventStore.backup(storeAt: source, to: destination)
        #expect(first.manifest.historyEpoch == 0)
        // A torn tail, injected: half a batch header's worth of non-zero bytes past the end.
        let handle = try FileHandle(forWritingTo: try Self.crashedActiveSegment(source))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 40))
        try handle.close()
        try await Self.makeStore(source, count: 50, from: 100)
        #expect(try SegmentedLog.openReadOnly(at: source).historyEpoch == 1, "the torn tail was not cut in a new epoch")
        let next = try await EventStore.backup(storeAt: source, to: destination)
        #expect(next.incremental)
        #expect(next.manifest.historyEpoch == 1)
        #expect(try BackupManifest.check(in: destination) == next.manifest)
        try Self.expectSameRecords(destination, source, below: 150)
    }

    /// A new epoch whose history is not a continuation of the backup (an OS crash lost batches
    /// the backup had copied; other appends took their place) is refused, the backup untouched;
    /// --restart starts over in the new epoch.
    @Test func refusesABackupOfAnotherHistoryEpoch() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup"), saved = scratch.file("saved")
        try await Self.makeStore(source, count: 100)
        try FileManager.default.copyItem(at: source, to: saved)
        try await Self.makeStore(source, count: 50, from: 100)
        let first = try await EventStore.backup(storeAt: source, to: destination)
        // The last 50 lost (the store as it was before them), the history cut, other appends.
        try FileManager.default.removeItem(at: source)
        try FileManager.default.moveItem(at: saved, to: source)
        _ = try SegmentedLog.startNewHistoryEpoch(at: source)
        let store = try EventStore.open(at: source, log: Self.configuration, snapshotPolicy: .never)
        for start in stride(from: 0, to: 60, by: 6) { try await store.append(Self.events(1_000 + start, 6)) }
        try await store.close()
        await #expect { try await EventStore.backup(storeAt: source, to: destination) } throws: { error in
            Self.logError(error)?.code == .backupMismatch
        }
        #expect(try BackupManifest.check(in: destination) == first.manifest)
        let restarted = try await EventStore.backup(storeAt: source, to: destination, options: BackupOptions(restart: true))
        #expect(restarted.manifest.historyEpoch == 1)
        try Self.expectSameRecords(destination, source, below: 160)
    }

    /// A repair's new epoch that cut nothing the backup holds (only the epoch moved): the backup
    /// is still a prefix of the store and goes on in the new epoch.
    @Test func aBackupGoesOnAcrossANewEpochThatCutNothingItHolds() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 100)
        _ = try await EventStore.backup(storeAt: source, to: destination)
        _ = try SegmentedLog.startNewHistoryEpoch(at: source)
        let next = try await EventStore.backup(storeAt: source, to: destination)
        #expect(next.incremental)
        #expect(next.manifest.historyEpoch == 1)
    }

    /// A manifest that does not decode is never trusted: refused, and `restart` writes every file.
    @Test func aDamagedManifestIsRefusedAndRestartWritesEverything() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 300)
        let first = try await EventStore.backup(storeAt: source, to: destination)
        try Data("{\"format\": 1".utf8).write(to: destination.appending(path: BackupManifest.fileName))
        await #expect { try await EventStore.backup(storeAt: source, to: destination) } throws: { error in
            Self.logError(error)?.code == .backupMismatch && "\(error)".contains("damaged backup manifest")
        }
        let restarted = try await EventStore.backup(storeAt: source, to: destination, options: BackupOptions(restart: true))
        #expect(!restarted.incremental)
        #expect(restarted.unchangedFiles.isEmpty)
        #expect(Set(restarted.copiedFiles) == Set(first.manifest.files.map(\.name)))
        #expect(try SegmentedLog.verify(at: destination).isIntact)
    }

    @Test func refusesADirectoryThatIsNotABackup() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 10)
        try FileManager.default.createDirectory(at: destination, withIntermediateDirectories: true)
        try Data("mine".utf8).write(to: destination.appending(path: "notes.txt"))
        for restart in [false, true] {
            await #expect { try await EventStore.backup(storeAt: source, to: destination, options: BackupOptions(restart: restart)) } throws: { error in
                Self.logError(error)?.code == .backupMismatch && "\(error)".contains("notes.txt")
            }
        }
        #expect(FileManager.default.fileExists(atPath: destination.appending(path: "notes.txt").path))
    }

    /// A first backup cut short (a write fails midway, as a crash would stop it) leaves no
    /// manifest; the next backup into the directory trusts nothing there and writes every file.
    @Test func aBackupCutShortLeavesNoManifestAndIsRedoneWhole() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 600)
        await #expect(throws: (any Error).self) {
            try await EventStore.backup(storeAt: source, to: destination, options: BackupOptions(fileIO: FailingFileIO(failAfter: 1)))
        }
        #expect(try BackupManifest.read(in: destination) == nil)
        #expect(FileManager.default.fileExists(atPath: destination.appending(path: BackupManifest.partialFileName).path))
        let resumed = try await EventStore.backup(storeAt: source, to: destination)
        #expect(!resumed.incremental)
        #expect(resumed.unchangedFiles.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: destination.appending(path: BackupManifest.partialFileName).path))
        #expect(try SegmentedLog.verify(at: destination).isIntact)
        try Self.expectSameRecords(destination, source, below: 600)
    }

    /// A backup cut short is a prefix of a store that would open and verify as a shorter one:
    /// every reader, writer and verify refuses it while it holds the partial marker, and the
    /// writer's refusal leaves no LOCK behind.
    @Test func aBackupCutShortIsNotAStore() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 300)
        _ = try await EventStore.backup(storeAt: source, to: destination)
        try await Self.makeStore(source, count: 300, from: 300)
        // A round killed midway leaves its marker (one that fails removes it: it goes back to
        // the earlier backup).
        _ = FileManager.default.createFile(atPath: destination.appending(path: BackupManifest.partialFileName).path, contents: Data())
        try? FileManager.default.removeItem(at: destination.appending(path: "LOCK"))
        let refusals: [(String, () throws -> Void)] = [
            ("openReadOnly", { _ = try SegmentedLog.openReadOnly(at: destination) }),
            ("open", { _ = try SegmentedLog.open(at: destination) }),
            ("verify", { _ = try SegmentedLog.verify(at: destination) }),
        ]
        for (name, body) in refusals {
            do {
                try body()
                Issue.record("\(name) accepted a backup cut short")
            } catch let error as LogError {
                #expect(error.code == .notAStore, "\(name): \(error)")
                #expect(error.message.contains(BackupManifest.partialFileName), "\(name): \(error)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: destination.appending(path: "LOCK").path))
        // Completed, it is a store again.
        _ = try await EventStore.backup(storeAt: source, to: destination)
        #expect(try SegmentedLog.verify(at: destination).isIntact)
    }

    /// Two backups into one directory at once (a cron run overlapping the previous one): the
    /// second is refused as locked while the first holds the directory, and the first ends
    /// with a manifest that matches every file.
    @Test func twoConcurrentBackupsIntoOneDirectoryOneSucceeds() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 300)
        let gate = GateFileIO()
        let first = Task { try await EventStore.backup(storeAt: source, to: destination, options: BackupOptions(fileIO: gate)) }
        #expect(try await eventually { gate.entered }, "the first backup never wrote")
        do {
            _ = try await EventStore.backup(storeAt: source, to: destination)
            Issue.record("a second backup into a directory being written succeeded")
        } catch {
            #expect(Self.logError(error)?.code == .locked, "\(error)")
        }
        gate.release()
        let report = try await first.value
        #expect(try BackupManifest.check(in: destination) == report.manifest)
        try Self.expectSameRecords(destination, source, below: 300)
    }

    /// `backups list` probes a backup directory's lock with a shared flock for a moment: a
    /// backup (a --follow round) starting then waits it out instead of failing as locked.
    @Test func aBackupWaitsOutAMomentaryProbeOfItsLock() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 100)
        _ = try await EventStore.backup(storeAt: source, to: destination)
        let descriptor = open(destination.appending(path: "LOCK").path, O_RDONLY)
        #expect(descriptor >= 0)
        #expect(flock(descriptor, LOCK_SH | LOCK_NB) == 0)
        #expect(BackupManifest.state(of: destination) == .complete, "a shared probe is not a backup in progress")
        // Released by the backup itself once it reports that it found the lock held and waits
        // (no sleep racing its deadline): the backup must then go on, and must have waited.
        let waited = WaitFlag()
        let options = BackupOptions(onLockWait: {
            waited.set()
            close(descriptor)
        })
        let report = try await EventStore.backup(storeAt: source, to: destination, options: options)
        #expect(waited.isSet, "the backup never met the probe's lock")
        #expect(report.incremental)
    }

    /// An incremental backup that fails midway (a full disk) leaves the earlier complete backup:
    /// its manifest stays, the files it lists are cut back to their listed bytes, the files it
    /// does not list and the marker are removed (it reads as that backup); a restore of it
    /// gives the earlier backup's events. The next backup builds on it.
    @Test func anIncrementalBackupCutShortLeavesTheEarlierBackupWhole() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 300)
        let first = try await EventStore.backup(storeAt: source, to: destination)
        try await Self.makeStore(source, count: 300, from: 300)
        for failAfter in [0, 1, 2, 3] {
            await #expect(throws: (any Error).self) {
                try await EventStore.backup(storeAt: source, to: destination, options: BackupOptions(fileIO: FailingFileIO(failAfter: failAfter)))
            }
            #expect(try BackupManifest.check(in: destination) == first.manifest, "after \(failAfter) writes")
            // Back to exactly the earlier backup (review item 13): no marker, so read commands
            // take it; grown files cut back, new ones removed, so it reads as that backup.
            #expect(BackupManifest.state(of: destination) == .complete, "after \(failAfter) writes")
            #expect(try SegmentedLog.openReadOnly(at: destination).bounds.nextPosition == first.manifest.nextPosition, "after \(failAfter) writes")
        }
        let restored = scratch.file("restored")
        #expect(try await EventStore.restore(from: destination, to: restored).nextPosition == first.manifest.nextPosition)
        try Self.expectSameRecords(restored, source, below: first.manifest.nextPosition)
        let next = try await EventStore.backup(storeAt: source, to: destination)
        #expect(next.incremental)
        #expect(try BackupManifest.check(in: destination) == next.manifest)
        try Self.expectSameRecords(destination, source, below: 600)
    }

    /// An incremental backup writes only the active segment's new tail, not the whole segment
    /// again: the bytes written are exactly what the files grew by or the new files hold.
    @Test func anIncrementalBackupAppendsOnlyTheActiveSegmentsTail() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 300)
        let first = try await EventStore.backup(storeAt: source, to: destination)
        try await Self.makeStore(source, count: 10, from: 300)
        let second = try await EventStore.backup(storeAt: source, to: destination)
        let before = Dictionary(uniqueKeysWithValues: first.manifest.files.map { ($0.name, $0.size) })
        let grown = second.manifest.files.filter { file in before[file.name].map { old in old < file.size } ?? false }
        #expect(!grown.isEmpty, "the test needs the active segment to grow, not seal")
        let expected = second.manifest.files.filter { second.copiedFiles.contains($0.name) }
            .reduce(Int64(0)) { $0 + $1.size - (before[$1.name] ?? 0) }
        #expect(second.copiedBytes == expected)
        #expect(second.copiedBytes < grown.reduce(Int64(0)) { $0 + $1.size })
        #expect(try BackupManifest.check(in: destination) == second.manifest)
        try Self.expectSameRecords(destination, source, below: 310)
    }

    /// The fixture of the two tests below: a store of 300 events (`scratch`'s "store") backed up
    /// once (into "backup"), then grown by `growingBy` events, then one bit flipped inside the
    /// first payload of the active segment, below the size of the backup's copy of it.
    /// - Returns: The first backup, the source's records once grown, and the active segment as
    ///   the first backup listed it.
    private static func backupThenDamageTheActiveSegmentsCopiedPrefix(growingBy added: Int) async throws
        -> (scratch: TemporaryDirectory, first: BackupReport, written: [(LogPosition, LogTimestamp, [UInt8])], active: BackupManifest.File) {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await makeStore(source, count: 300)
        let first = try await EventStore.backup(storeAt: source, to: destination)
        if added > 0 { try await makeStore(source, count: added, from: 300) }
        let written = try records(source)
        let active = try #require(first.manifest.files.filter { $0.name.hasSuffix(".log") }.max { $0.name < $1.name })
        try #require(active.size > 32 + 64 + 5, "the test needs a batch in the active segment's earlier copy")
        try flipBit(in: source.appending(path: active.name).path, at: 32 + 64 + 5)
        return (scratch, first, written, active)
    }

    /// An incremental backup reads only the active segment's tail: the prefix its earlier copy
    /// holds (the same batch headers up to the listed size, each with its payload's CRC32C) is
    /// not read again, as a sealed segment is not. A payload damaged in the source's prefix
    /// since is therefore not met (a whole read stopped the backup on it): the backup keeps
    /// its earlier, checked copy and appends the new batches, and holds the events as written.
    @Test func anIncrementalBackupReadsOnlyTheActiveSegmentsTail() async throws {
        let (scratch, _, written, active) = try await Self.backupThenDamageTheActiveSegmentsCopiedPrefix(growingBy: 10)
        let source = scratch.file("store"), destination = scratch.file("backup")
        let second = try await EventStore.backup(storeAt: source, to: destination)
        #expect(second.incremental)
        #expect(second.copiedFiles == [active.name])
        let grown = try #require(second.manifest.files.first { $0.name == active.name })
        #expect(second.copiedBytes == grown.size - active.size)
        #expect(try BackupManifest.check(in: destination) == second.manifest)
        let copied = try Self.records(destination)
        #expect(copied.count == 310)
        #expect(copied.elementsEqual(written) { $0 == $1 })
    }

    /// An incremental backup with nothing new does not read the active segment either: the
    /// same committed size and batch headers as the earlier copy are the same bytes. A payload
    /// damaged in the source since is not met; the earlier, checked copy stays as it is.
    @Test func anIncrementalBackupWithNothingNewDoesNotReadTheActiveSegment() async throws {
        let (scratch, first, written, active) = try await Self.backupThenDamageTheActiveSegmentsCopiedPrefix(growingBy: 0)
        let source = scratch.file("store"), destination = scratch.file("backup")
        let second = try await EventStore.backup(storeAt: source, to: destination)
        #expect(second.incremental)
        #expect(second.copiedFiles.isEmpty)
        #expect(second.unchangedFiles.contains(active.name))
        #expect(second.manifest.files == first.manifest.files)
        #expect(try BackupManifest.check(in: destination) == second.manifest)
        #expect(try Self.records(destination).elementsEqual(written) { $0 == $1 })
    }

    /// Only a manifest that does not decode is "damaged, use --restart": a newer build's
    /// manifest (unsupported version) is reported as such, never relabelled.
    @Test func aNewerBuildsManifestIsNotCalledDamaged() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 100)
        _ = try await EventStore.backup(storeAt: source, to: destination)
        let path = destination.appending(path: BackupManifest.fileName)
        let text = try String(contentsOf: path, encoding: .utf8)
        try text.replacingOccurrences(of: "\"format\":1", with: "\"format\":99").replacingOccurrences(of: "\"format\" : 1", with: "\"format\" : 99")
            .write(to: path, atomically: true, encoding: .utf8)
        await #expect { try await EventStore.backup(storeAt: source, to: destination) } throws: { error in
            Self.logError(error)?.code == .unsupportedVersion
        }
    }

    /// The parent of every directory a backup creates is synced (a completed backup in a new
    /// dated directory must survive a power loss).
    @Test func theParentsOfCreatedDirectoriesAreSynced() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store")
        try await Self.makeStore(source, count: 100)
        let io = SyncRecordingFileIO()
        let destination = scratch.file("a").appending(path: "b").appending(path: "backup")
        _ = try await EventStore.backup(storeAt: source, to: destination, options: BackupOptions(fileIO: io))
        let synced = io.synced
        for directory in [scratch.url, scratch.file("a"), scratch.file("a").appending(path: "b")] {
            #expect(synced.contains(directory.standardizedFileURL.path), "\(directory.path) not synced: \(synced)")
        }
    }

    /// A directory is synced before the manifest only when the round gave it a new entry: a
    /// first backup syncs the destination and its `snapshots` directory for the files it made
    /// there; a round that only grew the active segment's copy syncs neither for files (the
    /// destination only for its own in-progress marker, its manifest and the marker's removal).
    @Test func onlyDirectoriesGivenNewEntriesAreSyncedBeforeTheManifest() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 20)
        try await Self.writeSnapshots(source)
        let dest = destination.standardizedFileURL.path
        let firstIO = SyncRecordingFileIO()
        let first = try await EventStore.backup(storeAt: source, to: destination, options: BackupOptions(fileIO: firstIO))
        #expect(first.manifest.files.contains { $0.name.hasPrefix("snapshots/") })
        #expect(firstIO.synced.contains(dest + "/snapshots"))

        try await Self.makeStore(source, count: 10, from: 20)  // the same segment grows
        let io = SyncRecordingFileIO()
        let grown = try await EventStore.backup(storeAt: source, to: destination, options: BackupOptions(fileIO: io))
        #expect(grown.incremental && grown.copiedFiles == [Segment.Name.segment(0)] && grown.linkedFiles.isEmpty)
        #expect(!io.synced.contains(dest + "/snapshots"), "\(io.synced)")
        #expect(io.synced.filter { $0 == dest }.count == 3, "marker, manifest, end: \(io.synced)")
        #expect(!io.synced.contains { $0.hasSuffix(BackupManifest.partialFileName + ".tmp") }, "the empty marker is made in place")
        #expect(try SegmentedLog.verify(at: destination).isIntact)
        try Self.expectSameRecords(destination, source, below: 30)
    }

    /// An incremental round that finds the active segment's earlier copy was read from this
    /// very file trusts the copy's prefix from the header of the last batch it
    /// covers: only the tail is read and appended, however long the prefix (the fingerprint of
    /// every batch header read the whole prefix when batches are small). So a batch header
    /// earlier in that file rewritten in place (valid, other bytes: the log never does this) is
    /// not read, and the copy keeps the bytes it checked. The same bytes in another file (a new
    /// inode under the segment's name) are fingerprinted whole again: that rewrite is seen.
    @Test(.enabled(if: BackupTests.temporaryFilesHaveGenerations, "the file system under the temporary directory gives no inode generation: segments are fingerprinted"))
    func aGrownSegmentReadFromTheSameFileIsTrustedFromItsLastBatchHeader() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        let name = Segment.Name.segment(0)
        let path = source.appending(path: name).path
        let store = try EventStore.open(at: source, log: SegmentedLog.Configuration(segmentSize: 1 << 20), snapshotPolicy: .never)
        for start in stride(from: 0, to: 40, by: 10) { try await store.append(Self.events(start, 10)) }
        let first = try await store.backup(to: destination)
        let listed = try #require(first.manifest.files.first { $0.name == name })
        #expect(listed.source != nil)
        // The second batch's header (the first one's names the store).
        let firstHeader = try Self.bytes(of: path, at: Int64(SegmentHeader.size), count: BatchHeader.size)
        let second = Int64(SegmentHeader.size + BatchHeader.size) + Int64(firstHeader.withUnsafeBytes { $0.loadLittleEndian(at: 20, as: UInt32.self) })
        let original = try Self.bytes(of: path, at: second, count: BatchHeader.size)

        // Its maximum timestamp rewritten in place, its header checksum valid.
        var header = original
        header[40] &+= 1
        let crc = header.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<60])) }
        withUnsafeBytes(of: crc.littleEndian) { header.replaceSubrange(60..<64, with: $0) }
        try Self.write(header, to: path, at: second)
        for start in stride(from: 40, to: 60, by: 10) { try await store.append(Self.events(start, 10)) }
        let grown = try await store.backup(to: destination)
        let entry = try #require(grown.manifest.files.first { $0.name == name })
        #expect(grown.copiedFiles == [name] && entry.source == listed.source)
        #expect(grown.copiedBytes == entry.size - listed.size, "only the tail was read and appended")
        #expect(try Self.bytes(of: destination.appending(path: name).path, at: second, count: BatchHeader.size) == original)
        try await store.close()

        // The same bytes under another inode: fingerprinted whole, the rewritten header seen,
        // the segment written again.
        try FileManager.default.copyItem(atPath: path, toPath: path + ".copy")
        #expect(rename(path + ".copy", path) == 0)
        let moved = try await EventStore.backup(storeAt: source, to: destination)
        let rewritten = try #require(moved.manifest.files.first { $0.name == name })
        #expect(rewritten.source != entry.source)
        #expect(moved.copiedFiles.contains(name) && moved.copiedBytes >= rewritten.size, "\(moved.copiedBytes) of \(rewritten.size)")
        #expect(try Self.bytes(of: destination.appending(path: name).path, at: second, count: BatchHeader.size) == header)
        #expect(try SegmentedLog.verify(at: destination).isIntact)
    }

    /// The fingerprint a grown copy's entry carries (continued over the tail's headers) is the
    /// fingerprint of the whole segment: a round that cannot vouch for the copy (no `source`, as
    /// in a manifest of an older build) compares it and keeps the copy unwritten.
    @Test func aGrownCopysFingerprintIsTheWholeSegments() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        let name = Segment.Name.segment(0)
        try await Self.makeStore(source, count: 40)
        _ = try await EventStore.backup(storeAt: source, to: destination)
        try await Self.makeStore(source, count: 20, from: 40)
        let grown = try await EventStore.backup(storeAt: source, to: destination)
        #expect(grown.copiedFiles == [name])
        var manifest = try #require(try BackupManifest.read(in: destination))
        for index in manifest.files.indices { manifest.files[index].source = nil }
        try StoreDirectory.writeAtomically(try manifest.encoded(), directory: destination.path, name: BackupManifest.fileName, io: PosixFileIO())
        let again = try await EventStore.backup(storeAt: source, to: destination)
        #expect(again.unchangedFiles.contains(name) && again.copiedBytes == 0, "\(again.copiedFiles)")
        #expect((again.manifest.files.first { $0.name == name }?.source != nil) == Self.temporaryFilesHaveGenerations)
    }

    /// Whether files under the temporary directory get an inode generation (`FS_IOC_GETVERSION`:
    /// ext4, XFS, btrfs), which a backup needs to vouch for a copy without reading its headers.
    static let temporaryFilesHaveGenerations: Bool = {
        let dir = TemporaryDirectory("backup-generation")
        guard let file = try? OpenFile.open(dir.path + "/f", flags: O_RDWR | O_CREAT) else { return false }
        return SegmentedLog.identity(of: file) != nil
    }()

    /// A file's identity names one file: an inode number the file system gives again (ext4 does
    /// at once) comes with another generation.
    @Test func anInodeNumberGivenAgainIsAnotherFile() throws {
        let dir = TemporaryDirectory("backup-identity")
        var reused = 0
        for round in 0..<20 {
            let path = dir.path + "/f"
            let first = try OpenFile.open(path, flags: O_RDWR | O_CREAT)
            let firstIdentity = SegmentedLog.identity(of: first)
            var a = stat()
            fstat(first.descriptor, &a)
            unlink(path)
            _ = consume first
            let second = try OpenFile.open(path, flags: O_RDWR | O_CREAT)
            var b = stat()
            fstat(second.descriptor, &b)
            #expect((firstIdentity != nil) == Self.temporaryFilesHaveGenerations, "round \(round)")
            if firstIdentity != nil { #expect(SegmentedLog.identity(of: second) != firstIdentity) }
            if a.st_ino == b.st_ino { reused += 1 }
            unlink(path)
        }
        // Not a requirement of the code, a note on what the run exercised.
        print("inode numbers given again: \(reused) of 20")
    }

    static func bytes(of path: String, at offset: Int64, count: Int) throws -> [UInt8] {
        let handle = try FileHandle(forReadingFrom: URL(filePath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        return [UInt8](try handle.read(upToCount: count) ?? Data())
    }

    static func write(_ bytes: [UInt8], to path: String, at offset: Int64) throws {
        let handle = try FileHandle(forUpdating: URL(filePath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: bytes)
    }

    /// The snapshot filter is the store's own rule: a snapshot that contradicts the log (it
    /// covers events the log, never cut, does not hold) is damage, not skipped; one from an
    /// earlier history (a log cut since) is not carried.
    @Test func snapshotsAreJudgedByTheStoresRule() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), later = scratch.file("later")
        try await Self.makeStore(source, count: 300)
        try await Self.writeSnapshots(source)
        try FileManager.default.copyItem(at: source, to: later)
        try await Self.makeStore(later, count: 100, from: 300)
        let grown = try EventStore.open(at: later, log: Self.configuration, snapshotPolicy: SnapshotPolicy(everyEvents: nil, onClose: false))
        try await grown.writeSnapshots()
        try await grown.close()

        // Bound to the log: carried.
        let good = try await EventStore.backup(storeAt: source, to: scratch.file("good"))
        let carried = good.manifest.files.filter { $0.name.hasPrefix("snapshots/") }
        #expect(!carried.isEmpty)

        // A snapshot covering 400 events beside a log of 300: past the backup's position, it is
        // not the backup's and not judged (a writer in another process snapshots while it
        // appends, after the backup read the log's end: judging it against that end called a
        // healthy store damaged and advised a repair). The store's own open judges it.
        let snapshots = source.appending(path: "snapshots")
        let before = Set(try FileManager.default.contentsOfDirectory(atPath: snapshots.path))
        let planted = try FileManager.default.contentsOfDirectory(atPath: later.appending(path: "snapshots").path)
            .filter { $0.hasSuffix(".snap") && !before.contains($0) }
        #expect(!planted.isEmpty, "the test needs snapshots at 400")
        for name in planted {
            try FileManager.default.copyItem(at: later.appending(path: "snapshots").appending(path: name), to: snapshots.appending(path: name))
        }
        let ahead = try await EventStore.backup(storeAt: source, to: scratch.file("ahead"))
        #expect(Set(ahead.manifest.files.map(\.name).filter { $0.hasPrefix("snapshots/") }) == Set(carried.map(\.name)))
        #expect { try EventStore.open(at: source, log: Self.configuration, snapshotPolicy: .never) } throws: { error in
            Self.logError(error)?.code == .corruption
        }

        // A new history epoch (damage accepted): the one at 400 is stale and not carried; the
        // ones at 300 still match the log's records, so the store uses them, and so does the
        // backup, whatever their epoch.
        _ = try SegmentedLog.startNewHistoryEpoch(at: source)
        let after = try await EventStore.backup(storeAt: source, to: scratch.file("after"))
        let names = Set(after.manifest.files.map(\.name).filter { $0.hasPrefix("snapshots/") })
        #expect(names == Set(carried.map(\.name)))
        for name in planted { #expect(!names.contains("snapshots/" + name)) }
    }

    /// A damaged batch in the source stops the backup with its file and offset; no manifest.
    @Test func aChecksumMismatchInTheSourceIsReportedWithFileAndOffset() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), destination = scratch.file("backup")
        try await Self.makeStore(source, count: 300)
        let segment = source.appending(path: "00000000000000000000.log").path
        // Past the segment header and the first batch header: inside the first payload.
        try flipBit(in: segment, at: 32 + 64 + 5)
        await #expect { try await EventStore.backup(storeAt: source, to: destination) } throws: { error in
            guard let error = Self.logError(error) else { return false }
            return error.code == .corruption && error.file == segment && error.offset == 32 && error.position == 0
        }
        #expect(try BackupManifest.read(in: destination) == nil)
    }

    @Test func aDestinationThatCannotBeCreatedIsAnIOError() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store")
        try await Self.makeStore(source, count: 10)
        try Data("x".utf8).write(to: scratch.file("file"))
        await #expect { try await EventStore.backup(storeAt: source, to: scratch.file("file").appending(path: "backup")) } throws: { error in
            Self.logError(error)?.code == .io
        }
    }

    /// Restore (issue 28, item 4): at the end the backup's files (snapshots too); at a
    /// position or a recording time the log cut there; the result verifies and opens.
    @Test func restoreAtTheEndAtAPositionAndAtATime() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), backup = scratch.file("backup")
        try await Self.makeStore(source, count: 500)
        let store = try EventStore.open(at: source, log: Self.configuration, snapshotPolicy: .never)
        try await store.writeSnapshots()
        try await store.close()
        _ = try await EventStore.backup(storeAt: source, to: backup)

        let whole = scratch.file("whole")
        #expect(try await EventStore.restore(from: backup, to: whole).nextPosition == 500)
        #expect(try SegmentedLog.verify(at: whole).isIntact)
        #expect(FileManager.default.fileExists(atPath: whole.appending(path: "snapshots").path))
        #expect(!FileManager.default.fileExists(atPath: whole.appending(path: BackupManifest.fileName).path))
        try Self.expectSameRecords(whole, source, below: 500)

        let cut = scratch.file("cut")
        // 240: a batch boundary (the store appends ten events at a time).
        #expect(try await EventStore.restore(from: backup, to: cut, at: .position(240)) == RestoreResult(nextPosition: 240, requestedPosition: 240))
        #expect(try SegmentedLog.verify(at: cut).isIntact)
        try Self.expectSameRecords(cut, source, below: 240)
        let reopened = try EventStore.open(at: cut, snapshotPolicy: .never)
        #expect(reopened.nextPosition == 240)
        try await reopened.close()

        let records = try Self.records(source)
        let limit = records[321].1
        // The longest prefix recorded by then (EventStore.lastPosition's rule).
        let expected = LogPosition(records.firstIndex { $0.1 > limit } ?? records.count)
        let timed = scratch.file("timed")
        let atTime = try await EventStore.restore(from: backup, to: timed, at: .recordedAtOrBefore(limit))
        #expect(atTime.requestedPosition == expected)
        // Rounded down to the start of the batch of ten holding the prefix's last event.
        #expect(atTime.nextPosition == (expected % 10 == 0 ? expected : expected / 10 * 10))
        try Self.expectSameRecords(timed, source, below: atTime.nextPosition)
    }

    /// Recording times out of log order (an application's `recordedAt`; concurrent appends take
    /// their time before group commit orders them): a restore at a time holds what the store knew
    /// then, the longest prefix recorded by then, never an event recorded later that comes
    /// before one recorded earlier (the last-event rule took the batch [10, 30, 20] whole at 25).
    @Test func restoreAtATimeNeverHoldsAnEventRecordedLater() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), backup = scratch.file("backup")
        let base = Date(timeIntervalSince1970: 1_800_000_000)
        func at(_ seconds: [Double], from first: Int) -> [PendingEvent] {
            zip(Self.events(first, seconds.count), seconds).map { event, offset in
                var event = event
                event.recordedAt = base + offset
                return event
            }
        }
        let store = try EventStore.open(at: source, log: Self.configuration, snapshotPolicy: .never)
        try await store.append(at([0, 1], from: 0))         // positions 0-1
        try await store.append(at([10, 30, 20], from: 2))   // 2-4, one batch
        try await store.append(at([40], from: 5))           // 5
        try await store.append(at([35, 50], from: 6))       // 6-7: 35 comes after 40
        #expect(try store.lastPosition(recordedAtOrBefore: base + 25) == 2)
        #expect(try store.lastPosition(recordedAtOrBefore: base + 37) == 4)
        #expect(try store.lastPosition(recordedAtOrBefore: base + 45) == 6)
        #expect(try store.lastPosition(recordedAtOrBefore: base - 1) == nil)
        try await store.close()
        _ = try await EventStore.backup(storeAt: source, to: backup)

        for (seconds, requested, restored) in [(25.0, 3, 2), (37, 5, 5), (45, 7, 6), (-1, 0, 0)] as [(Double, LogPosition, LogPosition)] {
            let destination = scratch.file("at-\(seconds)")
            let result = try await EventStore.restore(from: backup, to: destination, at: .recordedAtOrBefore(try LogTimestamp(base + seconds)))
            #expect(result == RestoreResult(nextPosition: restored, requestedPosition: requested), "at +\(seconds) s")
            let held = try Self.records(destination)
            #expect(held.count == Int(restored))
            #expect(held.allSatisfy { $0.1 <= (try! LogTimestamp(base + seconds)) }, "at +\(seconds) s: an event recorded later was restored")
        }
    }

    /// The batches of the log at `directory`, as position ranges.
    static func batches(_ directory: URL) async throws -> [Range<LogPosition>] {
        let log = try SegmentedLog.openReadOnly(at: directory)
        let batches = log.batches(endingAtOrBefore: .max)
        try await log.close()
        return batches
    }

    /// A restore cut inside an atomic batch holds none of it (rounded down to its start), and
    /// copies batch by batch: the restored log's batches are the source's first whole ones, the
    /// same positions, records and recording times. The old restore cut at the very position
    /// and re-chunked the records by 4,096, whatever the batches.
    @Test func restoreAtAPointInsideABatchRoundsDownToItsStartAndKeepsTheBatches() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), backup = scratch.file("backup")
        // Batches of 1 to 7 records, each record recorded one second after the one before.
        let log = try SegmentedLog.open(at: source, configuration: Self.configuration)
        var next = 0
        for size in [3, 1, 7, 2, 5, 1, 4, 6, 2, 3] {
            _ = try await log.append((next..<next + size).map { i in
                LogEntry(timestamp: LogTimestamp(nanosecondsSince1970: 1_000_000_000_000 + Int64(i) * 1_000_000_000), payload: Self.noise(i))
            })
            next += size
        }
        try await log.close()
        _ = try await EventStore.backup(storeAt: source, to: backup)
        let sourceBatches = try await Self.batches(source)
        #expect(sourceBatches.count == 10)
        let starts = Set(sourceBatches.map(\.lowerBound) + [LogPosition(next)])
        for position in 0...LogPosition(next) {
            let expectedEnd = starts.filter { $0 <= position }.max()!
            for point in [RestorePoint.position(position),
                          .recordedAtOrBefore(LogTimestamp(nanosecondsSince1970: 1_000_000_000_000 + (Int64(position) - 1) * 1_000_000_000))] {
                let restored = scratch.file("at-\(position)-\(point == .position(position) ? "p" : "t")")
                let result = try await EventStore.restore(from: backup, to: restored, at: point)
                #expect(result == RestoreResult(nextPosition: expectedEnd, requestedPosition: position), "\(point)")
                #expect(result.roundedDown == !starts.contains(position))
                #expect(try await Self.batches(restored) == sourceBatches.filter { $0.upperBound <= expectedEnd }, "\(point)")
                try Self.expectSameRecords(restored, source, below: expectedEnd)
                #expect(try SegmentedLog.verify(at: restored).isIntact)
            }
        }
    }

    /// A backup reads whole only the snapshots it may carry: the header of every other one (past
    /// its position, or older than the one chosen for its projection) tells it is not needed.
    /// It read every snapshot whole before.
    @Test func aBackupReadsWholeOnlyTheSnapshotsItMayCarry() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store")
        let policy = SnapshotPolicy(everyEvents: nil, onClose: false, keep: 3)
        try await Self.makeStore(source, count: 300)
        for count in [100, 100] {
            let store = try EventStore.open(at: source, log: Self.configuration, snapshotPolicy: policy)
            try await store.writeSnapshots()
            try await store.close()
            try await Self.makeStore(source, count: count, from: Int(store.nextPosition))
        }
        let store = try EventStore.open(at: source, log: Self.configuration, snapshotPolicy: policy)
        try await store.writeSnapshots()
        try await store.close()
        // Snapshots at 300, 400 and 500 of each projection.
        let directory = source.appending(path: "snapshots")
        let all = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".snap") }
        let projections = Set(all.map { $0.dropFirst(20) })
        #expect(projections.count >= 1 && all.count == 3 * projections.count, "\(all)")

        let log = try SegmentedLog.openReadOnly(at: source)
        for (position, expected) in [(LogPosition(500), "00000000000000000500"), (450, "00000000000000000400"), (300, "00000000000000000300")] {
            let reads = Mutex<[String: [Int?]]>([:])
            let carried = try EventStore.boundSnapshots(in: directory, log: log, position: position, epoch: log.historyEpoch) { url, count in
                reads.withLock { $0[url.lastPathComponent, default: []].append(count) }
                return EventStore.readSnapshotFile(url, count: count)
            }
            #expect(Set(carried.map(\.name)) == Set(all.filter { $0.hasPrefix(expected) }.map { "snapshots/" + $0 }))
            let readWhole = Set(reads.withLock { $0 }.filter { $0.value.contains(nil) }.keys)
            #expect(readWhole == Set(all.filter { $0.hasPrefix(expected) }), "at \(position)")
            #expect(reads.withLock { $0.count } == all.count, "every header is read")
        }
        try await log.close()
    }

    /// An incremental backup keeps a snapshot that the backup it builds on holds unchanged (the
    /// manifest lists it at this size and the copy's header, which holds the body's length and
    /// checksum, is the store file's) without reading the store's file whole; a copy whose
    /// header differs, a copy gone from the directory, and a round that starts over read the
    /// file whole and write it.
    @Test func anIncrementalBackupKeepsAnUnchangedSnapshotUnread() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), backup = scratch.file("backup")
        try await Self.makeStore(source, count: 300)
        try await Self.writeSnapshots(source)
        let first = try await EventStore.backup(storeAt: source, to: backup)
        let snapshots = first.manifest.files.map(\.name).filter { $0.hasPrefix("snapshots/") }.sorted()
        #expect(!snapshots.isEmpty && Set(snapshots).isSubset(of: first.copiedFiles), "\(first)")
        try await Self.makeStore(source, count: 20, from: 300)

        /// What a round into `backup` would carry now, and every read it made (by path: the
        /// count of bytes asked, `nil` for the whole file).
        func carriedNow() async throws -> ([BackupExtraFile], [String: [Int?]]) {
            let log = try SegmentedLog.openReadOnly(at: source)
            let reads = Mutex<[String: [Int?]]>([:])
            let carried = try EventStore.boundSnapshots(in: source.appending(path: "snapshots"), log: log, position: log.bounds.nextPosition,
                                                        epoch: log.historyEpoch, earlierBackup: backup) { url, count in
                reads.withLock { $0[url.path, default: []].append(count) }
                return EventStore.readSnapshotFile(url, count: count)
            }
            try await log.close()
            return (carried, reads.withLock { $0 })
        }
        let (carried, reads) = try await carriedNow()
        #expect(carried.map(\.name) == snapshots)
        #expect(carried.allSatisfy { $0.earlierCopy != nil && $0.bytes.isEmpty }, "carried as the earlier copies")
        let storeReads = reads.filter { $0.key.hasPrefix(source.path) }
        #expect(storeReads.count == snapshots.count && storeReads.values.allSatisfy { !$0.contains(nil) }, "only the headers read: \(storeReads)")

        func expectSameCopies(_ report: BackupReport, _ comment: Comment) throws {
            for name in snapshots {
                #expect(try Data(contentsOf: backup.appending(path: name)) == Data(contentsOf: source.appending(path: name)), comment)
            }
            #expect(try SegmentedLog.verify(at: backup).isIntact, comment)
            #expect(report.manifest.files.filter { $0.name.hasPrefix("snapshots/") } == first.manifest.files.filter { $0.name.hasPrefix("snapshots/") }, comment)
        }
        let second = try await EventStore.backup(storeAt: source, to: backup)
        #expect(second.incremental && Set(snapshots).isSubset(of: second.unchangedFiles), "\(second)")
        try expectSameCopies(second, "kept")

        // The copy's header differs (damaged): the store's file is read whole and carried by
        // its bytes. (The round then keeps the copy the manifest lists by size and CRC32C, as
        // for any file: a damaged copy is what `backups list` and `--restart` are for.)
        try flipBit(in: backup.appending(path: snapshots[0]).path, at: 10)
        let (recarried, rereads) = try await carriedNow()
        let damagedOne = try #require(recarried.first { $0.name == snapshots[0] })
        let storeFile = Array(try Data(contentsOf: source.appending(path: snapshots[0])))
        #expect(damagedOne.earlierCopy == nil && damagedOne.bytes == storeFile)
        #expect(rereads[source.appending(path: snapshots[0]).path]?.contains(nil) == true, "read whole")
        try flipBit(in: backup.appending(path: snapshots[0]).path, at: 10)

        // The copy gone: read and written again.
        try FileManager.default.removeItem(at: backup.appending(path: snapshots[0]))
        let fourth = try await EventStore.backup(storeAt: source, to: backup)
        #expect(fourth.copiedFiles.contains(snapshots[0]), "\(fourth)")
        try expectSameCopies(fourth, "rewritten when gone")

        // Starting over: nothing is built on, every snapshot is read and written.
        let fifth = try await EventStore.backup(storeAt: source, to: backup, options: BackupOptions(restart: true))
        #expect(!fifth.incremental && Set(snapshots).isSubset(of: fifth.copiedFiles), "\(fifth)")
        try expectSameCopies(fifth, "restart")
    }

    @Test func restoreRefusesWhatIsNotACompleteIntactBackup() async throws {
        let scratch = TemporaryDirectory("backup")
        let source = scratch.file("store"), backup = scratch.file("backup")
        try await Self.makeStore(source, count: 300)
        // Not a backup: a store.
        await #expect { try await EventStore.restore(from: source, to: scratch.file("a")) } throws: { error in
            Self.logError(error)?.code == .backupMismatch
        }
        _ = try await EventStore.backup(storeAt: source, to: backup)
        await #expect { try await EventStore.restore(from: backup, to: scratch.file("b"), at: .position(301)) } throws: { error in
            Self.logError(error)?.code == .invalidArgument
        }
        await #expect { try await EventStore.restore(from: backup, to: source) } throws: { error in
            Self.logError(error)?.code == .invalidArgument && "\(error)".contains("not empty")
        }
        let damaged = backup.appending(path: "00000000000000000000.log").path
        try flipBit(in: damaged, at: 200)
        await #expect { try await EventStore.restore(from: backup, to: scratch.file("c")) } throws: { error in
            Self.logError(error)?.code == .corruption && Self.logError(error)?.file == damaged
        }
    }

    /// The caller's `extraFiles` runs under no lock of the log: a backup started from it (of
    /// the same log, elsewhere) completes instead of deadlocking on the lock that keeps
    /// rewrites away from the segments being copied.
    @Test func extraFilesRunUnderNoLockOfTheLog() async throws {
        let scratch = TemporaryDirectory("backup-extra")
        let source = scratch.file("store")
        try await Self.makeStore(source, count: 300)
        let log = try SegmentedLog.open(at: source, configuration: Self.configuration)
        #expect(!log.sealedSegments.isEmpty, "sealed segments: the part a rewrite could replace")
        let outer = scratch.file("outer"), inner = scratch.file("inner")
        let innerReport = Mutex<BackupReport?>(nil)
        let report = try await finishing(within: 120) {
            try log.backup(to: outer) { position, epoch in
                innerReport.withLock { $0 = try? log.backup(to: inner) }
                return [BackupExtraFile(name: "snapshots/at-\(position)-\(epoch)", bytes: [1, 2, 3])]
            }
        }
        let outerReport = try #require(report, "the backup with a nested one completed")
        #expect(outerReport.manifest.files.contains { $0.name.hasPrefix("snapshots/at-") })
        #expect(innerReport.withLock { $0 }?.manifest.nextPosition == outerReport.manifest.nextPosition)
        #expect(try SegmentedLog.verify(at: outer).isIntact && SegmentedLog.verify(at: inner).isIntact)
        try await log.close()
    }

    @Test func anInMemoryStoreCannotBeBackedUp() async throws {
        let store = try EventStore.inMemory()
        await #expect(throws: RepositoryError.misuse(Misuse(.backupUnsupported, ""))) {
            do { _ = try await store.backup(to: TemporaryDirectory("backup").url) } catch RepositoryError.misuse(let misuse) {
                throw RepositoryError.misuse(Misuse(misuse.code, ""))
            }
        }
    }
}

/// The real system calls; its first write waits (180,000 checks a millisecond apart at most) until `progress` has grown by 20.
final class WaitingFileIO: LogFileIO, Sendable {
    private let progress: @Sendable () -> Int
    private let state = Mutex<(waited: Bool, done: Bool)>((false, false))
    init(_ progress: @escaping @Sendable () -> Int) { self.progress = progress }
    var waitedFor: Bool { state.withLock { $0.waited } }

    func write(_ bytes: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64, descriptor: Int32, path: String) throws(LogError) -> Int {
        if !state.withLock({ $0.done }) {
            state.withLock { $0.done = true }
            let start = progress()
            // Counted checks, not wall time (as `eventually`): a sanitizer run can starve the
            // writer's task for tens of seconds without anything being blocked.
            var checks = 0
            while progress() < start + 20 && checks < 180_000 { usleep(1_000); checks += 1 }
            state.withLock { $0.waited = progress() >= start + 20 }
        }
        return try PosixFileIO().write(bytes, toAbsoluteOffset: offset, descriptor: descriptor, path: path)
    }
    func synchronizeData(descriptor: Int32, path: String) throws(LogError) { try PosixFileIO().synchronizeData(descriptor: descriptor, path: path) }
    func synchronize(descriptor: Int32, path: String) throws(LogError) { try PosixFileIO().synchronize(descriptor: descriptor, path: path) }
    func preallocate(descriptor: Int32, path: String, length: Int64) throws(LogError) { try PosixFileIO().preallocate(descriptor: descriptor, path: path, length: length) }
    func truncate(descriptor: Int32, path: String, length: Int64) throws(LogError) { try PosixFileIO().truncate(descriptor: descriptor, path: path, length: length) }
}

/// The real system calls, but every write after the first `failAfter` fails (ENOSPC).
final class FailingFileIO: LogFileIO, Sendable {
    private let writes = Atomic<Int>(0)
    private let failAfter: Int
    init(failAfter: Int) { self.failAfter = failAfter }

    func write(_ bytes: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64, descriptor: Int32, path: String) throws(LogError) -> Int {
        if writes.add(1, ordering: .relaxed).newValue > failAfter {
            throw LogError(.io, "injected write failure", file: path, offset: offset, systemErrorNumber: ENOSPC)
        }
        return try PosixFileIO().write(bytes, toAbsoluteOffset: offset, descriptor: descriptor, path: path)
    }
    func synchronizeData(descriptor: Int32, path: String) throws(LogError) { try PosixFileIO().synchronizeData(descriptor: descriptor, path: path) }
    func synchronize(descriptor: Int32, path: String) throws(LogError) { try PosixFileIO().synchronize(descriptor: descriptor, path: path) }
    func preallocate(descriptor: Int32, path: String, length: Int64) throws(LogError) { try PosixFileIO().preallocate(descriptor: descriptor, path: path, length: length) }
    func truncate(descriptor: Int32, path: String, length: Int64) throws(LogError) { try PosixFileIO().truncate(descriptor: descriptor, path: path, length: length) }
}

/// The real system calls; the first write waits (up to 20 s) until ``release()``.
final class GateFileIO: LogFileIO, Sendable {
    private let state = Mutex<(entered: Bool, released: Bool)>((false, false))
    var entered: Bool { state.withLock { $0.entered } }
    func release() { state.withLock { $0.released = true } }

    func write(_ bytes: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64, descriptor: Int32, path: String) throws(LogError) -> Int {
        state.withLock { $0.entered = true }
        // Counted checks (at least 180 s), released by the test; the bound only keeps a failed
        // test from hanging the run.
        var checks = 0
        while !state.withLock({ $0.released }) && checks < 180_000 { usleep(1_000); checks += 1 }
        return try PosixFileIO().write(bytes, toAbsoluteOffset: offset, descriptor: descriptor, path: path)
    }
    func synchronizeData(descriptor: Int32, path: String) throws(LogError) { try PosixFileIO().synchronizeData(descriptor: descriptor, path: path) }
    func synchronize(descriptor: Int32, path: String) throws(LogError) { try PosixFileIO().synchronize(descriptor: descriptor, path: path) }
    func preallocate(descriptor: Int32, path: String, length: Int64) throws(LogError) { try PosixFileIO().preallocate(descriptor: descriptor, path: path, length: length) }
    func truncate(descriptor: Int32, path: String, length: Int64) throws(LogError) { try PosixFileIO().truncate(descriptor: descriptor, path: path, length: length) }
}

/// The real system calls, recording the path of every `synchronize`.
final class SyncRecordingFileIO: LogFileIO, Sendable {
    private let paths = Mutex<[String]>([])
    var synced: [String] { paths.withLock { $0 } }

    func write(_ bytes: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64, descriptor: Int32, path: String) throws(LogError) -> Int {
        try PosixFileIO().write(bytes, toAbsoluteOffset: offset, descriptor: descriptor, path: path)
    }
    func synchronizeData(descriptor: Int32, path: String) throws(LogError) { try PosixFileIO().synchronizeData(descriptor: descriptor, path: path) }
    func synchronize(descriptor: Int32, path: String) throws(LogError) {
        paths.withLock { $0.append(path) }
        try PosixFileIO().synchronize(descriptor: descriptor, path: path)
    }
    func preallocate(descriptor: Int32, path: String, length: Int64) throws(LogError) { try PosixFileIO().preallocate(descriptor: descriptor, path: path, length: length) }
    func truncate(descriptor: Int32, path: String, length: Int64) throws(LogError) { try PosixFileIO().truncate(descriptor: descriptor, path: path, length: length) }
}

/// Set once from another thread (a hook), read by the test.
private final class WaitFlag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
