/// The tool's version and what this build was compiled with: the one place the version is written.
enum ToolVersion {
    /// EventKernel's release (semantic versioning).
    static let number = "0.1.0"

    /// The package traits compiled into this build (Package.swift), each with whether it is on.
    static var traits: [(name: String, enabled: Bool)] {
        #if PostgreSQL
        let postgreSQL = true
        #else
        let postgreSQL = false
        #endif
        #if Viewer
        let viewer = true
        #else
        let viewer = false
        #endif
        return [("PostgreSQL", postgreSQL), ("Viewer", viewer)]
    }

    /// What `eventkernel --version` prints: `eventkernel 0.1.0 (traits: PostgreSQL on, Viewer on)`.
    static var text: String {
        "eventkernel \(number) (traits: " + traits.map { "\($0.name) \($0.enabled ? "on" : "off")" }.joined(separator: ", ") + ")"
    }
}
