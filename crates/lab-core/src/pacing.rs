//! The schedule of the `multi-db` writers in the `paced` write mode, and the writes it makes expected.

use std::time::Duration;

/// When one database's paced writer issues its writes: at `phase + k × period` after the cell starts, for
/// `k = 0, 1, 2, …`.
///
/// The phases of the databases are spread evenly over one period, so a thousand writers make a steady stream of
/// writes rather than a burst every period. The schedule is fixed in advance: a writer that falls behind issues
/// its late writes back to back, and the writes the window expects are known before it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// Time between two writes of the database.
    pub period: Duration,
    /// Offset of the first write from the start of the cell, in `0..period`.
    pub phase: Duration,
}

impl Schedule {
    /// The schedule of database `db` of `databases`, one write every `period`.
    pub fn for_database(period: Duration, db: usize, databases: usize) -> Self {
        let databases = databases.max(1) as u128;
        let phase_nanos = period.as_nanos() * (db as u128 % databases) / databases;
        Self {
            period,
            phase: nanos(phase_nanos),
        }
    }

    /// Offset of write `k` from the start of the cell.
    pub fn tick(&self, k: u64) -> Duration {
        nanos(self.phase.as_nanos() + self.period.as_nanos() * u128::from(k))
    }

    /// Number of writes due in `[from, to)`, offsets from the start of the cell.
    pub fn ticks_in(&self, from: Duration, to: Duration) -> u64 {
        self.ticks_before(to)
            .saturating_sub(self.ticks_before(from))
    }

    /// Number of writes due before `offset`.
    fn ticks_before(&self, offset: Duration) -> u64 {
        let (offset, phase, period) = (
            offset.as_nanos(),
            self.phase.as_nanos(),
            self.period.as_nanos(),
        );
        if offset <= phase || period == 0 {
            return 0;
        }
        u64::try_from((offset - phase).div_ceil(period)).unwrap_or(u64::MAX)
    }
}

fn nanos(n: u128) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn phases_spread_over_one_period() {
        let phases: Vec<Duration> = (0..4)
            .map(|db| Schedule::for_database(100 * MS, db, 4).phase)
            .collect();
        assert_eq!(phases, [Duration::ZERO, 25 * MS, 50 * MS, 75 * MS]);
        let s = Schedule::for_database(100 * MS, 1, 4);
        assert_eq!(s.tick(0), 25 * MS);
        assert_eq!(s.tick(3), 325 * MS);
    }

    #[test]
    fn ticks_in_counts_writes_due_inside_the_window() {
        let s = Schedule::for_database(100 * MS, 1, 4);
        // Due at 25, 125, 225, 325, … ms.
        assert_eq!(s.ticks_in(Duration::ZERO, 25 * MS), 0);
        assert_eq!(s.ticks_in(Duration::ZERO, 26 * MS), 1);
        assert_eq!(s.ticks_in(25 * MS, 125 * MS), 1);
        assert_eq!(s.ticks_in(30 * MS, 330 * MS), 3);
        assert_eq!(s.ticks_in(330 * MS, 30 * MS), 0);
    }

    #[test]
    fn a_window_of_whole_periods_expects_duration_over_period_per_database() {
        // Whatever the warm-up and the phases, a window of 3 periods holds exactly 3 writes of each database.
        for warmup in [0, 1, 40, 99, 100, 250] {
            for databases in [1, 3, 7, 1000] {
                let total: u64 = (0..databases)
                    .map(|db| {
                        Schedule::for_database(100 * MS, db, databases)
                            .ticks_in(warmup * MS, (warmup + 300) * MS)
                    })
                    .sum();
                assert_eq!(
                    total,
                    3 * databases as u64,
                    "warm-up {warmup} ms, {databases} databases"
                );
            }
        }
    }
}
