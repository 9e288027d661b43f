import EventKernel
import HTTPTypes
import Hummingbird

/// An error answered as `{"error":{"code","message"}}` with its status: the service's one
/// mapping from what the repository throws to HTTP.
///
/// | thrown | status |
/// | --- | --- |
/// | `RepositoryError.validationFailed`, `.invalidQuery`, `.limitExceeded`, a malformed body or parameter | 400 |
/// | `RepositoryError.notFound` | 404 |
/// | `RepositoryError.alreadyExists`, `.conflict` | 409 |
/// | `RepositoryError.closed` (shutting down) | 503 |
/// | anything else (storage, undecodable data, `.misuse`: the server's bug) | 500, with the detail in the log, not the body |
struct APIError: HTTPResponseError {
    var status: HTTPResponse.Status
    var code: String
    var message: String

    static func badRequest(_ message: String) -> APIError { APIError(status: .badRequest, code: "badRequest", message: message) }
    static func notFound(_ message: String) -> APIError { APIError(status: .notFound, code: "notFound", message: message) }

    /// The answer to `error`; `nil` for an error that is not the client's (a 500).
    init?(_ error: RepositoryError) {
        switch error {
        case .validationFailed(let why): self.init(status: .badRequest, code: "validationFailed", message: why)
        case .invalidQuery(let why): self.init(status: .badRequest, code: "invalidQuery", message: why)
        case .notFound: self.init(status: .notFound, code: "notFound", message: error.description)
        case .alreadyExists: self.init(status: .conflict, code: "alreadyExists", message: error.description)
        case .conflict: self.init(status: .conflict, code: "conflict", message: error.description)
        case .streamPurged: self.init(status: .gone, code: "streamPurged", message: error.description)
        case .limitExceeded: self.init(status: .badRequest, code: "limitExceeded", message: error.description)
        case .closed: self.init(status: .serviceUnavailable, code: "closed", message: "the service is shutting down")
        case .storage, .undecodableEvent, .misuse: return nil
        }
    }

    init(status: HTTPResponse.Status, code: String, message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var json = JSONWriter()
        json.error(code: code, message: message)
        return Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: json.buffer))
    }
}

/// Turns repository errors into ``APIError``s, and logs the ones that are the server's.
struct RepositoryErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as RepositoryError {
            if let answer = APIError(error) { throw answer }
            context.logger.error("request failed", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
            throw APIError(status: .internalServerError, code: "storage", message: "the storage failed; see the service's log")
        }
    }
}
