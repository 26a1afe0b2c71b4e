//! One thread for the whole process that ends the snapshots idle connections keep, and closes connections nobody
//! has used for a while, for every database's [`Inline`] set.
//!
//! A kept snapshot holds the WAL back: a `RESTART` or `TRUNCATE` checkpoint waits for it to end, and a `PASSIVE`
//! one cannot copy past it. A thread that stops reading (its task went on to other work, or the service went
//! idle) would keep its snapshot for ever; the janitor ends it once it has stood unused for [`PERIOD`] (by the
//! coarse clock, [`Coarse`](crate::util::Coarse): give or take its tick), looking every [`PERIOD`]. While no
//! snapshot is open anywhere it dozes, until a snapshot begins or a connection is due to close; while no set keeps
//! a connection it sleeps.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use super::Inline;
use super::seats::Kept;
use crate::util::{lock, spawn};

/// How often the janitor looks while snapshots are open, and how long one may stand unused before it is ended.
pub(crate) const PERIOD: Duration = Duration::from_millis(10);

/// How long a connection may stand unused before it is closed (and, in a registry, its permit of the budget given
/// to another database).
pub(crate) const CLOSE_AFTER: Duration = Duration::from_secs(30);

/// Set while the janitor dozes: the next snapshot to begin wakes it.
static DOZING: AtomicBool = AtomicBool::new(false);

/// The sets the janitor tends.
struct Janitor {
    tended: Mutex<Vec<Weak<Inline>>>,
    wake: Condvar,
}

fn janitor() -> &'static Janitor {
    static JANITOR: OnceLock<Janitor> = OnceLock::new();
    JANITOR.get_or_init(|| {
        if let Err(e) = spawn("quicklite-janitor", run) {
            // Snapshots then end at the next read, at a commit or when the database closes, but not when idle.
            tracing::error!(error = %e, "no janitor thread: idle snapshots will not be ended");
        }
        Janitor {
            tended: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        }
    })
}

/// Has the janitor tend `set` from now on.
pub(super) fn tend(set: Weak<Inline>) {
    let janitor = janitor();
    let mut tended = lock(&janitor.tended);
    tended.push(set);
    DOZING.store(false, Ordering::SeqCst);
    janitor.wake.notify_one();
}

/// A snapshot began: wakes the janitor if it dozes.
pub(super) fn snapshot_begun() {
    if DOZING.load(Ordering::SeqCst) && DOZING.swap(false, Ordering::SeqCst) {
        let janitor = janitor();
        // Taken so that the janitor, which sets `DOZING` under this lock before it waits, is waiting by now.
        let _tended = lock(&janitor.tended);
        janitor.wake.notify_one();
    }
}

fn wait(janitor: &Janitor, tended: MutexGuard<'_, Vec<Weak<Inline>>>, timeout: Option<Duration>) {
    let _tended = match timeout {
        Some(timeout) => {
            janitor
                .wake
                .wait_timeout(tended, timeout)
                .unwrap_or_else(PoisonError::into_inner)
                .0
        }
        None => janitor
            .wake
            .wait(tended)
            .unwrap_or_else(PoisonError::into_inner),
    };
}

fn run() {
    let janitor = janitor();
    let mut kept = Kept::default();
    loop {
        if kept.snapshots() {
            std::thread::sleep(PERIOD);
        } else {
            let tended = lock(&janitor.tended);
            DOZING.store(true, Ordering::SeqCst);
            // A snapshot that began before `DOZING` was set did not wake us: look once more.
            if !sweep_all(janitor, &tended).snapshots() {
                wait(
                    janitor,
                    tended,
                    (!kept.is_empty()).then_some(CLOSE_AFTER / 4),
                );
            }
            DOZING.store(false, Ordering::SeqCst);
        }
        let sets: Vec<Weak<Inline>> = std::mem::take(&mut *lock(&janitor.tended));
        kept = Kept::default();
        let mut remaining = Vec::with_capacity(sets.len());
        for weak in sets {
            let Some(set) = weak.upgrade() else { continue };
            let left = set.sweep(Instant::now(), PERIOD, CLOSE_AFTER);
            if left.is_empty() && !keep_tending(&set) {
                continue;
            }
            kept = kept.or(left);
            remaining.push(weak);
        }
        lock(&janitor.tended).extend(remaining);
    }
}

/// What the tended sets keep, without changing anything.
fn sweep_all(_janitor: &Janitor, tended: &[Weak<Inline>]) -> Kept {
    tended
        .iter()
        .filter_map(Weak::upgrade)
        .fold(Kept::default(), |kept, set| kept.or(set.kept()))
}

/// Stops tending `set`, which keeps nothing, unless a connection appeared meanwhile (whose read found the set still
/// tended and did not ask again); returns whether to keep tending it.
fn keep_tending(set: &Inline) -> bool {
    set.tended.store(false, Ordering::SeqCst);
    !set.kept().is_empty() && !set.tended.swap(true, Ordering::SeqCst)
}
