public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A fresh directory under the system's temporary directory, removed (with everything in it)
/// when the value is released. Tests that take permissions away get them back first.
public final class TemporaryDirectory: Sendable {
    /// The directory.
    public let url: URL
    /// The directory's path.
    public var path: String { url.path }

    /// Creates `<tmp>/<label>-<8 random hex digits>/`.
    public init(_ label: String = "eventkernel") {
        url = FileManager.default.temporaryDirectory
            .appending(path: "\(label)-\(UUID().uuidString.prefix(8))", directoryHint: .isDirectory)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        chmod(url.path, 0o755)
        try? FileManager.default.removeItem(at: url)
    }

    /// The URL of `name` inside the directory.
    public func file(_ name: String) -> URL { url.appending(path: name) }
}

/// A private copy of a store checked into `Tests/Fixtures/<name>` (opening a store writes to it).
/// - Throws: When the fixture is missing or cannot be copied.
public func copyOfFixture(_ name: String) throws -> TemporaryDirectory {
    let source = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appending(path: "Fixtures/\(name)")
    let copy = TemporaryDirectory(name)
    try FileManager.default.removeItem(at: copy.url)
    try FileManager.default.copyItem(at: source, to: copy.url)
    return copy
}
