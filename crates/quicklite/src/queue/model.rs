//! Model checks of the queue under loom: every interleaving of consumers going to sleep, producers pushing and
//! the queue closing.

use std::collections::VecDeque;

use super::*;

/// A consumer that spins, then sleeps, while a producer pushes and closes: whatever the interleaving, the
/// consumer gets the request and then hears that the queue is closed (a lost wake-up would leave it asleep,
/// which the model reports as a deadlock).
#[test]
fn model_a_push_racing_a_consumer_going_to_sleep_wakes_it() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(4);
        let consumer = loom::thread::spawn(move || {
            let mut got = VecDeque::new();
            loop {
                let taken = match rx.spin_take(4, &mut got) {
                    Taken::Empty => rx.take_timeout(4, &mut got, None),
                    other => other,
                };
                if let Taken::Closed = taken {
                    return got;
                }
            }
        });
        tx.try_send(7).unwrap();
        tx.close();
        assert_eq!(consumer.join().unwrap(), [7]);
    });
}

/// Two consumers asleep or spinning, one request, then closing: exactly one gets the request and both end.
#[test]
fn model_two_consumers_share_one_request_and_both_hear_the_close() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(4);
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let rx = rx.clone();
                loom::thread::spawn(move || {
                    let mut got = VecDeque::new();
                    while !matches!(rx.take_timeout(1, &mut got, None), Taken::Closed) {}
                    got.len()
                })
            })
            .collect();
        drop(rx);
        tx.try_send(1).unwrap();
        tx.close();
        let taken: usize = consumers.into_iter().map(|c| c.join().unwrap()).sum();
        assert_eq!(taken, 1);
    });
}

/// A request sent while the queue closes is either taken or refused, never lost.
#[test]
fn model_a_request_racing_the_close_is_taken_or_refused() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(4);
        let closer = {
            let tx = tx.clone();
            loom::thread::spawn(move || {
                tx.close();
            })
        };
        let sent = tx.try_send(3).is_ok();
        closer.join().unwrap();
        let mut got = VecDeque::new();
        let taken = rx.try_take(4, &mut got).is_ok();
        assert_eq!(sent, taken, "sent {sent}, taken {taken}");
    });
}
