#if Viewer
import Hummingbird
import Mustache

/// The viewer's pages: swift-mustache templates (which escape every `{{value}}` as HTML) and
/// what each page shows, prepared for them. Kept in the code, not in files beside the binary,
/// so that the tool is one file to install.
struct ViewerPages: Sendable {
    private let library: MustacheLibrary

    init() {
        var library = MustacheLibrary()
        // The templates are constants of this file: a failure to parse is a bug here, found by
        // every test that renders a page.
        for (name, text) in Self.templates {
            do { try library.register(text, named: name) } catch { preconditionFailure("template \(name): \(error)") }
        }
        self.library = library
    }

    func overview(_ o: ViewerOverview) -> Response {
        let peak = max(1, o.histogram.map(\.count).max() ?? 1)
        let context: [String: Any?] = [
            "store": o.store, "events": Self.grouped(o.events), "streams": Self.grouped(o.streams),
            "nextPosition": Self.grouped(Int(o.nextPosition)),
            "recorded": o.firstRecordedAt.map { "\($0) … \(o.lastRecordedAt ?? $0)" } ?? "no event yet",
            "integrity": o.integrity,
            "types": o.types.map { t in
                ["name": t.name, "events": Self.grouped(t.events), "streams": Self.grouped(t.streams),
                 "href": "/streams?type=" + Self.queryEncoded(t.name)] as [String: Any?]
            },
            "eventTypes": o.eventTypes.map { ["name": $0.name, "count": Self.grouped($0.count)] as [String: Any?] },
            "period": o.histogramPeriod, "chart": Self.chart(o.histogram, peak: peak),
            "hasHistogram": !o.histogram.isEmpty,
            "segments": o.segments.map(Self.file), "snapshots": o.snapshots.map(Self.file),
            "hasSegments": !o.segments.isEmpty, "hasSnapshots": !o.snapshots.isEmpty,
        ]
        return page("Overview", "overview", context)
    }

    func streams(_ list: ViewerStreamList) -> Response {
        let base = "/streams?type=" + Self.queryEncoded(list.type) + (list.search.map { "&q=" + Self.queryEncoded($0) } ?? "")
        let context: [String: Any?] = [
            "type": list.type, "search": list.search ?? "", "searching": list.search != nil,
            "matching": Self.grouped(list.matching), "one": list.matching == 1,
            "streams": list.streams.map { s in
                ["id": s.id, "version": String(s.version), "events": Self.grouped(s.events), "lastEvent": s.lastEvent,
                 "lastRecordedAt": s.lastRecordedAt,
                 "href": Self.entityHref(list.type, s.id, stringID: s.stringLookingLikeUUID)] as [String: Any?]
            },
            "nextHref": list.next.map { base + "&after=" + Self.queryEncoded($0) },
        ]
        return page("\(list.type) streams", "streams", context)
    }

    func entity(_ e: ViewerEntity, stringID: Bool) -> Response {
        let href = Self.entityHref(e.type, e.id, stringID: stringID)
        let context: [String: Any?] = [
            "type": e.type, "id": e.id, "typeHref": "/streams?type=" + Self.queryEncoded(e.type), "stringID": stringID,
            "version": String(e.version), "events": Self.grouped(e.events),
            "first": e.firstRecordedAt, "last": e.lastRecordedAt,
            "moment": e.state.moment, "stateVersion": String(max(1, e.state.version)),
            "stateJSON": e.state.json, "stateNote": e.state.note,
            "timeline": e.timeline.map { t in
                ["position": String(t.position), "version": String(t.version), "recordedAt": t.recordedAt, "event": t.event,
                 "eventHref": "/events/\(t.position)", "stateHref": href + "&version=\(t.version)",
                 "note": t.note, "hasChanges": !t.changes.isEmpty, "unchanged": t.changes.isEmpty && t.note == nil,
                 "changes": t.changes.map { c in
                     ["path": c.path.isEmpty ? "(entity)" : c.path, "kind": c.kind, "from": c.from ?? "", "to": c.to ?? ""] as [String: Any?]
                 }] as [String: Any?]
            },
            "previousHref": e.previousPage.map { href + "&from=\($0)" },
            "nextHref": e.nextPage.map { href + "&from=\($0)" },
        ]
        return page("\(e.type) \(e.id)", "entity", context)
    }

    func event(_ e: ViewerEvent) -> Response {
        let context: [String: Any?] = [
            "position": String(e.position), "recordedAt": e.recordedAt, "streamType": e.streamType, "streamID": e.streamID,
            "entityHref": Self.entityHref(e.streamType, e.streamID, stringID: e.stringLookingLikeUUID), "version": String(e.version), "event": e.event,
            "schemaVersion": String(e.schemaVersion), "metadata": e.metadata.map { ["name": $0.name, "value": $0.value] as [String: Any?] },
            "codec": e.codec, "payload": e.payload, "note": e.note, "hex": e.hex, "bytes": Self.grouped(e.byteCount),
            "previousHref": e.position > 0 ? "/events/\(e.position - 1)" : nil,
            "nextHref": "/events/\(e.position + 1)",
        ]
        return page("Event \(e.position)", "event", context)
    }

    func error(_ error: ViewerError, status: HTTPResponse.Status) -> Response {
        page("\(status.code) \(status.reasonPhrase)", "error", ["status": "\(status.code) \(status.reasonPhrase)", "message": error.description] as [String: Any?])
    }

    /// Renders `template` with `context` inside the layout. Absent values (`nil`, in the
    /// context or in a dictionary of an array in it) are left out, so that a section on them is
    /// skipped: Mustache would show an `Optional` as "nil" and take it for true.
    private func page(_ title: String, _ template: String, _ context: [String: Any?]) -> Response {
        let body = library.render(Self.present(context), withTemplate: template) ?? ""
        let html = library.render(["title": title, "body": body], withTemplate: "layout") ?? body
        return Response(
            status: .ok,
            headers: [.contentType: "text/html; charset=utf-8",
                      // Nothing from elsewhere, no frames: the pages need nothing but themselves.
                      .contentSecurityPolicy: "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'",
                      .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
    }

    private static func present(_ context: [String: Any?]) -> [String: Any] {
        context.compactMapValues { value -> Any? in
            guard let value else { return nil }
            if let rows = value as? [[String: Any?]] { return rows.map(present) }
            if let nested = value as? [String: Any?] { return present(nested) }
            return value
        }
    }

    private static func file(_ f: ViewerFile) -> [String: Any?] {
        ["name": f.name, "bytes": grouped(f.bytes), "detail": f.detail]
    }

    /// `/entity?type=…&id=…`, and `&idType=string` for a string id whose text reads as a UUID.
    static func entityHref(_ type: String, _ id: String, stringID: Bool = false) -> String {
        "/entity?type=" + queryEncoded(type) + "&id=" + queryEncoded(id) + (stringID ? "&idType=string" : "")
    }

    /// `text` with everything but RFC 3986's unreserved characters percent-encoded.
    static func queryEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let digits = Array("0123456789ABCDEF".unicodeScalars)
                out += "%"
                out.unicodeScalars.append(digits[Int(byte >> 4)])
                out.unicodeScalars.append(digits[Int(byte & 15)])
            }
        }
        return out
    }

    /// `1234567` as `1,234,567`.
    static func grouped(_ n: Int) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out += "," }
            out.append(c)
        }
        return n < 0 ? "-" + out : out
    }

    /// `text` escaped for HTML text and attribute values.
    static func escaped(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }

    /// The events over time as an SVG bar chart (drawn here: no script, nothing fetched), each
    /// bar titled with its period and count.
    static func chart(_ bars: [ViewerCount], peak: Int) -> String {
        guard !bars.isEmpty else { return "" }
        let width = 720.0, height = 120.0
        // At most 24 units a bar: a short span is a few bars, not one wall.
        let step = min(24, width / Double(bars.count))
        var svg = "<svg id=\"chart\" viewBox=\"0 0 \(Int(width)) \(Int(height) + 18)\" role=\"img\" aria-label=\"events over time\">"
        for (i, bar) in bars.enumerated() {
            let h = max(bar.count > 0 ? 1 : 0, height * Double(bar.count) / Double(peak))
            let x = Double(i) * step
            svg += "<rect x=\"\(format(x))\" y=\"\(format(height - h))\" width=\"\(format(max(1, step * 0.85)))\" height=\"\(format(h))\">"
            svg += "<title>\(escaped(bar.name)): \(grouped(bar.count)) events</title></rect>"
        }
        svg += "<text x=\"0\" y=\"\(Int(height) + 14)\">\(escaped(bars.first!.name))</text>"
        if bars.count > 1 {
            svg += "<text x=\"\(format(step * Double(bars.count)))\" y=\"\(Int(height) + 14)\" text-anchor=\"end\">\(escaped(bars.last!.name))</text>"
        }
        svg += "</svg>"
        return svg
    }

    private static func format(_ value: Double) -> String {
        String(Double(Int(value * 10)) / 10)
    }
}
#endif
