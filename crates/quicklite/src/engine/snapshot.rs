//! A connection that keeps its snapshot from one read to the next, for reads run on their callers' threads: a
//! read-only connection of the database's own, or the writer's connection lent while the writer waits for work
//! ([`seat`](crate::engine::seat)).
//!
//! A read transaction costs more to begin and end than a point read costs to run (docs/design.md), so the
//! connection keeps one open between reads, for as long as it may serve them: until the commit sequence moves past
//! it (a read made after a commit must see it), until it is [`Config::read_snapshot_max_age`] old, or until it has
//! stood unused that long (ended from outside, so that it does not hold the WAL back from checkpoints).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use std::panic::{AssertUnwindSafe, catch_unwind};

use rusqlite::Connection;

use crate::config::Config;
use crate::engine::bound::{self, Bound};
use crate::engine::busy::BusyLimit;
use crate::engine::guard::{Control, GuardedConnection};
use crate::engine::map::ReaderMap;
use crate::engine::{Shared, open};
use crate::error::panic_message;
use crate::request::Deadline;
use crate::util::Coarse;
use crate::{Error, RequestKind, Result};

/// A connection for reads and the snapshot it keeps.
pub(crate) struct KeptSnapshot {
    conn: GuardedConnection,
    /// A reader's map; `None` on the writer's connection, which keeps its own.
    map: Option<ReaderMap>,
    /// Whether this is the writer's connection, lent.
    lent: bool,
    /// The open snapshot; `None` when none is open.
    open: Option<Open>,
    /// The commit sequence of the last snapshot begun: a snapshot begun while it is still the sequence finds the
    /// connection's cache as the last one left it.
    last_seq: u64,
    /// Whether the last snapshot began after a commit, with the cache thrown away: it is being filled again.
    refilling: bool,
    /// Reads the last snapshot kept served before it ended.
    last_served: u64,
    /// The commit sequence when the last read ran as a transaction of its own ([`KeptSnapshot::runs_alone`]), until
    /// a snapshot is kept again.
    alone_at: Option<u64>,
    /// Reads served since the counts were last added to the shared metrics.
    reads: u64,
    read_errors: u64,
    panics: u64,
}

/// An open snapshot: the commit sequence it contains, and when it began by both clocks.
#[derive(Debug, Clone, Copy)]
struct Open {
    seq: u64,
    /// Reads served in it.
    served: u64,
    began: Instant,
    began_coarse: Coarse,
}

/// A read run on a kept snapshot ([`KeptSnapshot::read`]): its answer, and what its scheduler learns of it.
pub(crate) struct Read<T> {
    pub(crate) result: Result<T>,
    /// Whether a snapshot was begun for it.
    pub(crate) began: bool,
    /// When it ended, if it ran (by the coarse clock).
    pub(crate) ended: Option<Coarse>,
    /// How long its closure ran, if it ran, did not panic, and was timed: asked to be, or run long enough to be
    /// looked at while it ran ([`crate::engine::bound`]), or for a tick of the coarse clock. What its call site
    /// costs (a snapshot begun for it serves many reads, and a panic's time is the panic hook's as much as the
    /// read's).
    pub(crate) took: Option<Duration>,
}

/// Why a snapshot could not be had.
#[derive(Debug)]
pub(crate) struct NoSnapshot;

impl KeptSnapshot {
    /// Opens a read-only connection to `path`. Its busy handler gives up at once: a read on a caller's thread must
    /// not sleep there waiting for a lock; it goes to the reader threads instead ([`KeptSnapshot::begin`]).
    pub(crate) fn open(path: &Path, config: &Config, shared: &Arc<Shared>) -> Result<KeptSnapshot> {
        let mut conn = open::open_read_only(path, config)?;
        let busy = BusyLimit::new(Duration::ZERO);
        open::instrument(&mut conn, config, shared, "reader", &busy)?;
        let commit_seq = shared.commit_seq();
        Ok(KeptSnapshot {
            map: Some(ReaderMap::new(&conn, commit_seq, Instant::now())),
            ..KeptSnapshot::over(conn, commit_seq)
        })
    }

    /// The writer's connection, lent for reads: it is read-write, so each read on it is checked
    /// ([`KeptSnapshot::after_read`]).
    pub(crate) fn lent(conn: GuardedConnection, commit_seq: u64) -> KeptSnapshot {
        KeptSnapshot {
            lent: true,
            ..KeptSnapshot::over(conn, commit_seq)
        }
    }

    fn over(conn: GuardedConnection, commit_seq: u64) -> KeptSnapshot {
        KeptSnapshot {
            conn,
            map: None,
            lent: false,
            open: None,
            last_seq: commit_seq,
            last_served: u64::MAX,
            alone_at: None,
            refilling: false,
            reads: 0,
            read_errors: 0,
            panics: 0,
        }
    }

    /// Whether a read made now, at `visible_seq`, would find this connection's page cache warm: no commit since
    /// its last snapshot began, and none just before it (SQLite throws a connection's cache away when a read
    /// transaction begins after another connection committed, and the reads that follow fill it again).
    pub(crate) fn warm(&self, visible_seq: u64) -> bool {
        self.last_seq >= visible_seq && !self.refilling
    }

    /// Makes sure the open snapshot contains every commit up to `visible_seq` (the sequence that must be visible now,
    /// [`Shared::visible_seq`]) and is younger than `max_age` (by the coarse clock, `now`, allowing for its tick: never
    /// older), beginning a new one if not (then returns `true`); `Err` if none could be begun (a lock held
    /// elsewhere), with no snapshot open.
    #[cfg(test)]
    fn current(
        &mut self,
        shared: &Shared,
        visible_seq: u64,
        now: Coarse,
        max_age: Duration,
    ) -> std::result::Result<bool, NoSnapshot> {
        if self.serves(visible_seq, now, max_age) {
            return Ok(false);
        }
        self.begin(shared).map(|()| true)
    }

    /// Begins a new snapshot, ending the open one, if any; `Err` if none could be begun (a lock held elsewhere), with
    /// no snapshot open.
    fn begin(&mut self, shared: &Shared) -> std::result::Result<(), NoSnapshot> {
        if self.open.is_some() {
            self.end(shared);
        }
        let (now, now_coarse) = (Instant::now(), Coarse::now());
        // What the new snapshot is sure to contain: the commits published before it begins (one under way may be
        // in it too, or not).
        let commit_seq = shared.commit_seq();
        if let Some(map) = &mut self.map {
            map.before_reads(&self.conn, commit_seq, now);
        }
        // `BEGIN` is deferred: the snapshot is taken by the first read, here, so that a lock held elsewhere is met
        // before any closure runs (and the read can still go to the threads).
        let begun = self.conn.control(Control::Begin).and_then(|()| {
            self.conn
                .conn()
                .prepare_cached("PRAGMA schema_version")?
                .query_row([], |_| Ok(()))
        });
        match begun {
            Ok(()) => {
                shared
                    .metrics
                    .read_transactions
                    .fetch_add(1, Ordering::Relaxed);
                // Every commit numbered up to `commit_seq` had returned before the snapshot was taken.
                self.open = Some(Open {
                    seq: commit_seq,
                    served: 0,
                    began: now,
                    began_coarse: now_coarse,
                });
                self.refilling = commit_seq != self.last_seq;
                self.last_seq = commit_seq;
                Ok(())
            }
            Err(e) => {
                tracing::debug!(error = %e, "no snapshot for a read on its caller's thread");
                self.rollback();
                Err(NoSnapshot)
            }
        }
    }

    /// Whether the open snapshot, if any, may serve a read made now, at `visible_seq`: it contains every commit up to
    /// it, and is younger than `max_age` (by the coarse clock, `now`, allowing for its tick: never older).
    fn serves(&self, visible_seq: u64, now: Coarse, max_age: Duration) -> bool {
        self.open.is_some_and(|open| {
            open.seq >= visible_seq && now.since(open.began_coarse) + Coarse::tick() < max_age
        })
    }

    /// Whether the next read, which the open snapshot (if any) cannot serve, runs as a transaction of its own instead
    /// of in a snapshot kept for the reads after it — then ends the snapshot open. On the writer's lent connection
    /// only, whose reads are single statements (the statement helpers'), each consistent by itself; and only where
    /// a kept snapshot buys nothing: the last one served a single read before a commit ended it, and the read
    /// before did not run alone with no commit since (two reads in a row keep a snapshot again). A read alone
    /// saves the `BEGIN`, the statement that takes the snapshot and the `COMMIT` around it: a write, then a read
    /// of it, then a write … keeps no snapshot that the next write would end after one read. Not while another
    /// connection contends for the write lock: a snapshot begun first meets a lock held elsewhere before the read
    /// runs, and the read can still go to the threads.
    fn runs_alone(&mut self, shared: &Shared) -> bool {
        if !self.lent || shared.write_lock_contended() {
            return false;
        }
        if self.open.is_some() {
            self.end(shared);
        }
        let commit_seq = shared.commit_seq();
        if self.last_served > 1 || self.alone_at == Some(commit_seq) {
            return false;
        }
        self.alone_at = Some(commit_seq);
        shared
            .metrics
            .read_transactions
            .fetch_add(1, Ordering::Relaxed);
        self.refilling = commit_seq != self.last_seq;
        self.last_seq = commit_seq;
        true
    }

    /// Runs `f`, one read, in a snapshot that contains every commit up to `visible_seq` ([`KeptSnapshot::serves`]; or
    /// alone, its statement its snapshot, [`KeptSnapshot::runs_alone`]),
    /// under `deadline` (interrupted past it) and its bound ([`crate::engine::bound`], `past` called past it), with
    /// the reader threads' guarantees: a panic is caught, a read that tried to write fails with `SQLITE_READONLY`
    /// ([`KeptSnapshot::after_read`]), the read is counted. Gives `f` back, not run, if no snapshot could be begun (a
    /// lock held elsewhere). The snapshot stays open for the next read unless a checkpoint waits for readers.
    ///
    /// The fine clock is read only where needed — a deadline, a read its scheduler wants `timed`, a snapshot begun,
    /// a read long enough to be looked at while it runs; the others take two readings of the coarse clock, which
    /// still tell a read that ran for ticks.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn read<T, F>(
        &mut self,
        shared: &Shared,
        visible_seq: u64,
        config: &Config,
        deadline: Option<Deadline>,
        past: Option<fn() -> bool>,
        timed: bool,
        f: F,
    ) -> std::result::Result<Read<T>, F>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T>,
    {
        let start = Coarse::now();
        let now = (deadline.is_some() || timed).then(Instant::now);
        if let Some(deadline) = deadline
            && let Some(now) = now
            && deadline.passed(now)
        {
            // Counted as the reader threads count a read answered past its deadline without running.
            self.count(true, false);
            return Ok(Read {
                result: Err(deadline.error(RequestKind::Read, false)),
                began: false,
                ended: None,
                took: None,
            });
        }
        // The open snapshot serves the read, or it runs alone, or a snapshot is begun for it.
        let (alone, began) = if self.serves(visible_seq, start, config.read_snapshot_max_age) {
            (false, false)
        } else if self.runs_alone(shared) {
            (true, false)
        } else if self.begin(shared).is_ok() {
            (false, true)
        } else {
            return Err(f);
        };
        if let Some(open) = &mut self.open {
            // A snapshot begun for the second read in a row with no commit between serves a run of reads that began
            // with the one before, which ran alone.
            if began && self.alone_at.take() == Some(open.seq) {
                open.served += 1;
            }
            open.served += 1;
        }
        let vetoed = self.vetoed();
        // What the read costs starts after the snapshot it may have begun (which serves many reads).
        let (started, start) = match began {
            true => (Some(Instant::now()), Coarse::now()),
            false => (now, start),
        };
        let conn = &self.conn;
        let (outcome, passed) = bound::within(Bound::new(started, past), || {
            conn.run_until(deadline.map(|d| d.at), || {
                catch_unwind(AssertUnwindSafe(|| f(conn.conn())))
            })
        });
        let ended = Coarse::now();
        // A read timed from its start, or from its first look; else one that ran for ticks of the coarse clock.
        let took = match passed.began {
            Some(began) => Some(began.elapsed()),
            None => Some(ended.since(start)).filter(|&took| took > Coarse::tick()),
        };
        let wrote = self.after_read(shared, vetoed);
        if shared.checkpoint_waits() {
            // A snapshot kept now would hold the checkpoint back for as long as this thread keeps reading.
            self.end(shared);
        }
        let took = took.filter(|_| outcome.is_ok());
        let result = match outcome {
            Ok(_) if wrote => {
                self.count(true, false);
                Err(Error::read_wrote())
            }
            Ok(Ok(value)) => {
                self.count(false, false);
                Ok(value)
            }
            Ok(Err(e)) => {
                self.count(true, false);
                match deadline {
                    // Failed past its deadline: interrupted (or failing anyway, too late to tell).
                    Some(deadline) if deadline.passed(Instant::now()) => {
                        Err(deadline.error(RequestKind::Read, true))
                    }
                    _ => Err(Error::from_closure(e)),
                }
            }
            Err(payload) => {
                // The closure may have left a statement half-stepped: begin afresh next time.
                self.count(true, true);
                self.end(shared);
                Err(Error::Panic {
                    message: panic_message(payload.as_ref()),
                })
            }
        };
        if alone {
            // Nothing of its transaction may stay open on the writer's connection (a `SAVEPOINT` its statement
            // began), and the read is counted now, as a snapshot's reads are when it ends.
            self.conn.roll_back_open();
            self.flush(shared);
        }
        if passed.long {
            shared.metrics.long_reads.fetch_add(1, Ordering::Relaxed);
        }
        if passed.past {
            shared
                .metrics
                .runtime_hand_offs
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(Read {
            result,
            began,
            ended: Some(ended),
            took,
        })
    }

    /// Runs `f`, a write, on the writer's connection lent here, taken back from the reads for the while: the
    /// snapshot ends first, the connection is the writer's again while `f` runs (its guards, its commits allowed
    /// where the engine allows them), lent again after, with what `f` may have changed of its hooks put back. The
    /// cache the write leaves is the connection's own, warm for the reads that follow.
    pub(crate) fn write<T>(
        &mut self,
        shared: &Shared,
        f: impl FnOnce(&GuardedConnection) -> T,
    ) -> T {
        debug_assert!(self.lent, "only the writer's connection writes");
        self.end(shared);
        self.conn.set_lent(false);
        let out = f(&self.conn);
        self.conn.set_lent(true);
        self.conn.rearm();
        self.last_seq = shared.commit_seq();
        self.refilling = false;
        out
    }

    /// The connection, for a read inside the snapshot.
    #[cfg(test)]
    pub(crate) fn conn(&self) -> &GuardedConnection {
        &self.conn
    }

    /// Counts one read served (added to the shared metrics when the snapshot ends).
    pub(crate) fn count(&mut self, failed: bool, panicked: bool) {
        self.reads += 1;
        self.read_errors += u64::from(failed);
        self.panics += u64::from(panicked);
    }

    /// When the open snapshot began, if one is open.
    pub(crate) fn began(&self) -> Option<Instant> {
        self.open.map(|open| open.began)
    }

    /// Ends the open snapshot, if any, and adds the counts to the shared metrics.
    pub(crate) fn end(&mut self, shared: &Shared) {
        if let Some(Open { began, .. }) = self.take_open() {
            shared
                .metrics
                .read_transaction_us
                .record_duration(began.elapsed());
            if !self.conn.conn().is_autocommit()
                && let Err(e) = self.conn.control(Control::Commit)
            {
                tracing::warn!(error = %e, "could not end a kept snapshot");
                self.rollback();
            }
        }
        self.flush(shared);
    }

    /// Adds the counts to the shared metrics.
    pub(crate) fn flush(&mut self, shared: &Shared) {
        let metrics = &shared.metrics;
        let reads = std::mem::take(&mut self.reads);
        for (count, total) in [
            (reads, &metrics.reads),
            (reads, &metrics.inline_reads),
            (
                if self.lent { reads } else { 0 },
                &metrics.inline_reads_on_writer,
            ),
            (std::mem::take(&mut self.read_errors), &metrics.read_errors),
            (std::mem::take(&mut self.panics), &metrics.panics),
        ] {
            if count > 0 {
                total.fetch_add(count, Ordering::Relaxed);
            }
        }
    }

    /// Commits vetoed on the connection so far, to pass to [`KeptSnapshot::after_read`].
    pub(crate) fn vetoed(&self) -> u64 {
        self.conn.vetoed()
    }

    /// After a read on the connection: returns whether the read tried to write, which fails it. A read-only
    /// connection refuses writes itself (`SQLITE_OPEN_READ_ONLY` and `query_only`). The writer's, lent, runs under
    /// `query_only` and its witness vetoes every commit; should a write get through anyway (a closure finding a
    /// statement that turns `query_only` off in the statement cache), it is rolled back here before anyone can see
    /// it, and a commit the read tried (`vetoed_before`: the count of vetoes before it) was vetoed.
    ///
    /// The snapshot is kept only while its transaction is really open: SQLite ends a transaction by itself (an
    /// `OR ROLLBACK` conflict, an I/O error), and the next read must then begin a new one.
    pub(crate) fn after_read(&mut self, shared: &Shared, vetoed_before: u64) -> bool {
        let mut wrote = false;
        if self.lent {
            wrote = self.conn.vetoed() > vetoed_before;
            if self.conn.writing() {
                self.rollback();
                wrote = true;
            }
        }
        if self.open.is_some() && self.conn.conn().is_autocommit() {
            self.take_open();
        }
        if wrote {
            self.flush(shared);
        }
        wrote
    }

    /// Forgets the open snapshot, if any (its transaction ended, or about to), and what it served.
    fn take_open(&mut self) -> Option<Open> {
        let open = self.open.take();
        if let Some(open) = open {
            self.last_served = open.served;
        }
        open
    }

    /// Ends the snapshot and gives the connection back (the writer's, lent).
    pub(crate) fn into_conn(mut self, shared: &Shared) -> GuardedConnection {
        self.end(shared);
        self.conn
    }

    /// Rolls back whatever transaction is open, after a failure.
    fn rollback(&mut self) {
        self.take_open();
        self.conn.roll_back_open();
    }

    /// Ends the snapshot and closes the connection.
    pub(crate) fn close(mut self, shared: &Shared) {
        self.end(shared);
        if let Err(e) = self.conn.close() {
            tracing::warn!(error = %e, "could not close a connection for reads on callers' threads");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database with a table `taken` holding row 1, and its configuration.
    fn database() -> (tempfile::TempDir, std::path::PathBuf, Config) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch(
                "PRAGMA journal_mode = WAL; CREATE TABLE taken (id INTEGER PRIMARY KEY); INSERT INTO taken VALUES (1)",
            )
            .unwrap();
        let config =
            crate::config::Config::from_settings(crate::Database::builder(&path).into_settings())
                .unwrap();
        (dir, path, config)
    }

    #[test]
    fn a_kept_snapshot_is_not_reused_while_a_commit_it_may_lack_is_under_way() {
        let (_dir, path, config) = database();
        let shared = Arc::new(Shared::default());
        let mut snapshot = KeptSnapshot::open(&path, &config, &shared).unwrap();
        let (now, age) = (Coarse::now(), Duration::from_secs(60));
        assert_eq!(
            snapshot
                .current(&shared, shared.visible_seq(), now, age)
                .ok(),
            Some(true)
        );
        assert_eq!(
            snapshot
                .current(&shared, shared.visible_seq(), now, age)
                .ok(),
            Some(false),
            "kept"
        );
        // A commit under way may be visible to a snapshot another connection begins now: a read made now must not
        // use one begun before it (published, it would be `commit_seq`; under way, only `visible_seq` says so).
        shared.commit_starts();
        assert_eq!(shared.commit_seq(), 0);
        assert_eq!(
            snapshot
                .current(&shared, shared.visible_seq(), now, age)
                .ok(),
            Some(true),
            "a snapshot that may lack the commit under way was reused"
        );
        snapshot.close(&shared);
    }

    /// The writer's connection, lent, over the database at `path`, with its witness of commits.
    fn lent(path: &Path, config: &Config, shared: &Arc<Shared>) -> KeptSnapshot {
        let mut conn = open::open_read_write(path, config, crate::ConnectionRole::Writer).unwrap();
        let witness = crate::engine::witness::install(conn.conn_mut(), shared).unwrap();
        conn.set_witness(witness);
        conn.set_lent(true);
        KeptSnapshot::lent(conn, shared.commit_seq())
    }

    /// Runs `f` as a read on `snapshot` at the sequence visible now; returns its result and whether a snapshot is
    /// kept after it.
    fn read<T>(
        snapshot: &mut KeptSnapshot,
        shared: &Shared,
        config: &Config,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> (Result<T>, bool) {
        let read = snapshot
            .read(shared, shared.visible_seq(), config, None, None, false, f)
            .unwrap_or_else(|_| panic!("no snapshot could be had"));
        let kept = snapshot.began().is_some();
        assert_eq!(
            kept,
            !snapshot.conn().conn().is_autocommit(),
            "a transaction is open exactly while a snapshot is kept"
        );
        (read.result, kept)
    }

    fn count(conn: &Connection) -> rusqlite::Result<i64> {
        conn.query_row("SELECT count(*) FROM taken", [], |r| r.get(0))
    }

    #[test]
    fn on_the_writers_connection_a_read_between_commits_runs_alone_and_reads_in_a_row_keep_a_snapshot()
     {
        let (_dir, path, config) = database();
        let shared = Arc::new(Shared::default());
        let mut snapshot = lent(&path, &config, &shared);
        let other = rusqlite::Connection::open(&path).unwrap();
        let mut rows = 1;
        let mut commit = || {
            rows += 1;
            shared.commit_starts();
            other
                .execute("INSERT INTO taken VALUES (?1)", [rows])
                .unwrap();
            shared.publish_commit();
            rows
        };
        // Reads in a row from the start: kept.
        assert!(read(&mut snapshot, &shared, &config, count).1);
        // A commit after each read: the snapshot that served one read ends, and the next reads run alone, each
        // seeing the commit before it.
        for _ in 0..3 {
            let rows = commit();
            let (seen, kept) = read(&mut snapshot, &shared, &config, count);
            assert_eq!((seen.unwrap(), kept), (rows, false));
        }
        // Two reads in a row: the second keeps a snapshot, which the reads after it reuse.
        let rows = commit();
        assert!(!read(&mut snapshot, &shared, &config, count).1, "alone");
        let before = shared.metrics.read_transactions.load(Ordering::Relaxed);
        for _ in 0..3 {
            let (seen, kept) = read(&mut snapshot, &shared, &config, count);
            assert_eq!((seen.unwrap(), kept), (rows, true));
        }
        assert_eq!(
            shared.metrics.read_transactions.load(Ordering::Relaxed),
            before + 1
        );
        // A snapshot that served several reads is kept again after a commit.
        let rows = commit();
        let (seen, kept) = read(&mut snapshot, &shared, &config, count);
        assert_eq!((seen.unwrap(), kept), (rows, true));
        snapshot.into_conn(&shared).close().unwrap();
    }

    #[test]
    fn a_read_alone_on_the_writers_connection_commits_nothing_and_leaves_no_transaction_open() {
        let (_dir, path, config) = database();
        let shared = Arc::new(Shared::default());
        let mut snapshot = lent(&path, &config, &shared);
        let other = rusqlite::Connection::open(&path).unwrap();
        let commit = || {
            shared.commit_starts();
            other.execute("UPDATE taken SET id = id", []).unwrap();
            shared.publish_commit();
        };
        assert_eq!(read(&mut snapshot, &shared, &config, count).0.unwrap(), 1);
        commit();
        // Alone from here, after each commit (the assertions in `read` check that no transaction stays open).
        let writes: [fn(&Connection) -> rusqlite::Result<i64>; 3] = [
            |c| {
                c.query_row("INSERT INTO taken VALUES (100) RETURNING id", [], |r| {
                    r.get(0)
                })
            },
            |c| {
                c.execute("INSERT INTO taken VALUES (101)", [])
                    .map(|n| n as i64)
            },
            |c| {
                c.execute("CREATE TEMP TABLE scratch (x)", [])
                    .map(|n| n as i64)
            },
        ];
        for (i, write) in writes.into_iter().enumerate() {
            let (result, kept) = read(&mut snapshot, &shared, &config, write);
            assert!(!kept, "{i} ran alone");
            assert!(result.is_err(), "{i}: a read that writes fails");
            commit();
        }
        // A savepoint begins a transaction without writing: rolled back after the read.
        let (result, kept) = read(&mut snapshot, &shared, &config, |c| {
            c.execute("SAVEPOINT mine", [])
        });
        assert!(!kept, "ran alone");
        assert!(result.is_ok());
        commit();
        let (rows, _) = read(&mut snapshot, &shared, &config, count);
        assert_eq!(rows.unwrap(), 1, "nothing was written");
        let temp: i64 = snapshot
            .conn()
            .conn()
            .query_row("SELECT count(*) FROM temp.sqlite_master", [], |r| r.get(0))
            .unwrap();
        assert_eq!(temp, 0, "no temporary table was kept");
        snapshot.into_conn(&shared).close().unwrap();
    }

    #[test]
    fn a_read_alone_that_runs_long_is_bounded_as_any_read() {
        static PAST: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        fn past() -> bool {
            PAST.fetch_add(1, Ordering::SeqCst);
            true
        }
        let (_dir, path, config) = database();
        let shared = Arc::new(Shared::default());
        let mut snapshot = lent(&path, &config, &shared);
        assert!(read(&mut snapshot, &shared, &config, count).1);
        shared.commit_starts();
        shared.publish_commit();
        // Past its bound (a millisecond of its thread's CPU), the read calls `past` — on a caller's thread, the
        // runtime's worker is handed to another thread — alone as in a kept snapshot.
        let long = |c: &Connection| {
            c.query_row(
                "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 300000) \
                 SELECT count(*) FROM n",
                [],
                |r| r.get::<_, i64>(0),
            )
        };
        let read = snapshot
            .read(
                &shared,
                shared.visible_seq(),
                &config,
                None,
                Some(past),
                false,
                long,
            )
            .unwrap_or_else(|_| panic!("no snapshot could be had"));
        assert_eq!(snapshot.began(), None, "ran alone");
        assert_eq!(read.result.unwrap(), 300_000);
        assert_eq!(PAST.load(Ordering::SeqCst), 1);
        assert_eq!(shared.metrics.runtime_hand_offs.load(Ordering::Relaxed), 1);
        assert_eq!(shared.metrics.long_reads.load(Ordering::Relaxed), 1);
        snapshot.into_conn(&shared).close().unwrap();
    }

    #[test]
    fn a_snapshot_sqlite_ended_is_not_kept() {
        let (_dir, path, config) = database();
        let shared = Arc::new(Shared::default());
        let mut snapshot = lent(&path, &config, &shared);
        let (now, age) = (Coarse::now(), Duration::from_secs(60));
        assert_eq!(snapshot.current(&shared, 0, now, age).ok(), Some(true));
        let vetoed = snapshot.vetoed();
        // A read whose statement makes SQLite end the transaction, then writes in autocommit mode.
        let conn = snapshot.conn().conn();
        assert!(
            conn.execute("INSERT OR ROLLBACK INTO taken VALUES (1)", [])
                .is_err()
        );
        assert!(conn.is_autocommit(), "SQLite ended the read's transaction");
        assert!(
            conn.execute("INSERT INTO taken VALUES (2)", []).is_err(),
            "the commit was vetoed"
        );
        assert!(
            snapshot.after_read(&shared, vetoed),
            "the read tried to write"
        );
        assert_eq!(snapshot.began(), None, "no snapshot is kept");
        assert_eq!(
            snapshot.current(&shared, 0, now, age).ok(),
            Some(true),
            "the next read begins one"
        );
        let rows: i64 = snapshot
            .conn()
            .conn()
            .query_row("SELECT count(*) FROM taken", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1);
        snapshot.into_conn(&shared).close().unwrap();
    }
}
