//! One open-loop request: the operation drawn for it, and the task that runs it and records its latency from
//! the instant it was due.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;

use super::dispatcher::Due;
use super::in_flight::Permit;
use crate::approach::Approach;
use crate::custom::{Bound, Drawer};
use crate::data::NewItem;
use crate::driver::client_loop::{store, store_transaction};
use crate::rng::Rng;
use crate::stats::{OpKind, StatsSink};
use crate::workload::{Workload, mixed_draws_write};

/// The operation of one request, drawn by the dispatcher from the cell's random stream.
#[derive(Debug)]
pub(super) enum Operation {
    /// `point-read`, and `mixed`'s reads.
    PointRead(i64),
    /// `insert`.
    Insert(NewItem),
    /// `mixed`'s writes.
    Update {
        /// The row updated.
        id: i64,
        /// What is added to its value.
        delta: i64,
    },
    /// A custom workload's transaction.
    Custom {
        /// Its name, for its own statistics.
        name: &'static str,
        /// Whether it writes.
        writes: bool,
        /// Its statements with their values.
        statements: Vec<Bound>,
    },
}

/// What an operation is drawn from: the workload and its settings.
#[derive(Debug)]
pub(super) struct Draw {
    /// `point-read`, `insert`, `mixed` or a custom workload.
    pub(super) workload: Workload,
    /// Rows of the seeded table, to pick an id among.
    pub(super) rows: i64,
    /// `mixed`'s share of writes, in parts per million.
    pub(super) write_ppm: u32,
    /// A custom workload's transactions, drawn as one client task draws them.
    pub(super) custom: Option<Drawer>,
}

impl Draw {
    /// The next request's operation, drawn as a closed-loop client draws it.
    pub(super) fn next(&mut self, rng: &mut Rng) -> Operation {
        if let Some(drawer) = &mut self.custom {
            let drawn = drawer.next(rng);
            return Operation::Custom {
                name: drawer.names[drawn.index],
                writes: drawn.writes,
                statements: drawn.statements,
            };
        }
        match self.workload {
            Workload::Insert => Operation::Insert(NewItem::random(rng)),
            Workload::Mixed if mixed_draws_write(rng, self.write_ppm) => Operation::Update {
                id: rng.between(1, self.rows),
                delta: rng.between(-100, 100),
            },
            _ => Operation::PointRead(rng.between(1, self.rows)),
        }
    }
}

impl Operation {
    /// The histogram the operation is recorded in.
    pub(super) fn kind(&self) -> OpKind {
        match self {
            Self::PointRead(_) | Self::Custom { writes: false, .. } => OpKind::Read,
            Self::Insert(_) | Self::Update { .. } | Self::Custom { writes: true, .. } => {
                OpKind::Write
            }
        }
    }

    /// Runs the operation on `approach`.
    async fn run<A: Approach>(self, approach: &A) -> Result<()> {
        match self {
            Self::PointRead(id) => approach.point_read(id).await,
            Self::Insert(item) => approach.insert(item).await,
            Self::Update { id, delta } => approach.update(id, delta).await,
            Self::Custom {
                writes, statements, ..
            } => approach.custom(writes, statements).await,
        }
    }
}

/// A request's task: runs `operation`, records it (if it was due inside the window) with its latency from its due
/// time, then gives its place in flight back.
pub(super) async fn serve<A: Approach>(
    approach: Arc<A>,
    operation: Operation,
    due: Due,
    permit: Permit,
    stats: Arc<StatsSink>,
) {
    let kind = operation.kind();
    let name = match &operation {
        Operation::Custom { name, .. } => Some(*name),
        _ => None,
    };
    let outcome = operation.run(&*approach).await;
    let latency = Instant::now().saturating_duration_since(due.at);
    if due.counted {
        match name {
            Some(name) => store_transaction(&stats, kind, name, latency, outcome),
            None => store(&stats, kind, latency, outcome),
        }
    }
    // Recorded before the permit goes: a driver that sees nothing in flight sees every outcome.
    drop(permit);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_workload_draws_its_own_operations() {
        let mut rng = Rng::derive(4, 0);
        let draw = |workload, write_ppm| Draw {
            workload,
            rows: 10,
            write_ppm,
            custom: None,
        };
        for _ in 0..100 {
            match draw(Workload::PointRead, 0).next(&mut rng) {
                Operation::PointRead(id) => assert!((1..=10).contains(&id)),
                other => panic!("{other:?}"),
            }
            assert!(matches!(
                draw(Workload::Insert, 0).next(&mut rng),
                Operation::Insert(_)
            ));
            assert_eq!(
                draw(Workload::Mixed, crate::cell::PPM)
                    .next(&mut rng)
                    .kind(),
                OpKind::Write
            );
            assert_eq!(draw(Workload::Mixed, 0).next(&mut rng).kind(), OpKind::Read);
        }
    }
}
