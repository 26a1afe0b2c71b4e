package main

// The SQL text of the workloads this runner implements, copied verbatim from crates/lab-core/src/sql.rs.

const itemsSchema = `CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    value INTEGER NOT NULL,
    payload TEXT NOT NULL
);`

const seedItem = "INSERT INTO items (id, name, value, payload) VALUES (?1, ?2, ?3, ?4)"

const pointRead = "SELECT id, name, value, payload FROM items WHERE id = ?1"

const insertItem = "INSERT INTO items (name, value, payload) VALUES (?1, ?2, ?3)"

const ledgerSchema = `CREATE TABLE IF NOT EXISTS blocks (
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
) WITHOUT ROWID;`

const insertBlock = "INSERT INTO blocks (idx, hash, parent_hash, timestamp) VALUES (?1, ?2, ?3, ?4)"

const insertTransaction = "INSERT INTO transactions " +
	"(block_idx, tx_index, from_account, to_account, amount, memo) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"

const upsertBalance = "INSERT OR REPLACE INTO account_balances (account, block_idx, balance) VALUES (?1, ?2, ?3)"

const accountHistory = `SELECT t.block_idx, t.tx_index, t.to_account, t.amount, b.hash, b.timestamp, ab.balance
FROM transactions AS t
JOIN blocks AS b ON b.idx = t.block_idx
LEFT JOIN account_balances AS ab ON ab.account = t.from_account AND ab.block_idx = t.block_idx
WHERE t.from_account = ?1
ORDER BY t.block_idx DESC
LIMIT 20`

const queueSchema = `CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY,
    payload TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    claimed_by INTEGER,
    claimed_at INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_unclaimed ON jobs (claimed_by, id);`

const publishJob = "INSERT INTO jobs (payload, created_at) VALUES (?1, ?2)"

const claimJob = `UPDATE jobs SET claimed_by = ?1, claimed_at = ?2
WHERE id = (SELECT id FROM jobs WHERE claimed_by IS NULL ORDER BY id LIMIT 1)
RETURNING id, payload`

const ackJob = "DELETE FROM jobs WHERE id = ?1 AND claimed_by = ?2"

const seedJob = "INSERT INTO jobs (id, payload, created_at) VALUES (?1, ?2, ?3)"
