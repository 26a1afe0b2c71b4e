//! Model checks of a pooled database's closing and reopening under loom: every interleaving of a write task, a
//! closer (housekeeping's idle close, or another database evicting this one to open at the cap) and callers
//! sending requests.
//!
//! The protocol is the real one: [`Lifecycle`] with its claims, writer slot, open flag and hand-over, on the real
//! request queue and [`Inbox`], their locks and atomics loom's. The host stands for the registry's actor
//! (`impl Host for Arc<Actor>` in `actor/turns.rs`) without SQLite: its writer serves one request per turn from an
//! inbox that takes two at a time, so that a turn leaves a request taken and not served — as a group that ends
//! before a write that must run alone does; its run queue is a list that the model's threads take tasks from, as
//! pool threads do; a read task stands for `Actor::run_read` without its connections. A database opening at the cap
//! calls the closers as `evict::close_one` does: `try_close`, then `try_close_queued`.

use std::collections::VecDeque;

use super::*;
use crate::inbox::Inbox;
use crate::permits::Permits;
use crate::queue::{self, Receiver, Sender};
use crate::sync::atomic::AtomicUsize;
use crate::sync::{Arc, Mutex};

/// A task of the database on the run queue, or set aside until there is room to open it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    Write,
    Read,
}

/// The writer while the database is open: its inbox on the write queue.
struct Writer {
    inbox: Inbox<u32>,
}

impl HandsOver for Writer {
    type Request = u32;

    fn take_unserved(&mut self) -> VecDeque<u32> {
        self.inbox.take_unserved()
    }

    fn serve_first(&mut self, requests: VecDeque<u32>) {
        self.inbox.serve_first(requests);
    }
}

/// One database with its queues, and the pool as far as this database sees it.
struct Db {
    life: Lifecycle<Writer>,
    /// The callers' end of the write queue.
    writes: Sender<u32>,
    write_rx: Receiver<u32>,
    /// Reads queued (a read task serves them all).
    reads: AtomicUsize,
    /// The pool's run queue.
    run: Mutex<VecDeque<Task>>,
    /// Tasks set aside until there is room to open the database.
    waiting: Mutex<VecDeque<Task>>,
    /// The cap on open databases: one.
    permits: Permits,
    /// Write requests served, in order.
    served: Mutex<Vec<u32>>,
    /// Reads served.
    reads_served: AtomicUsize,
    /// Writers opened and shut down.
    opens: AtomicUsize,
    closes: AtomicUsize,
}

impl Host for Db {
    type Writer = Writer;

    fn writes_wait(&self) -> bool {
        !self.write_rx.is_empty()
    }

    fn reads_wait(&self) -> bool {
        self.reads.load(Ordering::SeqCst) > 0
    }

    fn read_tasks(&self) -> usize {
        1
    }

    fn push_write(&self) {
        self.run.lock().unwrap().push_back(Task::Write);
    }

    fn push_read(&self) {
        self.run.lock().unwrap().push_back(Task::Read);
    }

    fn defer_write(&self) {
        self.waiting.lock().unwrap().push_back(Task::Write);
    }

    fn claims_released(&self) {}

    fn reserve_open(&self) -> bool {
        self.permits.try_take()
    }

    fn open_writer(&self) -> Result<Writer> {
        self.opens.fetch_add(1, Ordering::SeqCst);
        Ok(Writer {
            inbox: Inbox::new(self.write_rx.clone(), 2),
        })
    }

    fn opened(&self) {}

    fn found_open(&self) {}

    fn serve_turn(&self, writer: &mut Writer) -> bool {
        if let Some(request) = writer.inbox.pop_now() {
            self.served.lock().unwrap().push(request);
        }
        writer.inbox.has_work()
    }

    fn fail_waiting(&self, error: &crate::Error) {
        panic!("the model's writer always opens: {error}");
    }

    fn close_readers(&self) {}

    fn shut_down(&self, writer: Writer, _: Close) {
        drop(writer);
        self.closes.fetch_add(1, Ordering::SeqCst);
    }

    fn closed(&self) {
        self.permits.give_back(1);
        if let Some(task) = self.waiting.lock().unwrap().pop_front() {
            self.run.lock().unwrap().push_back(task);
        }
    }
}

impl Db {
    /// A closed database with nothing queued.
    fn new() -> Arc<Db> {
        let (writes, write_rx) = queue::bounded(4);
        Arc::new(Db {
            life: Lifecycle::new(),
            writes,
            write_rx,
            reads: AtomicUsize::new(0),
            run: Mutex::new(VecDeque::new()),
            waiting: Mutex::new(VecDeque::new()),
            permits: Permits::new(1),
            served: Mutex::new(Vec::new()),
            reads_served: AtomicUsize::new(0),
            opens: AtomicUsize::new(0),
            closes: AtomicUsize::new(0),
        })
    }

    /// A caller's write: queued, then a write task scheduled unless one is (as `Database::write` and
    /// `Actor::wake_writer`).
    fn write(&self, request: u32) {
        self.writes.try_send(request).unwrap();
        self.life.wake_writer(self);
    }

    /// A caller's read.
    fn read(&self) {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.life.wake_reader(self);
    }

    /// A read task, as `Actor::run_read`: opens the database if it is closed, serves the reads queued, and gives its
    /// claim back or goes to the back of the run queue.
    fn read_turn(&self) {
        match self.life.open_for_reads(self) {
            Ok(Opened::Yes) => {}
            Ok(Opened::Deferred) => {
                self.waiting.lock().unwrap().push_back(Task::Read);
                return;
            }
            Err(e) => panic!("the model's writer always opens: {e}"),
        }
        let n = self.reads.swap(0, Ordering::SeqCst);
        self.reads_served.fetch_add(n, Ordering::SeqCst);
        if self.reads_wait() {
            self.push_read();
        } else {
            self.life.release_read(self);
        }
    }

    /// A pool thread: runs the tasks on the run queue until it finds it empty.
    fn run_tasks(&self) {
        loop {
            let task = self.run.lock().unwrap().pop_front();
            match task {
                Some(Task::Write) => self.life.write_turn(self),
                Some(Task::Read) => self.read_turn(),
                None => return,
            }
        }
    }

    /// A database opening at the cap making room, as `evict::close_one`: closes this one if it is idle, else if
    /// its write task waits in the run queue. Returns whether it closed it.
    fn evict(&self) -> bool {
        self.life.try_close(self) || self.life.try_close_queued(self)
    }

    /// Write requests served so far.
    fn served(&self) -> Vec<u32> {
        self.served.lock().unwrap().clone()
    }

    /// Checks, with every thread of the model ended, that no request is stranded and no claim leaked: a request
    /// queued, handed over or taken by the writer has a write task scheduled to serve it (queued, or set aside
    /// until there is room); a claim is held exactly while a task of its kind is scheduled; the database is open
    /// exactly while its writer is in its slot.
    fn assert_settled(&self) {
        let tasks: Vec<Task> = {
            let run = self.run.lock().unwrap();
            let waiting = self.waiting.lock().unwrap();
            run.iter().chain(waiting.iter()).copied().collect()
        };
        let write_tasks = tasks.iter().filter(|t| **t == Task::Write).count();
        let read_tasks = tasks.len() - write_tasks;
        assert!(write_tasks <= 1, "two write tasks: {tasks:?}");
        assert_eq!(
            self.life.claims.write_scheduled(),
            write_tasks == 1,
            "the write claim is held exactly while a write task is scheduled: {tasks:?}"
        );
        let slot = self.life.slot().lock();
        let taken = slot.as_ref().is_some_and(|w| w.inbox.has_work());
        let writes = taken || !self.write_rx.is_empty() || self.life.unserved() > 0;
        assert!(
            !writes || write_tasks == 1,
            "writes stranded with no task scheduled"
        );
        assert!(
            !self.reads_wait() || read_tasks > 0,
            "reads stranded with no task scheduled"
        );
        if tasks.is_empty() {
            assert!(
                self.life.claims.idle(),
                "a claim held with no task scheduled"
            );
        }
        assert_eq!(
            self.life.is_open(),
            slot.is_some(),
            "open exactly while the writer is in its slot"
        );
        assert_eq!(
            self.permits.taken(),
            usize::from(slot.is_some()),
            "a permit under the cap is held exactly while the database is open"
        );
    }

    /// Runs every task left, on this thread, until none is scheduled; then nothing waits and every claim is free.
    fn drain(&self) {
        loop {
            self.run_tasks();
            let waiting = self.waiting.lock().unwrap().pop_front();
            match waiting {
                Some(task) => self.run.lock().unwrap().push_back(task),
                None => break,
            }
        }
        assert!(self.write_rx.is_empty() && self.life.unserved() == 0);
        assert!(!self.reads_wait());
        assert!(self.life.claims.idle(), "every claim given back");
    }
}

/// A database whose writer took two requests and served one, its write task queued for the other, evicted by a
/// database opening at the cap while a pool thread runs that task: whatever the interleaving, the request taken
/// before the close is served exactly once, after the first (the next writer serves it before anything queued).
#[test]
fn model_a_request_taken_before_a_close_is_served_once_after_the_reopen() {
    loom::model(|| {
        let db = Db::new();
        db.write(1);
        db.write(2);
        // The first turn opens the database, takes both requests, serves the first and queues the task again.
        let task = db.run.lock().unwrap().pop_front();
        assert_eq!(task, Some(Task::Write));
        db.life.write_turn(&*db);
        assert_eq!(db.served(), [1]);
        assert!(db.life.is_open() && db.write_rx.is_empty());
        let pool_thread = {
            let db = db.clone();
            loom::thread::spawn(move || db.run_tasks())
        };
        let evicted = db.evict();
        pool_thread.join().unwrap();
        db.assert_settled();
        db.drain();
        assert_eq!(db.served(), [1, 2], "evicted: {evicted}");
        assert_eq!(
            db.opens.load(Ordering::SeqCst),
            db.closes.load(Ordering::SeqCst) + usize::from(db.life.is_open()),
            "a close after the last task ends the model closed"
        );
    });
}

/// The same hand-over, reopened by a read task: a read arrives after the database was closed with its write task
/// queued, and its task may open the database before the write task's turn; the request taken before the close is
/// still served exactly once, by the write task.
#[test]
fn model_a_request_handed_over_survives_a_reopen_by_a_read_task() {
    loom::model(|| {
        let db = Db::new();
        db.write(1);
        db.write(2);
        let task = db.run.lock().unwrap().pop_front();
        assert_eq!(task, Some(Task::Write));
        db.life.write_turn(&*db);
        assert!(db.evict(), "the write task is queued and not running");
        assert_eq!(db.life.unserved(), 1);
        let reader = {
            let db = db.clone();
            loom::thread::spawn(move || {
                db.read();
                db.run_tasks();
            })
        };
        db.run_tasks();
        reader.join().unwrap();
        db.assert_settled();
        db.drain();
        assert_eq!(db.served(), [1, 2]);
        assert_eq!(db.reads_served.load(Ordering::SeqCst), 1);
    });
}

/// An open, idle database evicted while a caller sends a write and a pool thread runs what is scheduled: whatever
/// the interleaving, the database ends open and serving the request, or closed with the request queued and a write
/// task scheduled to reopen it — never with the request queued and nothing scheduled.
#[test]
fn model_an_eviction_racing_a_new_request_leaves_it_served_or_scheduled() {
    loom::model(|| {
        let db = Db::new();
        db.write(1);
        db.run_tasks();
        assert!(db.life.is_idle());
        let caller = {
            let db = db.clone();
            loom::thread::spawn(move || db.write(2))
        };
        let pool_thread = {
            let db = db.clone();
            loom::thread::spawn(move || db.run_tasks())
        };
        let evicted = db.evict();
        caller.join().unwrap();
        pool_thread.join().unwrap();
        db.assert_settled();
        if !db.served().contains(&2) {
            assert!(
                db.life.claims.write_scheduled(),
                "evicted: {evicted}; the request waits for a task"
            );
        }
        db.drain();
        assert_eq!(db.served(), [1, 2]);
    });
}

/// A closer that gives up changes nothing: an open database with a read task queued, which a caller writes to
/// while a closer tries to close it. The read task's claim keeps the closer out; it leaves the database open with
/// the same writer, and gives back the write claim it held for a moment — looking at the queue again for the write
/// that found the claim taken meanwhile, which would be stranded otherwise.
///
/// The read arrives before the closer starts. A read arriving while a closer has reads shut is scheduled by the
/// closer's look at the read queue after it reopens them, or by its own attempt after that: one of the two sees the
/// other by the total order of `SeqCst` operations (the closer's swap of the read count, then its load of the
/// queue's length; the caller's store of the length, then its load of the count), which loom weakens to
/// acquire/release (its README, "Unsupported features") and would report as a read stranded. A write has no such
/// gap: the caller and the closer both swap the write claim, and the later swap sees what the earlier one's thread
/// did before it.
#[test]
fn model_a_closer_that_gives_up_changes_nothing() {
    loom::model(|| {
        let db = Db::new();
        db.write(1);
        db.run_tasks();
        db.read();
        let caller = {
            let db = db.clone();
            loom::thread::spawn(move || db.write(2))
        };
        let closed = db.evict();
        caller.join().unwrap();
        assert!(!closed, "a read task is queued");
        assert!(db.life.is_open(), "still open");
        assert_eq!(db.opens.load(Ordering::SeqCst), 1, "the same writer");
        assert_eq!(
            db.closes.load(Ordering::SeqCst),
            0,
            "the writer still in its slot"
        );
        assert_eq!(db.life.unserved(), 0, "nothing handed over");
        db.assert_settled();
        db.drain();
        assert_eq!(db.served(), [1, 2]);
        assert_eq!(db.reads_served.load(Ordering::SeqCst), 1);
    });
}
