import Hummingbird
import HummingbirdCore
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import ServiceLifecycle

// The tests run the service as it runs in production: a real server on an ephemeral port of
// 127.0.0.1, driven by a small HTTP/1.1 client over SwiftNIO, which Hummingbird already brings.
// (HummingbirdTesting would do the same, but it depends on AsyncHTTPClient and NIOSSL: a TLS
// stack, BoringSSL's 400 C files among it, that this package never uses and CI would build on
// every run: about a minute and a half of a 2-core machine.)

/// A response read whole.
struct TestResponse: Sendable {
    /// The status line's status.
    let status: HTTPResponse.Status
    /// The response's header fields.
    let headers: HTTPFields
    /// The whole body.
    let body: ByteBuffer
}

/// Why a live test could not talk to its service.
struct LiveServiceError: Error, CustomStringConvertible {
    let description: String
}

/// A client of one running service: each request on its own connection.
struct LiveClient: Sendable {
    /// The port the service listens on (127.0.0.1).
    let port: Int
    /// Starts the service's graceful shutdown (what SIGTERM does), without waiting for it.
    let triggerGracefulShutdown: @Sendable () async -> Void

    /// Sends a request and reads its whole response.
    /// - Parameters:
    ///   - uri: The path and query.
    ///   - method: The request's method.
    ///   - headers: Header fields added to the request's.
    ///   - body: The request's body (sent with its length), or `nil` for none.
    ///   - check: Runs on the response.
    /// - Returns: What `check` returns.
    /// - Throws: An I/O error of the connection, `LiveServiceError` when the response ends before
    ///   its head, or what `check` throws.
    @discardableResult
    func execute<Value: Sendable>(uri: String, method: HTTPRequest.Method, headers: HTTPFields = [:], body: ByteBuffer? = nil,
                                  _ check: (TestResponse) async throws -> Value) async throws -> Value {
        let response = try await stream(uri: uri, method: method, headers: headers, body: body) { head, body in
            var whole = ByteBuffer()
            while var chunk = try await body.next() { whole.writeBuffer(&chunk) }
            return TestResponse(status: head.status, headers: head.headerFields, body: whole)
        }
        return try await check(response)
    }

    /// Sends a request and hands its response's head and body, as it arrives, to `read`; the
    /// connection is closed when `read` returns.
    /// - Parameters:
    ///   - uri: The path and query.
    ///   - method: The request's method.
    ///   - headers: Header fields added to the request's.
    ///   - body: The request's body, or `nil`.
    ///   - read: Reads the response: its head, and its body's chunks (`nil` at its end).
    /// - Returns: What `read` returns.
    /// - Throws: An I/O error of the connection, `LiveServiceError` when the response ends before
    ///   its head, or what `read` throws.
    func stream<Value: Sendable>(uri: String, method: HTTPRequest.Method = .get, headers: HTTPFields = [:], body: ByteBuffer? = nil,
                                 _ read: (HTTPResponse, inout ResponseBodyReader) async throws -> Value) async throws -> Value {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPClientCodec())
                    return try NIOAsyncChannel<HTTPResponsePart, HTTPRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        var request = HTTPRequest(method: method, scheme: nil, authority: "127.0.0.1:\(port)", path: uri, headerFields: headers)
        if let body { request.headerFields[.contentLength] = String(body.readableBytes) }
        return try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(.head(request))
            if let body { try await outbound.write(.body(body)) }
            try await outbound.write(.end(nil))
            var parts = inbound.makeAsyncIterator()
            var head: HTTPResponse
            repeat {
                guard case .head(let next) = try await parts.next() else {
                    throw LiveServiceError(description: "\(method) \(uri): the connection ended before a response")
                }
                head = next
            } while head.status.kind == .informational  // an interim (1xx) head: the response follows
            var reader = ResponseBodyReader(parts: parts)
            return try await read(head, &reader)
        }
    }
}

/// A response body's chunks as they arrive.
struct ResponseBodyReader: AsyncIteratorProtocol {
    fileprivate var parts: NIOAsyncChannelInboundStream<HTTPResponsePart>.AsyncIterator
    private var ended = false

    fileprivate init(parts: NIOAsyncChannelInboundStream<HTTPResponsePart>.AsyncIterator) { self.parts = parts }

    /// The next chunk, or `nil` once the response (or the connection) ended.
    mutating func next() async throws -> ByteBuffer? {
        while !ended {
            switch try await parts.next() {
            case .body(let chunk): return chunk
            case .head: continue  // not after the response's head (HTTP/1.1 sends one)
            case .end, nil: ended = true
            }
        }
        return nil
    }
}

/// Runs `app` on an ephemeral port of 127.0.0.1 (in a service group, as the executable does),
/// runs `body` with a client of it, then shuts the service down gracefully and waits for it
/// to stop (its services, the backend's among them, stopped too).
/// - Throws: What `body` throws, or what the service throws when it fails.
func withLiveService<App: ApplicationProtocol, Value: Sendable>(_ app: App, _ body: (LiveClient) async throws -> Value) async throws -> Value {
    let (ports, reportPort) = AsyncStream.makeStream(of: Int.self)
    let group = ServiceGroup(configuration: .init(services: [PortReporting(base: app, report: reportPort)], logger: app.logger))
    return try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask {
            // A service that stops before it listens ends the wait for its port.
            defer { reportPort.finish() }
            try await group.run()
        }
        var waiting = ports.makeAsyncIterator()
        guard let port = await waiting.next() else {
            // The service failed before it listened (waiting rethrows its error), or listens
            // where no port can be read: stopped either way.
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            throw LiveServiceError(description: "the service stopped before it listened")
        }
        let client = LiveClient(port: port, triggerGracefulShutdown: { await group.triggerGracefulShutdown() })
        let value: Value
        do {
            value = try await body(client)
        } catch {
            await group.triggerGracefulShutdown()
            try? await tasks.waitForAll()
            throw error
        }
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
        return value
    }
}

/// The application as it is, reporting the port its server listens on.
private struct PortReporting<Base: ApplicationProtocol>: ApplicationProtocol {
    typealias Responder = Base.Responder
    let base: Base
    let report: AsyncStream<Int>.Continuation

    var responder: Responder { get async throws { try await base.responder } }
    var server: HTTPServerBuilder { base.server }
    var eventLoopGroup: any EventLoopGroup { base.eventLoopGroup }
    var configuration: ApplicationConfiguration { base.configuration }
    var logger: Logger { base.logger }
    var services: [any Service] { base.services }
    var processesRunBeforeServerStart: [@Sendable () async throws -> Void] { base.processesRunBeforeServerStart }

    @Sendable func onServerRunning(_ channel: any Channel) async {
        await base.onServerRunning(channel)
        if let port = channel.localAddress?.port { report.yield(port) } else { report.finish() }
    }
}
