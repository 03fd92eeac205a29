//! The SQLite schema and its versioned migrations, and how connections are configured.
//!
//! Owns: table definitions, the `schema_version` table, the pragmas every connection gets
//! (WAL, `synchronous=NORMAL`, busy timeout), and the refusal to open a database written by a
//! newer svc. Must not touch: rows (beyond what a migration itself moves).
//!
//! Durability: WAL with `synchronous=NORMAL` makes every commit durable against a crash of the
//! process (the commit is in the WAL, in the OS page cache, before `COMMIT` returns), which is
//! what the SIGKILL test checks. A power loss can drop the last commits (never corrupt the
//! database); that is SQLite's documented trade-off for this mode. Checkpoints (the only
//! fsyncs in this mode) run on a background thread, off the commit path.

use rusqlite::{Connection, OpenFlags, OptionalExtension};
use std::path::Path;
use std::time::Duration;

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i64 = 14;

/// `PRAGMA application_id` of an svc database ("svc1").
pub(crate) const APPLICATION_ID: i64 = 0x7376_6331;

/// How long a connection waits for another one's write lock before failing with SQLITE_BUSY.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Migrations in order; entry `i` takes the schema from version `i` to `i + 1`.
///
/// Adding a table (another module's, e.g. a catalog): append one entry here with its
/// `CREATE TABLE` and indexes, raise [`SCHEMA_VERSION`] by one (the array's length must match
/// it), then put the table's SQL in its own file beside `versions.rs` (`store/<table>.rs`:
/// methods on `SqliteStore` through `read` and `write`, and a trait the caller holds, with an
/// in-memory twin for tests). Never edit an entry that has shipped.
const MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [
    // 1: the initial schema.
    "
    -- One row per live run: typed columns for filtering and paging, plus the mutable part of
    -- the projected row as JSON (state). The immutable part (title, goal, labels, workflow
    -- source, inputs, ...) is read from the run.created event (seq 1) and the checkpoint from
    -- the event at checkpoint_seq, so nothing large is duplicated and an append rewrites only
    -- this small row.
    CREATE TABLE runs (
        id             TEXT    NOT NULL PRIMARY KEY,
        status         TEXT    NOT NULL,
        archived       INTEGER NOT NULL DEFAULT 0,
        parent_id      TEXT,
        created_at     TEXT    NOT NULL,
        updated_at     TEXT    NOT NULL,
        last_seq       INTEGER NOT NULL,
        checkpoint_seq INTEGER,
        state          TEXT    NOT NULL
    );
    CREATE INDEX runs_by_status ON runs (status, id);
    CREATE INDEX runs_by_parent ON runs (parent_id, id) WHERE parent_id IS NOT NULL;
    -- The event log: payload is the event's JSON text, byte for byte. Clustered by run so a
    -- run's events are read sequentially.
    CREATE TABLE events (
        run_id  TEXT    NOT NULL,
        seq     INTEGER NOT NULL,
        kind    TEXT    NOT NULL,
        ts      TEXT    NOT NULL,
        payload TEXT    NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    -- Content-addressed blobs: id is the lowercase hex SHA-256 of bytes.
    CREATE TABLE blobs (
        id    TEXT    NOT NULL PRIMARY KEY,
        size  INTEGER NOT NULL,
        bytes BLOB    NOT NULL
    );
    -- Deleted runs: an id here can never come back.
    CREATE TABLE tombstones (
        run_id     TEXT NOT NULL PRIMARY KEY,
        deleted_at TEXT NOT NULL
    );
    -- The one-time import of <state-dir>/legacy and the digest of its private backup.
    CREATE TABLE legacy_import (
        id            INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
        source        TEXT    NOT NULL,
        backup_file   TEXT    NOT NULL,
        backup_sha256 TEXT    NOT NULL,
        backup_size   INTEGER NOT NULL,
        runs          INTEGER NOT NULL,
        events        INTEGER NOT NULL,
        blobs         INTEGER NOT NULL,
        completed_at  TEXT    NOT NULL
    );
    ",
    // 2: events keyed by (run number << 32) + seq in a rowid table. Keyed by (run_id, seq)
    // WITHOUT ROWID, appending at the end of the b-tree rebalanced three full leaves on almost
    // every commit (about 5.7 WAL frames of 4 KiB per no-op stage); a rowid table appended
    // at its end fills one leaf and starts the next (3.2 frames). Every run gets a number for
    // that; existing runs keep their rowid as theirs.
    "
    ALTER TABLE runs ADD COLUMN num INTEGER;
    UPDATE runs SET num = rowid;
    CREATE UNIQUE INDEX runs_by_num ON runs (num);
    CREATE TABLE events_v2 (
        key     INTEGER PRIMARY KEY,
        run_id  TEXT    NOT NULL,
        seq     INTEGER NOT NULL,
        kind    TEXT    NOT NULL,
        ts      TEXT    NOT NULL,
        payload TEXT    NOT NULL
    );
    INSERT INTO events_v2 (key, run_id, seq, kind, ts, payload)
        SELECT (r.num << 32) + e.seq, e.run_id, e.seq, e.kind, e.ts, e.payload
        FROM events e JOIN runs r ON r.id = e.run_id
        ORDER BY 1;
    DROP TABLE events;
    ALTER TABLE events_v2 RENAME TO events;
    ",
    // 3: workflow versions (`versions.rs`). The server created this table itself before it
    // came under migrations, so a database may have it already.
    "
    CREATE TABLE IF NOT EXISTS workflow_versions (
        id         TEXT NOT NULL PRIMARY KEY,
        package    TEXT NOT NULL,
        created_at TEXT NOT NULL
    ) STRICT;
    ",
    // 4: the automations catalog (`catalog.rs`): a catalog table's generic shape and CHECKs
    // (slug id, hex revision and salt, the definition a JSON object), plus the automation's
    // own (name, target, triggers, policies).
    "
    CREATE TABLE IF NOT EXISTS automations (
        id         TEXT NOT NULL PRIMARY KEY
                   CHECK (length(id) BETWEEN 1 AND 63 AND id NOT GLOB '*[^a-z0-9-]*'
                          AND substr(id, 1, 1) <> '-'),
        revision   TEXT NOT NULL
                   CHECK (length(revision) = 64 AND revision NOT GLOB '*[^0-9a-f]*'),
        definition TEXT NOT NULL
                   CHECK (json_valid(definition) AND json_type(definition) = 'object'),
        salt       TEXT NOT NULL CHECK (length(salt) = 32 AND salt NOT GLOB '*[^0-9a-f]*'),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        CHECK (json_type(definition, '$.name') = 'text'
               AND json_type(definition, '$.target') = 'object'
               AND json_type(definition, '$.triggers') = 'array'
               AND json_extract(definition, '$.policies.misfire') IN ('skip', 'fire_once')
               AND json_extract(definition, '$.policies.overlap') IN ('allow', 'skip', 'queue_one'))
    ) STRICT;
    ",
    // 5: automations at work (`automations.rs`): which automation created a run (a column,
    // indexed, for `GET /runs?automation=`), each schedule trigger's next due time, and
    // every fire.
    "
    ALTER TABLE runs ADD COLUMN automation_id TEXT;
    CREATE INDEX runs_by_automation ON runs (automation_id, id) WHERE automation_id IS NOT NULL;
    CREATE TABLE IF NOT EXISTS automation_schedules (
        automation_id TEXT    NOT NULL,
        trigger_id    TEXT    NOT NULL,
        expression    TEXT    NOT NULL,
        timezone      TEXT    NOT NULL,
        next_due_ms   INTEGER NOT NULL,
        last_due_ms   INTEGER,
        last_fired_at TEXT,
        PRIMARY KEY (automation_id, trigger_id)
    ) STRICT, WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS automation_fires (
        id            TEXT NOT NULL PRIMARY KEY CHECK (length(id) = 26),
        automation_id TEXT NOT NULL,
        trigger_id    TEXT NOT NULL,
        trigger_kind  TEXT NOT NULL
                      CHECK (trigger_kind IN ('api', 'schedule', 'webhook', 'codehost')),
        due_at        TEXT,
        fired_at      TEXT NOT NULL,
        outcome       TEXT NOT NULL
                      CHECK (outcome IN ('pending', 'queued', 'created', 'skipped', 'failed')),
        policy        TEXT CHECK (policy IN ('misfire', 'overlap')),
        error         TEXT,
        detail        TEXT,
        run_id        TEXT,
        delivery_id   TEXT,
        request       TEXT NOT NULL CHECK (json_valid(request)),
        CHECK ((outcome = 'skipped') = (policy IS NOT NULL)),
        CHECK (outcome <> 'failed' OR error IS NOT NULL),
        CHECK (outcome NOT IN ('pending', 'queued', 'created') OR run_id IS NOT NULL)
    ) STRICT;
    CREATE INDEX IF NOT EXISTS automation_fires_by_automation
        ON automation_fires (automation_id, id);
    CREATE UNIQUE INDEX IF NOT EXISTS automation_fires_by_delivery
        ON automation_fires (automation_id, trigger_id, delivery_id) WHERE delivery_id IS NOT NULL;
    CREATE INDEX IF NOT EXISTS automation_fires_open
        ON automation_fires (outcome, id) WHERE outcome IN ('pending', 'queued');
    ",
    // 6: the MCP servers catalog (`catalog.rs`, `mcp::catalog`): the generic shape and
    // CHECKs, plus the server's own (a transport of a known type, positive timeouts).
    "
    CREATE TABLE IF NOT EXISTS mcp_servers (
        id         TEXT NOT NULL PRIMARY KEY
                   CHECK (length(id) BETWEEN 1 AND 63 AND id NOT GLOB '*[^a-z0-9-]*'
                          AND substr(id, 1, 1) <> '-'),
        revision   TEXT NOT NULL
                   CHECK (length(revision) = 64 AND revision NOT GLOB '*[^0-9a-f]*'),
        definition TEXT NOT NULL
                   CHECK (json_valid(definition) AND json_type(definition) = 'object'),
        salt       TEXT NOT NULL CHECK (length(salt) = 32 AND salt NOT GLOB '*[^0-9a-f]*'),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        CHECK (json_type(definition, '$.transport') = 'object'
               AND json_extract(definition, '$.transport.type') IN ('stdio', 'http')
               AND json_extract(definition, '$.startup_timeout_secs') > 0
               AND json_extract(definition, '$.tool_timeout_secs') > 0)
    ) STRICT;
    ",
    // 7: Ask sessions (`sessions.rs`): which run a session belongs to. The session itself
    // lives in its run's event log (`run.session.*`); this only finds the run.
    "
    CREATE TABLE IF NOT EXISTS ask_sessions (
        id         TEXT NOT NULL PRIMARY KEY,
        run_id     TEXT NOT NULL,
        created_at TEXT NOT NULL
    ) STRICT;
    CREATE INDEX IF NOT EXISTS ask_sessions_by_run ON ask_sessions (run_id, id);
    ",
    // 8: the usage ledger (`usage.rs`): one row per LLM stage attempt that reported usage
    // (filled by a trigger in the transaction that appends its `stage.completed` or
    // `stage.failed`, top-level runs only: a child run's log mirrors its parent's stages) and
    // per completion (written by `usage.rs`). Kept when a run is deleted: the money was
    // spent. Existing events are copied in.
    "
    CREATE TABLE IF NOT EXISTS usage_ledger (
        id            INTEGER PRIMARY KEY,
        ts            TEXT    NOT NULL,
        day           TEXT    NOT NULL,
        origin        TEXT    NOT NULL CHECK (origin IN ('run', 'completion')),
        run_id        TEXT,
        node_id       TEXT,
        workflow      TEXT,
        automation_id TEXT,
        provider      TEXT,
        model         TEXT,
        input_tokens  INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        reasoning_tokens   INTEGER NOT NULL DEFAULT 0,
        cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens INTEGER NOT NULL DEFAULT 0,
        usd_micros    INTEGER NOT NULL DEFAULT 0,
        priced        INTEGER NOT NULL DEFAULT 0
    ) STRICT;
    CREATE INDEX IF NOT EXISTS usage_by_day ON usage_ledger (day);
    CREATE TRIGGER IF NOT EXISTS usage_from_stage_events AFTER INSERT ON events
    WHEN NEW.kind IN ('stage.completed', 'stage.failed')
         AND json_type(NEW.payload, '$.properties.usage') = 'object'
         AND (SELECT parent_id FROM runs WHERE id = NEW.run_id) IS NULL
    BEGIN
        INSERT INTO usage_ledger (ts, day, origin, run_id, node_id, workflow, automation_id,
            provider, model, input_tokens, output_tokens, reasoning_tokens,
            cache_read_tokens, cache_write_tokens, usd_micros, priced)
        SELECT NEW.ts, substr(NEW.ts, 1, 10), 'run', NEW.run_id,
            json_extract(NEW.payload, '$.node_id'),
            (SELECT COALESCE(json_extract(c.payload, '$.properties.workflow.name'),
                             json_extract(c.payload, '$.properties.workflow.graph_name'))
               FROM events c WHERE c.key = ((NEW.key >> 32) << 32) + 1),
            (SELECT automation_id FROM runs WHERE id = NEW.run_id),
            json_extract(u.value, '$.provider'), json_extract(u.value, '$.model'),
            COALESCE(json_extract(u.value, '$.tokens.input'), 0),
            COALESCE(json_extract(u.value, '$.tokens.output'), 0),
            COALESCE(json_extract(u.value, '$.tokens.reasoning'), 0),
            COALESCE(json_extract(u.value, '$.tokens.cache_read'), 0),
            COALESCE(json_extract(u.value, '$.tokens.cache_write'), 0),
            COALESCE(json_extract(u.value, '$.cost.usd_micros'), 0),
            COALESCE(json_extract(u.value, '$.cost.source'), 'unpriced') <> 'unpriced'
        FROM (SELECT json_extract(NEW.payload, '$.properties.usage') AS value) u;
    END;
    INSERT INTO usage_ledger (ts, day, origin, run_id, node_id, workflow, automation_id,
        provider, model, input_tokens, output_tokens, reasoning_tokens,
        cache_read_tokens, cache_write_tokens, usd_micros, priced)
    SELECT e.ts, substr(e.ts, 1, 10), 'run', e.run_id, json_extract(e.payload, '$.node_id'),
        (SELECT COALESCE(json_extract(c.payload, '$.properties.workflow.name'),
                         json_extract(c.payload, '$.properties.workflow.graph_name'))
           FROM events c WHERE c.key = ((e.key >> 32) << 32) + 1),
        r.automation_id,
        json_extract(e.payload, '$.properties.usage.provider'),
        json_extract(e.payload, '$.properties.usage.model'),
        COALESCE(json_extract(e.payload, '$.properties.usage.tokens.input'), 0),
        COALESCE(json_extract(e.payload, '$.properties.usage.tokens.output'), 0),
        COALESCE(json_extract(e.payload, '$.properties.usage.tokens.reasoning'), 0),
        COALESCE(json_extract(e.payload, '$.properties.usage.tokens.cache_read'), 0),
        COALESCE(json_extract(e.payload, '$.properties.usage.tokens.cache_write'), 0),
        COALESCE(json_extract(e.payload, '$.properties.usage.cost.usd_micros'), 0),
        COALESCE(json_extract(e.payload, '$.properties.usage.cost.source'), 'unpriced') <> 'unpriced'
    FROM events e JOIN runs r ON r.id = e.run_id
    WHERE e.kind IN ('stage.completed', 'stage.failed')
      AND json_type(e.payload, '$.properties.usage') = 'object'
      AND r.parent_id IS NULL;
    ",
    // 9: the code-host integration (`codehost.rs`): each run's pull request as last seen on
    // the host (details, checks, comments), pull-request creation jobs (one per run), and
    // every webhook delivery received.
    "
    CREATE TABLE IF NOT EXISTS pull_requests (
        run_id       TEXT    NOT NULL PRIMARY KEY,
        owner        TEXT    NOT NULL,
        repo         TEXT    NOT NULL,
        number       INTEGER NOT NULL CHECK (number > 0),
        head_sha     TEXT,
        state        TEXT    NOT NULL CHECK (json_valid(state)),
        refreshed_at INTEGER NOT NULL DEFAULT 0,
        updated_at   TEXT    NOT NULL
    ) STRICT;
    CREATE INDEX IF NOT EXISTS pull_requests_by_number ON pull_requests (owner, repo, number);
    CREATE INDEX IF NOT EXISTS pull_requests_by_head ON pull_requests (head_sha) WHERE head_sha IS NOT NULL;
    CREATE TABLE IF NOT EXISTS pr_creations (
        run_id TEXT NOT NULL PRIMARY KEY,
        id     TEXT NOT NULL UNIQUE,
        status TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
        record TEXT NOT NULL CHECK (json_valid(record))
    ) STRICT;
    CREATE INDEX IF NOT EXISTS pr_creations_pending ON pr_creations (status) WHERE status = 'pending';
    CREATE TABLE IF NOT EXISTS webhook_deliveries (
        delivery_id TEXT NOT NULL PRIMARY KEY,
        event       TEXT NOT NULL,
        action      TEXT,
        repository  TEXT,
        outcome     TEXT NOT NULL,
        detail      TEXT,
        received_at TEXT NOT NULL
    ) STRICT;
    ",
    // 10: the environments catalog (`catalog.rs`, `environments`): the generic shape and
    // CHECKs, plus the environment's own (a known provider and network mode, never the
    // reserved id `local`), and the seeded `default` (`environments::seeded_default`; its
    // revision is the SHA-256 of that definition's canonical text, checked by a test): seeded
    // here so it is made once, and stays deleted once deleted.
    "
    CREATE TABLE IF NOT EXISTS environments (
        id         TEXT NOT NULL PRIMARY KEY
                   CHECK (length(id) BETWEEN 1 AND 63 AND id NOT GLOB '*[^a-z0-9-]*'
                          AND substr(id, 1, 1) <> '-' AND id <> 'local'),
        revision   TEXT NOT NULL
                   CHECK (length(revision) = 64 AND revision NOT GLOB '*[^0-9a-f]*'),
        definition TEXT NOT NULL
                   CHECK (json_valid(definition) AND json_type(definition) = 'object'),
        salt       TEXT NOT NULL CHECK (length(salt) = 32 AND salt NOT GLOB '*[^0-9a-f]*'),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        CHECK (json_extract(definition, '$.provider') IN ('local', 'container', 'hosted')
               AND json_extract(definition, '$.network') IN ('allow', 'block'))
    ) STRICT;
    INSERT OR IGNORE INTO environments (id, revision, definition, salt, created_at, updated_at)
    VALUES ('default', '5e76e4360dce24d0aebcee539b5c5b96b2c273ba74d4935649ca4c954cfc6d66',
            '{\"description\":\"Seeded at install: a bubblewrap container on this host with 2 CPUs and 4 GB.\",\"env\":{},\"image\":null,\"labels\":{},\"lifecycle\":{\"retention_hours\":null,\"stop_on_terminal\":false},\"network\":\"allow\",\"provider\":\"container\",\"resources\":{\"cpu\":2,\"disk\":null,\"memory\":\"4GB\",\"pids\":null},\"snapshot\":null}',
            '00000000000000000000000000000000',
            strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
    ",
    // 11: the workflow catalog (`versions.rs`, issue 29): each run's workflow name (the
    // graph's name, else its entry file's stem; filled from `run.created` here, by the
    // writer after) indexed for runs-by-workflow and last runs, and each version's name
    // (set when registered; versions stored before are named by the server at start).
    "
    ALTER TABLE runs ADD COLUMN workflow TEXT;
    UPDATE runs SET workflow = (
        SELECT COALESCE(NULLIF(json_extract(e.payload, '$.properties.workflow.name'), ''),
                        NULLIF(json_extract(e.payload, '$.properties.workflow.graph_name'), ''),
                        NULLIF(json_extract(e.payload, '$.properties.workflow.slug'), ''))
          FROM events e WHERE e.key = (runs.num << 32) + 1);
    CREATE INDEX IF NOT EXISTS runs_by_workflow ON runs (workflow, id) WHERE workflow IS NOT NULL;
    ALTER TABLE workflow_versions ADD COLUMN name TEXT;
    CREATE INDEX IF NOT EXISTS workflow_versions_by_name
        ON workflow_versions (name, created_at) WHERE name IS NOT NULL;
    ",
    // 12: insights' saved queries (`catalog.rs`, `insights`): the generic shape and CHECKs,
    // plus the query's own (a non-blank name, SQL text).
    "
    CREATE TABLE IF NOT EXISTS insight_queries (
        id         TEXT NOT NULL PRIMARY KEY
                   CHECK (length(id) BETWEEN 1 AND 63 AND id NOT GLOB '*[^a-z0-9-]*'
                          AND substr(id, 1, 1) <> '-'),
        revision   TEXT NOT NULL
                   CHECK (length(revision) = 64 AND revision NOT GLOB '*[^0-9a-f]*'),
        definition TEXT NOT NULL
                   CHECK (json_valid(definition) AND json_type(definition) = 'object'),
        salt       TEXT NOT NULL CHECK (length(salt) = 32 AND salt NOT GLOB '*[^0-9a-f]*'),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        CHECK (json_type(definition, '$.name') = 'text'
               AND json_type(definition, '$.sql') = 'text')
    ) STRICT;
    ",
    // 13: what each run's events weigh (issue 29's `system/df` at 1,000,000 events): their
    // count and bytes (the stored JSON text's UTF-8 bytes), grown by every append in the
    // same statement that moves the row on, so df reads `runs` instead of every event.
    // Existing runs are measured here once.
    "
    ALTER TABLE runs ADD COLUMN event_count INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN event_bytes INTEGER NOT NULL DEFAULT 0;
    UPDATE runs SET (event_count, event_bytes) = (
        SELECT COUNT(*), COALESCE(SUM(length(CAST(e.payload AS BLOB))), 0)
          FROM events e
         WHERE e.key >= (runs.num << 32) AND e.key < ((runs.num + 1) << 32));
    ",
    // 14: (issue 29's Speed targets at 100,000 runs) the usage ledger summed per UTC day and
    // key for `GET /usage`, and runs indexed by day and status for insights. The day sums: one row per (day, origin, provider, model, workflow, automation), kept by
    // a trigger on the ledger (which is only ever inserted into) in the same transaction.
    // A report reads whole days here and only its first and last day from the ledger. Keys
    // are '' for NULL (a primary key column cannot hold NULLs that conflict); readers turn
    // '' back into NULL. Existing ledger rows are summed in here once.
    "
    CREATE TABLE IF NOT EXISTS usage_daily (
        day                TEXT    NOT NULL,
        origin             TEXT    NOT NULL,
        provider           TEXT    NOT NULL,
        model              TEXT    NOT NULL,
        workflow           TEXT    NOT NULL,
        automation_id      TEXT    NOT NULL,
        records            INTEGER NOT NULL,
        input_tokens       INTEGER NOT NULL,
        output_tokens      INTEGER NOT NULL,
        reasoning_tokens   INTEGER NOT NULL,
        cache_read_tokens  INTEGER NOT NULL,
        cache_write_tokens INTEGER NOT NULL,
        usd_micros         INTEGER NOT NULL,
        priced             INTEGER NOT NULL,
        PRIMARY KEY (day, origin, provider, model, workflow, automation_id)
    ) STRICT, WITHOUT ROWID;
    CREATE TRIGGER IF NOT EXISTS usage_daily_from_ledger AFTER INSERT ON usage_ledger
    BEGIN
        INSERT INTO usage_daily (day, origin, provider, model, workflow, automation_id, records,
            input_tokens, output_tokens, reasoning_tokens, cache_read_tokens,
            cache_write_tokens, usd_micros, priced)
        VALUES (NEW.day, NEW.origin, COALESCE(NEW.provider, ''), COALESCE(NEW.model, ''),
            COALESCE(NEW.workflow, ''), COALESCE(NEW.automation_id, ''), 1, NEW.input_tokens,
            NEW.output_tokens, NEW.reasoning_tokens, NEW.cache_read_tokens,
            NEW.cache_write_tokens, NEW.usd_micros, NEW.priced)
        ON CONFLICT (day, origin, provider, model, workflow, automation_id) DO UPDATE SET
            records = records + 1,
            input_tokens = input_tokens + excluded.input_tokens,
            output_tokens = output_tokens + excluded.output_tokens,
            reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens,
            cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
            cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
            usd_micros = usd_micros + excluded.usd_micros,
            priced = priced + excluded.priced;
    END;
    INSERT INTO usage_daily (day, origin, provider, model, workflow, automation_id, records,
        input_tokens, output_tokens, reasoning_tokens, cache_read_tokens, cache_write_tokens,
        usd_micros, priced)
    SELECT day, origin, COALESCE(provider, ''), COALESCE(model, ''), COALESCE(workflow, ''),
        COALESCE(automation_id, ''), COUNT(*), SUM(input_tokens), SUM(output_tokens),
        SUM(reasoning_tokens), SUM(cache_read_tokens), SUM(cache_write_tokens),
        SUM(usd_micros), SUM(priced)
    FROM usage_ledger
    GROUP BY 1, 2, 3, 4, 5, 6;
    -- Runs by UTC day and status, for insights' counts per day (the sample \"runs per day
    -- by status\" reads this index alone, in order, with no sort): `insights_runs`'
    -- `substr(created_at, 1, 10)` is this expression. Touched only when a run's status
    -- changes, as `runs_by_status` is.
    CREATE INDEX IF NOT EXISTS runs_by_day ON runs (substr(created_at, 1, 10), status);
    ",
];

/// Why a database could not be brought to [`SCHEMA_VERSION`].
#[derive(Debug)]
pub(crate) enum SchemaError {
    Sql(&'static str, rusqlite::Error),
    NotOurs(i64),
    Newer(i64),
}

impl From<(&'static str, rusqlite::Error)> for SchemaError {
    fn from((what, e): (&'static str, rusqlite::Error)) -> Self {
        SchemaError::Sql(what, e)
    }
}

fn ctx<T>(what: &'static str, r: rusqlite::Result<T>) -> Result<T, SchemaError> {
    r.map_err(|e| SchemaError::Sql(what, e))
}

/// Opens the writer connection: creates the file if needed, WAL, pragmas.
pub(crate) fn open_writer(path: &Path) -> Result<Connection, SchemaError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    // The writer gathers each commit's WAL frames into one write (`walbuf.rs`).
    let opened = if super::walbuf::register() {
        Connection::open_with_flags_and_vfs(path, flags, super::walbuf::VFS_NAME)
    } else {
        Connection::open_with_flags(path, flags)
    };
    let conn = ctx("opening", opened)?;
    // Room for every statement the writer runs (the event insert has one per batch size),
    // so none is prepared again on the hot path.
    conn.set_prepared_statement_cache_capacity(64);
    ctx("setting busy_timeout", conn.busy_timeout(BUSY_TIMEOUT))?;
    ctx("fixing query plans", stable_plans(&conn))?;
    let mode: String = ctx(
        "switching to WAL",
        conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)),
    )?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(SchemaError::Sql(
            "switching to WAL",
            rusqlite::Error::InvalidParameterName(format!("journal_mode stayed {mode}")),
        ));
    }
    ctx(
        "setting pragmas",
        conn.execute_batch(
            "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=OFF; PRAGMA cache_size=-16384;
             PRAGMA journal_size_limit=67108864;",
        ),
    )?;
    Ok(conn)
}

/// WAL pages after which the writer checkpoints inline. Normally the background checkpointer
/// (see `sqlite.rs`) keeps the WAL far below this; it is the safety net if it cannot.
pub(crate) const WRITER_AUTOCHECKPOINT_PAGES: u32 = 16_384;

/// Moves the writer's checkpoints off the commit path (the background checkpointer does
/// them), keeping an inline one only as a safety net.
pub(crate) fn defer_checkpoints(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "PRAGMA wal_autocheckpoint={WRITER_AUTOCHECKPOINT_PAGES};"
    ))
}

/// Opens the background checkpointer's connection (read-write, never writes rows).
pub(crate) fn open_checkpointer(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_millis(100))?;
    conn.execute_batch("PRAGMA wal_autocheckpoint=0; PRAGMA journal_size_limit=67108864;")?;
    Ok(conn)
}

/// Opens a read-only connection to an existing database.
pub(crate) fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    stable_plans(&conn)?;
    conn.execute_batch("PRAGMA cache_size=-16384;")?;
    Ok(conn)
}

/// Turns on SQLite's query planner stability guarantee. The bundled SQLite is built with
/// STAT4, which otherwise re-prepares a cached statement whenever a value bound against an
/// indexed column changes: every `events(run, seq)` or `get_run(id)` call re-parsed its SQL
/// (measured: the parser was the largest single cost of reading a run's first event).
/// Our queries have one good plan regardless of the values.
pub(crate) fn stable_plans(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map(|_| ())
}

/// The schema version recorded in the database (0 for a fresh file).
pub(crate) fn current_version(conn: &Connection) -> rusqlite::Result<i64> {
    let has_table: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if has_table.is_none() {
        return Ok(0);
    }
    conn.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_version",
        [],
        |r| r.get(0),
    )
}

/// Brings the database to [`SCHEMA_VERSION`], one transaction per migration; refuses a
/// database of another application or of a newer version. Returns the version found.
pub(crate) fn migrate(conn: &mut Connection) -> Result<i64, SchemaError> {
    let app_id: i64 = ctx(
        "reading application_id",
        conn.query_row("PRAGMA application_id", [], |r| r.get(0)),
    )?;
    let found = ctx("reading schema_version", current_version(conn))?;
    if app_id != APPLICATION_ID && (app_id != 0 || found != 0) {
        return Err(SchemaError::NotOurs(app_id));
    }
    if found > SCHEMA_VERSION {
        return Err(SchemaError::Newer(found));
    }
    if found == SCHEMA_VERSION {
        return Ok(found);
    }
    let tx = ctx(
        "starting migration",
        conn.transaction_with_behavior(rusqlite::TransactionBehavior::Exclusive),
    )?;
    // Re-read under the lock: another process may have migrated meanwhile.
    let found = ctx("reading schema_version", current_version(&tx))?;
    if found > SCHEMA_VERSION {
        return Err(SchemaError::Newer(found));
    }
    ctx(
        "creating schema_version",
        tx.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID};
             CREATE TABLE IF NOT EXISTS schema_version (
                 version    INTEGER NOT NULL PRIMARY KEY,
                 applied_at TEXT    NOT NULL
             );"
        )),
    )?;
    let start = usize::try_from(found).unwrap_or(0);
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(start) {
        ctx("applying a migration", tx.execute_batch(sql))?;
        ctx(
            "recording a migration",
            tx.execute(
                "INSERT INTO schema_version (version, applied_at) VALUES (?1, ?2)",
                rusqlite::params![i as i64 + 1, crate::base::clock::now()],
            ),
        )?;
    }
    ctx("committing migrations", tx.commit())?;
    Ok(found)
}
