//! The queue's tests, aimed at the hard races: a push racing a consumer's spin-to-sleep, a sender given room that
//! gives up.

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
