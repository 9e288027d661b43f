#if PostgreSQL
import EventLog
import Logging
import PostgresNIO

/// The log's tables in PostgreSQL, versioned: created at the first open and migrated by later
/// ones (Docs/ScaleOut.md, "The schema").
///
/// - `meta`: key/value facts about the log: `schema_version` (the oldest schema version a
///   reader must understand: what older builds check), `schema_revision` (the version the
///   schema is at; missing before version 2, when it equals `schema_version`), `log_id`, `created_at`.
/// - `head`: one row: the next position and the smallest and largest recorded-at times. Its row
///   lock is what serializes position assignment: an append transaction locks it first, so
///   positions follow commit order and a rolled-back transaction leaves no gap.
/// - `events`: one row per event, the envelope's fields as columns; `(entity_type,
///   entity_id_kind, entity_id, stream_version)` is unique: the cross-instance concurrency
///   check. Text columns collate as `"C"`: byte for byte, as EventKernel compares ids and
///   types, and without the locale's cost in the index every append probes.
/// - `rounds`: one row per append transaction (its id, first position, count and each batch's
///   first position, null for a refused batch), so that an instance whose connection dropped
///   during an append learns whether, and how, it committed.
/// - `append_round(...)`: the append transaction's body, run in one statement (one round trip),
///   so the head's lock is held for the server's work and the commit only, never for a round
///   trip to an instance.
/// - `consumers` (version 2): one row per named consumer (Docs/Consumers.md, "On PostgreSQL"):
///   its id (the lease's advisory-lock key is built from it), name, and committed position
///   with what binds it to the log's history (the epoch, and the anchor: the timestamp and
///   payload CRC-32C of the event before it); the position is null until the first commit;
///   `lease_epoch`, the fencing token bumped each time an instance takes the consumer's lease.
/// - `consumer_parked` (version 2): the consumers' parked events, one row each;
///   `replace_parked(...)` replaces a consumer's list in one statement (one transaction).
///   Version 3 adds `retry_requested` (a retry asked for, ``ParkedEvent/retryRequested``) and
///   a `replace_parked` that takes it; the version 2 function stays, for builds of version 2
///   (their lists are written with no request: the column's default).
enum PostgresSchema {
    /// The version this code writes and reads. Older schemas are migrated at open; a newer
    /// one is refused (the log was written by a newer EventKernel).
    static let currentVersion = 3
    /// The oldest version whose readers can use a schema at ``currentVersion``: versions 2 and
    /// 3 only add tables (the consumers') and a column with a default, so a version 1 build
    /// still opens the log (it checks `schema_version`, which stays at this), and a version 2
    /// build still reads and writes parked lists. A change older readers would misread raises it.
    static let minimumReaderVersion = 1

    /// The statements that bring a schema from `version - 1` to `version`, in order.
    static func migration(to version: Int, schema s: String) -> [String] {
        switch version {
        case 1:
            return [
                """
                CREATE TABLE "\(s)".head (
                    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
                    next_position bigint NOT NULL,
                    min_recorded_at bigint,
                    max_recorded_at bigint
                )
                """,
                #"INSERT INTO "\#(s)".head (singleton, next_position) VALUES (true, 0)"#,
                """
                CREATE TABLE "\(s)".events (
                    position bigint PRIMARY KEY,
                    recorded_at bigint NOT NULL,
                    entity_type text COLLATE "C" NOT NULL,
                    entity_id_kind smallint NOT NULL,
                    entity_id text COLLATE "C" NOT NULL,
                    stream_version bigint NOT NULL,
                    event_type text COLLATE "C" NOT NULL,
                    schema_version integer NOT NULL,
                    correlation_id text,
                    actor text,
                    payload_codec smallint NOT NULL,
                    payload_length integer NOT NULL,
                    payload bytea NOT NULL,
                    CONSTRAINT events_stream_version UNIQUE (entity_type, entity_id_kind, entity_id, stream_version)
                )
                """,
                // Payloads are compressed by the instance already: PostgreSQL's own compression
                // of large values would spend time for nothing.
                #"ALTER TABLE "\#(s)".events ALTER COLUMN payload SET STORAGE EXTERNAL"#,
                """
                CREATE TABLE "\(s)".rounds (
                    round_id uuid PRIMARY KEY,
                    first_position bigint NOT NULL,
                    record_count integer NOT NULL,
                    batch_firsts bigint[] NOT NULL,
                    committed_at timestamptz NOT NULL DEFAULT now()
                )
                """,
                appendFunction(schema: s),
            ]
        case 2:
            return [
                """
                CREATE TABLE "\(s)".consumers (
                    id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY CHECK (id > 0),
                    name text COLLATE "C" NOT NULL UNIQUE,
                    lease_epoch bigint NOT NULL DEFAULT 0,
                    committed bigint,
                    committed_at bigint,
                    history_epoch bigint,
                    anchor_recorded_at bigint,
                    anchor_checksum bigint,
                    CHECK ((committed IS NULL) = (committed_at IS NULL) AND (committed IS NULL) = (history_epoch IS NULL)),
                    CHECK ((anchor_recorded_at IS NULL) = (anchor_checksum IS NULL))
                )
                """,
                """
                CREATE TABLE "\(s)".consumer_parked (
                    consumer_id integer NOT NULL REFERENCES "\(s)".consumers (id),
                    position bigint NOT NULL,
                    stream text NOT NULL,
                    event_type text NOT NULL,
                    error_type text NOT NULL,
                    error text NOT NULL,
                    attempts integer NOT NULL,
                    parked_at bigint NOT NULL,
                    PRIMARY KEY (consumer_id, position)
                )
                """,
                """
                CREATE OR REPLACE FUNCTION "\(s)".replace_parked(
                    p_consumer integer, p_position bigint[], p_stream text[], p_event_type text[],
                    p_error_type text[], p_error text[], p_attempts integer[], p_parked_at bigint[])
                RETURNS void LANGUAGE sql AS $fn$
                    DELETE FROM "\(s)".consumer_parked WHERE consumer_id = p_consumer;
                    INSERT INTO "\(s)".consumer_parked (consumer_id, position, stream, event_type, error_type, error, attempts, parked_at)
                        SELECT p_consumer, u.* FROM unnest(p_position, p_stream, p_event_type, p_error_type, p_error, p_attempts, p_parked_at) AS u;
                $fn$
                """,
            ]
        case 3:
            return [
                #"ALTER TABLE "\#(s)".consumer_parked ADD COLUMN retry_requested boolean NOT NULL DEFAULT false"#,
                """
                CREATE OR REPLACE FUNCTION "\(s)".replace_parked(
                    p_consumer integer, p_position bigint[], p_stream text[], p_event_type text[],
                    p_error_type text[], p_error text[], p_attempts integer[], p_parked_at bigint[], p_retry_requested boolean[])
                RETURNS void LANGUAGE sql AS $fn$
                    DELETE FROM "\(s)".consumer_parked WHERE consumer_id = p_consumer;
                    INSERT INTO "\(s)".consumer_parked (consumer_id, position, stream, event_type, error_type, error, attempts, parked_at, retry_requested)
                        SELECT p_consumer, u.* FROM unnest(p_position, p_stream, p_event_type, p_error_type, p_error, p_attempts, p_parked_at, p_retry_requested) AS u;
                $fn$
                """,
            ]
        default:
            return []
        }
    }

    /// The body of an append transaction.
    ///
    /// It locks the head row (waiting for any other instance's append to commit), then tries
    /// the common case: every batch accepted at consecutive positions from the head, the rows
    /// inserted in one statement, the unique index refusing a stream version that is taken
    /// (its insert probes the index anyway: the common case costs no extra lookup). When it
    /// refuses one (another instance appended to a stream meanwhile; the inserts are rolled
    /// back to a savepoint), it decides batch by batch: the current version of every stream
    /// the round touches is read, and a batch is accepted when each of its streams' first
    /// event follows the stream's version (as committed, or as an earlier batch of this round
    /// left it), refused otherwise; the accepted rows are inserted. Then the head is advanced,
    /// the round recorded, and the new head announced with NOTIFY (delivered at commit), with
    /// the appending instance's id so that it skips its own. One row per batch comes back:
    /// its first position, or the stream that refused it with the expected and actual versions.
    ///
    /// Records (r), distinct streams (s), batches (b) and version checks (c: one per batch
    /// and stream, with the stream's first and last version in the batch) arrive as arrays.
    static func appendFunction(schema s: String) -> String {
        let insert = """
            WITH inserted AS (
                INSERT INTO "\(s)".events (position, recorded_at, entity_type, entity_id_kind, entity_id,
                    stream_version, event_type, schema_version, correlation_id, actor,
                    payload_codec, payload_length, payload)
                SELECT v_first[r.b] + r.o, r.at, p_s_type[r.s], p_s_kind[r.s], p_s_id[r.s],
                       r.v, r.et, r.sv,
                       CASE WHEN r.m & 1 <> 0 THEN r.c END, CASE WHEN r.m & 2 <> 0 THEN r.a END,
                       r.codec, r.len, r.p
                  FROM unnest(p_batch, p_offset, p_stream, p_version, p_event_type, p_schema_version,
                              p_meta, p_correlation_id, p_actor, p_recorded_at, p_codec, p_length, p_payload)
                       AS r(b, o, s, v, et, sv, m, c, a, at, codec, len, p)
                 WHERE v_first[r.b] IS NOT NULL
                RETURNING recorded_at
            )
            SELECT min(recorded_at), max(recorded_at) INTO v_min, v_max FROM inserted;
            """
        return """
        CREATE OR REPLACE FUNCTION "\(s)".append_round(
            p_round uuid, p_batch_count integer[],
            p_s_type text[], p_s_kind smallint[], p_s_id text[],
            p_c_batch integer[], p_c_stream integer[], p_c_first bigint[], p_c_last bigint[],
            p_batch integer[], p_offset integer[], p_stream integer[], p_version bigint[],
            p_event_type text[], p_schema_version integer[], p_meta smallint[],
            p_correlation_id text[], p_actor text[], p_recorded_at bigint[],
            p_codec smallint[], p_length integer[], p_payload bytea[], p_origin text)
        RETURNS TABLE (out_batch integer, out_first bigint, out_stream integer, out_expected bigint, out_actual bigint)
        LANGUAGE plpgsql AS $fn$
        DECLARE
            v_start bigint;
            v_next bigint;
            v_current bigint[];
            v_first bigint[];
            v_bad_stream integer[];
            v_expected bigint[];
            v_actual bigint[];
            v_check integer := 1;
            v_end integer;
            v_bad integer;
            v_min bigint;
            v_max bigint;
            v_batches integer := coalesce(cardinality(p_batch_count), 0);
            v_checks integer := coalesce(cardinality(p_c_batch), 0);
        BEGIN
            SELECT h.next_position INTO v_start FROM "\(s)".head h FOR UPDATE;
            v_bad_stream := array_fill(NULL::integer, ARRAY[v_batches]);
            v_expected := array_fill(NULL::bigint, ARRAY[v_batches]);
            v_actual := array_fill(NULL::bigint, ARRAY[v_batches]);
            BEGIN
                -- Every batch accepted, at consecutive positions.
                SELECT array_agg(v_start + u.total - u.count ORDER BY u.n) INTO v_first
                  FROM (SELECT c.n, c.count, sum(c.count) OVER (ORDER BY c.n) AS total
                          FROM unnest(p_batch_count) WITH ORDINALITY AS c(count, n)) AS u;
                v_next := v_start + coalesce(cardinality(p_version), 0);
                \(insert)
            EXCEPTION WHEN unique_violation THEN
                -- A stream moved on: decide batch by batch.
                v_next := v_start;
                SELECT array_agg(coalesce((SELECT max(e.stream_version) FROM "\(s)".events e
                                           WHERE e.entity_type = t.type AND e.entity_id_kind = t.kind AND e.entity_id = t.id), 0)
                                 ORDER BY t.n)
                  INTO v_current
                  FROM unnest(p_s_type, p_s_kind, p_s_id) WITH ORDINALITY AS t(type, kind, id, n);
                v_first := array_fill(NULL::bigint, ARRAY[v_batches]);
                FOR b IN 1 .. v_batches LOOP
                    v_end := v_check;
                    v_bad := NULL;
                    WHILE v_end <= v_checks AND p_c_batch[v_end] = b LOOP
                        IF v_bad IS NULL AND p_c_first[v_end] <> v_current[p_c_stream[v_end]] + 1 THEN
                            v_bad := v_end;
                        END IF;
                        v_end := v_end + 1;
                    END LOOP;
                    IF v_bad IS NULL THEN
                        FOR c IN v_check .. v_end - 1 LOOP
                            v_current[p_c_stream[c]] := p_c_last[c];
                        END LOOP;
                        v_first[b] := v_next;
                        v_next := v_next + p_batch_count[b];
                    ELSE
                        v_bad_stream[b] := p_c_stream[v_bad];
                        v_expected[b] := p_c_first[v_bad] - 1;
                        v_actual[b] := v_current[p_c_stream[v_bad]];
                    END IF;
                    v_check := v_end;
                END LOOP;
                IF v_next > v_start THEN
                    \(insert)
                END IF;
            END;
            IF v_next > v_start THEN
                UPDATE "\(s)".head SET next_position = v_next,
                    min_recorded_at = LEAST(min_recorded_at, v_min),
                    max_recorded_at = GREATEST(max_recorded_at, v_max);
                INSERT INTO "\(s)".rounds (round_id, first_position, record_count, batch_firsts)
                    VALUES (p_round, v_start, (v_next - v_start)::integer, v_first);
                PERFORM pg_notify('\(s).appended', v_next || ' ' || p_origin);
            END IF;
            RETURN QUERY SELECT b, v_first[b], v_bad_stream[b], v_expected[b], v_actual[b]
                           FROM generate_series(1, v_batches) AS b;
        END
        $fn$
        """
    }

    /// Creates or migrates the schema on `connection`, in one transaction under an advisory
    /// lock (instances opening at once migrate one at a time; the others find it done); with
    /// ``PostgresLog/Configuration/preparesSchema`` off, only reads what is there.
    /// - Returns: The log's id (a UUID made when the schema was created) and the version its
    ///   schema is at (below ``currentVersion`` only when not prepared: then the tables of
    ///   later versions are missing).
    /// - Throws: ``LogError`` with code ``LogError/Code/unsupportedVersion`` for a schema newer
    ///   than this code can read, ``LogError/Code/notAStore`` for a missing log that is not to
    ///   be created, or the server's error.
    static func prepare(on connection: PostgresConnection, configuration: PostgresLog.Configuration, logger: Logger) async throws -> (logID: String, revision: Int) {
        let s = configuration.schema
        try await connection.query("BEGIN", logger: logger)
        do {
            if configuration.preparesSchema {
                // Two-key advisory lock: a fixed class ("EVKN") and the schema's hash.
                try await connection.query(PostgresQuery(unsafeSQL: "SELECT pg_advisory_xact_lock(1163283278, hashtext($1))", binds: binds(s)), logger: logger)
                try await connection.query(PostgresQuery(unsafeSQL: #"CREATE SCHEMA IF NOT EXISTS "\#(s)""#), logger: logger)
                try await connection.query(PostgresQuery(unsafeSQL: #"CREATE TABLE IF NOT EXISTS "\#(s)".meta (key text PRIMARY KEY, value text NOT NULL)"#), logger: logger)
            } else {
                var exists = false
                for try await found in try await connection.query(PostgresQuery(unsafeSQL: "SELECT to_regclass($1) IS NOT NULL", binds: binds("\"\(s)\".meta")), logger: logger).decode(Bool.self) {
                    exists = found
                }
                guard exists else { throw LogError(.notAStore, "there is no EventKernel log in \(configuration) (no schema \"\(s)\" with its tables): check the URL's schema") }
            }
            var facts: [String: String] = [:]
            for try await (key, value) in try await connection.query(PostgresQuery(unsafeSQL: #"SELECT key, value FROM "\#(s)".meta WHERE key IN ('schema_version', 'schema_revision', 'log_id')"#), logger: logger).decode((String, String).self) {
                facts[key] = value
            }
            let readers = facts["schema_version"].map { Int($0) ?? Int.max } ?? 0
            let revision = facts["schema_revision"].map { Int($0) ?? Int.max } ?? readers
            guard readers <= currentVersion else {
                throw LogError(.unsupportedVersion, "the log in \(configuration) has schema version \(readers); this EventKernel reads up to version \(currentVersion): upgrade it")
            }
            if revision < currentVersion, configuration.preparesSchema {
                for version in (revision + 1)...currentVersion {
                    for statement in migration(to: version, schema: s) {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                }
                try await connection.query(PostgresQuery(unsafeSQL: """
                    INSERT INTO "\(s)".meta (key, value) VALUES ('schema_version', $1), ('schema_revision', $2)
                    ON CONFLICT (key) DO UPDATE SET value = excluded.value
                    """, binds: binds(String(max(readers, minimumReaderVersion)), String(currentVersion))), logger: logger)
                try await connection.query(PostgresQuery(unsafeSQL: """
                    INSERT INTO "\(s)".meta (key, value) VALUES ('log_id', gen_random_uuid()::text), ('created_at', now()::text)
                    ON CONFLICT (key) DO NOTHING
                    """), logger: logger)
                var logID = ""
                for try await value in try await connection.query(PostgresQuery(unsafeSQL: #"SELECT value FROM "\#(s)".meta WHERE key = 'log_id'"#), logger: logger).decode(String.self) {
                    logID = value
                }
                facts["log_id"] = logID
            }
            try await connection.query("COMMIT", logger: logger)
            return (facts["log_id"] ?? "", configuration.preparesSchema ? max(revision, currentVersion) : revision)
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: logger)
            throw error
        }
    }

    static func binds(_ values: String...) -> PostgresBindings {
        var binds = PostgresBindings(capacity: values.count)
        for value in values { binds.append(value) }
        return binds
    }
}
#endif
