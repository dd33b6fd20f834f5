//! What falls due when, served by one timer set for the earliest entry: the
//! waiting registry's wait timeouts and lock deadlines, the sessions'
//! renewals. Pure, so it is tested without a server; the shell arms the
//! timer (`server::timers`).
//!
//! An entry dropped before it falls due keeps the timer set for it: that
//! timer finds nothing due and the next is armed then. Parking and serving a
//! client, on every handoff, thus mostly create and stop no timer (each
//! costs some 1,500 to 3,000 server instructions).

use std::collections::btree_map::IntoValues;
use std::collections::BTreeMap;

/// An entry's key: when it falls due (Unix milliseconds, Redis's clock) and
/// a number that tells entries of the same millisecond apart.
pub type Slot = (i64, u64);

/// The agenda's timer: its id and when it fires.
pub type Timer = (u64, i64);

pub struct Agenda<T> {
    /// Earliest first.
    entries: BTreeMap<Slot, T>,
    /// Numbers entries.
    appointed: u64,
    /// Never fires after the first entry, maybe before (that entry was
    /// dropped since).
    timer: Option<Timer>,
}

impl<T> Default for Agenda<T> {
    fn default() -> Self {
        Agenda {
            entries: BTreeMap::new(),
            appointed: 0,
            timer: None,
        }
    }
}

impl<T> Agenda<T> {
    /// Puts `entry` on the agenda at `at`; the caller arms the timer.
    pub fn appoint(&mut self, at: i64, entry: T) -> Slot {
        self.appointed += 1;
        let slot = (at, self.appointed);
        self.entries.insert(slot, entry);
        slot
    }

    /// Takes the entry at `slot` off the agenda, if it is still there; its
    /// timer stays.
    #[inline]
    pub fn cancel(&mut self, slot: &Slot) -> Option<T> {
        self.entries.remove(slot)
    }

    /// Takes what fell due by `now` off the agenda, earliest first; the
    /// timer that fired is gone.
    pub fn take_due(&mut self, now: i64) -> IntoValues<Slot, T> {
        self.timer = None;
        let later = self.entries.split_off(&(now + 1, 0));
        std::mem::replace(&mut self.entries, later).into_values()
    }

    /// When the timer must fire, if a new one is needed: the first entry is
    /// earlier than the timer set (or none is set). Returns the timer to
    /// stop, if any, and the time.
    pub fn timer_needed(&self) -> Option<(Option<u64>, i64)> {
        let (&(first, _), _) = self.entries.first_key_value()?;
        match self.timer {
            Some((_, at)) if at <= first => None,
            timer => Some((timer.map(|(id, _)| id), first)),
        }
    }

    /// The timer armed for the first entry.
    pub fn set_timer(&mut self, timer: Timer) {
        self.timer = Some(timer);
    }

    /// The id of the timer set, if any: to stop when the agenda is dropped.
    pub fn timer(&self) -> Option<u64> {
        self.timer.map(|(id, _)| id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_agenda_needs_no_timer_and_has_nothing_due() {
        let mut a = Agenda::<u32>::default();
        assert_eq!(a.timer_needed(), None);
        assert_eq!(a.timer(), None);
        assert_eq!(a.take_due(i64::MAX - 1).count(), 0);
    }

    #[test]
    fn entries_fall_due_earliest_first_and_in_order_within_a_millisecond() {
        let mut a = Agenda::default();
        a.appoint(50, "c");
        a.appoint(10, "a");
        a.appoint(30, "b1");
        a.appoint(30, "b2");
        assert_eq!(a.take_due(9).count(), 0);
        assert_eq!(a.take_due(30).collect::<Vec<_>>(), vec!["a", "b1", "b2"]);
        assert_eq!(a.take_due(49).count(), 0);
        assert_eq!(a.take_due(50).collect::<Vec<_>>(), vec!["c"]);
        assert_eq!(a.timer_needed(), None);
    }

    #[test]
    fn a_cancelled_entry_never_falls_due() {
        let mut a = Agenda::default();
        let first = a.appoint(10, 1);
        a.appoint(10, 2);
        assert_eq!(a.cancel(&first), Some(1));
        assert_eq!(a.cancel(&first), None, "cancelled once");
        assert_eq!(a.timer_needed(), Some((None, 10)));
        assert_eq!(a.take_due(10).collect::<Vec<_>>(), vec![2]);
    }

    #[test]
    fn a_timer_is_replaced_only_by_an_earlier_entry() {
        let mut a = Agenda::default();
        a.appoint(100, 1);
        assert_eq!(a.timer_needed(), Some((None, 100)));
        a.set_timer((7, 100));
        assert_eq!(a.timer(), Some(7));
        assert_eq!(
            a.timer_needed(),
            None,
            "a timer for the first entry is kept"
        );
        a.appoint(200, 2);
        assert_eq!(a.timer_needed(), None, "a later entry needs no new timer");
        let early = a.appoint(40, 3);
        assert_eq!(a.timer_needed(), Some((Some(7), 40)), "the old one stops");
        a.set_timer((8, 40));
        // The entry the timer was set for leaves: the early timer is kept.
        a.cancel(&early);
        assert_eq!(a.timer_needed(), None);
        // A fired timer is gone: the next entry needs a new one.
        assert_eq!(a.take_due(40).count(), 0);
        assert_eq!(a.timer(), None);
        assert_eq!(a.timer_needed(), Some((None, 100)));
    }
}
