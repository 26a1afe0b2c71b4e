//! Helpers shared by this crate's unit tests: a small cell, and in-memory approaches to drive it against.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Result, bail};

use crate::approach::Approach;
use crate::cell::{Cell, MultiDb, WriteMode};
use crate::custom::{CustomStatement, CustomWorkload, SeedColumn, SeedTable, Transaction, Values};
use crate::data::{self, Block, NewItem, NewJob};
use crate::driver::drive;
use crate::measurement::Measurement;
use crate::orm::{ORM_ARTISTS, OrmOp};

/// A small, valid cell for `workload` and `approach`.
pub(crate) fn sample_cell(workload: &str, approach: &str) -> Cell {
    Cell {
        workload: workload.into(),
        approach: approach.into(),
        duration_ms: 60,
        warmup_ms: 10,
        concurrency: 4,
        worker_threads: 2,
        profile: "server".into(),
        synchronous: None,
        memstatus: false,
        mmap_size: None,
        mutex: "nomutex".into(),
        rows: 200,
        think_us: 0,
        write_ppm: crate::cell::DEFAULT_WRITE_PPM,
        rate: None,
        long_reads: (workload == "long-read").then_some(crate::cell::LongReads {
            every: 10,
            min_ms: 2,
            max_ms: 4,
        }),
        multi_db: (workload == "multi-db").then_some(MultiDb {
            num_databases: 3,
            readers: 2,
            write_delay_ms: 5,
            write_mode: WriteMode::Blocking,
            total_readers: None,
        }),
        dir: "/nonexistent".into(),
        seed: 42,
        repetition: 0,
        build_profile: "tuned".into(),
        postgres_url: None,
        custom: None,
    }
}

/// An in-memory approach: deterministic, no SQLite, records what it was asked to do.
#[derive(Default)]
pub(crate) struct Fake {
    /// `items` rows by id.
    pub(crate) items: Mutex<BTreeMap<i64, i64>>,
    /// Databases that saw a JOIN read.
    pub(crate) joined: Mutex<BTreeSet<usize>>,
    /// Block indexes written, per database.
    pub(crate) blocks: Mutex<BTreeMap<usize, Vec<i64>>>,
    /// Fail every operation, alternating between two messages.
    pub(crate) failing: bool,
    /// The queue: job id → the worker that claimed it.
    pub(crate) jobs: Mutex<BTreeMap<i64, Option<i64>>>,
    /// `orm` calls per (operation, in a transaction).
    pub(crate) orm_calls: Mutex<BTreeMap<(&'static str, bool), u64>>,
    /// Count one row fewer than there are (`throughput`'s and `held-tx`'s checks).
    pub(crate) loses_a_row: bool,
    /// `held-tx`'s log: each change's row, old value and new value, in commit order.
    pub(crate) item_log: Mutex<Vec<(i64, i64, i64)>>,
    /// Write back a `held-tx` value other than the one logged, as a lost update leaves a row.
    pub(crate) loses_an_update: bool,
    /// The custom transactions seen: whether each wrote, and its statements' SQL.
    pub(crate) custom: Mutex<BTreeSet<(bool, String)>>,
    /// `long-read`'s reads: how many ran with each count.
    pub(crate) counts: Mutex<BTreeMap<i64, u64>>,
    /// `long-read`'s calibration runs: the count of each, in order.
    pub(crate) timed_counts: Mutex<Vec<i64>>,
    /// A count takes no time at all (the calibration must give up), rather than [`Fake::STEP`] a step.
    pub(crate) free_counts: bool,
}

impl Fake {
    /// What a step of `long-read`'s count takes in the fake's calibration: 10,000 steps a millisecond.
    pub(crate) const STEP: Duration = Duration::from_nanos(100);

    /// A fake whose `items` table holds `rows` rows.
    pub(crate) fn seeded(rows: i64) -> Self {
        let fake = Fake::default();
        fake.items
            .lock()
            .unwrap()
            .extend((1..=rows).map(|id| (id, 0)));
        fake
    }

    /// The injected failure, when the fake is failing.
    fn check(&self, id: i64) -> Result<()> {
        if self.failing {
            bail!("injected failure {}", id % 2);
        }
        Ok(())
    }
}

impl Approach for Fake {
    async fn point_read(&self, id: i64) -> Result<()> {
        self.check(id)?;
        match self.items.lock().unwrap().get(&id) {
            Some(_) => Ok(()),
            None => bail!("no row {id}"),
        }
    }

    async fn insert(&self, item: NewItem) -> Result<()> {
        let mut items = self.items.lock().unwrap();
        let id = items.len() as i64 + 1;
        items.insert(id, item.value);
        Ok(())
    }

    async fn update(&self, id: i64, delta: i64) -> Result<()> {
        match self.items.lock().unwrap().get_mut(&id) {
            Some(v) => *v += delta,
            None => bail!("no row {id}"),
        }
        Ok(())
    }

    async fn join_read(&self, db: usize, account: i64) -> Result<()> {
        assert!((1..=data::LEDGER_ACCOUNTS).contains(&account));
        self.joined.lock().unwrap().insert(db);
        Ok(())
    }

    async fn paced_write(&self, db: usize, block: Block, delay: Duration) -> Result<()> {
        std::thread::sleep(delay);
        self.blocks
            .lock()
            .unwrap()
            .entry(db)
            .or_default()
            .push(block.idx);
        Ok(())
    }

    async fn publish(&self, job: NewJob) -> Result<()> {
        assert_eq!(job.payload.len(), data::JOB_PAYLOAD_LEN);
        let mut jobs = self.jobs.lock().unwrap();
        let id = jobs.keys().next_back().map_or(1, |last| last + 1);
        jobs.insert(id, None);
        Ok(())
    }

    async fn claim(&self, owner: i64, _now_ms: i64) -> Result<Option<i64>> {
        let mut jobs = self.jobs.lock().unwrap();
        let oldest = jobs.iter_mut().find(|(_, claimed)| claimed.is_none());
        Ok(oldest.map(|(id, claimed)| {
            *claimed = Some(owner);
            *id
        }))
    }

    async fn orm(&self, op: OrmOp, key: i64, txn: bool) -> Result<()> {
        assert!((1..=ORM_ARTISTS).contains(&key));
        *self
            .orm_calls
            .lock()
            .unwrap()
            .entry((op.name(), txn))
            .or_default() += 1;
        Ok(())
    }

    async fn insert_batch(&self, batch: Vec<NewItem>, think: Duration) -> Result<()> {
        std::thread::sleep(think);
        let mut items = self.items.lock().unwrap();
        for item in batch {
            let id = items.len() as i64 + 1;
            items.insert(id, item.value);
        }
        Ok(())
    }

    async fn count_items(&self) -> Result<u64> {
        let rows = self.items.lock().unwrap().len() as u64;
        Ok(rows - u64::from(self.loses_a_row))
    }

    async fn held_transaction(&self, id: i64, delta: i64, think: Duration) -> Result<()> {
        self.check(id)?;
        crate::think::await_think(think).await;
        let mut items = self.items.lock().unwrap();
        let old = *items.get(&id).unwrap_or(&0);
        // As a lost update leaves it: the row's value is not the one the log says it became.
        let written = old + delta + i64::from(self.loses_an_update);
        items.insert(id, written);
        self.item_log.lock().unwrap().push((id, old, old + delta));
        Ok(())
    }

    async fn check_item_log(&self) -> Result<(u64, u64)> {
        // What `sql::CHECK_ITEM_LOG` counts: links of a row's changes that break, and rows whose value is not their
        // last change's.
        let log = self.item_log.lock().unwrap();
        let mut last: BTreeMap<i64, i64> = BTreeMap::new();
        let mut lost = 0;
        for &(id, old, new) in log.iter() {
            if last.get(&id).is_some_and(|&previous| previous != old) {
                lost += 1;
            }
            last.insert(id, new);
        }
        let items = self.items.lock().unwrap();
        lost += last
            .iter()
            .filter(|&(id, new)| items.get(id) != Some(new))
            .count() as u64;
        let rows = log.len() as u64 - u64::from(self.loses_a_row);
        Ok((rows, lost))
    }

    async fn custom(&self, writes: bool, statements: Vec<crate::custom::Bound>) -> Result<()> {
        let sql: Vec<&str> = statements.iter().map(|s| &*s.sql).collect();
        self.custom.lock().unwrap().insert((writes, sql.join("; ")));
        Ok(())
    }

    async fn counted_read(&self, id: i64, count: i64) -> Result<()> {
        self.point_read(id).await?;
        *self.counts.lock().unwrap().entry(count).or_default() += 1;
        Ok(())
    }

    async fn time_counted_read(&self, id: i64, count: i64) -> Result<Duration> {
        self.point_read(id).await?;
        self.timed_counts.lock().unwrap().push(count);
        if self.free_counts {
            return Ok(Duration::ZERO);
        }
        Ok(Self::STEP * u32::try_from(count)?)
    }

    async fn ack(&self, id: i64, owner: i64) -> Result<()> {
        let mut jobs = self.jobs.lock().unwrap();
        match jobs.get(&id) {
            Some(Some(by)) if *by == owner => {
                jobs.remove(&id);
                Ok(())
            }
            _ => bail!("job {id} is not claimed by {owner}"),
        }
    }
}

/// An approach with only the operations every approach must have: no queue, no `orm` suite (the trait's defaults).
pub(crate) struct RequiredOnly;

impl Approach for RequiredOnly {
    async fn point_read(&self, _: i64) -> Result<()> {
        Ok(())
    }
    async fn insert(&self, _: NewItem) -> Result<()> {
        Ok(())
    }
    async fn update(&self, _: i64, _: i64) -> Result<()> {
        Ok(())
    }
    async fn join_read(&self, _: usize, _: i64) -> Result<()> {
        Ok(())
    }
    async fn paced_write(&self, _: usize, _: Block, _: Duration) -> Result<()> {
        Ok(())
    }
}

/// Drives `cell` against `fake`; what was measured, and the fake to look into.
pub(crate) async fn run(cell: &Cell, fake: Fake) -> (Measurement, Arc<Fake>) {
    let fake = Arc::new(fake);
    let m = drive(cell, fake.clone()).await.unwrap();
    (m, fake)
}

/// A small workload: a table of 50 rows, a read of one row and an insert.
pub(crate) fn sample_custom() -> CustomWorkload {
    CustomWorkload {
        name: "shop".to_owned(),
        schema: vec!["CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)".to_owned()],
        seed: vec![SeedTable {
            table: "t".to_owned(),
            rows: 50,
            columns: vec![
                SeedColumn {
                    name: "id".to_owned(),
                    values: Values::Sequence { start: 1 },
                },
                SeedColumn {
                    name: "name".to_owned(),
                    values: Values::Text {
                        min_len: 4,
                        max_len: 8,
                    },
                },
            ],
        }],
        transactions: vec![
            Transaction {
                name: "read".to_owned(),
                weight: 3,
                writes: false,
                params: vec![Values::Uniform { min: 1, max: 50 }],
                statements: vec![CustomStatement {
                    sql: "SELECT * FROM t WHERE id = :id".to_owned(),
                    binds: vec![0],
                }],
            },
            Transaction {
                name: "add".to_owned(),
                weight: 1,
                writes: true,
                params: vec![
                    Values::Sequence { start: 1_000 },
                    Values::Choice {
                        options: vec!["a".into()],
                    },
                ],
                statements: vec![CustomStatement {
                    sql: "INSERT INTO t (id, name) VALUES (:id, :name)".to_owned(),
                    binds: vec![0, 1],
                }],
            },
        ],
    }
}
