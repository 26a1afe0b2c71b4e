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

/// A sender waiting for room in a full queue, twice, while a consumer takes one request at a time: whatever the
/// interleaving, every request gets in (a sender left waiting beside free room would be a lost wake-up, which the
/// model reports as a deadlock).
#[test]
fn model_a_sender_waiting_for_room_gets_in() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(1);
        tx.try_send(0).unwrap();
        let sender = loom::thread::spawn(move || {
            loom::future::block_on(async {
                tx.send(1).await?;
                tx.send(2).await
            })
        });
        let mut got = Vec::new();
        while let Some(i) = rx.recv_blocking() {
            got.push(i);
        }
        assert_eq!(sender.join().unwrap(), Ok(()));
        assert_eq!(got, [0, 1, 2]);
    });
}

/// A sender waiting for room while the queue closes: it gets its request back, whatever the interleaving.
#[test]
fn model_closing_releases_a_sender_waiting_for_room() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(1);
        tx.try_send(0).unwrap();
        let sender = {
            let tx = tx.clone();
            loom::thread::spawn(move || loom::future::block_on(tx.send(1)))
        };
        tx.close();
        assert_eq!(sender.join().unwrap(), Err(1));
        assert_eq!(rx.try_recv(), Ok(0));
    });
}
