//! The line of senders waiting for room: first come, first served. A sender that finds the queue full takes a
//! ticket and joins the line (`Queue::line`, under the queue's lock); room made while senders wait is set aside for
//! the longest waiting by the take that made it ([`QueueState::grant`]), so that neither a sender that comes later
//! nor a `try_send` takes it first. A sender that gives up leaves the line and passes room it was given to the next.

use std::task::{Context, Poll};

use super::shared::{InLine, Queue, QueueState};

/// A sender's turn in the line for room, while it has one; leaving it when dropped (the sender's future dropped)
/// passes on room set aside for it.
pub(super) struct Turn<'a, T> {
    shared: &'a QueueState<T>,
    /// Its ticket in `Queue::line`, once it joined.
    ticket: Option<u64>,
}

impl<'a, T> Turn<'a, T> {
    /// A sender's turn, before it has joined the line.
    pub(super) fn new(shared: &'a QueueState<T>) -> Self {
        Turn {
            shared,
            ticket: None,
        }
    }

    /// Queues `item` if there is room for this sender: any room on its first try, then room set aside for it.
    pub(super) fn poll_send(
        &mut self,
        item: &mut Option<T>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), T>> {
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
