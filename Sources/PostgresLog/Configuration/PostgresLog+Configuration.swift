#if PostgreSQL
public import EventLog
import Foundation
import NIOCore
import NIOSSL
import PostgresNIO

extension PostgresLog {
    /// Where the shared log lives and how an instance uses it.
    ///
    /// Built from a URL in libpq's form, `postgres://user:password@host:port/database?schema=…`,
    /// or field by field. Several stores can share one database in different schemas.
    public struct Configuration: Sendable, CustomStringConvertible {
        /// How the server is reached.
        public enum Endpoint: Hashable, Sendable, CustomStringConvertible {
            /// TCP: a host name or address and a port.
            case tcp(host: String, port: Int)
            /// A Unix-domain socket file (`<directory>/.s.PGSQL.<port>` for a default server).
            case unixSocket(path: String)

            public var description: String {
                switch self {
                case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
                case .unixSocket(let path): path
                }
            }
        }

        /// Whether the connection is encrypted (libpq's `sslmode`).
        public enum TLSMode: String, Hashable, Sendable {
            /// Never.
            case disable
            /// When the server offers it (libpq's default).
            case prefer
            /// Always; the connection fails when the server does not offer it.
            case require
        }

        /// The server.
        public var endpoint: Endpoint
        /// The role to connect as.
        public var username: String
        /// Its password, if the server asks for one.
        public var password: String?
        /// The database (the server's default for `username` when `nil`).
        public var database: String?
        /// The schema holding the log's tables; created and migrated at open. Lower-case
        /// letters, digits and `_`, starting with a letter or `_`, at most 48 characters.
        public var schema: String
        /// Encryption. Unix-domain sockets are never encrypted.
        public var tls: TLSMode
        /// How often an instance looks for other instances' appends when no notification came:
        /// the bound on how long a lost notification can delay a follower.
        public var pollInterval: Duration
        /// Whether the instance listens for the notifications appends send (LISTEN). Turn it
        /// off where LISTEN does not work (a connection pooler in transaction mode): the
        /// instance then learns of other instances' appends by polling alone.
        public var listensForNotifications: Bool
        /// How long opening a connection may take before the server counts as unreachable.
        public var connectTimeout: Duration
        /// The most records one append transaction (one round of group commit) carries.
        public var maximumRoundRecords: Int
        /// The most payload bytes one append transaction carries (a larger single batch still
        /// goes alone).
        public var maximumRoundBytes: Int
        /// How many recent records an instance keeps in memory so that folding what others
        /// appended does not read them from the server again.
        public var cachedRecords: Int
        /// How many rows one read asks the server for at a time.
        public var readPageSize: Int
        /// How payloads are compressed in the `payload` column (as the local log compresses).
        public var compression: CompressionCodec
        /// The most connections the instance opens for appends, following and reads (at least 3).
        public var maximumConnections: Int
        /// Whether opening creates the schema or migrates it to this EventKernel's version
        /// (the default). `false` for tools that only read: the log must exist (else
        /// ``LogError/Code/notAStore``) and is opened as it is, its schema never changed.
        public var preparesSchema: Bool

        /// Creates a configuration.
        /// - Parameters:
        ///   - endpoint: The server.
        ///   - username: The role.
        ///   - password: Its password.
        ///   - database: The database.
        ///   - schema: The schema for the log's tables (default `eventkernel`).
        ///   - tls: Encryption (default ``TLSMode/prefer``).
        public init(
            endpoint: Endpoint, username: String, password: String? = nil, database: String? = nil,
            schema: String = "eventkernel", tls: TLSMode = .prefer
        ) {
            self.endpoint = endpoint
            self.username = username
            self.password = password
            self.database = database
            self.schema = schema
            self.tls = tls
            self.pollInterval = .milliseconds(200)
            self.listensForNotifications = true
            self.connectTimeout = .seconds(10)
            self.maximumRoundRecords = 16_384
            self.maximumRoundBytes = 8 << 20
            self.cachedRecords = 65_536
            self.readPageSize = 4_096
            self.compression = .lz4
            self.maximumConnections = 6
            self.preparesSchema = true
        }

        /// Parses a URL in libpq's form: `postgres://user:password@host:port/database`, with
        /// the query items `schema`, `sslmode` (`disable`, `prefer`, `require`), and `host`
        /// (a socket directory, as libpq's `?host=/var/run/postgresql`, or a host name).
        /// `postgresql://` is accepted too. The port defaults to 5432, the user to `$USER`.
        /// - Throws: ``LogError`` with code ``LogError/Code/invalidArgument`` naming what is wrong.
        public init(url text: String) throws {
            guard let components = URLComponents(string: text),
                  let scheme = components.scheme, scheme == "postgres" || scheme == "postgresql" else {
                throw LogError(.invalidArgument, "\"\(Self.redacted(text))\" is not a PostgreSQL URL (postgres://user@host:port/database)")
            }
            var items: [String: String] = [:]
            for item in components.queryItems ?? [] { items[item.name] = item.value ?? "" }
            let port = components.port ?? Int(items["port"] ?? "") ?? 5432
            let username = components.user.flatMap { $0.removingPercentEncoding } ?? items["user"]
                ?? ProcessInfo.processInfo.environment["USER"] ?? "postgres"
            let endpoint: Endpoint
            if let host = components.host, !host.isEmpty {
                endpoint = .tcp(host: host, port: port)
            } else if let host = items["host"], host.hasPrefix("/") {
                endpoint = .unixSocket(path: "\(host)/.s.PGSQL.\(port)")
            } else if let host = items["host"], !host.isEmpty {
                endpoint = .tcp(host: host, port: port)
            } else {
                endpoint = .tcp(host: "localhost", port: port)
            }
            let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
            self.init(
                endpoint: endpoint, username: username,
                password: components.password.flatMap { $0.removingPercentEncoding } ?? items["password"],
                database: path.isEmpty ? nil : path.removingPercentEncoding ?? path,
                schema: items["schema"] ?? "eventkernel")
            if let mode = items["sslmode"] {
                switch mode {
                case "disable", "allow": tls = .disable
                case "prefer": tls = .prefer
                case "require", "verify-ca", "verify-full": tls = .require
                default: throw LogError(.invalidArgument, "sslmode \"\(mode)\" is not one of disable, prefer, require")
                }
            }
            try validate()
        }

        /// Checks what the server would otherwise reject later, less clearly.
        /// - Throws: ``LogError`` with code ``LogError/Code/invalidArgument``.
        func validate() throws {
            let valid = schema.utf8.count <= 48 && schema.utf8.first.map { $0 == UInt8(ascii: "_") || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) } == true
                && schema.utf8.allSatisfy { $0 == UInt8(ascii: "_") || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
            guard valid else {
                throw LogError(.invalidArgument, "schema name \"\(schema)\" must be lower-case letters, digits and _, start with a letter or _, and have at most 48 characters")
            }
            guard maximumRoundRecords > 0, maximumRoundBytes > 0, readPageSize > 0, cachedRecords >= 0, maximumConnections >= 3 else {
                throw LogError(.invalidArgument, "round limits and the read page size must be positive, the cache size not negative, and at least 3 connections allowed")
            }
        }

        /// The URL without its password: what messages name.
        public var description: String {
            var text = "postgres://\(username)@"
            switch endpoint {
            case .tcp: text += endpoint.description
            case .unixSocket(let path): text += "?socket=\(path)"
            }
            if let database { text += "/\(database)" }
            return text + " (schema \(schema))"
        }

        /// The NOTIFY channel appends announce themselves on.
        var channel: String { "\(schema).appended" }

        static func redacted(_ url: String) -> String {
            guard var components = URLComponents(string: url), components.password != nil else { return url }
            components.password = "***"
            return components.string ?? url
        }

        func clientConfiguration() -> PostgresClient.Configuration {
            var configuration: PostgresClient.Configuration
            switch endpoint {
            case .tcp(let host, let port):
                let tls: PostgresClient.Configuration.TLS = switch self.tls {
                case .disable: .disable
                case .prefer: .prefer(.makeClientConfiguration())
                case .require: .require(.makeClientConfiguration())
                }
                configuration = .init(host: host, port: port, username: username, password: password, database: database, tls: tls)
            case .unixSocket(let path):
                configuration = .init(unixSocketPath: path, username: username, password: password, database: database)
            }
            configuration.options.connectTimeout = connectTimeout
            configuration.options.maximumConnections = maximumConnections
            configuration.options.minimumConnections = 0
            return configuration
        }

        func connectionConfiguration() throws -> PostgresConnection.Configuration {
            var configuration: PostgresConnection.Configuration
            switch endpoint {
            case .tcp(let host, let port):
                let tls: PostgresConnection.Configuration.TLS
                do {
                    switch self.tls {
                    case .disable: tls = .disable
                    case .prefer: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
                    case .require: tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
                    }
                } catch {
                    throw LogError(.invalidArgument, "the TLS configuration for \(endpoint) cannot be built: \(error)", cause: error)
                }
                configuration = .init(host: host, port: port, username: username, password: password, database: database, tls: tls)
            case .unixSocket(let path):
                configuration = .init(unixSocketPath: path, username: username, password: password, database: database)
            }
            configuration.options.connectTimeout = .nanoseconds(Int64(connectTimeout.components.seconds) * 1_000_000_000
                + connectTimeout.components.attoseconds / 1_000_000_000)
            return configuration
        }
    }
}
#endif
