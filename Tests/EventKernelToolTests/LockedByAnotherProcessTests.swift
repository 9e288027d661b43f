import Activities
import Foundation
import Testing
import EventKernelTestSupport

/// The CLI against a store whose lock another process holds (`ActivitiesTestHelper hold`):
/// a writing command exits 2 with a clear message and changes nothing; reading works.
@Suite struct LockedByAnotherProcessTests {
    @Test func importIntoAStoreLockedByAnotherProcessExits2() async throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let before = try run("export", "--dir", store)
        let holder = Process()
        holder.executableURL = builtExecutable("ActivitiesTestHelper")
        holder.arguments = ["hold", store]
        let input = Pipe(), output = Pipe()
        holder.standardInput = input
        holder.standardOutput = output
        try holder.run()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        #expect(line.hasPrefix("holding"), "helper: \(line)")
        let file = temp.file("more.jsonl")
        try write([activityLine(5, start: "2025-02-01T10:00:00Z", end: nil, type: "bath")], to: file)
        let result = try run("import", file.path, "--dir", store)
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("locked by another writer (pid \(holder.processIdentifier))"), "\(result.stderr)")
        #expect(try run("export", "--dir", store).stdout == before.stdout, "a read alongside the holder differs")
        try input.fileHandleForWriting.close()
        holder.waitUntilExit()
        closeOutputFiles(of: holder)
        #expect(try run("export", "--dir", store).stdout == before.stdout, "the store changed")
    }
}
