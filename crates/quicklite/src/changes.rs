//! Change notifications: what a committed write group changed, told to every subscriber
//! ([`Database::subscribe`](crate::Database::subscribe)).
//!
//! The writer's connection reports each row a statement inserts, updates or deletes (SQLite's update hook) into the
//! database's [`ChangeLog`]; the engine takes back what a write that failed had reported (its savepoint rolled back),
//! and SQLite's rollback hook empties the log when a whole transaction rolls back. When a `COMMIT` returns, the log
//! becomes one [`Notice::Committed`], sent to every subscriber through a bounded broadcast channel: a subscriber that
//! falls behind by more than its capacity gets [`Notice::Lagged`] instead of the notices it missed, and nobody's
//! memory grows without bound.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::util::lock;

/// What a subscriber is told.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// A write group committed by this database's writer: every write the group acknowledged, nothing of a write
    /// that failed.
    Committed(Arc<Commit>),
    /// This subscriber fell behind and `missed` notices were dropped for it: what it keeps in step with the database
    /// should be read afresh.
    Lagged {
        /// How many notices it missed.
        missed: u64,
    },
    /// Another process, or a connection this database does not own, committed to the file since the last look
    /// ([`Builder::notice_external_commits`](crate::Builder::notice_external_commits)): one or more commits,
    /// whose tables are not known. What the subscriber keeps in step with the database should be read afresh. Now
    /// and then it comes without such a commit: when the writer goes on with its second connection (a read kept its
    /// first), whose look cannot tell a commit from outside since the last look from the first connection's.
    External,
}

/// One committed write group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// The database's commit sequence after this commit: one more than the previous commit's, so a subscriber sees
    /// them in order and can tell it missed none.
    pub seq: u64,
    /// The tables whose rows the group inserted, updated or deleted, in the order first changed. As SQLite's update
    /// hook reports them: tables `WITHOUT ROWID`, rows deleted by `DELETE` without `WHERE` (the truncate
    /// optimization) and rows replaced by `REPLACE` conflicts are not reported, and a schema change is no row's; the
    /// notice still comes for every committed group. The change feed's own tables
    /// ([`Builder::change_feed`](crate::Builder::change_feed)) are not listed.
    pub tables: Vec<TableChange>,
}

/// The rows of one table a commit changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableChange {
    /// The table's name, as the statement wrote it (for an attached database's table, without the schema).
    pub table: String,
    /// The rowids changed, each once, in the order first changed; `None` when more than
    /// [`Builder::change_rowids`](crate::Builder::change_rowids) were.
    pub rowids: Option<Vec<i64>>,
}

/// Row changes recorded in the log, past which only the tables are kept: a bulk load of a million rows must not hold
/// a million entries.
const MAX_ENTRIES: usize = 65_536;

/// The changes of the write transaction under way on the writer's connection.
#[derive(Debug, Default)]
struct ChangeLog {
    /// Tables changed so far, by index.
    tables: Vec<String>,
    /// (table index, rowid) of each row change, in order, up to [`MAX_ENTRIES`].
    entries: Vec<(usize, i64)>,
    /// Tables changed after the entries ran out (their rowids are not known).
    overflowed: Vec<bool>,
}

impl ChangeLog {
    fn record(&mut self, table: &str, rowid: i64) {
        let index = match self.tables.iter().rposition(|t| t == table) {
            Some(index) => index,
            None => {
                self.tables.push(table.to_owned());
                self.overflowed.push(false);
                self.tables.len() - 1
            }
        };
        if self.entries.len() < MAX_ENTRIES {
            self.entries.push((index, rowid));
        } else {
            self.overflowed[index] = true;
        }
    }

    fn clear(&mut self) {
        self.tables.clear();
        self.entries.clear();
        self.overflowed.clear();
    }

    /// The group's changes, bounded to `max_rowids` rowids a table; the log is empty afterwards.
    fn take(&mut self, max_rowids: usize) -> Vec<TableChange> {
        let mut rowids: Vec<Option<Vec<i64>>> = self
            .overflowed
            .iter()
            .map(|&overflowed| (!overflowed).then(Vec::new))
            .collect();
        let mut listed = vec![false; self.tables.len()];
        let mut order = Vec::new();
        for &(index, rowid) in &self.entries {
            if !listed[index] {
                listed[index] = true;
                order.push(index);
            }
            if let Some(ids) = &mut rowids[index]
                && !ids.contains(&rowid)
            {
                if ids.len() < max_rowids {
                    ids.push(rowid);
                } else {
                    rowids[index] = None;
                }
            }
        }
        // Tables that overflowed without an entry of their own come last.
        order.extend((0..self.tables.len()).filter(|&i| !listed[i]));
        let tables = std::mem::take(&mut self.tables);
        let changes = order
            .into_iter()
            .map(|index| TableChange {
                table: tables[index].clone(),
                rowids: rowids[index].take(),
            })
            .collect();
        self.clear();
        changes
    }
}

/// The default of [`Builder::subscription_capacity`](crate::Builder::subscription_capacity).
pub(crate) const DEFAULT_CAPACITY: usize = 1024;

/// The default of [`Builder::change_rowids`](crate::Builder::change_rowids).
pub(crate) const DEFAULT_ROWIDS: usize = 100;

/// A database's change notifications: the log the writer's connection fills, and the subscribers' channel.
#[derive(Debug)]
pub(crate) struct Changes {
    state: Mutex<State>,
    /// Whether anyone subscribes: while nobody does, the update hook records nothing.
    subscribed: AtomicBool,
    capacity: usize,
    max_rowids: usize,
}

#[derive(Debug)]
struct State {
    log: ChangeLog,
    /// `None` once the database is closed: the subscribers' streams end.
    sender: Option<broadcast::Sender<Notice>>,
}

/// A position in the log, to take back what was recorded after it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    entries: usize,
    tables: usize,
}

impl Default for Changes {
    fn default() -> Changes {
        Changes::new(DEFAULT_CAPACITY, DEFAULT_ROWIDS)
    }
}

impl Changes {
    /// Notifications to subscribers that each hold up to `capacity` notices, with up to `max_rowids` rowids a table.
    pub(crate) fn new(capacity: usize, max_rowids: usize) -> Changes {
        let capacity = capacity.max(1);
        Changes {
            state: Mutex::new(State {
                log: ChangeLog::default(),
                sender: Some(broadcast::channel(capacity).0),
            }),
            subscribed: AtomicBool::new(false),
            capacity,
            max_rowids,
        }
    }

    /// A new subscriber's end of the channel: every notice sent from now on (one for a group under way may list
    /// only what the group changed from now on). Closed at once if the database is.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Notice> {
        let state = lock(&self.state);
        match &state.sender {
            Some(sender) => {
                let receiver = sender.subscribe();
                self.subscribed.store(true, Ordering::SeqCst);
                receiver
            }
            None => broadcast::channel(self.capacity).1,
        }
    }

    /// Records a row change (the writer connection's update hook); the change feed's own tables' are no
    /// application's, and are left out.
    pub(crate) fn record(&self, table: &str, rowid: i64) {
        if self.subscribed.load(Ordering::Relaxed) && !table.starts_with(crate::feed::PREFIX) {
            lock(&self.state).log.record(table, rowid);
        }
    }

    /// Where the log stands, before a write whose changes may have to be taken back. Without subscribers, the
    /// start: nothing is recorded, and what a subscriber arriving meanwhile sees recorded may be taken back.
    pub(crate) fn mark(&self) -> Mark {
        if !self.subscribed.load(Ordering::Relaxed) {
            return Mark {
                entries: 0,
                tables: 0,
            };
        }
        let state = lock(&self.state);
        Mark {
            entries: state.log.entries.len(),
            tables: state.log.tables.len(),
        }
    }

    /// Takes back what was recorded after `mark` (a write rolled back to its savepoint, or a statement SQLite undid).
    /// A table the log ran out of entries for stays listed, without its rowids.
    pub(crate) fn undo_to(&self, mark: Mark) {
        let log = &mut lock(&self.state).log;
        log.entries.truncate(mark.entries);
        if mark.tables <= log.tables.len() && !log.overflowed[mark.tables..].contains(&true) {
            log.tables.truncate(mark.tables);
            log.overflowed.truncate(mark.tables);
        }
    }

    /// Forgets the transaction's changes (it rolled back).
    pub(crate) fn discard(&self) {
        if self.subscribed.load(Ordering::Relaxed) {
            lock(&self.state).log.clear();
        }
    }

    /// Tells every subscriber that the transaction whose changes are in the log committed as `seq`.
    pub(crate) fn committed(&self, seq: u64) {
        if !self.subscribed.load(Ordering::Relaxed) {
            return;
        }
        let mut state = lock(&self.state);
        let tables = state.log.take(self.max_rowids);
        let Some(sender) = &state.sender else {
            return;
        };
        if sender.receiver_count() == 0 {
            // The last subscriber has gone: record nothing until the next one comes (which subscribes under this
            // lock, so it cannot come between the count and the store).
            self.subscribed.store(false, Ordering::SeqCst);
            return;
        }
        let _ = sender.send(Notice::Committed(Arc::new(Commit { seq, tables })));
    }

    /// Whether anyone subscribes now.
    pub(crate) fn has_subscribers(&self) -> bool {
        lock(&self.state)
            .sender
            .as_ref()
            .is_some_and(|sender| sender.receiver_count() > 0)
    }

    /// Tells every subscriber that the file was committed to from outside ([`Notice::External`]).
    pub(crate) fn external(&self) {
        if let Some(sender) = &lock(&self.state).sender
            && sender.receiver_count() > 0
        {
            let _ = sender.send(Notice::External);
        }
    }

    /// Ends every subscriber's stream (after the notices it holds); later subscribers get ended streams.
    pub(crate) fn close(&self) {
        lock(&self.state).sender = None;
        self.subscribed.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes_of(changes: &Changes, seq: u64) -> Vec<TableChange> {
        let mut rx = changes.subscribe();
        changes.committed(seq);
        match rx.try_recv().unwrap() {
            Notice::Committed(commit) => {
                assert_eq!(commit.seq, seq);
                commit.tables.clone()
            }
            other => panic!("{other:?}"),
        }
    }

    fn table(name: &str, rowids: Option<&[i64]>) -> TableChange {
        TableChange {
            table: name.into(),
            rowids: rowids.map(<[i64]>::to_vec),
        }
    }

    #[test]
    fn a_commit_lists_each_table_once_with_its_rowids_once_each() {
        let changes = Changes::new(8, 3);
        let _rx = changes.subscribe();
        for (t, id) in [
            ("a", 1),
            ("b", 7),
            ("a", 2),
            ("a", 1),
            ("b", 8),
            ("b", 9),
            ("b", 10),
        ] {
            changes.record(t, id);
        }
        assert_eq!(
            changes_of(&changes, 5),
            [table("a", Some(&[1, 2])), table("b", None)],
            "b changed more rowids than the bound"
        );
        assert_eq!(changes_of(&changes, 6), [], "the log starts over");
    }

    #[test]
    fn a_failed_writes_changes_are_taken_back() {
        let changes = Changes::new(8, 10);
        let _rx = changes.subscribe();
        changes.record("a", 1);
        let mark = changes.mark();
        changes.record("a", 2);
        changes.record("b", 3);
        changes.undo_to(mark);
        changes.record("c", 4);
        assert_eq!(
            changes_of(&changes, 1),
            [table("a", Some(&[1])), table("c", Some(&[4]))]
        );
        changes.record("a", 1);
        changes.discard();
        assert_eq!(changes_of(&changes, 2), []);
    }

    #[test]
    fn past_the_entries_tables_are_kept_without_rowids() {
        let changes = Changes::new(8, 10);
        let _rx = changes.subscribe();
        for id in 0..MAX_ENTRIES as i64 {
            changes.record("a", id);
        }
        let mark = changes.mark();
        changes.record("b", 1);
        changes.undo_to(mark);
        assert_eq!(
            changes_of(&changes, 1),
            [table("a", None), table("b", None)],
            "b may have changed: listed, without rowids"
        );
    }

    #[test]
    fn nothing_is_recorded_without_subscribers_and_a_slow_one_is_told_it_lagged() {
        let changes = Changes::new(2, 10);
        changes.record("a", 1);
        let mut rx = changes.subscribe();
        assert!(lock(&changes.state).log.entries.is_empty());
        for seq in 1..=5 {
            changes.committed(seq);
        }
        assert_eq!(
            rx.try_recv(),
            Err(broadcast::error::TryRecvError::Lagged(3))
        );
        assert!(matches!(rx.try_recv(), Ok(Notice::Committed(c)) if c.seq == 4));
        drop(rx);
        changes.committed(6);
        changes.record("a", 1);
        assert!(
            lock(&changes.state).log.entries.is_empty(),
            "no subscriber left"
        );
    }
}
