#if Viewer
/// Where the viewer listens and who may read it.
package struct ViewerConfiguration: Sendable {
    /// The address to bind (127.0.0.1 by default: this machine only).
    package var host: String
    /// The port (0: any free one).
    package var port: Int
    /// The bearer token every request must carry (`Authorization: Bearer T`, or once as
    /// `?token=T`, which sets a cookie for the pages that follow); `nil`: no check, which only
    /// a loopback address allows.
    package var token: String?

    package init(host: String = "127.0.0.1", port: Int = 8080, token: String? = nil) {
        self.host = host
        self.port = port
        self.token = token
    }

    /// Whether `host` names this machine only.
    package static func isLoopback(_ host: String) -> Bool {
        let name = host.lowercased()
        if name == "localhost" || name == "::1" || name == "[::1]" { return true }
        // 127.0.0.0/8.
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// Refuses a configuration that would expose the store: a non-local address without a
    /// token, or a token that is empty, short or not sendable in a header and a cookie.
    /// - Throws: ``ViewerError`` with ``ViewerError/Code/misconfigured``, saying what to change.
    package func validate() throws(ViewerError) {
        if let token {
            guard token.count >= 16 else {
                throw ViewerError(.misconfigured, "the token is \(token.count) characters long: give at least 16 (for example `openssl rand -hex 16`)")
            }
            // RFC 6265's cookie-octet, which also travels unchanged in a header and a query.
            let allowed = token.unicodeScalars.allSatisfy { s in
                s.value >= 0x21 && s.value <= 0x7E && !"\",;\\%&+=?#".unicodeScalars.contains(s)
            }
            guard allowed else {
                throw ViewerError(.misconfigured, "the token holds a character that cannot travel in a cookie or a query (a space, a quote, , ; \\ % & + = ? #): use letters, digits, - _ . ~ and the like")
            }
        } else if !Self.isLoopback(host) {
            throw ViewerError(.misconfigured, "--host \(host) lets other machines read the store: give --token T too (every request must then carry it), or bind to 127.0.0.1")
        }
        guard (0...65_535).contains(port) else { throw ViewerError(.misconfigured, "--port \(port) is not a port (0-65535)") }
    }
}
#endif
