//! The state a queue's senders and receivers share: the requests and the line of senders waiting for room, under
//! one lock, with the atomics that let consumers look without taking it. Every operation on it — a push, a take,
//! room granted to the line, closing — is one short critical section.

use std::collections::VecDeque;
use std::sync::PoisonError;
use std::task::Waker;

use super::spin::Heartbeat;
use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::{Condvar, Mutex, MutexGuard};

/// What a queue's senders and receivers share.
pub(super) struct QueueState<T> {
    pub(super) queue: Mutex<Queue<T>>,
    /// Number of queued requests, kept equal to `queue.items.len()` under the lock: read without it by spinning
    /// consumers (a load, not a lock, so spinning does not slow producers down) and for metrics.
    pub(super) len: AtomicUsize,
    /// Equal to `queue.closed`, readable without the lock (a consumer that found nothing asks whether it ever will).
    pub(super) closed: AtomicBool,
    /// Whether a consumer is spinning for the next request ([`Receiver::spin_take`](super::Receiver::spin_take)):
    /// one at a time, and a push wakes a sleeping consumer only when none spins (the spinning one takes it sooner
    /// than a woken one could).
    pub(super) spinning: AtomicBool,
    /// When the spinning consumer last looked: a push wakes a sleeping consumer if it has not looked for a while.
    pub(super) heartbeat: Heartbeat,
    /// Requests queued when a consumer last took some: how busy the queue is, for
    /// [`Receiver::spin_take`](super::Receiver::spin_take).
    pub(super) burst: AtomicUsize,
    pub(super) capacity: usize,
    /// Where consumers sleep; signalled by a push when `queue.sleeping > 0`, and by closing.
    pub(super) consumers: Condvar,
    pub(super) senders: AtomicUsize,
    pub(super) receivers: AtomicUsize,
}

/// What the lock guards.
pub(super) struct Queue<T> {
    pub(super) items: VecDeque<T>,
    pub(super) closed: bool,
    /// Consumers asleep on `QueueState::consumers`.
    pub(super) sleeping: usize,
    /// Senders waiting for room, longest waiting first, by ticket ([`Sender::send`](super::Sender::send)).
    pub(super) line: VecDeque<InLine>,
    /// Room set aside for the first `granted` senders of `line`, woken and not yet come for it: a sender new to the
    /// queue finds it taken. `items.len() + granted` never exceeds the capacity, and senders wait beyond the
    /// first `granted` only while it equals the capacity.
    pub(super) granted: usize,
    /// The ticket of the next sender to join `line`: tickets grow along the line.
    pub(super) next_ticket: u64,
}

/// A sender waiting in line for room.
pub(super) struct InLine {
    pub(super) ticket: u64,
    /// Wakes the sender when it is granted room, or when the queue closes.
    pub(super) waker: Waker,
}

impl<T> QueueState<T> {
    /// An empty, open queue holding at most `capacity` requests (at least one), with one sender and one receiver.
    pub(super) fn new(capacity: usize) -> QueueState<T> {
        QueueState {
            queue: Mutex::new(Queue {
                items: VecDeque::new(),
                closed: false,
                sleeping: 0,
                line: VecDeque::new(),
                granted: 0,
                next_ticket: 0,
            }),
            len: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            spinning: AtomicBool::new(false),
            heartbeat: Heartbeat::new(),
            burst: AtomicUsize::new(0),
            capacity: capacity.max(1),
            consumers: Condvar::new(),
            senders: AtomicUsize::new(1),
            receivers: AtomicUsize::new(1),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Queue<T>> {
        // Nothing panics while holding the lock; a poisoned lock still guards a consistent queue.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn close(&self) -> bool {
        let line = {
            let mut queue = self.lock();
            if std::mem::replace(&mut queue.closed, true) {
                return false;
            }
            self.closed.store(true, Ordering::SeqCst);
            // Senders in line find the queue closed, and the line gone.
            queue.granted = 0;
            std::mem::take(&mut queue.line)
        };
        self.consumers.notify_all();
        for sender in line {
            sender.waker.wake();
        }
        true
    }

    /// Whether a request may be queued now: room that is not set aside for a sender in line.
    pub(super) fn has_room(&self, queue: &Queue<T>) -> bool {
        queue.items.len() + queue.granted < self.capacity
    }

    /// Queues `item` (there is room); returns whether to wake a sleeping consumer, once the lock is released.
    pub(super) fn push(&self, queue: &mut Queue<T>, item: T) -> bool {
        queue.items.push_back(item);
        self.len.store(queue.items.len(), Ordering::SeqCst);
        // A consumer that stops spinning clears the flag before it locks the queue to look a last time and
        // sleep, so either it finds this request then or this push sees the flag clear.
        queue.sleeping > 0 && (!self.spinning.load(Ordering::SeqCst) || self.heartbeat.stalled())
    }

    /// Sets free room aside for senders in line that have none yet, longest waiting first, and wakes them.
    pub(super) fn grant(&self, queue: &mut Queue<T>) {
        let free = self
            .capacity
            .saturating_sub(queue.items.len() + queue.granted);
        let ungranted = queue.line.len() - queue.granted;
        for _ in 0..free.min(ungranted) {
            queue.line[queue.granted].waker.wake_by_ref();
            queue.granted += 1;
        }
    }

    /// Moves up to `max` requests from the queue into `into`; returns how many. Grants the room made to senders in
    /// line.
    pub(super) fn take(
        &self,
        queue: &mut MutexGuard<'_, Queue<T>>,
        max: usize,
        into: &mut VecDeque<T>,
    ) -> usize {
        let n = max.min(queue.items.len());
        self.burst.store(queue.items.len(), Ordering::Relaxed);
        into.extend(queue.items.drain(..n));
        self.len.store(queue.items.len(), Ordering::SeqCst);
        if queue.line.len() > queue.granted {
            self.grant(queue);
        }
        n
    }
}
