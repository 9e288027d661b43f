import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// `eventkernel backup` (issue 28): the backup verifies and exports as its source; an
/// incremental run writes nothing new; exit statuses per Docs/CLI.md.
@Suite("eventkernel backup")
struct BackupCLITests {
    static func demo(_ temp: TemporaryDirectory, _ name: String = "demo") throws -> String {
        let store = temp.file(name).path
        let result = try run("demo", "--dir", store, "--activities", "2000", "--repetitions", "20")
        #expect(result.status == 0, "\(result.stderr)")
        return store
    }

    @Test func backupVerifiesExportsAsItsSourceAndIsIncremental() throws {
        let temp = TemporaryDirectory()
        let store = try Self.demo(temp)
        let backup = temp.file("backup").path
        let first = try run("backup", store, backup, "--json")
        #expect(first.status == 0, "\(first.stderr)")
        let report = try #require(try jsonObject(first.stdout) as? [String: Any])
        #expect(report["incremental"] as? Bool == false)
        #expect((report["copiedFiles"] as? [String])?.contains { $0.hasPrefix("snapshots/") } == true)
        let verify = try run("verify", backup)
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        let exported = try run("export", backup)
        let original = try run("export", store)
        #expect(exported.status == 0, "\(exported.stderr)")
        #expect(exported.stdout == original.stdout)
        #expect(!exported.stdout.isEmpty)

        // Again, with the store as --dir and the backup as --to: nothing new, nothing written.
        let second = try run("backup", "--dir", store, "--to", backup, "--json")
        #expect(second.status == 0, "\(second.stderr)")
        let again = try #require(try jsonObject(second.stdout) as? [String: Any])
        #expect(again["incremental"] as? Bool == true)
        #expect((again["copiedFiles"] as? [String]) == [])
        #expect((again["copiedBytes"] as? Int) == 0)

        let table = try run("backup", store, "--to", backup)
        #expect(table.status == 0, "\(table.stderr)")
        #expect(table.stdout.contains("incremental"))
    }

    @Test func anotherStoresBackupIsRefusedUnlessRestart() throws {
        let temp = TemporaryDirectory()
        let one = try Self.demo(temp, "one")
        let two = try Self.demo(temp, "two")
        let backup = temp.file("backup").path
        #expect(try run("backup", one, backup).status == 0)
        let refused = try run("backup", two, backup)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("another store") && refused.stderr.contains("--restart"), "\(refused.stderr)")
        let restarted = try run("backup", two, backup, "--restart")
        #expect(restarted.status == 0, "\(restarted.stderr)")
        #expect(try run("export", backup).stdout == (try run("export", two).stdout))
    }

    @Test func aDamagedSourceIsExit3WithFileAndOffset() throws {
        let temp = TemporaryDirectory()
        let store = try Self.demo(temp)
        let segment = store + "/00000000000000000000.log"
        try flipBit(in: segment, at: 32 + 64 + 3)
        let result = try run("backup", store, temp.file("backup").path)
        #expect(result.status == 3)
        #expect(result.stderr.contains(segment) && result.stderr.contains("offset 32"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: temp.file("backup").appending(path: BackupManifest.fileName).path))
    }

    @Test func usageErrors() throws {
        let temp = TemporaryDirectory()
        let store = try Self.demo(temp)
        #expect(try run("backup", "--dir", store).status == 1)
        #expect(try run("backup", store, temp.file("a").path, "--to", temp.file("b").path).status == 1)
        #expect(try run("backup", temp.file("missing").path, temp.file("b").path).status == 2)
    }
}
