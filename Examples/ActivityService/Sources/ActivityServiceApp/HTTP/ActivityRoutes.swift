import Activities
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle

/// The service's routes, over any ``ActivityBackend``:
///
/// | route | answer |
/// | --- | --- |
/// | `GET /activities?after&before&types&limit&offset&order&cursor` | 200 `{"activities":[...],"nextCursor"}` |
/// | `POST /activities` | 201 the activity, `Location`; 400 invalid, 409 the id exists |
/// | `GET /activities/{id}` | 200 the activity, `ETag` its version; 404 |
/// | `PUT /activities/{id}` (optional `If-Match: "<version>"`) | 200 the activity; 400, 404, 409 on a changed version |
/// | `DELETE /activities/{id}` | 204; 404 |
/// | `GET /activities/{id}/history` | 200 `{"changes":[...]}`; 404 for an id never written |
/// | `GET /activities/live?<the query's parameters>` | `text/event-stream`: the result now, then each changed one |
struct ActivityRoutes<Context: RequestContext> {
    let backend: any ActivityBackend

    func add(to router: Router<Context>) {
        let activities = router.group("activities")
        activities.get(use: list)
        activities.post(use: create)
        activities.get("live", use: live)
        activities.get(":id", use: show)
        activities.put(":id", use: replace)
        activities.delete(":id", use: remove)
        activities.get(":id/history", use: history)
    }

    @Sendable func list(_ request: Request, context: Context) async throws -> Response {
        let query = try ActivityQueryParameters.query(from: request)
        let page = try await backend.fetch(query: query)
        var json = JSONWriter(capacity: 64 + page.count * 128)
        json.page(page, nextCursor: Cursor.next(after: page, of: query))
        return Self.json(.ok, json)
    }

    @Sendable func create(_ request: Request, context: Context) async throws -> Response {
        let input = try ActivityInput.decode(try await request.body.collect(upTo: context.maxUploadSize))
        let activity = input.model(id: input.id ?? UUID())
        try await backend.add(activity)
        var json = JSONWriter()
        json.activity(activity)
        var response = Self.json(.created, json)
        response.headers[.location] = "/activities/\(activity.id.uuidString)"
        return response
    }

    @Sendable func show(_ request: Request, context: Context) async throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        guard let (activity, version) = try await backend.versionedActivity(id: id) else {
            throw APIError.notFound("no activity with id \(id.uuidString)")
        }
        var json = JSONWriter()
        json.activity(activity)
        var response = Self.json(.ok, json)
        response.headers[.eTag] = "\"\(version)\""
        return response
    }

    @Sendable func replace(_ request: Request, context: Context) async throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let input = try ActivityInput.decode(try await request.body.collect(upTo: context.maxUploadSize))
        if let bodyID = input.id, bodyID != id {
            throw APIError.badRequest("the body's id \(bodyID.uuidString) is not the path's \(id.uuidString)")
        }
        let activity = input.model(id: id)
        if let ifMatch = request.headers[.ifMatch] {
            guard let version = UInt64(ifMatch.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))) else {
                throw APIError.badRequest("If-Match must be a version this service sent as an ETag, such as \"3\", not \(ifMatch)")
            }
            try await backend.update(activity, expectedVersion: version)
        } else {
            try await backend.update(activity)
        }
        var json = JSONWriter()
        json.activity(activity)
        return Self.json(.ok, json)
    }

    @Sendable func remove(_ request: Request, context: Context) async throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        guard try await backend.delete(id: id) else { throw APIError.notFound("no activity with id \(id.uuidString)") }
        return Response(status: .noContent)
    }

    @Sendable func history(_ request: Request, context: Context) async throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let changes = try await backend.history(of: id)
        guard !changes.isEmpty else { throw APIError.notFound("no activity with id \(id.uuidString) was ever recorded") }
        var json = JSONWriter(capacity: 64 + changes.count * 160)
        json.history(changes)
        return Self.json(.ok, json)
    }

    /// Server-sent events: `event: activities` with the page as data, at once and after every
    /// change that alters the result. The stream ends when the client goes, when the backend
    /// closes, or when the service shuts down gracefully (so an open feed never holds the
    /// shutdown up).
    @Sendable func live(_ request: Request, context: Context) async throws -> Response {
        let query = try ActivityQueryParameters.query(from: request)
        // The repository refuses a malformed query by ending its stream; say why instead.
        do throws(ActivityQueryError) { try query.validate() } catch { throw APIError(status: .badRequest, code: "invalidQuery", message: error.message) }
        let results = backend.observe(query: query)
        let body = ResponseBody { writer in
            // The feed's own stream, finished by the shutdown: the repository's stream ends only
            // when the store closes, which happens after the HTTP server has stopped.
            let (feed, continuation) = AsyncStream.makeStream(of: [ActivityModel].self, bufferingPolicy: .bufferingNewest(1))
            let forwarding = Task {
                for await page in results { continuation.yield(page) }
                continuation.finish()
            }
            defer { forwarding.cancel() }
            try await withGracefulShutdownHandler {
                for await page in feed {
                    var json = JSONWriter(capacity: 64 + page.count * 128)
                    json.raw("event: activities\ndata: ")
                    json.page(page, nextCursor: Cursor.next(after: page, of: query))
                    json.raw("\n\n")
                    try await writer.write(json.buffer)
                }
            } onGracefulShutdown: {
                continuation.finish()
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"], body: body)
    }

    static func json(_ status: HTTPResponse.Status, _ json: JSONWriter) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: json.buffer))
    }
}
