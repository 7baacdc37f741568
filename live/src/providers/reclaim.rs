//! Freeing what an update leaves behind off the update path: [`drop_later`].
//!
//! An update of a 100,000-provider list leaves large values to free: the pushed list (a
//! source's 100,000 URL strings are 100,000 frees) and the state the swap replaced (its
//! snapshot holds a reference to every provider: 100,000 reference counts decremented, each
//! a cache miss, and its routers' indexes). Freed on the applying thread they made up most
//! of an update's time although nothing waits for them: the new state is already serving.
//! They are handed to one thread of the process (`routechain-live-drop`, started at the
//! first large value) that drops them in order as they come.
//!
//! A replaced state is handed over, not kept until the next update: a live chain holds one
//! state, not two (with 500 services that is 500 states less), and the drop is usually
//! this thread's (a call that still holds the state frees it when it lets go, as before).

use std::sync::OnceLock;
use std::sync::mpsc::{Sender, channel};

/// A value to drop.
type Garbage = Box<dyn Send>;

/// Drops `value` on the drop thread, or here when that thread cannot be started.
pub(crate) fn drop_later<T: Send + 'static>(value: T) {
    static DROPPER: OnceLock<Option<Sender<Garbage>>> = OnceLock::new();
    let dropper = DROPPER.get_or_init(|| {
        let (tx, rx) = channel::<Garbage>();
        std::thread::Builder::new()
            .name("routechain-live-drop".into())
            .spawn(move || {
                while let Ok(garbage) = rx.recv() {
                    drop(garbage);
                }
            })
            .ok()
            .map(|_| tx)
    });
    let value: Garbage = Box::new(value);
    match dropper {
        Some(tx) => {
            // The thread never stops while the process runs; were it gone, the value comes
            // back in the error and is dropped here.
            if let Err(back) = tx.send(value) {
                drop(back);
            }
        }
        None => drop(value),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn a_value_handed_over_is_dropped_soon() {
        let value = Arc::new(vec![1u8; 1 << 20]);
        let weak = Arc::downgrade(&value);
        super::drop_later(value);
        let start = Instant::now();
        while weak.upgrade().is_some() {
            assert!(start.elapsed() < Duration::from_secs(10), "never dropped");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
