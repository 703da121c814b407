//! The tables, as [`Client::ensure_schema`](crate::Client::ensure_schema)
//! creates them (`IF NOT EXISTS`: running it again, or against tables
//! created by hand, is fine). Tested against ClickHouse 18.16.1; the
//! statements use only what current versions accept too.
//!
//! # `profkit_samples`: one row per distinct sample key of a part
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS DB.profkit_samples (
//!     host String,          -- the recording host
//!     session String,       -- the session id (unique per host)
//!     part UInt32,          -- the part's number within the session
//!     part_id String,       -- 'host/session/part': the export's key
//!     start DateTime,       -- the part's start (seconds): partitions, prunes
//!     start_ns UInt64,      -- the part's start, Unix ns
//!     end_ns UInt64,        -- the part's end, Unix ns
//!     cpu UInt16, pid UInt32, tid UInt32,
//!     comm String,          -- the thread's name
//!     process String,       -- the process's name (its main thread's)
//!     cgroup String,        -- its path, '[cgroup ID]' unnamed, '' none
//!     binary String,        -- image path, or '[kernel.kallsyms]'
//!     build_id String,      -- hex, may be empty
//!     function String,      -- empty: unnamed (then `offset` says where)
//!     offset UInt64,
//!     stack Array(String),  -- frames, leaf first, 'NAME\tFUNCTION' (function
//!                           -- empty: unnamed); the sampled one alone without call graphs
//!     samples UInt64
//! ) ENGINE = MergeTree()
//! PARTITION BY toYYYYMMDD(start)
//! ORDER BY (host, start, binary, function)
//! ```
//!
//! Every row of a part carries the part's own `start`, so a part lies in
//! one partition and its single INSERT makes one data part: ClickHouse
//! writes it whole or not at all.
//!
//! # `profkit_parts`: one row per exported part, written last
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS DB.profkit_parts (
//!     part_id String, host String, session String, part UInt32,
//!     start DateTime, start_ns UInt64, end_ns UInt64,
//!     samples UInt64,       -- all samples of the part
//!     lost UInt64,          -- samples the kernel dropped
//!     rows UInt64,          -- its rows in profkit_samples
//!     exported_at DateTime
//! ) ENGINE = MergeTree()
//! PARTITION BY toYYYYMM(start)
//! ORDER BY (host, start)
//! ```
//!
//! A part's row here says its samples are complete. Reports
//! ([`Client::query`](crate::Client::query),
//! [`Client::stacks`](crate::Client::stacks)) count only samples of parts
//! listed here, so a half-done export is never half-counted.
//!
//! What 18.16 refuses: `LowCardinality(String)` (experimental there,
//! "allow_experimental_low_cardinality_type"), so the strings are plain
//! `String`. It accepts the `MergeTree() PARTITION BY … ORDER BY …`
//! syntax.
//!
//! # Over shards
//!
//! With a cluster `CLUSTER` in the servers' `remote_servers`, create the
//! two tables above on every shard (in database `DB`), then, in a
//! database of their own (`fleet`), the Distributed tables the exporter
//! writes to and the reports read, sharded by host so that a host's parts
//! stay on one shard:
//!
//! ```sql
//! CREATE TABLE fleet.profkit_samples ON CLUSTER CLUSTER AS DB.profkit_samples
//!     ENGINE = Distributed(CLUSTER, DB, profkit_samples, cityHash64(host))
//! CREATE TABLE fleet.profkit_parts ON CLUSTER CLUSTER AS DB.profkit_parts
//!     ENGINE = Distributed(CLUSTER, DB, profkit_parts, cityHash64(host))
//! ```
//!
//! (`ON CLUSTER` needs ZooKeeper; without it, run each statement on every
//! server.) Then export to `clickhouse://…/fleet`: `ensure_schema` finds
//! the tables there and changes nothing. The client sends every statement
//! with `insert_distributed_sync=1`, so an INSERT into a Distributed table
//! has landed on its shard when it answers and the export's read-back
//! sees it; the reports' `GLOBAL IN` works across shards. Tested on a
//! cluster of one shard (the server itself). With `ReplicatedMergeTree`
//! tables on the shards, ClickHouse's insert deduplication (same block,
//! same checksum) adds a second guard against a repeated INSERT.
//!
//! # Example queries
//!
//! Top functions across every host (what `profreport -l` shows, computed
//! by the server):
//!
//! ```sql
//! SELECT binary, function, sum(samples) AS n
//! FROM DB.profkit_samples
//! WHERE part_id GLOBAL IN (SELECT part_id FROM DB.profkit_parts)
//! GROUP BY binary, function ORDER BY n DESC LIMIT 20
//! ```
//!
//! One host's flame graph as folded stacks (root first, `;`-joined), for
//! `flamegraph.pl` or inferno:
//!
//! ```sql
//! SELECT arrayStringConcat(arrayReverse(stack), ';') AS folded, sum(samples)
//! FROM DB.profkit_samples
//! WHERE host = 'web-1' AND notEmpty(stack)
//!     AND part_id GLOBAL IN (SELECT part_id FROM DB.profkit_parts)
//! GROUP BY folded
//! FORMAT TabSeparated
//! ```
//!
//! Samples and lost samples per host over one day:
//!
//! ```sql
//! SELECT host, sum(samples), sum(lost) FROM DB.profkit_parts
//! WHERE start >= toDateTime('2024-05-01 00:00:00') AND start < toDateTime('2024-05-02 00:00:00')
//! GROUP BY host ORDER BY host
//! ```

/// The samples table's name.
pub const SAMPLES: &str = "profkit_samples";
/// The parts table's name.
pub const PARTS: &str = "profkit_parts";

/// The columns of `profkit_samples`, in the order the export sends them.
pub const SAMPLES_COLUMNS: &str = "host String, session String, part UInt32, part_id String, \
    start DateTime, start_ns UInt64, end_ns UInt64, cpu UInt16, pid UInt32, tid UInt32, \
    comm String, process String, cgroup String, binary String, build_id String, function String, \
    offset UInt64, stack Array(String), samples UInt64";

/// The columns of `profkit_parts`, in the order the export sends them.
pub const PARTS_COLUMNS: &str = "part_id String, host String, session String, part UInt32, \
    start DateTime, start_ns UInt64, end_ns UInt64, samples UInt64, lost UInt64, rows UInt64, \
    exported_at DateTime";

/// The statements [`Client::ensure_schema`](crate::Client::ensure_schema)
/// runs, in order, for database `db`.
pub fn statements(db: &str) -> Vec<String> {
    vec![
        format!("CREATE DATABASE IF NOT EXISTS {db}"),
        format!(
            "CREATE TABLE IF NOT EXISTS {db}.{SAMPLES} ({SAMPLES_COLUMNS}) ENGINE = MergeTree() \
             PARTITION BY toYYYYMMDD(start) ORDER BY (host, start, binary, function)"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {db}.{PARTS} ({PARTS_COLUMNS}) ENGINE = MergeTree() \
             PARTITION BY toYYYYMM(start) ORDER BY (host, start)"
        ),
    ]
}

/// The column names of a column list (`"a String, b UInt8"` → `a, b`).
pub fn names(columns: &str) -> String {
    columns
        .split(',')
        .filter_map(|c| c.split_whitespace().next())
        .collect::<Vec<_>>()
        .join(", ")
}
