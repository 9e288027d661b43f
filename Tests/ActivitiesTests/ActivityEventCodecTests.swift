@testable import Activities
import EventKernel
import Foundation
import Testing
import KernelPrimitives

/// Schema version 3 writes whole-second dates as integers and an end as its duration; every
/// date must read back bit for bit, whatever its value, and versions 1 and 2 must still decode.
@Suite struct ActivityEventCodecTests {
    private let codec = ActivityEventCodec()

    private func roundTrip(_ event: ActivityEvent) throws -> (ActivityEvent, bytes: Int) {
        let encoded = codec.encode(event)
        #expect(encoded.schemaVersion == 3)
        let envelope = EventEnvelope(position: 7, recordedAt: .now, eventType: encoded.eventType, schemaVersion: encoded.schemaVersion,
                                     stream: encoded.stream, entityVersion: 1, payload: encoded.payload)
        return (try codec.decode(envelope), encoded.payload.count)
    }

    @Test func datesReadBackBitForBit() throws {
        let starts: [Double] = [0, -0.0, 1, -1, 800_000_000, 800_000_000.5, -978_307_200, 0x1p53, 0x1p53 + 2, -0x1p53,
                                0x1p60, .leastNonzeroMagnitude, 1e-300, 123_456_789.000_001, Double(Int64.max), -Double(Int64.max)]
        let durations: [Double?] = [nil, 0, 1, 3_600, 0.25, 1e-9, 86_400 * 365 * 100]
        for start in starts {
            for duration in durations {
                let model = ActivityModel(id: UUID(), startDate: Date(timeIntervalSinceReferenceDate: start),
                                          endDate: duration.map { Date(timeIntervalSinceReferenceDate: start + $0) }, type: "nap")
                for event in [ActivityEvent.added(model), .updated(model), .ended(id: model.id, at: model.endDate ?? model.startDate)] {
                    let (decoded, _) = try roundTrip(event)
                    #expect(decoded == event, "start \(start), duration \(String(describing: duration))")
                    if case .added(let back) = decoded {
                        #expect(back.startDate.timeIntervalSinceReferenceDate.bitPattern == start.bitPattern)
                        #expect(back.endDate?.timeIntervalSinceReferenceDate.bitPattern == model.endDate?.timeIntervalSinceReferenceDate.bitPattern)
                    }
                }
            }
        }
    }

    @Test func wholeSecondsTakeFewerBytes() throws {
        let start = Date(timeIntervalSinceReferenceDate: 800_000_000)
        let whole = ActivityModel(id: UUID(), startDate: start, endDate: start + 1_800, type: .sleep)
        let fractional = ActivityModel(id: UUID(), startDate: start + 0.5, endDate: start + 1_800.25, type: .sleep)
        // flags 1 + start 5 + duration 2 + type 6, against flags 1 + 8 + 8 + 6.
        #expect(try roundTrip(.added(whole)).bytes == 14)
        #expect(try roundTrip(.added(fractional)).bytes == 23)
    }

    /// An `activity.added` envelope holding `payload` written at `schemaVersion`.
    private func added(_ id: UUID, schemaVersion: UInt16, _ write: (inout BinaryWriter) -> Void) -> EventEnvelope {
        var writer = BinaryWriter(capacity: 32)
        write(&writer)
        return EventEnvelope(position: 3, recordedAt: .now, eventType: ActivityEventCodec.EventType.added, schemaVersion: schemaVersion,
                             stream: ActivityEventCodec.stream(of: id), entityVersion: 1, payload: writer.bytes)
    }

    @Test func version1PayloadsStillDecodeAndNewerVersionsAreRefused() throws {
        let id = UUID()
        let envelope = added(id, schemaVersion: 1) { writer in
            writer.writeUInt8(1)
            writer.writeDateExact(Date(timeIntervalSince1970: 1_700_000_000.5))
            writer.writeDateExact(Date(timeIntervalSince1970: 1_700_000_100.25))
            writer.writeString("sleep")
        }
        #expect(try codec.decode(envelope) == .added(ActivityModel(id: id, startDate: Date(timeIntervalSince1970: 1_700_000_000.5),
                                                                  endDate: Date(timeIntervalSince1970: 1_700_000_100.25), type: .sleep)))
        var future = envelope
        future.schemaVersion = 4
        #expect(throws: ActivityDecodingError(position: 3, message: "schema version 4 is newer than this build's (3)")) {
            try codec.decode(future)
        }
    }

    @Test func version2PayloadsStillDecodeAndUnknownFlagsAreRefused() throws {
        let id = UUID()
        var envelope = added(id, schemaVersion: 2) { writer in
            writer.writeUInt8(1)
            writer.writeDateReference(Date(timeIntervalSinceReferenceDate: 800_000_000.5))
            writer.writeDateReference(Date(timeIntervalSinceReferenceDate: 800_000_100))
            writer.writeString("feeding")
        }
        #expect(try codec.decode(envelope) == .added(ActivityModel(
            id: id, startDate: Date(timeIntervalSinceReferenceDate: 800_000_000.5),
            endDate: Date(timeIntervalSinceReferenceDate: 800_000_100), type: "feeding")))
        // Bit 1 means nothing in version 2: damage, not a date read the wrong way.
        envelope.payload[0] = 3
        #expect(throws: BinaryDecodingError.self) { try codec.decode(envelope) }
        // Version 3 starts with the type; its flags follow.
        envelope = added(id, schemaVersion: 3) { writer in
            writer.writeString("feeding")
            writer.writeUInt8(0x81)
        }
        #expect(throws: BinaryDecodingError.self) { try codec.decode(envelope) }
    }
}
