//! A consumer's end of a request queue, with the requests it took and has not served yet.

use std::collections::VecDeque;
use std::time::Duration;

use crate::queue::{Receiver, Taken};

/// The requests a writer or reader takes from its queue in one go, waiting to be served.
///
/// Consumers take requests in runs (one lock for many), so a request met while filling a batch that cannot join it
/// (a write that must run alone, a read past the batch's limits) waits here to be served next.
pub(crate) struct Inbox<R> {
    rx: Receiver<R>,
    taken: VecDeque<R>,
    /// Most requests taken from the queue at once.
    take: usize,
}

impl<R> Inbox<R> {
    /// An inbox on `rx` that takes up to `take` requests at once.
    pub(crate) fn new(rx: Receiver<R>, take: usize) -> Inbox<R> {
        Inbox {
            rx,
            taken: VecDeque::with_capacity(take),
            take,
        }
    }

    /// The next request already taken, if any.
    pub(crate) fn pop_taken(&mut self) -> Option<R> {
        self.taken.pop_front()
    }

    /// The next request: one already taken, else one taken from the queue now (without waiting).
    pub(crate) fn pop_now(&mut self) -> Option<R> {
        if self.taken.is_empty() {
            let _ = self.rx.try_take(self.take, &mut self.taken);
        }
        self.taken.pop_front()
    }

    /// The next request, taking up to `max` from the queue now if none is taken (without waiting).
    pub(crate) fn pop_now_up_to(&mut self, max: usize) -> Option<R> {
        if self.taken.is_empty() {
            let _ = self.rx.try_take(max.max(1), &mut self.taken);
        }
        self.taken.pop_front()
    }

    /// The requests already taken, not served yet, oldest first.
    pub(crate) fn taken(&self) -> impl Iterator<Item = &R> {
        self.taken.iter()
    }

    /// Puts `request` back, to be served first.
    pub(crate) fn push_front(&mut self, request: R) {
        self.taken.push_front(request);
    }

    /// Takes what is queued now, without waiting; returns whether anything is taken.
    pub(crate) fn take_now(&mut self) -> bool {
        if self.taken.is_empty() {
            let _ = self.rx.try_take(self.take, &mut self.taken);
        }
        !self.taken.is_empty()
    }

    /// Spins briefly for requests ([`Receiver::spin_take`]).
    pub(crate) fn spin(&mut self) -> Taken<usize> {
        self.rx.spin_take(self.take, &mut self.taken)
    }

    /// Sleeps until requests are queued, or `timeout` (if any) has passed ([`Receiver::take_timeout`]).
    pub(crate) fn wait(&mut self, timeout: Option<Duration>) -> Taken<usize> {
        self.rx.take_timeout(self.take, &mut self.taken, timeout)
    }

    /// Whether requests are taken or queued.
    pub(crate) fn has_work(&self) -> bool {
        !self.taken.is_empty() || !self.rx.is_empty()
    }

    /// The requests taken and not served, for whoever serves this queue next.
    pub(crate) fn take_unserved(&mut self) -> VecDeque<R> {
        std::mem::take(&mut self.taken)
    }

    /// Serves `requests` (taken by an earlier consumer that stopped) before anything queued.
    pub(crate) fn serve_first(&mut self, requests: VecDeque<R>) {
        for r in requests.into_iter().rev() {
            self.taken.push_front(r);
        }
    }
}
