#if Viewer
/// Why the viewer did not start or a page could not be shown: a code to match on, a message
/// that says what and where, and the underlying error when there is one.
package struct ViewerError: Error, CustomStringConvertible, Sendable {
    /// What went wrong.
    package enum Code: Sendable, Equatable {
        /// A type, stream or position the store does not hold (HTTP 404).
        case notFound
        /// A request's parameter that does not parse (HTTP 400).
        case badRequest
        /// The configuration refuses to start: a non-local address without a token, or a token
        /// that cannot travel in a header or a cookie.
        case misconfigured
        /// Reading the store failed (HTTP 500; `underlying` says why).
        case storage
    }

    package var code: Code
    package var message: String
    package var underlying: (any Error & Sendable)?

    package init(_ code: Code, _ message: String, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    package var description: String {
        underlying.map { "\(message): \($0)" } ?? message
    }
}
#endif
