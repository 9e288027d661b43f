public import Foundation

/// The built executable `name` (a test helper, or the `eventkernel` tool): looked up from the
/// running test bundle upwards, as SwiftPM puts test bundles and executables side by side
/// (`<products>/EventKernelPackageTests.xctest` on Linux, inside a bundle on macOS).
public func builtExecutable(_ name: String) -> URL {
    var directory = URL(filePath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    while !FileManager.default.fileExists(atPath: directory.appending(path: name).path), directory.path != "/" {
        directory = directory.deletingLastPathComponent()
    }
    return directory.appending(path: name)
}
