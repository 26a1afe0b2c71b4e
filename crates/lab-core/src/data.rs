//! Deterministic data: seeded rows, new rows for writes, and ledger blocks for `multi-db`.
//!
//! Everything is generated from `Cell::seed` by [`Rng`], so two runs (or two runners in different
//! languages) of the same cell see the same database and the same operations.

use std::borrow::Cow;

use crate::rng::Rng;
use crate::sql;

/// Accounts in each `multi-db` ledger.
pub const LEDGER_ACCOUNTS: i64 = 500;
/// Blocks seeded into each `multi-db` ledger before the run.
pub const LEDGER_SEED_BLOCKS: i64 = 1_000;
/// Transactions per ledger block.
pub const TRANSACTIONS_PER_BLOCK: i64 = 4;
/// Length of an item's `payload` text, so a row is about the size of a small web-app record.
pub const ITEM_PAYLOAD_LEN: usize = 100;

/// A bound parameter value; runners convert it into their driver's value type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param {
    /// SQLite INTEGER.
    Int(i64),
    /// SQLite TEXT.
    Text(String),
    /// SQLite BLOB.
    Blob(Vec<u8>),
}

/// One statement to execute with its parameters (numbered `?1`, `?2`, … in order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// SQL text: one of the constants in [`crate::sql`], or a custom workload's.
    pub sql: Cow<'static, str>,
    /// Parameters in order.
    pub params: Vec<Param>,
}

/// A new row for the `insert` workload (bound to [`sql::INSERT_ITEM`] as name, value, payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewItem {
    /// `items.name`.
    pub name: String,
    /// `items.value`.
    pub value: i64,
    /// `items.payload`.
    pub payload: String,
}

impl NewItem {
    /// A random row.
    pub fn random(rng: &mut Rng) -> Self {
        Self {
            name: format!("item-{}", rng.text(12)),
            value: rng.between(0, 1_000_000),
            payload: rng.text(ITEM_PAYLOAD_LEN),
        }
    }
}

/// The rows seeded into the `items` table: ids `1..=rows`.
pub fn item_seed(rows: u64, seed: u64) -> impl Iterator<Item = Statement> {
    let mut rng = Rng::derive(seed, u64::MAX);
    (1..=rows as i64).map(move |id| Statement {
        sql: Cow::Borrowed(sql::SEED_ITEM),
        params: vec![
            Param::Int(id),
            Param::Text(format!("item-{id}")),
            Param::Int(rng.between(0, 1_000_000)),
            Param::Text(rng.text(ITEM_PAYLOAD_LEN)),
        ],
    })
}

/// A job for the `queue` workload's publish (bound to [`sql::PUBLISH`] as payload, creation time).
///
/// The payload is shared (`Arc<str>`, made once per client task), so publishing allocates nothing on the lab's
/// side: the allocations a queue cell reports are the approach's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// `jobs.payload`.
    pub payload: std::sync::Arc<str>,
    /// `jobs.created_at`, in milliseconds since the Unix epoch.
    pub created_at: i64,
}

/// Length of a job's payload: a small JSON-ish message.
pub const JOB_PAYLOAD_LEN: usize = 100;

/// The backlog seeded into the `jobs` table before the run: ids `1..=rows`, all unclaimed.
pub fn job_seed(rows: u64, seed: u64) -> impl Iterator<Item = Statement> {
    let mut rng = Rng::derive(seed, u64::MAX - 1);
    (1..=rows as i64).map(move |id| Statement {
        sql: Cow::Borrowed(sql::SEED_JOB),
        params: vec![
            Param::Int(id),
            Param::Text(rng.text(JOB_PAYLOAD_LEN)),
            Param::Int(id),
        ],
    })
}

/// One ledger block with its transactions and balance updates: the unit the `multi-db` writer commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Block index (`blocks.idx`).
    pub idx: i64,
    /// The statements that append the block, to run in one transaction, in order.
    pub statements: Vec<Statement>,
}

/// Generates consecutive ledger blocks for one database.
#[derive(Debug, Clone)]
pub struct LedgerGenerator {
    /// Source of accounts, amounts and hashes.
    rng: Rng,
    /// Index of the next block.
    next_idx: i64,
    /// Hash of the previous block, so blocks chain like a real ledger's.
    parent_hash: Option<Vec<u8>>,
}

impl LedgerGenerator {
    /// The generator of the blocks seeded into database `db`, starting at block 0.
    pub fn seeding(seed: u64, db: usize) -> Self {
        Self {
            rng: Rng::derive(seed, 1_000_000 + db as u64),
            next_idx: 0,
            parent_hash: None,
        }
    }

    /// The generator of the blocks the `multi-db` writer of database `db` appends after the seeded ones.
    pub fn writing(seed: u64, db: usize) -> Self {
        Self {
            rng: Rng::derive(seed, 2_000_000 + db as u64),
            next_idx: LEDGER_SEED_BLOCKS,
            parent_hash: None,
        }
    }

    /// The next block.
    pub fn next_block(&mut self) -> Block {
        let idx = self.next_idx;
        self.next_idx += 1;
        let hash = self.rng.bytes(32);
        let parent = match self.parent_hash.replace(hash.clone()) {
            Some(h) => Param::Blob(h),
            None => Param::Blob(Vec::new()),
        };
        let mut statements = vec![Statement {
            sql: Cow::Borrowed(sql::INSERT_BLOCK),
            params: vec![
                Param::Int(idx),
                Param::Blob(hash),
                parent,
                // Milliseconds, one block a second from a fixed epoch: deterministic, plausible.
                Param::Int(1_700_000_000_000 + idx * 1_000),
            ],
        }];
        for tx_index in 0..TRANSACTIONS_PER_BLOCK {
            let from = self.rng.between(1, LEDGER_ACCOUNTS);
            let to = self.rng.between(1, LEDGER_ACCOUNTS);
            statements.push(Statement {
                sql: Cow::Borrowed(sql::INSERT_TRANSACTION),
                params: vec![
                    Param::Int(idx),
                    Param::Int(tx_index),
                    Param::Int(from),
                    Param::Int(to),
                    Param::Int(self.rng.between(1, 1_000_000)),
                    Param::Text(format!("memo-{}", self.rng.text(8))),
                ],
            });
            for account in [from, to] {
                statements.push(Statement {
                    sql: Cow::Borrowed(sql::UPSERT_BALANCE),
                    params: vec![
                        Param::Int(account),
                        Param::Int(idx),
                        Param::Int(self.rng.between(0, 1_000_000_000)),
                    ],
                });
            }
        }
        Block { idx, statements }
    }
}

/// The rows seeded into ledger database `db`: [`LEDGER_SEED_BLOCKS`] blocks.
pub fn ledger_seed(seed: u64, db: usize) -> impl Iterator<Item = Statement> {
    let mut generator = LedgerGenerator::seeding(seed, db);
    (0..LEDGER_SEED_BLOCKS).flat_map(move |_| generator.next_block().statements)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_seed_is_deterministic_and_dense() {
        let a: Vec<_> = item_seed(50, 9).collect();
        let b: Vec<_> = item_seed(50, 9).collect();
        assert_eq!(a, b);
        assert_eq!(a.len(), 50);
        assert_eq!(a[0].params[0], Param::Int(1));
        assert_eq!(a[49].params[0], Param::Int(50));
        assert_ne!(a, item_seed(50, 10).collect::<Vec<_>>());
    }

    #[test]
    fn ledger_blocks_chain_and_continue_after_the_seed() {
        let seeded: Vec<_> = ledger_seed(1, 0).collect();
        let per_block = 1 + 3 * TRANSACTIONS_PER_BLOCK as usize;
        assert_eq!(seeded.len(), LEDGER_SEED_BLOCKS as usize * per_block);
        assert_eq!(seeded[0].sql, sql::INSERT_BLOCK);

        let mut writer = LedgerGenerator::writing(1, 0);
        let first = writer.next_block();
        let second = writer.next_block();
        assert_eq!(first.idx, LEDGER_SEED_BLOCKS);
        assert_eq!(second.idx, LEDGER_SEED_BLOCKS + 1);
        // The second block's parent hash is the first block's hash.
        assert_eq!(
            second.statements[0].params[2],
            first.statements[0].params[1]
        );
        // Different databases get different ledgers.
        assert_ne!(ledger_seed(1, 1).next(), ledger_seed(1, 0).next());
    }
}
