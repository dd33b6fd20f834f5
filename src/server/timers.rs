//! The one timer of an agenda (`engine::agenda`) that a thread-local
//! registry keeps: the waiting clients', the fair lines' looks and the
//! session renewals'.

use std::cell::RefCell;
use std::mem::size_of;
use std::thread::LocalKey;
use std::time::Duration;

use redis_module::Context;

use crate::engine::agenda::Agenda;

/// Makes the timer of the agenda `agenda(registry)` fire by its first entry,
/// calling `callback` with `data`. A timer set earlier, for an entry dropped
/// since, is kept: it finds nothing due and its callback arms the next.
pub fn arm_agenda<R, T, A, F, D>(
    ctx: &Context,
    registry: &'static LocalKey<RefCell<R>>,
    agenda: A,
    callback: F,
    data: D,
) where
    A: Fn(&mut R) -> &mut Agenda<T>,
    F: FnOnce(&Context, D),
    D: 'static,
{
    // The crate boxes the callback with the data, but its stop_timer takes
    // back a box of the data alone: the two agree only when both are
    // zero-sized (a function item and a unit struct), which then allocate
    // nothing either.
    const { assert!(size_of::<F>() == 0 && size_of::<D>() == 0) };
    let Some((stale, at)) = registry.with(|r| agenda(&mut r.borrow_mut()).timer_needed()) else {
        return;
    };
    if let Some(timer) = stale {
        // It may have fired already; then there is nothing to stop.
        let _ = ctx.stop_timer::<D>(timer);
    }
    let now = super::milliseconds();
    let delay = (at - now).max(0);
    let timer = ctx.create_timer(Duration::from_millis(delay as u64), callback, data);
    registry.with(|r| agenda(&mut r.borrow_mut()).set_timer((timer, now + delay)));
}
