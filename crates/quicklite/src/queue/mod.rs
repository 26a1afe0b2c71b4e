//! The bounded request queues between callers and a database's threads.
//!
//! Many producers (callers on any thread) and a few consumers (one writer, a couple of readers). Consumers take
//! requests in runs — a reader takes several per lock, the writer a whole group — because at hundreds of thousands
//! of requests a second the queue itself becomes the contended spot: a lock-free queue that hands out one item per
//! atomic operation has consumers and producers fight over the same cache lines for every request, and its wake-up
//! machinery (`event-listener` in `async-channel`) costs as much again. Here a push is one short critical section,
//! a take of `n` requests is one, and sleeping consumers are counted under the lock so a push only signals when
//! somebody sleeps.
//!
//! Senders that find the queue full wait in line ([`Sender::send`]): room made while some wait is handed to the
//! longest waiting, under the same lock, as tokio's bounded channel hands out its permits in order.
//!
//! Closing follows `async-channel`: the queue closes when [`Sender::close`] is called, when the last sender or the
//! last receiver is dropped. Once closed, sends fail and receivers still get what was queued.
//!
//! # Layout
//!
//! The two ends ([`Sender`], [`Receiver`]) are here; `shared` holds the state they share and every operation on
//! it under the lock (the push, with the argument why no wake-up is lost); `line`, the senders waiting for room;
//! `spin`, how a consumer waits before it sleeps; `tests` and, in a loom build, `model`, their checks.

mod line;
mod shared;
mod spin;

use std::collections::VecDeque;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use crate::sync::Arc;
use crate::sync::atomic::{AtomicBool, Ordering};
use line::Turn;
use shared::QueueState;
use spin::Spin;

/// Creates a queue holding at most `capacity` requests (at least one).
pub(crate) fn bounded<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(QueueState::new(capacity));
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

/// Why [`Sender::try_send`] gave the request back.
#[derive(Debug)]
pub(crate) enum TrySendError<T> {
    /// The queue holds `capacity` requests, or the room left is set aside for senders that waited for it.
    Full(T),
    /// The queue is closed.
    Closed(T),
}

/// Why `Receiver::try_recv` found nothing.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TryRecvError {
    /// Nothing is queued now.
    Empty,
    /// Nothing is queued and the queue is closed.
    Closed,
}

/// What a waiting receive found.
pub(crate) enum Taken<T> {
    /// A request.
    Got(T),
    /// The queue is closed and empty.
    Closed,
    /// Nothing arrived (while spinning, or before the timeout).
    Empty,
}

/// The producing end; cloning it adds a sender.
pub(crate) struct Sender<T> {
    shared: Arc<QueueState<T>>,
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.close();
        }
    }
}

impl<T> Sender<T> {
    /// Queues `item` if there is room (room set aside for senders waiting in line is not).
    pub(crate) fn try_send(&self, item: T) -> Result<(), TrySendError<T>> {
        let shared = &*self.shared;
        let wake = {
            let mut queue = shared.lock();
            if queue.closed {
                return Err(TrySendError::Closed(item));
            }
            if !shared.has_room(&queue) {
                return Err(TrySendError::Full(item));
            }
            shared.push(&mut queue, item)
        };
        if wake {
            shared.consumers.notify_one();
        }
        Ok(())
    }

    /// Queues `item`, waiting for room; gives it back if the queue is closed (before or while waiting).
    ///
    /// First come, first served: a sender that finds the queue full joins a line, and room made while senders
    /// wait is set aside for the longest waiting, so neither a sender that comes later nor
    /// [`try_send`](Self::try_send) takes it first. A sender that gives up (its future dropped) leaves the line
    /// and passes room it was given to the next. Without waiting, a send costs what `try_send` does: one short
    /// critical section.
    pub(crate) async fn send(&self, item: T) -> Result<(), T> {
        let mut turn = Turn::new(&self.shared);
        let mut item = Some(item);
        std::future::poll_fn(|cx| turn.poll_send(&mut item, cx)).await
    }

    /// Closes the queue; returns whether this call closed it.
    pub(crate) fn close(&self) -> bool {
        self.shared.close()
    }

    /// Number of queued requests.
    pub(crate) fn len(&self) -> usize {
        self.shared.len.load(Ordering::SeqCst)
    }

    /// The most requests the queue holds.
    pub(crate) fn capacity(&self) -> usize {
        self.shared.capacity
    }
}

/// Marks a consumer as spinning while it exists; cleared before the consumer can lock the queue to sleep (why a
/// push then never leaves its request to a sleeping consumer unsignalled: [`QueueState::push`]).
struct Spinning<'a>(&'a AtomicBool);

impl Drop for Spinning<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// The consuming end; cloning it adds a receiver.
pub(crate) struct Receiver<T> {
    shared: Arc<QueueState<T>>,
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.shared.receivers.fetch_add(1, Ordering::Relaxed);
        Receiver {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        if self.shared.receivers.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.close();
        }
    }
}

/// A view of a queue's length alone: it neither sends nor takes, so it does not keep the queue open.
pub(crate) struct Length<T> {
    shared: Arc<QueueState<T>>,
}

impl<T> Length<T> {
    /// Number of queued requests.
    pub(crate) fn get(&self) -> usize {
        self.shared.len.load(Ordering::SeqCst)
    }
}

impl<T> Receiver<T> {
    /// A view of the queue's length, for a thread that only looks at it.
    pub(crate) fn length(&self) -> Length<T> {
        Length {
            shared: self.shared.clone(),
        }
    }

    /// Takes the oldest request, if any.
    #[cfg(test)]
    pub(crate) fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut one = VecDeque::new();
        match self.try_take(1, &mut one) {
            Ok(_) => Ok(one.pop_front().expect("one request was taken")),
            Err(e) => Err(e),
        }
    }

    /// Moves up to `max` of the oldest requests into `into`; returns how many (at least one).
    pub(crate) fn try_take(
        &self,
        max: usize,
        into: &mut VecDeque<T>,
    ) -> Result<usize, TryRecvError> {
        if self.shared.len.load(Ordering::SeqCst) == 0 {
            return Err(self.empty_error());
        }
        let mut queue = self.shared.lock();
        match self.shared.take(&mut queue, max, into) {
            0 if queue.closed => Err(TryRecvError::Closed),
            0 => Err(TryRecvError::Empty),
            n => Ok(n),
        }
    }

    /// Why nothing was taken: nothing is sent after the queue closes, so closed and then empty is for good.
    fn empty_error(&self) -> TryRecvError {
        if self.shared.closed.load(Ordering::SeqCst) && self.shared.len.load(Ordering::SeqCst) == 0
        {
            TryRecvError::Closed
        } else {
            TryRecvError::Empty
        }
    }

    /// Takes up to `max` requests, spinning while the queue is empty (crossbeam's backoff, then yielding the CPU
    /// until [`SPIN_FOR`](spin::SPIN_FOR) has passed); [`Taken::Empty`] if nothing came. At low load a caller sends
    /// its next request right after its answer: a consumer that slept in between would have to be woken (a system
    /// call for the sender, and a context switch) for every request.
    ///
    /// At low load (the last take found one request queued) one consumer spins at a time; the others look once
    /// and return, to sleep until a push finds nobody spinning: a second spinner would only race the first for
    /// the lock while taking a core from the threads that make the requests. Under load every consumer spins: a
    /// sleeping one would have to be woken for every burst of requests.
    pub(crate) fn spin_take(&self, max: usize, into: &mut VecDeque<T>) -> Taken<usize> {
        let look = |into: &mut VecDeque<T>| match self.try_take(max, into) {
            Ok(n) => Taken::Got(n),
            Err(TryRecvError::Closed) => Taken::Closed,
            Err(TryRecvError::Empty) => Taken::Empty,
        };
        let shared = &*self.shared;
        let first = shared
            .spinning
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok();
        if !first && shared.burst.load(Ordering::Relaxed) <= 1 {
            return look(into);
        }
        let _spinning = first.then(|| Spinning(&shared.spinning));
        let mut spin = Spin::new();
        loop {
            if first {
                shared.heartbeat.beat();
            }
            if shared.len.load(Ordering::Relaxed) > 0 {
                match look(into) {
                    Taken::Empty => {}
                    found => return found,
                }
            }
            if !spin.again() {
                return look(into);
            }
        }
    }

    /// Takes up to `max` requests, sleeping until at least one is queued or `timeout` (if any) has passed.
    pub(crate) fn take_timeout(
        &self,
        max: usize,
        into: &mut VecDeque<T>,
        timeout: Option<Duration>,
    ) -> Taken<usize> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let shared = &*self.shared;
        let mut queue = shared.lock();
        loop {
            match shared.take(&mut queue, max, into) {
                0 if queue.closed => return Taken::Closed,
                0 => {}
                n => return Taken::Got(n),
            }
            queue.sleeping += 1;
            queue = match deadline {
                None => shared
                    .consumers
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        queue.sleeping -= 1;
                        return Taken::Empty;
                    }
                    shared
                        .consumers
                        .wait_timeout(queue, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
            queue.sleeping -= 1;
        }
    }

    /// Takes the oldest request, sleeping until one is queued; `None` once the queue is closed and empty.
    #[cfg(test)]
    pub(crate) fn recv_blocking(&self) -> Option<T> {
        let mut one = VecDeque::new();
        match self.take_timeout(1, &mut one, None) {
            Taken::Got(_) => one.pop_front(),
            Taken::Closed | Taken::Empty => None,
        }
    }

    /// Whether the queue is closed (requests may still be queued).
    pub(crate) fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::SeqCst)
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of queued requests.
    pub(crate) fn len(&self) -> usize {
        self.shared.len.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests;

#[cfg(all(test, quicklite_loom))]
mod model;
