#if Viewer
package import Hummingbird
package import Logging
import ServiceLifecycle
import Foundation
import NIOCore

/// `eventkernel serve`: a read-only web viewer of a store (Docs/Auditing.md).
///
/// Every route is a `GET`: no request writes. Pages are rendered on the server (swift-mustache
/// templates, `ViewerPages`), with no script but a few lines on the entity page, and nothing
/// loaded from elsewhere.
package enum Viewer {
    /// The viewer's HTTP application over `browser`.
    /// - Parameters:
    ///   - browser: What the pages show.
    ///   - configuration: Address, port and token; checked first.
    ///   - logger: The server's logger.
    ///   - onListening: Called with the port bound (useful with port 0).
    /// - Throws: ``ViewerError`` with ``ViewerError/Code/misconfigured`` when the configuration
    ///   would expose the store without a token (see ``ViewerConfiguration/validate()``).
    package static func application(
        browser: any StoreBrowsing, configuration: ViewerConfiguration, logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws(ViewerError) -> some ApplicationProtocol {
        try configuration.validate()
        return Application(
            router: router(browser: browser, token: configuration.token),
            configuration: ApplicationConfiguration(address: .hostname(configuration.host, port: configuration.port), serverName: "eventkernel"),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? configuration.port) },
            logger: logger)
    }

    /// Runs `application` until SIGTERM or SIGINT (Ctrl-C), which stop it gracefully: the
    /// server stops accepting, finishes the pages being sent and closes idle connections. A
    /// shutdown that has not ended after 10 seconds (a client that reads nothing) is cancelled;
    /// what runs without looking at cancellation (a page checking a large store) finishes
    /// first. No limit on the cancellation itself: past one, the service group ends the
    /// process with `fatalError`. Hummingbird's `runService()` waits for a graceful shutdown
    /// however long it takes, ignoring a second Ctrl-C meanwhile. (Cancelling on a second signal is not offered: a service group refuses
    /// a signal that both shuts down and cancels; and cancelling on Ctrl-C alone logged two
    /// server errors at every stop.)
    /// - Parameters:
    ///   - application: The viewer (``application(browser:configuration:logger:onListening:)``).
    ///   - logger: The service group's logger.
    /// - Throws: What the server throws (a port in use: ``listenFailure(_:configuration:)``).
    package static func run(_ application: some ApplicationProtocol, logger: Logger) async throws {
        var configuration = ServiceGroupConfiguration(
            services: [.init(service: application)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(10)
        try await ServiceGroup(configuration: configuration).run()
    }

    /// Why the server could not start listening, said as a person reads it ("cannot listen on
    /// 127.0.0.1:8080: Address already in use"), when `error` is the system's refusal; `nil`
    /// for any other error. SwiftNIO's own text names its call and its arguments
    /// (`bind(descriptor:ptr:bytes:): Address already in use) (errno: 98)`), not the address.
    package static func listenFailure(_ error: any Error, configuration: ViewerConfiguration) -> String? {
        guard let error = error as? IOError else { return nil }
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return "cannot listen on \(host):\(configuration.port): \(String(cString: strerror(error.errnoCode)))"
    }

    /// The routes, for ``application(browser:configuration:logger:onListening:)`` and tests.
    /// - Parameter token: The bearer token every request must carry, or `nil`.
    package static func router(browser: any StoreBrowsing, token: String?) -> Router<BasicRequestContext> {
        let pages = ViewerPages()
        // HEAD answers as GET would, without the body (a link checker's or monitor's probe;
        // ReadOnlyMiddleware lets both through).
        let router = Router(options: .autoGenerateHeadEndpoints)
        router.middlewares.add(ViewerErrorMiddleware(pages: pages))
        router.middlewares.add(ReadOnlyMiddleware())
        if let token { router.middlewares.add(TokenMiddleware(token: token)) }
        router.get("/") { request, _ in
            pages.overview(try await browser.overview(checking: request.uri.queryParameters["check"] == "1"))
        }
        router.get("/streams") { request, _ in
            let query = request.uri.queryParameters
            let type = try required(request, "type")
            let search = query["q"].map(String.init).flatMap { $0.isEmpty ? nil : $0 }
            let list = try await browser.streams(ofType: type, matching: search, after: query["after"].map(String.init), limit: 50)
            return pages.streams(list)
        }
        router.get("/entity") { request, _ in
            let query = request.uri.queryParameters
            let type = try required(request, "type"), id = try required(request, "id")
            var moment: ViewerMoment?
            if let version = query["version"], !version.isEmpty {
                guard let number = UInt64(version) else { throw ViewerError(.badRequest, "version \"\(version)\" is not a whole number") }
                moment = .version(number)
            } else if let date = query["asOf"], !date.isEmpty {
                moment = .recordedAt(String(date))
            }
            var from: UInt64?
            if let text = query["from"], !text.isEmpty {
                guard let number = UInt64(text) else { throw ViewerError(.badRequest, "from \"\(text)\" is not a whole number") }
                from = number
            }
            let stringID = query["idType"] == "string"
            return pages.entity(try await browser.entity(type: type, id: id, stringID: stringID, fromVersion: from, at: moment), stringID: stringID)
        }
        router.get("/events/:position") { _, context in
            let text = context.parameters.get("position") ?? ""
            guard let position = UInt64(text) else { throw ViewerError(.badRequest, "position \"\(text)\" is not a whole number") }
            return pages.event(try await browser.event(at: position))
        }
        router.get("/events") { request, _ in
            // The overview's "go to position" form.
            let text = request.uri.queryParameters["position"].map(String.init) ?? ""
            guard let position = UInt64(text) else { throw ViewerError(.badRequest, "position \"\(text)\" is not a whole number") }
            return pages.event(try await browser.event(at: position))
        }
        return router
    }

    private static func required(_ request: Request, _ name: String) throws(ViewerError) -> String {
        guard let value = request.uri.queryParameters[Substring(name)], !value.isEmpty else { throw ViewerError(.badRequest, "the parameter \"\(name)\" is missing") }
        return String(value)
    }
}

/// Refuses every method but `GET` and `HEAD` (405): the viewer never writes.
struct ReadOnlyMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.method == .get || request.method == .head else {
            throw HTTPError(.methodNotAllowed, headers: [.allow: "GET, HEAD"], message: "the viewer is read-only")
        }
        return try await next(request, context)
    }
}

/// Lets a request through only with the token: `Authorization: Bearer T`, the cookie this sets,
/// or `?token=T` (a link a person can open), which answers with a redirect to the same page
/// without it, setting the cookie. Compared in constant time.
struct TokenMiddleware<Context: RequestContext>: RouterMiddleware {
    let token: String
    static var cookieName: String { "eventkernel_token" }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let header = request.headers[.authorization], header.hasPrefix("Bearer "), Self.equal(String(header.dropFirst(7)), token) {
            return try await next(request, context)
        }
        if let cookie = request.cookies[Self.cookieName], Self.equal(cookie.value, token) {
            return try await next(request, context)
        }
        if let given = request.uri.queryParameters["token"], Self.equal(String(given), token) {
            // The same page without the token in its address (nor in the history or a Referer).
            var rest = request.uri.queryParameters.filter { $0.key != "token" }.map { "\($0.key)=\(ViewerPages.queryEncoded(String($0.value)))" }
            rest.sort()
            var response = Response(status: .seeOther, headers: [.location: request.uri.path + (rest.isEmpty ? "" : "?" + rest.joined(separator: "&"))])
            response.setCookie(Cookie(name: Self.cookieName, value: token, path: "/", httpOnly: true, sameSite: .strict))
            return response
        }
        throw HTTPError(.unauthorized, headers: [.wwwAuthenticate: "Bearer realm=\"eventkernel\""],
                        message: "this viewer needs its token: open it with ?token=T once, or send Authorization: Bearer T")
    }

    /// Whether `a` equals `b`, in a time that depends only on their lengths.
    static func equal(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for i in x.indices { difference |= x[i] ^ y[i] }
        return difference == 0
    }
}

/// Shows a ``ViewerError`` as a page with its status (404, 400, 500), its message and cause.
struct ViewerErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let pages: ViewerPages

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as ViewerError {
            let status: HTTPResponse.Status = switch error.code {
            case .notFound: .notFound
            case .badRequest: .badRequest
            case .misconfigured, .storage: .internalServerError
            }
            var response = pages.error(error, status: status)
            response.status = status
            return response
        }
    }
}
#endif
