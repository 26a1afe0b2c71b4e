//! The think time of a transaction held across `.await` (`held-tx`): an awaited pause that ends when it asked to, as
//! a call to another service ends when its answer arrives.
//!
//! `tokio::time::sleep` would not do: tokio's timer rounds a sleep up to its next millisecond tick, so an awaited
//! 1 ms takes 1–2 ms while a blocking `std::thread::sleep` of the closure form takes about 1.06 ms, and the two forms
//! would be compared on different thinks. The pause is instead a blocking sleep on tokio's blocking pool that wakes
//! the awaiting task when it ends — the way an answer read by another thread wakes it — so every form's think blocks
//! some thread for the same time, and only where it blocks differs.

use std::time::Duration;

/// Awaits `think` (nothing at all for zero): a `std::thread::sleep` on tokio's blocking pool, the calling task woken
/// when it ends. Needs a tokio runtime.
pub async fn await_think(think: Duration) {
    if think.is_zero() {
        return;
    }
    // The sleep cannot panic; were the pool shut down, the runtime is ending and the think with it.
    let _ = tokio::task::spawn_blocking(move || std::thread::sleep(think)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_think_takes_at_least_its_time_and_none_takes_nothing() {
        let started = std::time::Instant::now();
        await_think(Duration::from_micros(300)).await;
        assert!(started.elapsed() >= Duration::from_micros(300));
        await_think(Duration::ZERO).await;
    }
}
