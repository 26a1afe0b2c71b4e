//! Whether the caller of the read running on this thread still waits for it: SQLite's progress handler asks
//! ([`caller_gone`]) and interrupts a read nobody waits for.

use std::cell::Cell;

use tokio::sync::oneshot;

use crate::reply::Answer;

/// A reply channel, type-erased, and how to ask it whether its caller is still waiting.
type WatchedReply = (*const (), unsafe fn(*const ()) -> bool);

thread_local! {
    /// The reply channel of the read running on this thread, if any: SQLite's progress handler asks it
    /// ([`caller_gone`]).
    static WATCHED: Cell<Option<WatchedReply>> = const { Cell::new(None) };
}

/// Whether the caller of the read running on this thread has stopped waiting for it (false when no read runs).
pub(crate) fn caller_gone() -> bool {
    WATCHED.with(|watched| {
        // SAFETY: `Watch` sets the pointer to a reply channel that outlives it and clears it when dropped, on this
        // thread; the function was made for the channel's type.
        watched
            .get()
            .is_some_and(|(reply, closed)| unsafe { closed(reply) })
    })
}

/// Whether the channel behind `reply`, a `oneshot::Sender<Answer<T>>`, has lost its receiver.
///
/// # Safety
/// `reply` must point to a live `oneshot::Sender<Answer<T>>`.
unsafe fn reply_closed<T>(reply: *const ()) -> bool {
    // SAFETY: the caller's promise.
    unsafe { (*reply.cast::<oneshot::Sender<Answer<T>>>()).is_closed() }
}

/// While it lives, [`caller_gone`] on this thread watches one reply channel, which outlives it.
pub(super) struct Watch<'a>(std::marker::PhantomData<&'a ()>);

impl<'a> Watch<'a> {
    pub(super) fn set<T>(reply: &'a oneshot::Sender<Answer<T>>) -> Watch<'a> {
        let reply: *const oneshot::Sender<Answer<T>> = reply;
        WATCHED.with(|watched| watched.set(Some((reply.cast(), reply_closed::<T>))));
        Watch(std::marker::PhantomData)
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        WATCHED.with(|watched| watched.set(None));
    }
}
