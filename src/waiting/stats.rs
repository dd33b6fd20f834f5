//! How long recent waits lasted, for `INFO rwlock` (docs/design.md,
//! contract §14.6): the last `KEPT` waits that ended (served, timed out,
//! aborted or failed as a deadlock's victim), and their percentiles. Pure.

use std::collections::VecDeque;

/// How many recent waits the percentiles are over.
pub const KEPT: usize = 1024;

/// The last waits' lengths in ms, oldest first.
#[derive(Debug, Default)]
pub struct Waits {
    lengths: VecDeque<i64>,
}

/// The 50th and 99th percentiles and the longest of the waits kept, in ms
/// (all 0 when none ended yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Percentiles {
    pub p50: i64,
    pub p99: i64,
    pub max: i64,
}

impl Waits {
    /// A wait of `ms` ended; the oldest kept goes past `KEPT`.
    pub fn record(&mut self, ms: i64) {
        if self.lengths.len() == KEPT {
            self.lengths.pop_front();
        }
        self.lengths.push_back(ms.max(0));
    }

    /// Nearest-rank percentiles of the waits kept.
    pub fn percentiles(&self) -> Percentiles {
        let mut sorted: Vec<i64> = self.lengths.iter().copied().collect();
        if sorted.is_empty() {
            return Percentiles::default();
        }
        sorted.sort_unstable();
        let rank = |p: usize| sorted[(sorted.len() * p).div_ceil(100).max(1) - 1];
        Percentiles {
            p50: rank(50),
            p99: rank(99),
            max: sorted[sorted.len() - 1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_waits_read_as_zero() {
        assert_eq!(Waits::default().percentiles(), Percentiles::default());
    }

    #[test]
    fn nearest_rank_percentiles() {
        let mut w = Waits::default();
        for ms in (1..=100).rev() {
            w.record(ms);
        }
        let p = w.percentiles();
        assert_eq!((p.p50, p.p99, p.max), (50, 99, 100));
        let mut one = Waits::default();
        one.record(7);
        assert_eq!(
            one.percentiles(),
            Percentiles {
                p50: 7,
                p99: 7,
                max: 7
            }
        );
    }

    #[test]
    fn only_the_last_waits_are_kept() {
        let mut w = Waits::default();
        w.record(1_000_000);
        for _ in 0..KEPT {
            w.record(3);
        }
        assert_eq!(w.percentiles().max, 3, "the long wait left the window");
        w.record(-5);
        assert_eq!(w.percentiles().p50, 3, "a clock step back counts as 0");
    }
}
