//! The SQL text of every workload, written once and executed verbatim by every runner.
//!
//! Plain SQLite SQL with numbered parameters (`?1`), which rusqlite, sqlx and other languages' drivers all
//! accept, so every approach runs exactly the same statements.

/// The `items` table, as a literal for [`ITEMS_SCHEMA`] and [`HELD_TX_SCHEMA`] to share.
macro_rules! items_table {
    () => {
        "\
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    value INTEGER NOT NULL,
    payload TEXT NOT NULL
);"
    };
}

/// Schema of the single-database workloads (`point-read`, `insert`, `mixed`).
pub const ITEMS_SCHEMA: &str = items_table!();

/// Schema of `held-tx`: the `items` table, and a log of the changes its transactions make, a row each.
pub const HELD_TX_SCHEMA: &str = concat!(
    items_table!(),
    "
CREATE TABLE IF NOT EXISTS item_log (
    id INTEGER PRIMARY KEY,
    item INTEGER NOT NULL,
    old_value INTEGER NOT NULL,
    new_value INTEGER NOT NULL
);"
);

/// Seeds one row with an explicit id (`?1` id, `?2` name, `?3` value, `?4` payload).
pub const SEED_ITEM: &str = "INSERT INTO items (id, name, value, payload) VALUES (?1, ?2, ?3, ?4)";

/// `point-read`: one row by primary key (`?1` id).
pub const POINT_READ: &str = "SELECT id, name, value, payload FROM items WHERE id = ?1";

/// `insert`: one new row, id chosen by SQLite (`?1` name, `?2` value, `?3` payload).
pub const INSERT_ITEM: &str = "INSERT INTO items (name, value, payload) VALUES (?1, ?2, ?3)";

/// `long-read`'s read: one row's value by primary key (`?1` id), returned only once a count from 1 to `?2` has run —
/// one statement whose cost its second parameter sets: `1` for a short read (a point read and a few steps more),
/// millions for a long one, as a query's cost follows its tenant's rows. The count is a recursive CTE, so SQLite
/// steps through it a row at a time (a progress handler sees it run) and holds one row of it at a time.
pub const COUNTED_READ: &str = "SELECT value FROM items WHERE id = ?1 AND (SELECT count(*) FROM \
    (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?2) SELECT x FROM c)) > 0";

/// `mixed`'s write: update one row by primary key (`?1` id, `?2` delta).
pub const UPDATE_ITEM: &str = "UPDATE items SET value = value + ?2 WHERE id = ?1";

/// `held-tx`'s update: one row's value set to what the transaction computed from the value it read (`?1` id, `?2` new
/// value) — a read-modify-write, right only if nobody wrote the row in between.
pub const SET_ITEM_VALUE: &str = "UPDATE items SET value = ?2 WHERE id = ?1";

/// `held-tx`'s log row: which row changed, from which value to which (`?1` item, `?2` old value, `?3` new value).
pub const LOG_ITEM_CHANGE: &str =
    "INSERT INTO item_log (item, old_value, new_value) VALUES (?1, ?2, ?3)";

/// `held-tx`'s check after the window: the log's rows (one per committed transaction), and the changes that lost
/// another's update — a log row whose old value is not the new value of the row's previous change, or a row whose
/// value is not its last change's. Each change is logged in the transaction that makes it, so the log's order is the
/// commit order; a lost update shows as a broken link.
pub const CHECK_ITEM_LOG: &str = "SELECT (SELECT count(*) FROM item_log), \
    (SELECT count(*) FROM (SELECT old_value, lag(new_value) OVER (PARTITION BY item ORDER BY id) AS previous \
        FROM item_log) WHERE previous != old_value) \
    + (SELECT count(*) FROM items JOIN (SELECT item, new_value, \
        row_number() OVER (PARTITION BY item ORDER BY id DESC) AS newest FROM item_log) AS l \
        ON l.item = items.id AND l.newest = 1 WHERE l.new_value != items.value)";

/// Schema of each `multi-db` database: a small ledger in the shape of ICRC Rosetta's (seed 004) —
/// blocks, the transactions they carry, and the balance history of the accounts they touch.
pub const LEDGER_SCHEMA: &str = "\
CREATE TABLE IF NOT EXISTS blocks (
    idx INTEGER PRIMARY KEY,
    hash BLOB NOT NULL,
    parent_hash BLOB,
    timestamp INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS transactions (
    block_idx INTEGER NOT NULL REFERENCES blocks (idx),
    tx_index INTEGER NOT NULL,
    from_account INTEGER NOT NULL,
    to_account INTEGER NOT NULL,
    amount INTEGER NOT NULL,
    memo TEXT,
    PRIMARY KEY (block_idx, tx_index)
);
CREATE INDEX IF NOT EXISTS transactions_by_from ON transactions (from_account, block_idx);
CREATE TABLE IF NOT EXISTS account_balances (
    account INTEGER NOT NULL,
    block_idx INTEGER NOT NULL,
    balance INTEGER NOT NULL,
    PRIMARY KEY (account, block_idx)
) WITHOUT ROWID;";

/// Appends a block (`?1` idx, `?2` hash, `?3` parent hash, `?4` timestamp).
pub const INSERT_BLOCK: &str =
    "INSERT INTO blocks (idx, hash, parent_hash, timestamp) VALUES (?1, ?2, ?3, ?4)";

/// Appends a transaction of a block (`?1` block, `?2` index in block, `?3` from, `?4` to, `?5` amount,
/// `?6` memo).
pub const INSERT_TRANSACTION: &str = "INSERT INTO transactions \
    (block_idx, tx_index, from_account, to_account, amount, memo) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// Records an account's balance after a block (`?1` account, `?2` block, `?3` balance); a second
/// transaction of the same account in the same block replaces the first one's balance.
pub const UPSERT_BALANCE: &str =
    "INSERT OR REPLACE INTO account_balances (account, block_idx, balance) VALUES (?1, ?2, ?3)";

/// `multi-db`'s read: an account's most recent transactions with their block data and the balance after
/// each (`?1` account) — the shape of Rosetta's `/search/transactions` query.
pub const ACCOUNT_HISTORY: &str = "\
SELECT t.block_idx, t.tx_index, t.to_account, t.amount, b.hash, b.timestamp, ab.balance
FROM transactions AS t
JOIN blocks AS b ON b.idx = t.block_idx
LEFT JOIN account_balances AS ab ON ab.account = t.from_account AND ab.block_idx = t.block_idx
WHERE t.from_account = ?1
ORDER BY t.block_idx DESC
LIMIT 20";

/// Schema of the `queue` workload (seed 002): a durable job queue. A job is published unclaimed, claimed by a
/// worker (owner and time set), and deleted when acknowledged.
///
/// `jobs_unclaimed` orders jobs by claim owner, then id: the unclaimed jobs (`claimed_by IS NULL`) sit together in
/// id order, so [`CLAIM`] finds the oldest with one index search instead of scanning the table (a test checks
/// the plan with `EXPLAIN QUERY PLAN`).
pub const QUEUE_SCHEMA: &str = "\
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY,
    payload TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    claimed_by INTEGER,
    claimed_at INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_unclaimed ON jobs (claimed_by, id);";

/// `queue`'s publish: one new unclaimed job (`?1` payload, `?2` creation time in ms since the Unix epoch).
pub const PUBLISH: &str = "INSERT INTO jobs (payload, created_at) VALUES (?1, ?2)";

/// `queue`'s claim: marks the oldest unclaimed job as claimed by `?1` at `?2` (ms since the Unix epoch) and
/// returns its id and payload; no row when the queue is empty.
pub const CLAIM: &str = "\
UPDATE jobs SET claimed_by = ?1, claimed_at = ?2
WHERE id = (SELECT id FROM jobs WHERE claimed_by IS NULL ORDER BY id LIMIT 1)
RETURNING id, payload";

/// `queue`'s ack: deletes job `?1`, if `?2` claimed it.
pub const ACK: &str = "DELETE FROM jobs WHERE id = ?1 AND claimed_by = ?2";

/// Seeds one unclaimed job of the backlog (`?1` id, `?2` payload, `?3` creation time).
pub const SEED_JOB: &str = "INSERT INTO jobs (id, payload, created_at) VALUES (?1, ?2, ?3)";

/// Schema of the `orm` workload (seed 003): artists with albums with tracks, the shape of an ORM benchmark's
/// one-to-many-to-many associations, each artist with a JSON document.
pub const ORM_SCHEMA: &str = "\
CREATE TABLE IF NOT EXISTS artists (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS artists_by_name ON artists (name);
CREATE TABLE IF NOT EXISTS albums (
    id INTEGER PRIMARY KEY,
    artist_id INTEGER NOT NULL REFERENCES artists (id),
    name TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS albums_by_artist ON albums (artist_id);
CREATE TABLE IF NOT EXISTS tracks (
    id INTEGER PRIMARY KEY,
    album_id INTEGER NOT NULL REFERENCES albums (id),
    name TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tracks_by_album ON tracks (album_id);";

/// Seeds an artist (`?1` id, `?2` name, `?3` JSON data).
pub const ORM_SEED_ARTIST: &str = "INSERT INTO artists (id, name, data) VALUES (?1, ?2, ?3)";
/// Seeds an album (`?1` id, `?2` artist, `?3` name).
pub const ORM_SEED_ALBUM: &str = "INSERT INTO albums (id, artist_id, name) VALUES (?1, ?2, ?3)";
/// Seeds a track (`?1` id, `?2` album, `?3` name).
pub const ORM_SEED_TRACK: &str = "INSERT INTO tracks (id, album_id, name) VALUES (?1, ?2, ?3)";

/// A new artist (`?1` name, `?2` JSON data).
pub const ORM_INSERT_ARTIST: &str = "INSERT INTO artists (name, data) VALUES (?1, ?2)";
/// A new album of artist `?1` (`?2` name).
pub const ORM_INSERT_ALBUM: &str = "INSERT INTO albums (artist_id, name) VALUES (?1, ?2)";
/// Every seeded artist, every column.
pub const ORM_SELECT_ALL: &str = "SELECT id, name, data FROM artists WHERE id <= ?1";
/// One artist by primary key.
pub const ORM_SELECT_BY_PK: &str = "SELECT id, name, data FROM artists WHERE id = ?1";
/// Artists by name (indexed).
pub const ORM_SELECT_BY_NAME: &str = "SELECT id, name, data FROM artists WHERE name = ?1";
/// Renames artist `?1` to `?2`.
pub const ORM_UPDATE_NAME: &str = "UPDATE artists SET name = ?2 WHERE id = ?1";
/// Deletes artist `?1`.
pub const ORM_DELETE_ARTIST: &str = "DELETE FROM artists WHERE id = ?1";
/// Artist `?1` with its albums, one query.
pub const ORM_EAGER_1_N: &str = "SELECT ar.id, ar.name, ar.data, al.id, al.name FROM artists AS ar \
    JOIN albums AS al ON al.artist_id = ar.id WHERE ar.id = ?1";
/// Artist `?1` with its albums and their tracks, one query.
pub const ORM_EAGER_1_N_N: &str = "SELECT ar.id, ar.name, ar.data, al.id, al.name, t.id, t.name \
    FROM artists AS ar JOIN albums AS al ON al.artist_id = ar.id JOIN tracks AS t ON t.album_id = al.id \
    WHERE ar.id = ?1";
/// The albums of artist `?1`.
pub const ORM_ALBUMS_OF: &str = "SELECT id, artist_id, name FROM albums WHERE artist_id = ?1";
/// The tracks of the albums of artist `?1` (the second query of a query-per-association load).
pub const ORM_TRACKS_OF_ARTIST: &str = "SELECT id, album_id, name FROM tracks \
    WHERE album_id IN (SELECT id FROM albums WHERE artist_id = ?1)";
/// Ten artists from `?1` (the first query of a lazy load).
pub const ORM_TEN_ARTISTS: &str =
    "SELECT id, name, data FROM artists WHERE id >= ?1 ORDER BY id LIMIT 10";
/// Ten albums from `?1` (the first query of a lazy 1-1 load).
pub const ORM_TEN_ALBUMS: &str =
    "SELECT id, artist_id, name FROM albums WHERE id >= ?1 ORDER BY id LIMIT 10";
/// A nested value of artist `?1`'s JSON document.
pub const ORM_SELECT_JSON_NESTED: &str = "SELECT json_extract(data, '$.tags.genre'), json_extract(data, '$.tags.year') FROM artists WHERE id = ?1";
/// Updates a top-level value of artist `?1`'s JSON document to `?2`.
pub const ORM_UPDATE_JSON: &str =
    "UPDATE artists SET data = json_set(data, '$.plays', ?2) WHERE id = ?1";
/// Updates a nested value of artist `?1`'s JSON document to `?2`.
pub const ORM_UPDATE_JSON_NESTED: &str =
    "UPDATE artists SET data = json_set(data, '$.tags.year', ?2) WHERE id = ?1";

/// The `orm` suite's statements for PostgreSQL (`--with-postgres`): the same operations as the `ORM_*` ones,
/// in PostgreSQL's dialect (`$n` parameters, identity columns, `jsonb`).
pub mod pg {
    /// The schema, dropped and created afresh for every cell.
    pub const SCHEMA: &str = "\
DROP TABLE IF EXISTS tracks, albums, artists;
CREATE TABLE artists (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL,
    data JSONB NOT NULL
);
CREATE INDEX artists_by_name ON artists (name);
CREATE TABLE albums (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    artist_id BIGINT NOT NULL REFERENCES artists (id),
    name TEXT NOT NULL
);
CREATE INDEX albums_by_artist ON albums (artist_id);
CREATE TABLE tracks (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    album_id BIGINT NOT NULL REFERENCES albums (id),
    name TEXT NOT NULL
);
CREATE INDEX tracks_by_album ON tracks (album_id);";

    /// After seeding with explicit ids: identities continue after the seeded rows.
    pub const RESTART_IDENTITIES: &str = "\
SELECT setval(pg_get_serial_sequence('artists', 'id'), (SELECT max(id) FROM artists));
SELECT setval(pg_get_serial_sequence('albums', 'id'), (SELECT max(id) FROM albums));
SELECT setval(pg_get_serial_sequence('tracks', 'id'), (SELECT max(id) FROM tracks));
ANALYZE;";

    /// Seeds an artist (`$1` id, `$2` name, `$3` JSON text).
    pub const SEED_ARTIST: &str =
        "INSERT INTO artists (id, name, data) VALUES ($1, $2, $3::text::jsonb)";
    /// Seeds an album (`$1` id, `$2` artist, `$3` name).
    pub const SEED_ALBUM: &str = "INSERT INTO albums (id, artist_id, name) VALUES ($1, $2, $3)";
    /// Seeds a track (`$1` id, `$2` album, `$3` name).
    pub const SEED_TRACK: &str = "INSERT INTO tracks (id, album_id, name) VALUES ($1, $2, $3)";
    /// A new artist, its id returned.
    pub const INSERT_ARTIST: &str =
        "INSERT INTO artists (name, data) VALUES ($1, $2::text::jsonb) RETURNING id";
    /// A new album of artist `$1`.
    pub const INSERT_ALBUM: &str = "INSERT INTO albums (artist_id, name) VALUES ($1, $2)";
    /// Every seeded artist.
    pub const SELECT_ALL: &str = "SELECT id, name, data::text FROM artists WHERE id <= $1";
    /// One artist by primary key.
    pub const SELECT_BY_PK: &str = "SELECT id, name, data::text FROM artists WHERE id = $1";
    /// Artists by name.
    pub const SELECT_BY_NAME: &str = "SELECT id, name, data::text FROM artists WHERE name = $1";
    /// Renames an artist.
    pub const UPDATE_NAME: &str = "UPDATE artists SET name = $2 WHERE id = $1";
    /// Deletes an artist.
    pub const DELETE_ARTIST: &str = "DELETE FROM artists WHERE id = $1";
    /// An artist with its albums.
    pub const EAGER_1_N: &str = "SELECT ar.id, ar.name, ar.data::text, al.id, al.name FROM artists AS ar \
        JOIN albums AS al ON al.artist_id = ar.id WHERE ar.id = $1";
    /// An artist with its albums and their tracks.
    pub const EAGER_1_N_N: &str = "SELECT ar.id, ar.name, ar.data::text, al.id, al.name, t.id, t.name \
        FROM artists AS ar JOIN albums AS al ON al.artist_id = ar.id JOIN tracks AS t ON t.album_id = al.id \
        WHERE ar.id = $1";
    /// The albums of an artist.
    pub const ALBUMS_OF: &str = "SELECT id, artist_id, name FROM albums WHERE artist_id = $1";
    /// The tracks of an artist's albums.
    pub const TRACKS_OF_ARTIST: &str = "SELECT id, album_id, name FROM tracks \
        WHERE album_id IN (SELECT id FROM albums WHERE artist_id = $1)";
    /// Ten artists from `$1`.
    pub const TEN_ARTISTS: &str =
        "SELECT id, name, data::text FROM artists WHERE id >= $1 ORDER BY id LIMIT 10";
    /// Ten albums from `$1`.
    pub const TEN_ALBUMS: &str =
        "SELECT id, artist_id, name FROM albums WHERE id >= $1 ORDER BY id LIMIT 10";
    /// Nested values of an artist's JSON document.
    pub const SELECT_JSON_NESTED: &str = "SELECT data #>> '{tags,genre}', (data #>> '{tags,year}')::bigint \
        FROM artists WHERE id = $1";
    /// Updates a top-level value of an artist's JSON document.
    pub const UPDATE_JSON: &str =
        "UPDATE artists SET data = jsonb_set(data, '{plays}', to_jsonb($2::bigint)) WHERE id = $1";
    /// Updates a nested value of an artist's JSON document.
    pub const UPDATE_JSON_NESTED: &str = "UPDATE artists SET data = jsonb_set(data, '{tags,year}', to_jsonb($2::bigint)) WHERE id = $1";

    /// Every statement the suite prepares.
    pub const PREPARED: &[&str] = &[
        INSERT_ARTIST,
        INSERT_ALBUM,
        SELECT_ALL,
        SELECT_BY_PK,
        SELECT_BY_NAME,
        UPDATE_NAME,
        DELETE_ARTIST,
        EAGER_1_N,
        EAGER_1_N_N,
        ALBUMS_OF,
        TRACKS_OF_ARTIST,
        TEN_ARTISTS,
        TEN_ALBUMS,
        SELECT_JSON_NESTED,
        UPDATE_JSON,
        UPDATE_JSON_NESTED,
    ];
}
