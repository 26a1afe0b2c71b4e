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

mod spin;

use std::collections::VecDeque;
use std::sync::PoisonError;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::{Arc, Condvar, Mutex, MutexGuard};
use spin::{Heartbeat, Spin};

/// Creates a queue holding at most `capacity` requests (at least one).
pub(crate) fn bounded<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(QueueState {
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
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

struct QueueState<T> {
    queue: Mutex<Queue<T>>,
    /// Number of queued requests, kept equal to `queue.items.len()` under the lock: read without it by spinning
    /// consumers (a load, not a lock, so spinning does not slow producers down) and for metrics.
    len: AtomicUsize,
    /// Equal to `queue.closed`, readable without the lock (a consumer that found nothing asks whether it ever will).
    closed: AtomicBool,
    /// Whether a consumer is spinning for the next request ([`Receiver::spin_take`]): one at a time, and a push
    /// wakes a sleeping consumer only when none spins (the spinning one takes it sooner than a woken one could).
    spinning: AtomicBool,
    /// When the spinning consumer last looked: a push wakes a sleeping consumer if it has not looked for a while.
    heartbeat: Heartbeat,
    /// Requests queued when a consumer last took some: how busy the queue is, for [`Receiver::spin_take`].
    burst: AtomicUsize,
    capacity: usize,
    /// Where consumers sleep; signalled by a push when `queue.sleeping > 0`, and by closing.
    consumers: Condvar,
    senders: AtomicUsize,
    receivers: AtomicUsize,
}

struct Queue<T> {
    items: VecDeque<T>,
    closed: bool,
    /// Consumers asleep on `QueueState::consumers`.
    sleeping: usize,
    /// Senders waiting for room, longest waiting first, by ticket ([`Sender::send`]).
    line: VecDeque<InLine>,
    /// Room set aside for the first `granted` senders of `line`, woken and not yet come for it: a sender new to the
    /// queue finds it taken. `items.len() + granted` never exceeds the capacity, and senders wait beyond the
    /// first `granted` only while it equals the capacity.
    granted: usize,
    /// The ticket of the next sender to join `line`: tickets grow along the line.
    next_ticket: u64,
}

/// A sender waiting in line for room.
struct InLine {
    ticket: u64,
    /// Wakes the sender when it is granted room, or when the queue closes.
    waker: Waker,
}

impl<T> QueueState<T> {
    fn lock(&self) -> MutexGuard<'_, Queue<T>> {
        // Nothing panics while holding the lock; a poisoned lock still guards a consistent queue.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn close(&self) -> bool {
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
    fn has_room(&self, queue: &Queue<T>) -> bool {
        queue.items.len() + queue.granted < self.capacity
    }

    /// Queues `item` (there is room); returns whether to wake a sleeping consumer, once the lock is released.
    fn push(&self, queue: &mut Queue<T>, item: T) -> bool {
        queue.items.push_back(item);
        self.len.store(queue.items.len(), Ordering::SeqCst);
        // A consumer that stops spinning clears the flag before it locks the queue to look a last time and
        // sleep, so either it finds this request then or this push sees the flag clear.
        queue.sleeping > 0 && (!self.spinning.load(Ordering::SeqCst) || self.heartbeat.stalled())
    }

    /// Sets free room aside for senders in line that have none yet, longest waiting first, and wakes them.
    fn grant(&self, queue: &mut Queue<T>) {
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
    fn take(
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
        let mut turn = Turn {
            shared: &self.shared,
            ticket: None,
        };
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

/// A sender's turn in the line for room, while it has one; leaving it when dropped (the sender's future dropped)
/// passes on room set aside for it.
struct Turn<'a, T> {
    shared: &'a QueueState<T>,
    /// Its ticket in `Queue::line`, once it joined.
    ticket: Option<u64>,
}

impl<T> Turn<'_, T> {
    /// Queues `item` if there is room for this sender: any room on its first try, then room set aside for it.
    fn poll_send(&mut self, item: &mut Option<T>, cx: &mut Context<'_>) -> Poll<Result<(), T>> {
        let shared = self.shared;
        let take_item = |item: &mut Option<T>| item.take().expect("polled after it finished");
        let wake = {
            let mut queue = shared.lock();
            if queue.closed {
                // Closing emptied the line.
                self.ticket = None;
                return Poll::Ready(Err(take_item(item)));
            }
            match self.ticket {
                None if !shared.has_room(&queue) => {
                    let ticket = queue.next_ticket;
                    queue.next_ticket += 1;
                    queue.line.push_back(InLine {
                        ticket,
                        waker: cx.waker().clone(),
                    });
                    self.ticket = Some(ticket);
                    return Poll::Pending;
                }
                None => {}
                Some(ticket) => {
                    let at = index_of(&queue, ticket);
                    if at >= queue.granted {
                        let waker = &mut queue.line[at].waker;
                        if !waker.will_wake(cx.waker()) {
                            *waker = cx.waker().clone();
                        }
                        return Poll::Pending;
                    }
                    queue.line.remove(at);
                    queue.granted -= 1;
                    self.ticket = None;
                }
            }
            shared.push(&mut queue, take_item(item))
        };
        if wake {
            shared.consumers.notify_one();
        }
        Poll::Ready(Ok(()))
    }
}

impl<T> Drop for Turn<'_, T> {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket else { return };
        let mut queue = self.shared.lock();
        if queue.closed {
            return;
        }
        let at = index_of(&queue, ticket);
        queue.line.remove(at);
        if at < queue.granted {
            queue.granted -= 1;
            self.shared.grant(&mut queue);
        }
    }
}

/// The index in the line of the sender holding `ticket` (it is there: only it and closing take it out).
fn index_of<T>(queue: &Queue<T>, ticket: u64) -> usize {
    queue
        .line
        .binary_search_by_key(&ticket, |sender| sender.ticket)
        .expect("a sender stays in the line until it leaves")
}

/// Marks a consumer as spinning while it exists; cleared before the consumer can lock the queue to sleep.
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
mod tests {
    use std::future::Future;
    use std::task::Context;

    use super::*;

    /// A waker that records that it was woken.
    #[derive(Default)]
    struct Woken(std::sync::atomic::AtomicBool);

    impl std::task::Wake for Woken {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_request_pushed_while_consumers_stop_spinning_is_never_stranded() {
        // Two consumers that spin, then sleep, as readers do; one request at a time, pushed after a pause of
        // 0–100 µs, so pushes land while a consumer spins, while it gives up and while it sleeps. A lost wake-up
        // leaves a request queued with both consumers asleep.
        let (tx, rx) = bounded::<u32>(8);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let (rx, done) = (rx.clone(), done_tx.clone());
                std::thread::spawn(move || {
                    let mut got = VecDeque::new();
                    loop {
                        let mut spun = rx.spin_take(1, &mut got);
                        if matches!(spun, Taken::Empty) {
                            spun = rx.take_timeout(1, &mut got, None);
                        }
                        if matches!(spun, Taken::Closed) {
                            return;
                        }
                        for item in got.drain(..) {
                            done.send(item).unwrap();
                        }
                    }
                })
            })
            .collect();
        drop(rx);
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for i in 0..3_000 {
            tx.try_send(i).unwrap();
            let back = done_rx
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("request {i} stayed queued"));
            assert_eq!(back, i);
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let until = Instant::now() + Duration::from_micros(state % 100);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        drop(tx);
        for consumer in consumers {
            consumer.join().unwrap();
        }
    }

    #[test]
    fn first_in_first_out_in_runs() {
        let (tx, rx) = bounded(8);
        for i in 0..5 {
            tx.try_send(i).unwrap();
        }
        let mut got = VecDeque::new();
        assert_eq!(rx.try_take(3, &mut got), Ok(3));
        assert_eq!(rx.try_recv(), Ok(3));
        assert_eq!(rx.try_take(10, &mut got), Ok(1));
        assert_eq!(got, [0, 1, 2, 4]);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        assert!(rx.is_empty());
    }

    #[test]
    fn full_queue_refuses_then_takes_again() {
        let (tx, rx) = bounded(2);
        tx.try_send(1).unwrap();
        tx.try_send(2).unwrap();
        assert!(matches!(tx.try_send(3), Err(TrySendError::Full(3))));
        assert_eq!(tx.len(), 2);
        assert_eq!(rx.try_recv(), Ok(1));
        tx.try_send(3).unwrap();
        assert_eq!(tx.capacity(), 2);
    }

    #[test]
    fn closed_queue_refuses_sends_but_drains() {
        let (tx, rx) = bounded(4);
        tx.try_send(1).unwrap();
        assert!(tx.close());
        assert!(!tx.close(), "closes once");
        assert!(matches!(tx.try_send(2), Err(TrySendError::Closed(2))));
        assert_eq!(rx.recv_blocking(), Some(1));
        assert_eq!(rx.recv_blocking(), None);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
    }

    #[test]
    fn last_sender_dropped_closes() {
        let (tx, rx) = bounded::<u8>(4);
        let second = tx.clone();
        drop(tx);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        drop(second);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
    }

    #[test]
    fn last_receiver_dropped_closes() {
        let (tx, rx) = bounded::<u8>(4);
        let second = rx.clone();
        drop(rx);
        tx.try_send(1).unwrap();
        drop(second);
        assert!(matches!(tx.try_send(2), Err(TrySendError::Closed(2))));
    }

    #[test]
    fn timeout_with_nothing_queued_is_empty() {
        let (_tx, rx) = bounded::<u8>(4);
        let mut got = VecDeque::new();
        assert!(matches!(
            rx.take_timeout(4, &mut got, Some(Duration::from_millis(1))),
            Taken::Empty
        ));
        assert!(matches!(rx.spin_take(4, &mut got), Taken::Empty));
    }

    #[test]
    fn sleeping_consumer_wakes_for_a_push_from_another_thread() {
        let (tx, rx) = bounded(4);
        let consumer = std::thread::spawn(move || rx.recv_blocking());
        tx.try_send(7).unwrap();
        assert_eq!(consumer.join().unwrap(), Some(7));
    }

    #[test]
    #[cfg(not(quicklite_loom))]
    fn a_push_wakes_a_sleeping_consumer_when_the_spinning_one_has_stopped_looking() {
        use super::spin::STALLED_AFTER;

        let (tx, rx) = bounded(4);
        let (woke_tx, woke) = std::sync::mpsc::channel();
        {
            let rx = rx.clone();
            std::thread::spawn(move || {
                let mut got = VecDeque::new();
                if let Taken::Got(_) = rx.take_timeout(1, &mut got, Some(Duration::from_secs(60))) {
                    woke_tx.send(got.pop_front()).unwrap();
                }
            });
        }
        let asleep_by = Instant::now() + Duration::from_secs(10);
        while rx.shared.lock().sleeping == 0 {
            assert!(
                Instant::now() < asleep_by,
                "the consumer never went to sleep"
            );
            std::thread::yield_now();
        }
        // A consumer becomes the spinner and looks once, then is not scheduled again for a while (as one
        // that yielded its CPU while every CPU is busy). The sleep is that while: at least as long as asked.
        rx.shared.spinning.store(true, Ordering::SeqCst);
        rx.shared.heartbeat.beat();
        std::thread::sleep(STALLED_AFTER * 2);
        assert!(rx.shared.heartbeat.stalled());

        tx.try_send(7).unwrap();
        let item = woke
            .recv_timeout(Duration::from_secs(10))
            .expect("the sleeping consumer was left asleep");
        assert_eq!(item, Some(7));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiting_senders_all_get_in_as_room_is_made() {
        let (tx, rx) = bounded(2);
        let mut senders = Vec::new();
        for i in 0..50 {
            let tx = tx.clone();
            senders.push(tokio::spawn(async move { tx.send(i).await }));
        }
        let consumer = std::thread::spawn(move || {
            let mut got = Vec::new();
            while let Some(i) = rx.recv_blocking() {
                got.push(i);
            }
            got
        });
        for s in senders {
            s.await.unwrap().unwrap();
        }
        drop(tx);
        let mut got = consumer.join().unwrap();
        got.sort_unstable();
        assert_eq!(got, (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn closing_releases_waiting_senders() {
        let (tx, rx) = bounded(1);
        tx.try_send(0).unwrap();
        let woken = std::sync::Arc::new(Woken::default());
        let waker = std::task::Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        let mut waiting = std::pin::pin!(tx.send(1));
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        tx.close();
        assert!(woken.0.load(Ordering::SeqCst), "closing wakes it");
        assert_eq!(
            waiting.as_mut().poll(&mut cx),
            std::task::Poll::Ready(Err(1))
        );
        assert_eq!(rx.try_recv(), Ok(0));
    }

    #[test]
    fn a_sender_that_waited_for_room_gets_in_before_one_that_came_after() {
        let (tx, rx) = bounded(1);
        tx.try_send(0).unwrap();
        let woken = std::sync::Arc::new(Woken::default());
        let waker = std::task::Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        let mut waited = std::pin::pin!(tx.send(1));
        assert!(waited.as_mut().poll(&mut cx).is_pending());
        // Room for one appears while a sender new to the queue comes: the room is the waiting sender's.
        assert_eq!(rx.try_recv(), Ok(0));
        assert!(woken.0.load(Ordering::SeqCst), "the waiting sender is told");
        let mut came_after = std::pin::pin!(tx.send(2));
        assert!(came_after.as_mut().poll(&mut cx).is_pending());
        assert!(matches!(tx.try_send(3), Err(TrySendError::Full(3))));
        assert!(waited.as_mut().poll(&mut cx).is_ready());
        assert_eq!(rx.try_recv(), Ok(1));
        assert!(came_after.as_mut().poll(&mut cx).is_ready());
        assert_eq!(rx.try_recv(), Ok(2));
    }

    #[test]
    fn room_given_to_a_sender_that_gave_up_goes_to_the_next() {
        let (tx, rx) = bounded(1);
        tx.try_send(0).unwrap();
        let second_woken = std::sync::Arc::new(Woken::default());
        let second_waker = std::task::Waker::from(second_woken.clone());
        let mut first = Box::pin(tx.send(1));
        let mut second = Box::pin(tx.send(2));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(first.as_mut().poll(&mut cx).is_pending());
        assert!(
            second
                .as_mut()
                .poll(&mut Context::from_waker(&second_waker))
                .is_pending()
        );
        // Room for one: the first waiting sender is told, and gives up before using it.
        assert_eq!(rx.try_recv(), Ok(0));
        assert!(
            !second_woken.0.load(Ordering::SeqCst),
            "the room is the first's"
        );
        drop(first);
        assert!(second_woken.0.load(Ordering::SeqCst), "the second is told");
        assert!(matches!(tx.try_send(3), Err(TrySendError::Full(3))));
        assert!(
            second.as_mut().poll(&mut cx).is_ready(),
            "the second sender got the room"
        );
        assert_eq!(rx.try_recv(), Ok(2));
    }
}

#[cfg(all(test, quicklite_loom))]
mod model;
