import EventKernel
import EventKernelTestSupport
import EventLog
import Foundation
import ShiftsExample
import Testing

@Suite struct ShiftsTests {
    let monday = Date(timeIntervalSinceReferenceDate: 800_000_000)
    func hours(_ n: Double) -> Date { monday.addingTimeInterval(n * 3_600) }
    func ada(_ company: String = "c1") -> User { User(uid: "u1", name: "Ada", email: "ada@example.com", companyId: company) }

    @Test func usersThroughTheCRUDFamilyWithTheAppsErrors() async throws {
        let factory = try RepositoryFactory.inMemory()
        let users = factory.userRepository()
        try await users.create(ada())
        try await users.create(User(uid: "u2", name: "Bob", email: "bob@example.com", companyId: "c1"))
        try await users.create(User(uid: "u3", name: "Cy", email: "cy@example.com", companyId: "c2"))
        #expect(try await users.get(byId: "u1")?.name == "Ada")
        #expect(try await users.get(byId: "nobody") == nil)
        #expect(try await users.getAll().map(\.uid) == ["u1", "u2", "u3"])
        #expect(try await users.getTeamMembers(companyId: "c1").map(\.name) == ["Ada", "Bob"])

        await #expect { try await users.create(ada()) } throws: { error in
            guard case ShiftsExample.RepositoryError.operationFailed(let why) = error else { return false }
            return why.contains("already exists")
        }
        await #expect { try await users.update(User(uid: "u9", name: "X", email: "x@example.com", companyId: "c1")) } throws: { error in
            if case ShiftsExample.RepositoryError.documentNotFound = error { return true } else { return false }
        }
        await #expect { try await users.create(User(uid: "u4", name: "Bad", email: "no-at-sign", companyId: "c1")) } throws: { error in
            if case ShiftsExample.RepositoryError.invalidData = error { return true } else { return false }
        }
        try await users.update(ada("c2"))
        #expect(try await users.getTeamMembers(companyId: "c2").map(\.name) == ["Ada", "Cy"])
        try await users.delete(byId: "u2")
        await #expect { try await users.delete(byId: "u2") } throws: { error in
            if case ShiftsExample.RepositoryError.documentNotFound = error { return true } else { return false }
        }
        #expect(try await users.getAll().count == 2)
    }

    @Test func pagesWalkEveryUserOnceAndAForeignCursorIsRefused() async throws {
        let factory = try RepositoryFactory.inMemory()
        let users = factory.userRepository()
        for n in 0..<25 { try await users.create(User(uid: "u\(n)", name: String(format: "N%02d", n), email: "\(n)@x.io", companyId: "c")) }
        var seen: [String] = [], cursor: QueryCursor? = nil
        repeat {
            let page = try await users.getPage(after: cursor, limit: 10)
            #expect(page.items.count <= 10)
            seen += page.items.map(\.uid)
            cursor = page.next
        } while cursor != nil
        #expect(seen == (0..<25).map { "u\($0)" }, "in name order, each once")

        let first = try await users.getPage(after: nil, limit: 10)
        await #expect { try await users.query(EntityQuery<User>().where(\.companyId, equals: "c").after(first.next)) } throws: { error in
            guard case ShiftsExample.RepositoryError.operationFailed = error else { return false }
            return true
        }
    }

    @Test func shiftsByUserAndIntervalAndObservation() async throws {
        let dir = TemporaryDirectory("ek-shifts")
        do {
            let factory = try RepositoryFactory.open(at: dir.url)
            let shifts = factory.shiftRepository()
            let updates = shifts.observe { $0.userId == "u1" }
            var iterator = updates.makeAsyncIterator()
            #expect(await iterator.next() == [], "the current result at once")
            try await shifts.create(Shift(id: "s2", userId: "u1", start: hours(30), end: hours(38), role: "bar"))
            #expect(await iterator.next()?.map(\.id) == ["s2"])
            try await shifts.create(Shift(id: "s1", userId: "u1", start: hours(6), end: hours(14), role: "kitchen"))
            try await shifts.create(Shift(id: "s3", userId: "u2", start: hours(7), end: hours(15), role: "bar"))
            try await shifts.create(Shift(id: "s4", userId: "u1", start: hours(24 * 8), end: hours(24 * 8 + 8), role: "bar"))
            let week = DateInterval(start: monday, duration: 7 * 86_400)
            #expect(try await shifts.getShifts(forUser: "u1", in: week).map(\.id) == ["s1", "s2"], "earliest first, in the week")
            try await factory.close()
        }
        let reopened = try RepositoryFactory.open(at: dir.url)
        #expect(try await reopened.shiftRepository().getAll().map(\.id) == ["s1", "s3", "s2", "s4"], "by start time")
        try await reopened.close()
    }

    @Test func everyKernelErrorMapsToAnAppCaseAndStorageFailuresKeepTheirCause() {
        let logFailure = EventKernel.RepositoryError.storage(StorageFailure("the log failed", cause: CocoaError(.fileWriteOutOfSpace)))
        func mapped(_ error: any Error) -> String { "\(ShiftsExample.RepositoryError(error))" }
        #expect(mapped(EventKernel.RepositoryError.notFound("u1".entityID)) == "documentNotFound")
        #expect(mapped(EventKernel.RepositoryError.validationFailed("email")) == "invalidData")
        #expect(mapped(EventKernel.RepositoryError.closed).hasPrefix("operationFailed"))
        #expect(mapped(EventKernel.RepositoryError.invalidQuery("offset")).hasPrefix("operationFailed"))
        #expect(mapped(EncodingError.invalidValue(1, .init(codingPath: [], debugDescription: ""))) == "encodingFailed")
        #expect(mapped(DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: ""))) == "decodingFailed")
        guard case .unexpectedError(let cause?) = ShiftsExample.RepositoryError(logFailure),
              case .storage(let failure)? = cause as? EventKernel.RepositoryError else {
            Issue.record("a storage failure must keep its cause"); return
        }
        #expect(failure.cause is CocoaError)
    }
}
