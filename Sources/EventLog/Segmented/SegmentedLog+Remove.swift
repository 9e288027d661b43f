public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension SegmentedLog {
    /// What ``removeStore(at:)`` deleted.
    public struct Removal: Sendable {
        /// The deleted files and directories (with a trailing `/`), relative to the store
        /// directory.
        public var removed: [String] = []
        /// Hidden files left in place (not the store's, and not in its way).
        public var kept: [String] = []
    }

    /// Deletes a store's own files from `directory`, and nothing else, or refuses before
    /// deleting anything.
    ///
    /// The store's own files are those it names itself (Docs/FileFormat.md, "The store
    /// directory"; EventKernel's snapshot names, `SnapshotDirectory`): the
    /// store file, the lock, segments with their index and checkpoint files and those files'
    /// temporaries, `snapshots/` holding only snapshot files (`<20 digits>-<hex>.snap`) and their
    /// hidden temporaries, and an empty `recovered/`. The bytes recovery and repair keep in
    /// `recovered/` are never deleted: a store holding some is refused.
    /// Hidden files beside them are left alone. Anything else (a user's file, a subdirectory, a
    /// directory where the store keeps a file) means the directory is not only a store: it is
    /// refused whole. Symbolic links among the store's names are unlinked, never followed. The
    /// directory itself stays; the writer's lock is held while deleting.
    /// - Parameter directory: The store directory.
    /// - Returns: What was deleted and what was kept.
    /// - Throws: ``LogError`` ``LogError/Code/notAStore`` (no such directory, not a store,
    ///   other files in it, or kept bytes in `recovered/`: nothing deleted),
    ///   ``LogError/Code/locked`` (a writer holds it: nothing deleted), or an I/O error from a
    ///   deletion.
    public static func removeStore(at directory: URL) throws(LogError) -> Removal {
        let path = directory.standardizedFileURL.path
        try StoreDirectory.requireExisting(path)
        guard isStore(at: directory) else {
            throw LogError(.notAStore, "\(path) is not a store (no \(StoreManifest.fileName) file and no segment files): nothing was deleted", file: path)
        }
        var removal = Removal()
        var files: [String] = []          // top-level files and links to unlink, in order
        var directories: [(name: String, entries: [String])] = []    // owned subdirectories to empty, then remove
        var foreign: [String] = []
        for name in try StoreDirectory.list(path).sorted() {
            let kind = entryKind(path + "/" + name)
            if name.hasPrefix(".") { removal.kept.append(name); continue }
            if name == "snapshots" || name == RecoveredFiles.directoryName || name == ConsumerFiles.directoryName {
                switch kind {
                case .link: files.append(name)
                case .directory:
                    let inner = try StoreDirectory.list(path + "/" + name)
                    if name == RecoveredFiles.directoryName && !inner.isEmpty {
                        // Recovery and repair keep these bytes for people to inspect; the
                        // store never deletes them (Docs/FileFormat.md).
                        throw LogError(.notAStore, "\(path)/\(name)/ holds bytes that recovery or repair kept (\(inner.sorted().prefix(3).joined(separator: ", "))\(inner.count > 3 ? ", ..." : "")); EventKernel never deletes them: move them away first. Nothing was deleted", file: path + "/" + name)
                    }
                    let consumers = name == ConsumerFiles.directoryName
                    let strangers = inner.filter { entry in
                        entryKind(path + "/" + name + "/" + entry) == .directory
                            || !(consumers ? ConsumerFiles.isOwnedFile(entry) : isSnapshotFile(entry))
                    }
                    foreign += strangers.sorted().map { name + "/" + $0 }
                    directories.append((name, inner.sorted()))
                case .other: foreign.append(name)
                }
            } else if isOwnedFileName(name), kind != .directory {
                files.append(name)
            } else {
                foreign.append(name)
            }
        }
        guard foreign.isEmpty else {
            let shown = foreign.prefix(3).joined(separator: ", ") + (foreign.count > 3 ? ", ..." : "")
            throw LogError(.notAStore, "\(path) holds files that are not the store's (\(shown)): nothing was deleted; move them away, or use another directory", file: path)
        }
        let lock = try DirectoryLock(directory: path)
        // Taking the lock creates the lock file when there was none: it goes too, unreported.
        let lockCreated = !files.contains(DirectoryLock.fileName)
        if lockCreated { files.append(DirectoryLock.fileName) }
        defer { lock.unlock() }
        // Snapshots first (a cache), then the log, the store file and the lock last: a removal
        // stopped midway leaves a store (possibly missing segments, which verify reports) that
        // a second removal finishes. Only the entries checked above go: a file that appeared
        // since makes rmdir fail rather than go unchecked.
        for (name, entries) in directories {
            for entry in entries {
                try remove(path + "/" + name + "/" + entry, directory: false)
                removal.removed.append(name + "/" + entry)
            }
            try remove(path + "/" + name, directory: true)
            removal.removed.append(name + "/")
        }
        let order: (String) -> Int = { name in
            name == DirectoryLock.fileName ? 3 : name.hasPrefix(StoreManifest.fileName) ? 2 : Segment.Name.basePosition(ofSegmentNamed: name) != nil ? 1 : 0
        }
        for name in files.sorted(by: { (order($0), $0) < (order($1), $1) }) {
            try remove(path + "/" + name, directory: false)
            if !(lockCreated && name == DirectoryLock.fileName) { removal.removed.append(name) }
        }
        return removal
    }

    private enum EntryKind { case directory, link, other }

    /// The entry itself (lstat: a link is a link, whatever it points to).
    private static func entryKind(_ path: String) -> EntryKind {
        var st = stat()
        guard lstat(path, &st) == 0 else { return .other }
        switch st.st_mode & S_IFMT {
        case S_IFDIR: return .directory
        case S_IFLNK: return .link
        default: return .other
        }
    }

    private static func remove(_ path: String, directory: Bool) throws(LogError) {
        if directory { try StoreDirectory.removeDirectory(path) } else { try StoreDirectory.remove(path) }
    }

    /// A top-level name the store writes: its file, its lock, a segment or one of its side
    /// files, or the temporary of an atomically replaced one.
    private static func isOwnedFileName(_ name: String) -> Bool {
        let stem = name.hasSuffix(".tmp") ? String(name.dropLast(4)) : name
        return stem == StoreManifest.fileName || name == DirectoryLock.fileName || Segment.Name.isSegmentOrSideFile(stem)
    }

    /// `<20 digits>-<hex>.snap` (EventKernel's SnapshotDirectory names), or the hidden
    /// temporary of one (`.<name>.<uuid>.tmp`).
    private static func isSnapshotFile(_ name: String) -> Bool {
        if name.hasPrefix(".") { return name.hasSuffix(".tmp") && name.contains(".snap.") }
        guard name.hasSuffix(".snap") else { return false }
        let parts = name.dropLast(5).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        return parts.count == 2 && parts[0].count == 20 && parts[0].allSatisfy { $0 >= "0" && $0 <= "9" }
            && !parts[1].isEmpty && parts[1].allSatisfy(\.isHexDigit)
    }
}
