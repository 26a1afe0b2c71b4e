//! The writer: the one read-write connection of a database, serving its queue one transaction at a time.
//!
//! The writer takes what is queued (up to `write_batch_max`), commits the grouped writes together
//! ([`group`]) and answers everyone once the `COMMIT` returned; a write that must run alone
//! runs alone. Who runs the writer, and how it waits for work, is the scheduler's business: a thread of its own
//! or turns on a registry's pool.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use rusqlite::config::DbConfig;

use crate::config::{Config, ConnectionRole, Migration};
use crate::engine::busy::BusyLimit;
use crate::engine::checkpoint::{Checkpoints, PassiveCheckpoints};
use crate::engine::duty::Duty;
use crate::engine::external::ExternalCommits;
use crate::engine::group::{self, BEGIN, COMMIT, Outcomes};
use crate::engine::guard::GuardedConnection;
use crate::engine::policy::Mode;
use crate::engine::seat::{TAKE_BACK_WAIT, TakenBack, WriterSeat};
use crate::engine::{Shared, held, hooks, open, witness, write_lock};
use crate::feed::{self, Retention};
use crate::gate::Held;
use crate::inbox::Inbox;
use crate::metrics::Metrics;
use crate::queue::Receiver;
use crate::reply::{Answers, Relays, Reply};
use crate::request::{WriteKind, WriteRequest};
use crate::{Error, RequestKind, Result};

/// WAL frames (4 KiB pages by default) below which a writer closed to be reopened later leaves the WAL as it is;
/// a longer WAL is checkpointed at close ([`Writer::shut_down`]).
const WAL_KEPT_AT_CLOSE: u64 = 256;

/// How often the writer prunes its change feed ([`Writer::prune_feed_if_due`]) while the last pruning left nothing
/// more to delete.
const PRUNE_EVERY: Duration = Duration::from_secs(5);

/// The writer's pruning of its change feed.
struct FeedPruning {
    retention: Retention,
    /// When the next pruning is due.
    next_at: Instant,
}

/// Writes in one turn from which writes are taken to come together ([`Writer::grouping`]; on callers' threads,
/// [`Inline::suits_write`](crate::sched::inline::Inline::suits_write)): two or three at once happen by chance at a
/// few thousand writes a second, where writes on their callers' threads cost the least.
pub(crate) const GROUPED_AT: usize = 4;

/// How a writer's connection is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Close {
    /// For good: `PRAGMA optimize`, and under managed checkpoints a `TRUNCATE` checkpoint, first.
    ForGood,
    /// To be reopened soon (a registry's database closed when idle or to make room): a short WAL stays for the
    /// next open.
    ToReopen,
}

/// A database's writer.
pub(crate) struct Writer {
    conn: Own,
    /// Where the connection is lent to reads while the writer waits for work, if it is.
    seat: Option<Arc<WriterSeat>>,
    /// Whether writes may run on the lent connection, on their callers' threads ([`writes_may_run_inline`]).
    inline_writes: bool,
    /// The commit sequence when the connection was last lent: commits past it were made on callers' threads.
    lent_at_seq: u64,
    /// Whether a turn served writes of several callers together since the writer last waited idle, the writer has
    /// not been found idle since ([`Duty::idle`]), and its turns have served two writes or more on average: writes
    /// come together lately, and group commit serves them best, so the connection is lent to reads only, until the
    /// writer has waited idle, its turns were found to take a small share of its time over a few windows in a row,
    /// or its turns serve writes one by one.
    grouping: bool,
    /// Writes served in the last turn.
    last_turn: usize,
    /// Writes served a turn, on average over the last several turns, in sixteenths.
    turn_writes: usize,
    /// How much of its time the writer spent in turns lately ([`Writer::grouping`]), the writes' on its lent
    /// connection counted as its own.
    duty: Duty,
    /// The writes' time on the lent connection ([`WriterSeat::written`]) counted in `duty` so far.
    written_counted: Duration,
    /// The commit sequence when the turn being served began: its writes committed if it moved.
    turn_began_at: u64,
    /// A second read-write connection, for while a read keeps the first past a take-back ([`Writer::take_back`]);
    /// opened the first time one does.
    spare: Option<GuardedConnection>,
    /// What the database was opened with, for the second connection.
    path: PathBuf,
    /// The connection's wait for locks held elsewhere: none while it is lent (a read on a caller's thread must not
    /// sleep there).
    busy: BusyLimit,
    inbox: Inbox<WriteRequest>,
    shared: Arc<Shared>,
    config: Config,
    checkpoints: Checkpoints,
    /// Looks for commits from outside, if the database makes them.
    external: Option<ExternalCommits>,
    /// Prunes the change feed, if the database records one.
    feed_pruning: Option<FeedPruning>,
    /// The group being committed (kept to reuse its allocation).
    group: Vec<WriteRequest>,
    /// Answers handed to callers to pass on, delivered from here if they are not passed on in time.
    relays: Relays,
    /// What happened to each write of a group, and the decided answers (kept to reuse their allocations).
    outcomes: Outcomes,
    answers: Answers,
}

/// The writer's connection: here, or lent to reads while the writer waits ([`Writer::lend_to_reads`]).
struct Own(Option<GuardedConnection>);

impl std::ops::Deref for Own {
    type Target = GuardedConnection;

    fn deref(&self) -> &GuardedConnection {
        self.0
            .as_ref()
            .expect("the writer uses its connection only while it holds it")
    }
}

impl std::ops::DerefMut for Own {
    fn deref_mut(&mut self) -> &mut GuardedConnection {
        self.0
            .as_mut()
            .expect("the writer uses its connection only while it holds it")
    }
}

/// A writer just opened, with what its connection reported.
pub(crate) struct OpenedWriter {
    pub(crate) writer: Writer,
    /// The PRAGMAs read back (only `busy_timeout` unless asked for).
    pub(crate) pragmas: BTreeMap<String, String>,
    /// The file SQLite opened, when it reports one.
    pub(crate) file: Option<PathBuf>,
}

/// Opens a read-write connection of the writer: the profile's PRAGMAs, the application's set-up, the busy handler
/// that waits `busy`, the WAL's size watched, and its commits witnessed ([`witness`]).
fn open_connection(
    path: &Path,
    config: &Config,
    shared: &Arc<Shared>,
    busy: &BusyLimit,
) -> Result<GuardedConnection> {
    let mut conn = open::open_read_write(path, config, ConnectionRole::Writer)?;
    open::instrument(&mut conn, config, shared, "writer", busy)?;
    open::watch_wal(&mut conn, config, shared)?;
    let witness = witness::install(conn.conn_mut(), shared)?;
    conn.set_witness(witness);
    // The migration, which may set them, runs with the guard open.
    conn.fix_writer_settings();
    Ok(conn)
}

/// Runs the application's migration on the writer's connection; a transaction it leaves open is rolled back and
/// fails it.
///
/// A failure names the migration (the function given to [`Builder::migrate`](crate::Builder::migrate)) and the last
/// statement it began — the one that failed, or, for a statement SQLite could not even prepare (a syntax error,
/// "incomplete input"), the one before it.
fn migrate(conn: &mut GuardedConnection, migration: &Migration) -> Result<()> {
    let mut last = None;
    // SAFETY: the handle is the open connection this thread holds; it is used through `conn` meanwhile.
    let handle = unsafe { conn.conn().handle() };
    let outcome = hooks::tracing_statements(handle, &mut last, || {
        conn.allow_tx_control_mut(|c| (migration.run)(c))
    });
    conn.rearm();
    let failed = |what: String| {
        let at = match &last {
            Some(sql) => format!("the last statement it began: {}", sql.trim()),
            None => "it began no statement".into(),
        };
        Error::Setup {
            stage: "migration",
            connection: ConnectionRole::Writer.name(),
            message: format!("{} failed: {what} ({at})", migration.name),
        }
    };
    if conn.roll_back_open() {
        return Err(failed(match outcome {
            Err(e) => e.to_string(),
            Ok(()) => "it left a transaction open, which was rolled back".into(),
        }));
    }
    outcome.map_err(|e| failed(e.to_string()))
}

/// Whether writes may run on the writer's connection on their callers' threads while the writer waits
/// ([`crate::sched::inline`]): only where a commit is short and bounded, with no fsync in it — WAL at
/// `synchronous=NORMAL` or `OFF` — and no checkpoint either (not SQLite's automatic one, which runs inside the
/// commit that crosses its threshold), and where the application did not ask writes to wait for others to join them
/// ([`Config::write_linger`]).
fn writes_may_run_inline(conn: &rusqlite::Connection, config: &Config) -> bool {
    let pragma = |name: &str| {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| {
            r.get::<_, rusqlite::types::Value>(0)
        })
        .ok()
    };
    let wal = matches!(pragma("journal_mode"), Some(rusqlite::types::Value::Text(mode)) if mode.eq_ignore_ascii_case("wal"));
    // 0 = OFF, 1 = NORMAL, 2 = FULL, 3 = EXTRA.
    let no_fsync = matches!(
        pragma("synchronous"),
        Some(rusqlite::types::Value::Integer(0 | 1))
    );
    config.inline_writes
        && wal
        && no_fsync
        && config.write_linger.is_zero()
        && config.checkpointing != crate::Checkpointing::Sqlite
        // Their answers wait for object storage on the writer's side.
        && config.replicated_acks.is_none()
}

impl Writer {
    /// Opens the read-write connection of `path` (applying the PRAGMAs, running the application's set-up,
    /// installing the hooks) for a writer serving `rx`. On the `first` open of the database by its handle it also
    /// runs the application's migration and reads every PRAGMA back (a dozen statements, which a registry's
    /// database does not repeat when it reopens).
    pub(crate) fn open(
        path: &Path,
        config: &Config,
        shared: &Arc<Shared>,
        rx: Receiver<WriteRequest>,
        first: bool,
    ) -> Result<OpenedWriter> {
        // Another process is the only one to wait for: try every millisecond ([`BusyLimit`]).
        let busy = BusyLimit::polling(config.busy_timeout);
        let mut conn = open_connection(path, config, shared, &busy)?;
        if first && let Some(migration) = &config.hooks.migration {
            let migrated = conn.committing_mut(|conn| migrate(conn, migration));
            conn.settle_all();
            migrated?;
        }
        if first && let Some(feed) = &config.feed {
            // After the migration, which creates the tables and may change their columns.
            let installed = conn.committing_mut(|conn| {
                conn.allow_tx_control_mut(|c| feed::install(c, &feed.tables))
            });
            conn.settle_all();
            installed?;
        }
        let mut pragmas = if first {
            open::read_back_pragmas(conn.conn(), config)?
        } else {
            BTreeMap::new()
        };
        // The busy handler that counts retries replaced SQLite's timeout (which now reads 0); it enforces the
        // configured timeout itself.
        pragmas.insert(
            "busy_timeout".into(),
            config.busy_timeout.as_millis().to_string(),
        );
        let file = conn
            .conn()
            .path()
            .filter(|p| !p.is_empty())
            .map(PathBuf::from);
        if let (Some(gate), Some(file)) = (&shared.gate, &file) {
            gate.opened(file.clone());
        }
        let checkpoints = Checkpoints::new(config, conn.conn(), shared, busy.clone());
        let external = config
            .external_commits
            .map(|every| ExternalCommits::new(every, config.replica.is_some(), &conn, shared));
        let inline_writes = writes_may_run_inline(conn.conn(), config);
        let writer = Writer {
            conn: Own(Some(conn)),
            seat: None,
            inline_writes,
            lent_at_seq: 0,
            grouping: false,
            last_turn: 0,
            turn_writes: 0,
            duty: Duty::new(Instant::now()),
            written_counted: Duration::ZERO,
            turn_began_at: 0,
            spare: None,
            path: path.to_path_buf(),
            busy,
            inbox: Inbox::new(rx, config.write_batch_max),
            shared: shared.clone(),
            checkpoints,
            external,
            feed_pruning: config.feed.as_ref().map(|feed| FeedPruning {
                retention: feed.retention,
                next_at: Instant::now(),
            }),
            group: Vec::with_capacity(config.write_batch_max),
            relays: Relays::default(),
            outcomes: Outcomes::with_capacity(config.write_batch_max),
            answers: Answers::with_capacity(config.write_batch_max),
            config: config.clone(),
        };
        Ok(OpenedWriter {
            writer,
            pragmas,
            file,
        })
    }

    /// Has the writer lend its connection to reads at `seat` whenever it waits for work
    /// ([`Writer::lend_to_reads`]).
    pub(crate) fn lend_when_idle(&mut self, seat: Arc<WriterSeat>) {
        self.seat = Some(seat);
    }

    /// Leaves the connection at the seat for reads on callers' threads, if the writer lends it and writes have not
    /// come together lately (while they do, it keeps it until it has waited idle, [`Writer::idle`], or its turns
    /// no longer show them together, [`Writer::turn_served`]); the writer
    /// takes it back ([`Writer::take_back`]) before it uses it again. A connection a read kept past a take-back is
    /// collected first, once that read is over; while it runs, the writer lends nothing.
    pub(crate) fn lend_to_reads(&mut self) {
        let Some(seat) = &self.seat else {
            return;
        };
        if self.grouping {
            // Writes come together: the next turn is likely within the writer's wait, and lending the connection
            // and taking it back around every turn costs the one thread that serves every write more than the
            // reads in between gain (docs/design.md).
            return;
        }
        if let Some(kept) = seat.collect(&self.shared) {
            self.spare = Some(kept);
        }
        let Some(conn) = self.conn.0.take() else {
            return;
        };
        self.busy.set(Duration::ZERO);
        self.lent_at_seq = self.shared.commit_seq();
        seat.writes_below(if self.inline_writes {
            self.checkpoints.writes_below()
        } else {
            0
        });
        if let Some(conn) = seat.lend(conn, self.lent_at_seq) {
            seat.writes_below(0);
            self.busy.set(self.config.busy_timeout);
            self.conn.0 = Some(conn);
        }
    }

    /// Whether a turn served several callers' writes together since the writer last waited idle ([`Writer::idle`])
    /// and the writer has not been found idle since ([`Duty::idle`]), and the last turn served several too: writes
    /// still come together.
    pub(crate) fn grouping(&self) -> bool {
        self.grouping && self.last_turn >= GROUPED_AT
    }

    /// Says the writer has waited for work without any coming: it lends its connection again, to writes as well as
    /// reads, however many writes came together lately ([`Writer::lend_to_reads`]).
    pub(crate) fn idle(&mut self) {
        self.grouping = false;
        if self.conn.0.is_some() {
            self.lend_to_reads();
        }
    }

    /// Takes the connection back from the seat, once the read running on it ends — or, if that read runs past
    /// [`TAKE_BACK_WAIT`] (a short call site's read turned long), goes on with the writer's second connection and
    /// leaves the first to that read ([`WriterSeat::collect`] gives it back later). A write never waits behind a
    /// read for longer than that, save for opening the second connection the first time; it waits for a write
    /// running there, which holds the write lock it needs anyway.
    ///
    /// Returns whether writes committed on the connection while it was lent (on their callers' threads); then the
    /// checkpoint due after them, if any, runs (or is handed off) now, as after the writer's own commits.
    pub(crate) fn take_back(&mut self) -> bool {
        let Some(seat) = &self.seat else {
            return false;
        };
        if self.conn.0.is_some() {
            return false;
        }
        // A read replica's writer waits for the read instead: a second connection through Litestream's VFS would
        // poll object storage on its own (`sched::threads`). Reads on callers' threads are short by their site's
        // cost ([`Config::inline_read_max`]).
        let wait = match self.config.replica {
            Some(_) => None,
            None => Some(TAKE_BACK_WAIT),
        };
        let conn = match seat.take_back(&self.shared, wait) {
            TakenBack::Conn(conn) => Some(conn),
            TakenBack::NotLent => None,
            TakenBack::Busy => match self.spare.take().map_or_else(
                || open_connection(&self.path, &self.config, &self.shared, &self.busy),
                Ok,
            ) {
                Ok(other) => {
                    self.shared
                        .metrics
                        .writer_switches
                        .fetch_add(1, Ordering::Relaxed);
                    if let Some(external) = &mut self.external {
                        external.switched(&other, &self.shared);
                    }
                    Some(other)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "no second connection for the writer: it waits for the read");
                    match seat.take_back(&self.shared, None) {
                        TakenBack::Conn(conn) => Some(conn),
                        TakenBack::NotLent | TakenBack::Busy => None,
                    }
                }
            },
        };
        self.conn.0 = conn;
        self.busy.set(self.config.busy_timeout);
        // Writes that ran on its callers' threads meanwhile were the writer's work: under a load that keeps them
        // coming as fast as they commit, the writer is busy, and group commit serves them best.
        let written = seat.written();
        self.duty.also(written.saturating_sub(self.written_counted));
        self.written_counted = written;
        let commit_seq = self.shared.commit_seq();
        if commit_seq == self.lent_at_seq || self.conn.0.is_none() {
            return false;
        }
        self.lent_at_seq = commit_seq;
        self.checkpoints.count_frames(&self.conn, &self.shared);
        self.checkpoints.after_commit(&self.conn, &self.shared);
        true
    }

    /// How often a writer waiting for work looks at the commits made meanwhile on its lent connection, by writes on
    /// their callers' threads ([`Writer::take_back`]), if it must: only they can make the WAL due for truncation
    /// while no write comes to the writer.
    pub(crate) fn look_back_every(&self) -> Option<Duration> {
        (self.seat.is_some() && self.inline_writes)
            .then(|| self.checkpoints.truncate_when_idle())
            .flatten()
    }

    /// The writer's queue and the requests it took from it.
    pub(crate) fn inbox(&mut self) -> &mut Inbox<WriteRequest> {
        &mut self.inbox
    }

    /// The relays this writer issued.
    pub(crate) fn relays(&mut self) -> &mut Relays {
        &mut self.relays
    }

    /// The file SQLite opened, if it reports one.
    pub(crate) fn file(&self) -> Option<&str> {
        self.conn.conn().path().filter(|p| !p.is_empty())
    }

    /// Whether the writer checkpoints by itself ([`Checkpointing::Managed`](crate::Checkpointing::Managed)).
    pub(crate) fn manages_checkpoints(&self) -> bool {
        self.checkpoints.managed()
    }

    /// Hands this writer's `PASSIVE` checkpoints to `passive` from now on.
    pub(crate) fn hand_passive_checkpoints_to(&mut self, passive: Box<dyn PassiveCheckpoints>) {
        self.checkpoints.hand_passive_to(passive);
    }

    /// How long the writer may wait for a request before truncating the WAL ([`Writer::truncate_wal`]), if it
    /// should.
    pub(crate) fn idle_truncate_after(&self) -> Option<Duration> {
        self.checkpoints.idle_wait()
    }

    /// Truncates the WAL (a `TRUNCATE` checkpoint), once the writer has been idle.
    pub(crate) fn truncate_wal(&mut self) {
        self.checkpoints
            .run(&self.conn, &self.shared, Mode::Truncate);
    }

    /// When the writer should next look for commits from outside, if it looks for them
    /// ([`Writer::look_outside_if_due`]).
    pub(crate) fn next_outside_look(&self) -> Option<Instant> {
        self.external.as_ref().map(ExternalCommits::next_look)
    }

    /// Looks for commits made to the file from outside the database, if it looks for them and a look is due; and
    /// prunes the change feed, if it records one and a pruning is due (the writer's housekeeping, at the same
    /// moments).
    pub(crate) fn look_outside_if_due(&mut self) {
        if let Some(external) = &mut self.external {
            external.look_if_due(&self.conn, &self.shared);
        }
        self.prune_feed_if_due();
    }

    /// Deletes what the change feed's retention no longer keeps, a bounded number of changes at a time, if a
    /// pruning is due: in a transaction of its own, committed and published as any other. While another
    /// connection holds the write lock, it does not wait: the next pruning tries again.
    fn prune_feed_if_due(&mut self) {
        let Some(pruning) = &mut self.feed_pruning else {
            return;
        };
        let now = Instant::now();
        if now < pruning.next_at || !self.conn.conn().is_autocommit() {
            return;
        }
        pruning.next_at = now + PRUNE_EVERY;
        let point = match feed::prune_point(self.conn.conn(), pruning.retention, SystemTime::now())
        {
            Ok(Some(point)) => point,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(error = %e, "could not look at the change feed's retention");
                return;
            }
        };
        if point.more {
            // The rest at the writer's next chance.
            pruning.next_at = now;
        }
        let conn = &self.conn;
        self.shared.changes.discard();
        self.busy.waiting_up_to(Duration::ZERO, || {
            if conn.control(BEGIN).is_err() {
                return;
            }
            match feed::prune_through(conn.conn(), point.through) {
                Ok(()) => {
                    if let Err(e) = conn.committing(|| conn.control(COMMIT)) {
                        tracing::debug!(error = %e, "could not commit the change feed's pruning");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "could not prune the change feed"),
            }
            conn.roll_back_open();
            conn.settle();
        });
    }

    /// Serves what is queued now, one group (or one write that runs alone), without waiting for more, and
    /// delivers the relays it issued; returns whether there was anything to serve (a turn on a pool's thread).
    pub(crate) fn serve_turn(&mut self) -> bool {
        let Some(first) = self.inbox.pop_now() else {
            return false;
        };
        self.serve(first);
        // Nothing here waits to deliver late relays: deliver them now (callers already passing them on get there
        // first).
        self.relays.deliver_all();
        true
    }

    /// Serves `first` and, if it is a grouped write, the grouped writes queued behind it; then runs the
    /// checkpoint that is due, if any, and looks for commits from outside if a look is due (a writer that is never
    /// idle looks too).
    pub(crate) fn serve(&mut self, first: WriteRequest) {
        let Some(first) = still_wanted(&self.shared, &mut self.answers, first) else {
            // Its timeout, if it timed out.
            self.relays.answer_all(&mut self.answers);
            return;
        };
        let started = Instant::now();
        self.turn_began_at = self.shared.commit_seq();
        let mut group = std::mem::take(&mut self.group);
        let alone = !first.kind.is_grouped();
        group.push(first);
        if !alone {
            // Whether each caller still waits is the one thing of its request on a line its caller wrote last (its
            // answer's channel, where its task left its waker): asked of all the taken requests in a row first, the
            // CPU fetches those lines together, and the asks that decide find them here.
            for request in self.inbox.taken() {
                std::hint::black_box(request.job.abandoned());
            }
            let max = self.config.write_batch_max;
            let linger = self.config.write_linger;
            fill(
                &mut self.inbox,
                &self.shared,
                &mut self.answers,
                max,
                linger,
                &mut group,
            );
        }
        let writes = group.len();
        let closures = group
            .iter()
            .any(|write| write.kind != WriteKind::GroupedStatement);
        let unmanaged = alone && group[0].kind == WriteKind::Unmanaged;
        match group.as_mut_slice() {
            // A single statement with nothing queued to share its commit runs as a transaction by itself.
            [lone] if alone || lone.kind == WriteKind::GroupedStatement => self.serve_alone(lone),
            _ => self.serve_group(&mut group),
        }
        if closures {
            // A closure may have replaced one of the connection's hooks through rusqlite's API (the busy handler
            // that waits for locks, with `busy_timeout`): put back before the next write.
            self.conn.rearm();
        }
        if unmanaged {
            // It could set anything (`synchronous`, the WAL's automatic checkpoint): where a commit may run now.
            self.inline_writes = writes_may_run_inline(self.conn.conn(), &self.config);
        }
        self.checkpoints.count_frames(&self.conn, &self.shared);
        self.answer(&mut group);
        self.group = group;
        self.checkpoints.after_commit(&self.conn, &self.shared);
        self.look_outside_if_due();
        self.turn_served(writes, started, Instant::now());
    }

    /// Notes a turn that served `writes` writes from `started` to `ended`: whether writes come together now
    /// ([`Writer::grouping`]).
    fn turn_served(&mut self, writes: usize, started: Instant, ended: Instant) {
        // Until the writer waits idle ([`Writer::idle`]) or is found idle over a few windows ([`Duty::idle`]), or
        // serving writes one by one (below): under a load that groups writes, some turns still find one write only.
        self.grouping |= writes >= GROUPED_AT;
        self.last_turn = writes;
        self.turn_writes = (self.turn_writes * 7 + writes * 16) / 8;
        self.duty.turn(started, ended);
        if self.duty.idle() || self.turn_writes < 2 * 16 {
            // Turns of several writes by chance, at a load that leaves the writer mostly idle — or busy with writes
            // that come one by one: a steady load of them, mostly run on their callers' threads, keeps it busy a
            // quarter of the time and more, and a connection kept between its turns would send them all to it.
            self.grouping = false;
        }
    }

    /// Runs a group of writes in one transaction; the outcomes wait in `self.outcomes`.
    ///
    /// While another connection holds the write lock, the group waits for it ([`write_lock`]) as long as its
    /// writes allow: each time the first of them gives up, the writes at their deadline are answered with it and
    /// those that waited `write_lock_wait` with [`Error::WriteLockHeld`], and the others wait on.
    fn serve_group(&mut self, group: &mut Vec<WriteRequest>) {
        let _span = tracing::debug_span!("quicklite.write_group", writes = group.len()).entered();
        record_waits(&self.shared.metrics, group);
        let since = Instant::now();
        let bound = self.config.write_lock_wait;
        while !group.is_empty() {
            let wait = write_lock::wait(group, since, bound, Instant::now());
            let (conn, shared, inbox, answers) =
                (&self.conn, &self.shared, &mut self.inbox, &mut self.answers);
            let (outcomes, max) = (&mut self.outcomes, self.config.write_batch_max);
            let began = self.busy.waiting_up_to(wait, || {
                group::commit_group(conn, shared, group, outcomes, |group| {
                    // Writes queued while the group ran join it: they share its commit, with no wait.
                    let joined = group.len();
                    fill(inbox, shared, answers, max, Duration::ZERO, group);
                    record_waits(&shared.metrics, &group[joined..]);
                })
            });
            if began.is_ok() {
                return;
            }
            // None of the group ran: `self.outcomes` is empty, and the writes that wait on stay in `group`.
            let waited = since.elapsed();
            let mut held = None;
            let before = group.len();
            for request in std::mem::take(group) {
                let Some(request) = still_wanted(&self.shared, &mut self.answers, request) else {
                    continue;
                };
                if write_lock::gives_up_at(&request, since, bound) <= Instant::now() {
                    let error = held.get_or_insert_with(|| write_lock::held(self.file(), waited));
                    let error = error.duplicate();
                    answer_without_running(&self.shared, &mut self.answers, request, error);
                } else {
                    group.push(request);
                }
            }
            // Those that gave up hear it now, not when the group ends.
            self.relays.answer_all(&mut self.answers);
            if group.len() == before {
                // SQLite answered `SQLITE_BUSY` without waiting (it does when waiting could deadlock): try again
                // in a millisecond, as the busy handler would.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// Runs one write alone; its outcome waits in `self.outcomes`.
    ///
    /// It waits for a write lock held by another connection as long as it allows ([`write_lock`]). One that did
    /// not run because the lock stayed held is answered with its deadline's timeout, or with
    /// [`Error::WriteLockHeld`]; a write on the connection in autocommit mode keeps its own error, as it may have
    /// committed before one of its statements met the lock.
    fn serve_alone(&mut self, request: &mut WriteRequest) {
        let span =
            tracing::debug_span!(parent: &request.span, "quicklite.write", kind = ?request.kind);
        let _span = span.enter();
        record_waits(&self.shared.metrics, std::slice::from_ref(request));
        let since = Instant::now();
        let wait = write_lock::gives_up_at(request, since, self.config.write_lock_wait)
            .saturating_duration_since(since);
        let mut outcome = self.busy.waiting_up_to(wait, || match request.kind {
            WriteKind::Held => held::run(&self.conn, &self.shared, request),
            _ => group::run_alone(&mut self.conn, &self.shared, request),
        });
        let lock_held = match request.kind {
            // Its `BEGIN IMMEDIATE` failed (the only `SQLITE_BUSY` a transaction of its own reports as such).
            WriteKind::Grouped | WriteKind::Transaction | WriteKind::Held => matches!(
                &outcome,
                Some(e @ Error::Sqlite(_)) if e.sqlite_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
            ),
            // One statement in autocommit mode: it failed as a whole, having changed nothing.
            WriteKind::GroupedStatement => request.job.failed_busy(),
            WriteKind::Unmanaged => false,
        };
        if lock_held {
            outcome = None;
            let error = write_lock::gave_up(request, self.file(), since.elapsed());
            request.job.fail_later(error);
        }
        self.outcomes.clear();
        self.outcomes.push(outcome);
    }

    /// Answers the writes just served, emptying `served`. Under [`Acknowledge::Replicated`](crate::Acknowledge),
    /// the answers of those that succeeded in a turn that committed wait for object storage instead
    /// ([`Gated::hold`](crate::gate::Gated::hold)); failures are answered now, as they committed nothing of their
    /// own to wait for.
    fn answer(&mut self, served: &mut Vec<WriteRequest>) {
        let metrics = &self.shared.metrics;
        metrics
            .writes
            .fetch_add(served.len() as u64, Ordering::Relaxed);
        let commit_seq = self.shared.commit_seq();
        let gate = self
            .shared
            .gate
            .as_ref()
            .filter(|_| commit_seq != self.turn_began_at);
        let mut held = Vec::new();
        let mut answers = std::mem::take(&mut self.answers);
        for (mut r, outcome) in served.drain(..).zip(self.outcomes.drain(..)) {
            if r.job.resolve(outcome) {
                metrics.write_errors.fetch_add(1, Ordering::Relaxed);
            } else if gate.is_some() {
                held.push(Held {
                    job: r.job,
                    deadline: r.deadline,
                    permit: r.permit,
                });
                continue;
            }
            answers.push((r.caller, r.job as Box<dyn Reply>));
        }
        if let Some(gate) = gate
            && !held.is_empty()
        {
            gate.hold(commit_seq, held);
        }
        self.relays.answer_all(&mut answers);
        // Empty again; its room serves the next group.
        self.answers = answers;
    }

    /// Lends the connection to `f`, a batch of reads ([`GuardedConnection::lend_read_only`]): a registry's
    /// database that is read rarely needs no reader connection of its own.
    pub(crate) fn lend_read_only<T>(&mut self, f: impl FnOnce(&GuardedConnection) -> T) -> T {
        self.conn.lend_read_only(f)
    }

    /// Ends the writer: rolls back anything open and closes the connection (see [`Close`]).
    pub(crate) fn shut_down(mut self, close: Close) {
        if let Some(seat) = &self.seat {
            // Whatever is at the seat, once the read on it (if any) ends.
            if let TakenBack::Conn(conn) = seat.take_back(&self.shared, None) {
                if self.conn.0.is_none() {
                    self.conn.0 = Some(conn);
                } else {
                    self.spare = Some(conn);
                }
            }
        }
        if let Some(Err(e)) = self.spare.take().map(GuardedConnection::close) {
            tracing::warn!(error = %e, "closing the writer's second connection failed");
        }
        // A checkpoint thread ends (its checkpoint, if one runs) and closes its connection first.
        self.checkpoints.stop_handing_off();
        self.conn.roll_back_open();
        if close == Close::ToReopen {
            // Likely to reopen soon: leave a short WAL for the next open instead of the checkpoint (and fsyncs)
            // SQLite runs when the last connection closes. The next open reads the whole WAL to rebuild its index,
            // so a long one is checkpointed now, once, rather than read again at every reopen.
            let frames = self.shared.metrics.wal_frames.load(Ordering::Relaxed);
            if self.checkpoints.managed()
                && frames < WAL_KEPT_AT_CLOSE
                && let Err(e) = self
                    .conn
                    .conn()
                    .set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            {
                tracing::debug!(error = %e, "could not skip the checkpoint at close");
            }
            match self.conn.0.take().map_or(Ok(()), GuardedConnection::close) {
                Ok(()) if frames >= WAL_KEPT_AT_CLOSE => {
                    // Checkpointed by SQLite as the last connection closed.
                    self.shared.metrics.wal_frames.store(0, Ordering::Relaxed);
                }
                Ok(()) => {}
                Err(e) => tracing::warn!(error = %e, "closing the writer connection failed"),
            }
            return;
        }
        // `PRAGMA optimize` before closing is what SQLite recommends for long-lived connections.
        if let Err(e) = self
            .conn
            .committing(|| self.conn.conn().execute_batch("PRAGMA optimize"))
        {
            tracing::debug!(error = %e, "PRAGMA optimize at close failed");
        }
        let wal = self
            .conn
            .conn()
            .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
            .map(|m| m.eq_ignore_ascii_case("wal"))
            .unwrap_or(false);
        if wal && self.checkpoints.managed() {
            // Fold the WAL back into the database so the file is complete on its own after close. (SQLite itself
            // checkpoints when the last connection closes, unless checkpoints are external.)
            self.truncate_wal();
        }
        if let Some(Err(e)) = self.conn.0.take().map(GuardedConnection::close) {
            tracing::warn!(error = %e, "closing the writer connection failed");
        }
    }
}

/// Adds queued grouped writes to `group`, up to `max` in all, leaving out those no longer wanted ([`still_wanted`]);
/// stops at a write that must run alone (left first in `inbox`). Waits up to `linger` for more writes to join; with
/// none, takes only what is queued now.
fn fill(
    inbox: &mut Inbox<WriteRequest>,
    shared: &Shared,
    answers: &mut Answers,
    max: usize,
    linger: Duration,
    group: &mut Vec<WriteRequest>,
) {
    let deadline = (!linger.is_zero()).then(|| Instant::now() + linger);
    while group.len() < max {
        match inbox.pop_now_up_to(max - group.len()) {
            Some(r) if r.kind.is_grouped() => group.extend(still_wanted(shared, answers, r)),
            Some(r) => {
                inbox.push_front(r);
                return;
            }
            None => match deadline {
                Some(d) if Instant::now() < d => {
                    std::thread::sleep((d - Instant::now()).min(Duration::from_micros(50)))
                }
                _ => break,
            },
        }
    }
}

/// `request`, unless its caller has stopped waiting (then it is not run, so not committed, only counted) or it is
/// past its deadline (then its answer, the timeout, goes to `answers`). A write that has started runs to its end
/// whatever its caller does.
fn still_wanted(
    shared: &Shared,
    answers: &mut Answers,
    request: WriteRequest,
) -> Option<WriteRequest> {
    if request.job.abandoned() {
        shared
            .metrics
            .abandoned_writes
            .fetch_add(1, Ordering::Relaxed);
        return None;
    }
    match request.deadline {
        Some(deadline) if deadline.passed(Instant::now()) => {
            let error = deadline.error(RequestKind::Write, false);
            answer_without_running(shared, answers, request, error);
            None
        }
        _ => Some(request),
    }
}

/// Puts the answer of `request`, which did not run, with `error`, in `answers`.
fn answer_without_running(
    shared: &Shared,
    answers: &mut Answers,
    request: WriteRequest,
    error: Error,
) {
    let metrics = &shared.metrics;
    let mut job = request.job;
    job.fail_later(error);
    metrics.writes.fetch_add(1, Ordering::Relaxed);
    metrics.write_errors.fetch_add(1, Ordering::Relaxed);
    answers.push((request.caller, job as Box<dyn Reply>));
}

/// Records how long each of `requests` waited in the queue.
fn record_waits(metrics: &Metrics, requests: &[WriteRequest]) {
    // Asked after every group for the writes that joined it, mostly none: the clock only when there are some.
    if requests.is_empty() {
        return;
    }
    let now = Instant::now();
    for r in requests {
        metrics
            .write_queue_wait_us
            .record_duration(now - r.enqueued);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::seat::Lent;

    /// A writer on a new database in `dir`, lending its connection at the seat it returns.
    fn lending_writer(dir: &std::path::Path) -> (Writer, Arc<WriterSeat>) {
        let path = dir.join("db");
        let config =
            Config::from_settings(crate::Database::builder(&path).into_settings()).unwrap();
        let shared = Arc::new(Shared::default());
        let (_tx, rx) = crate::queue::bounded(16);
        let mut writer = Writer::open(&path, &config, &shared, rx, true)
            .unwrap()
            .writer;
        let seat = Arc::new(WriterSeat::new());
        writer.lend_when_idle(seat.clone());
        (writer, seat)
    }

    #[test]
    fn writes_on_the_lent_connection_count_as_the_writers_time_in_turns() {
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, seat) = lending_writer(dir.path());
        writer.lend_to_reads();
        // Writes on callers' threads held the lent connection for 3 ms of the writer's wait (a write's start told,
        // not slept: the seat counts from it).
        let mut lent = seat.borrow().expect("lent, and free");
        let began = Instant::now() - Duration::from_millis(3);
        seat.write(&mut lent, began, |_: &mut Lent| ());
        drop(lent);
        writer.take_back();
        // A short turn then closes the window: the writer was busy, with writes it did not run itself. Before, the
        // window counted the turn alone, and group commit let go of writes that came as fast as they committed one
        // by one: they went back to their callers' threads, each committing alone, until the writer took them again.
        let at = Instant::now() + crate::engine::duty::WINDOW;
        writer.duty.turn(at, at + Duration::from_micros(10));
        assert!(writer.duty.busy(), "{:?}", writer.duty);
        writer.shut_down(Close::ForGood);
    }

    #[test]
    fn the_writer_keeps_its_connection_between_turns_only_while_its_turns_serve_writes_together() {
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, seat) = lending_writer(dir.path());
        // Busy all the time, with turns of many writes: writes come together, and the connection stays between
        // turns.
        let mut at = Instant::now();
        let turn = Duration::from_micros(100);
        for _ in 0..100 {
            writer.turn_served(30, at, at + turn);
            at += turn;
        }
        assert!(writer.grouping(), "turns of 30 writes, back to back");
        // A window of 3 ms with one turn in it: the writer, or the callers whose next writes it waits for, waited for
        // a CPU. Not idle: the connection stays.
        at += Duration::from_millis(3);
        writer.turn_served(30, at, at + turn);
        at += turn;
        assert!(!writer.duty.busy(), "{:?}", writer.duty);
        assert!(writer.grouping(), "one window with little in turns");
        writer.lend_to_reads();
        assert!(
            !seat.lent(),
            "lent between two turns of writes that come together"
        );
        // Still busy, but with turns of one write now and then one of several: writes come one by one, as a steady
        // load of them makes while most run on their callers' threads; a connection kept between turns would send
        // them all to the writer.
        for i in 0..100 {
            writer.turn_served(if i % 10 == 0 { GROUPED_AT } else { 1 }, at, at + turn);
            at += turn;
        }
        assert!(writer.duty.busy(), "{:?}", writer.duty);
        assert!(
            !writer.grouping && !writer.grouping(),
            "turns of one write, busy"
        );
        writer.lend_to_reads();
        assert!(seat.lent(), "kept between turns of writes one by one");
        writer.take_back();
        writer.shut_down(Close::ForGood);
    }

    #[test]
    fn a_write_waits_briefly_for_another_callers_write_on_the_lent_connection_and_never_for_a_read()
    {
        use std::sync::mpsc;
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, seat) = lending_writer(dir.path());
        writer.lend_to_reads();
        // Another caller's write holds the lent connection until told.
        let holds = |seat: Arc<WriterSeat>, write: bool| {
            let (started_tx, started_rx) = mpsc::channel();
            let (end_tx, end_rx) = mpsc::channel::<()>();
            let thread = std::thread::spawn(move || {
                let mut lent = seat.borrow().expect("lent, and free");
                if write {
                    seat.write(&mut lent, Instant::now(), |_: &mut Lent| {
                        started_tx.send(()).unwrap();
                        end_rx.recv().unwrap();
                    });
                } else {
                    started_tx.send(()).unwrap();
                    end_rx.recv().unwrap();
                }
            });
            started_rx.recv().unwrap();
            (end_tx, thread)
        };
        let (end, thread) = holds(seat.clone(), true);
        // Past its wait, it gives up: the write goes to the writer.
        let asked = Instant::now();
        assert!(seat.borrow_for_write(Duration::from_millis(2)).is_none());
        assert!(asked.elapsed() >= Duration::from_millis(2));
        // Within it, it takes the connection once the other write ends.
        let ending = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            end.send(()).unwrap();
        });
        let asked = Instant::now();
        let lent = seat.borrow_for_write(Duration::from_secs(10));
        assert!(lent.is_some(), "the other write ended within the wait");
        assert!(
            asked.elapsed() >= Duration::from_millis(15),
            "{:?}",
            asked.elapsed()
        );
        drop(lent);
        ending.join().unwrap();
        thread.join().unwrap();
        // A read on it may run long: no write waits for one.
        let (end, thread) = holds(seat.clone(), false);
        let asked = Instant::now();
        assert!(seat.borrow_for_write(Duration::from_secs(10)).is_none());
        assert!(asked.elapsed() < Duration::from_secs(5));
        end.send(()).unwrap();
        thread.join().unwrap();
        writer.take_back();
        writer.shut_down(Close::ForGood);
    }
}
