#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KernelPrimitives
import Foundation

/// Directory-level operations: creation, listing, atomic replacement of small files.
package enum StoreDirectory {
    /// `path` with every symbolic link resolved: its nearest existing ancestor's real path,
    /// then the components that do not exist yet; `nil` when even `/` cannot be resolved.
    package static func realPath(ofPossiblyMissing path: String) -> String? {
        var existing = URL(filePath: path).standardizedFileURL.path
        var missing: [String] = []
        while true {
            if let resolved = realpath(existing, nil) {
                defer { free(resolved) }
                let base = String(cString: resolved)
                return missing.reversed().reduce(base) { $0 == "/" ? "/" + $1 : $0 + "/" + $1 }
            }
            guard existing != "/", !existing.isEmpty else { return nil }
            missing.append((existing as NSString).lastPathComponent)
            existing = (existing as NSString).deletingLastPathComponent
        }
    }

    /// Whether `path` is the directory `directory` or anything inside it, by real paths
    /// (``realPath(ofPossiblyMissing:)``: a link into the directory counts): the one test of
    /// "writing there would touch a store's own files" (a backup's destination, an export's
    /// output).
    package static func isWithin(_ path: String, directory: String) -> Bool {
        guard let target = realPath(ofPossiblyMissing: path), let root = realPath(ofPossiblyMissing: directory) else { return false }
        return target == root || target.hasPrefix(root == "/" ? "/" : root + "/")
    }

    /// Creates `path` and its parents; fails if it exists as something other than a directory.
    static func create(_ path: String) throws(LogError) {
        var st = stat()
        if stat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                throw LogError(.notAStore, "\(path) exists and is not a directory", file: path)
            }
            return
        }
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            do throws(SystemCallError) {
                try SystemCall.run("mkdir") { mkdir(prefix, 0o755) }
            } catch where error.errorNumber == EEXIST {
                // A parent that exists already (or a racing creator): checked below.
            } catch {
                throw LogError(error.errorNumber == EACCES || error.errorNumber == EROFS ? .io : .notAStore,
                               "cannot create store directory \(prefix)", file: prefix, systemErrorNumber: error.errorNumber)
            }
        }
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
            throw LogError(.notAStore, "\(path) is not a directory", file: path)
        }
    }

    /// Creates `path` and its missing parents like ``create(_:)``, then syncs the parent of
    /// every directory it created (deepest first), so that after a power loss a directory a
    /// backup or restore completed in is still there.
    /// - Parameters:
    ///   - path: The directory.
    ///   - io: The system-call layer.
    /// - Throws: As ``create(_:)``; ``LogError/Code/io`` when a sync fails.
    package static func createDurably(_ path: String, io: any LogFileIO) throws(LogError) {
        var missing: [String] = []
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if !exists(prefix) { missing.append(prefix) }
        }
        try create(path)
        for created in missing.reversed() {
            let slash = created.lastIndex(of: "/")!
            let parent = String(created[..<slash])
            try synchronize(parent.isEmpty ? "/" : parent, io: io)
        }
    }

    /// Puts a directory written whole under a temporary name in its place: syncs it, creates
    /// (durably) the destination's parent, renames it to `destination` (which must not exist or
    /// be an empty directory) and syncs the parent, so the directory is there after a power loss.
    /// - Parameters:
    ///   - source: The written directory.
    ///   - destination: Its final path.
    ///   - io: The system-call layer.
    /// - Throws: ``LogError`` naming the path whose sync or rename failed.
    package static func moveDurably(_ source: String, to destination: String, io: any LogFileIO) throws(LogError) {
        try synchronize(source, io: io)
        let parent = destination.lastIndex(of: "/").map { String(destination[..<$0]) } ?? "."
        try createDurably(parent.isEmpty ? "/" : parent, io: io)
        do throws(SystemCallError) {
            try SystemCall.run("rename to \(destination)") { rename(source, destination) }
        } catch {
            throw LogError.system(error, file: source)
        }
        try synchronize(parent.isEmpty ? "/" : parent, io: io)
    }

    /// Fails unless `path` is an existing directory.
    static func requireExisting(_ path: String) throws(LogError) {
        var st = stat()
        guard stat(path, &st) == 0 else {
            throw LogError(.notAStore, "no store at \(path): the directory does not exist", file: path, systemErrorNumber: errno)
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            throw LogError(.notAStore, "\(path) is not a directory", file: path)
        }
    }

    /// The names in a directory (no "." or "..").
    static func list(_ path: String) throws(LogError) -> [String] {
        guard let dir = opendir(path) else {
            throw LogError(.notAStore, "cannot list \(path)", file: path, systemErrorNumber: errno)
        }
        defer { closedir(dir) }
        var names: [String] = []
        // The name is read in place, up to its terminating zero: a `dirent` record is only as
        // long as its name (`d_reclen`), so copying the whole `d_name` array (256 bytes) reads
        // past the end of the last record in readdir's buffer (AddressSanitizer reported it).
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        while let entry = readdir(dir) {
            let name = String(cString: (UnsafeRawPointer(entry) + nameOffset).assumingMemoryBound(to: CChar.self))
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    static func exists(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0
    }

    /// Makes the directory's entries (creations, renames, removals) durable.
    package static func synchronize(_ path: String, io: any LogFileIO) throws(LogError) {
        let dir = try OpenFile.open(path, flags: O_RDONLY)
        try io.synchronize(descriptor: dir.descriptor, path: path)
    }

    /// Replaces `directory/name` with `bytes` atomically: temporary file, fsync, rename,
    /// directory fsync. A crash leaves either the old file or the new one, never a mix.
    ///
    /// The one atomic-write routine of a store: the log's side files and the snapshot
    /// directory both use it, through the log's ``LogFileIO``, so that fault injection reaches
    /// every durable write.
    /// - Parameters:
    ///   - bytes: The new contents.
    ///   - directory: The directory holding the file.
    ///   - name: The file's name in `directory`.
    ///   - temporaryName: The temporary file's name in `directory`; default `name + ".tmp"`.
    ///     Writers that may overlap on one `name` give each write its own.
    ///   - io: The system-call layer.
    ///   - synchronizingDirectory: Sync the directory after the rename (a caller writing many
    ///     files, a backup, syncs it once after the last).
    /// - Throws: ``LogError`` naming the file that failed; the temporary file is removed.
    package static func writeAtomically(
        _ bytes: [UInt8], directory: String, name: String, temporaryName: String? = nil, io: any LogFileIO,
        synchronizingDirectory: Bool = true
    ) throws(LogError) {
        try writeAtomically(parts: [bytes], directory: directory, name: name, temporaryName: temporaryName, io: io,
                            synchronizingDirectory: synchronizingDirectory)
    }

    /// ``writeAtomically(_:directory:name:temporaryName:io:synchronizingDirectory:)`` of a file
    /// given in parts, written one after the other: a large file (a snapshot's header and its
    /// body) is never copied into one array, which would double its memory while it is written.
    package static func writeAtomically(
        parts: [[UInt8]], directory: String, name: String, temporaryName: String? = nil, io: any LogFileIO,
        synchronizingDirectory: Bool = true
    ) throws(LogError) {
        let temporary = directory + "/" + (temporaryName ?? name + ".tmp")
        let final = directory + "/" + name
        do throws(LogError) {
            let file = try OpenFile.open(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC)
            var offset: Int64 = 0
            for part in parts {
                try part.withBytes { (raw) throws(LogError) in
                    try io.writeAll(raw, toAbsoluteOffset: offset, descriptor: file.descriptor, path: temporary)
                }
                offset += Int64(part.count)
            }
            try io.synchronize(descriptor: file.descriptor, path: temporary)
            do throws(SystemCallError) {
                try SystemCall.run("rename to \(final)") { rename(temporary, final) }
            } catch {
                throw LogError.system(error, file: temporary)
            }
        } catch {
            unlink(temporary)
            throw error
        }
        if synchronizingDirectory { try synchronize(directory, io: io) }
    }

    /// Removes a file (or a symbolic link, never what it points to); a missing one is not an error.
    static func remove(_ path: String) throws(LogError) {
        try removeEntry(path, call: "unlink") { unlink(path) }
    }

    /// Removes an empty directory; a missing one is not an error.
    static func removeDirectory(_ path: String) throws(LogError) {
        try removeEntry(path, call: "rmdir") { rmdir(path) }
    }

    private static func removeEntry(_ path: String, call: String, _ body: () -> Int32) throws(LogError) {
        do throws(SystemCallError) {
            _ = try SystemCall.run(call, body)
        } catch where error.errorNumber == ENOENT {
            // Already gone: what was asked.
        } catch {
            throw LogError.system(error, file: path)
        }
    }
}
