//! A permit-expirable semaphore's set of permits taken on a live server
//! (contract §17): read on the open key through the low-level sorted-set
//! API (an acquisition's look for expired permits is one range start, not a
//! command), written as the fair lock's line is, with the event, the key's
//! signal and the replicated command each script's write has.

use super::line::integer;
use super::RedisStore;
use crate::effects::notify::Event;
use crate::engine::permit::Permits;
use crate::engine::store::{Line, LineKind};

impl Permits for RedisStore<'_> {
    fn zrange_by_score(&mut self, key: &[u8], max: i64, limit: Option<usize>) -> Vec<Vec<u8>> {
        let handle = self.line_read(key);
        let mut found = Vec::new();
        let limit = limit.unwrap_or(usize::MAX);
        if limit > 0 {
            handle.scan_zset_range(0.0, max as f64, |member, _| {
                found.push(member);
                found.len() < limit
            });
        }
        found
    }

    fn zrem_all(&mut self, key: &[u8], members: &[Vec<u8>]) -> i64 {
        let (_, handle, name) = self.write(key);
        let removed = members
            .iter()
            .filter(|m| handle.zset_remove(self.member(m).ptr()))
            .count();
        if removed > 0 {
            self.line_written(handle, name, Event::Zrem, |s| {
                s.replication().zrem_all(s.ctx, key, members);
            });
        }
        removed as i64
    }

    fn zcount_from_zero(&mut self, key: &[u8]) -> i64 {
        if self.line_kind(key) == LineKind::Missing {
            return 0;
        }
        let count = self.call(false, "ZCOUNT", &[key, b"0", b"+inf"], integer, None);
        count.map_or(0, |n| n as i64)
    }

    fn zfirst_score(&mut self, key: &[u8], from_zero: bool) -> Option<i64> {
        let handle = self.line_read(key);
        let mut first = None;
        let min = if from_zero { 0.0 } else { f64::NEG_INFINITY };
        handle.scan_zset_range(min, f64::INFINITY, |_, score| {
            first = Some(score as i64);
            false
        });
        first
    }
}
