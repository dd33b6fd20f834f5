//! The one command table: each command's name, entry point, flags, key spec
//! and docs, from which the commands are registered, `COMMAND DOCS` and
//! `COMMAND INFO` are given to Redis (`docs`), and the README's command list
//! is checked (a test below). The handlers live beside it, one file per lock
//! kind; the kinds added last (the semaphore, the latch) keep their rows in
//! their own file too, and `table` gathers them.

/// Wraps a handler in the C entry point Redis calls. Done here rather than
/// by the crate's command table, whose entry points copy and retain every
/// argument first. Defined before the kinds' files, which use it too.
macro_rules! entry {
    ($handler:path) => {{
        unsafe extern "C" fn entry(
            ctx: *mut ::redis_module::raw::RedisModuleCtx,
            argv: *mut *mut ::redis_module::raw::RedisModuleString,
            argc: ::std::os::raw::c_int,
        ) -> ::std::os::raw::c_int {
            // SAFETY: Redis passes the command's own context and `argc`
            // arguments, alive until the handler returns.
            unsafe {
                $crate::server::run_handler(
                    ctx,
                    $crate::server::ArgString::slice(argv, argc),
                    $handler,
                )
            }
        }
        Some(entry as unsafe extern "C" fn(_, _, _) -> _)
    }};
}

mod apply;
pub mod docs;
pub mod fair;
pub mod inspect;
pub mod latch;
pub mod lock;
pub mod multi;
pub mod permit;
pub mod rwlock;
pub mod semaphore;

use redis_module::Context;

use self::docs::{
    acquire_request_option, acquisition, arg, block, fenced, flag, hash_release_args,
    held_acquire_option, held_release_option, lease, lease_option, lock, mode_choice, multi_args,
    no_reentry, optional, owner, request_option, session, wait_option, ArgDoc, ArgKind, Command,
    ACQUIRE_KEY, FAIR_KEYS, FORCE_KEY, INFO_KEY, LOCK_KEYS, MULTI_KEYS, RELEASE_KEY, RWLOCK_KEYS,
    V1, V2, V3, V4,
};
use crate::server;

/// The fair lock's commands (`RFairLock`).
fn fair_commands() -> Vec<Command> {
    vec![
        Command {
            name: c"fairlock.acquire",
            entry: entry!(fair::acquire),
            flags: c"write deny-oom blocking",
            summary: c"Takes a Redisson fair lock (RFairLock) or joins its line. Replies nil when held, else the script's ttl (NOQUEUE: 1); BLOCK waits in the line on the server",
            complexity: c"O(W) where W is the number of waiters in the lock's line",
            since: V4,
            arity: -4,
            key: ACQUIRE_KEY,
            key_notes: FAIR_KEYS,
            args: vec![
                lock(),
                owner(),
                lease(),
                wait_option(),
                flag(
                    c"noqueue",
                    c"NOQUEUE",
                    c"tryLock() without wait: never join the line; reply nil or 1",
                ),
                no_reentry(),
                block(),
                acquire_request_option(),
                held_acquire_option(),
            ],
        },
        Command {
            name: c"fairlock.cancel",
            entry: entry!(fair::cancel),
            flags: c"write",
            summary: c"Leaves a fair lock's line as a waiter that gives up. Replies 1 when it was in the line, else 0",
            complexity: c"O(W) where W is the number of waiters in the lock's line",
            since: V4,
            arity: -3,
            key: RELEASE_KEY,
            key_notes: FAIR_KEYS,
            args: vec![lock(), owner(), wait_option()],
        },
        Command {
            name: c"fairlock.unlock",
            entry: entry!(fair::unlock),
            flags: c"write",
            summary: c"Releases one hold of a fair lock and tells the head waiter. Replies nil (not held, or no lock), 0 (still held) or 1 (released)",
            complexity: c"O(S) where S is the number of stale waiters purged from the line's head",
            since: V4,
            arity: -3,
            key: RELEASE_KEY,
            key_notes: FAIR_KEYS,
            args: hash_release_args(),
        },
        Command {
            name: c"fairlock.forceunlock",
            entry: entry!(fair::force_unlock),
            flags: c"write",
            summary: c"Deletes a fair lock whoever holds it and tells the head waiter. Replies 1 if deleted, else 0",
            complexity: c"O(S) where S is the number of stale waiters purged from the line's head",
            since: V4,
            arity: 2,
            key: FORCE_KEY,
            key_notes: FAIR_KEYS,
            args: vec![lock()],
        },
        Command {
            name: c"fairlock.info",
            entry: entry!(fair::info),
            flags: c"readonly",
            summary: c"Shows a fair lock's holder and count, its TTL and its line in order with each waiter's deadline",
            complexity: c"O(W) where W is the number of waiters in the lock's line",
            since: V4,
            arity: 2,
            key: INFO_KEY,
            key_notes: FAIR_KEYS,
            args: vec![lock()],
        },
    ]
}

/// Every command.
pub fn table() -> Vec<Command> {
    let mut table = vec![
        acquisition(
            c"rwlock.read",
            V1,
            entry!(rwlock::read),
            c"Takes a read hold of a Redisson read-write lock. Replies nil when held, else the lock's PTTL",
            RWLOCK_KEYS,
            vec![],
        ),
        acquisition(
            c"rwlock.write",
            V1,
            entry!(rwlock::write),
            c"Takes the write hold of a Redisson read-write lock. Replies nil when held, else the lock's PTTL",
            c"Also the lock's read-lease keys, unlock latches, acquisition latches redisson_lock_request_latch:{lock}:id (REQUEST) and (FENCED) its fencing token redisson_lock_token:{lock}, named from the lock and in its hash slot",
            vec![fenced()],
        ),
        Command {
            name: c"rwlock.unlock",
            entry: entry!(rwlock::unlock),
            flags: c"write",
            summary: c"Releases one hold. Replies nil (nothing held), 0 (still held) or 1 (released)",
            complexity: c"O(R) where R is the number of read holds on the lock",
            since: V1,
            arity: -4,
            key: RELEASE_KEY,
            key_notes: RWLOCK_KEYS,
            args: vec![
                lock(),
                owner(),
                mode_choice(c"Which kind of hold to release"),
                lease_option(),
                request_option(),
                held_release_option(),
            ],
        },
        Command {
            name: c"rwlock.renew",
            entry: entry!(rwlock::renew),
            flags: c"write",
            summary: c"Extends the owner's own holds to the lease (the watchdog's call). Replies 1 if it held anything, else 0",
            complexity: c"O(N) where N is the owner's number of read holds",
            since: V1,
            arity: 4,
            key: ACQUIRE_KEY,
            key_notes: RWLOCK_KEYS,
            args: vec![lock(), owner(), lease()],
        },
        Command {
            name: c"rwlock.forceunlock",
            entry: entry!(rwlock::force_unlock),
            flags: c"write",
            summary: c"Deletes the lock whoever holds it (only in the given mode, if any). Replies 1 if deleted, else 0",
            complexity: c"O(R) where R is the number of read holds on the lock",
            since: V1,
            arity: -2,
            key: FORCE_KEY,
            key_notes: RWLOCK_KEYS,
            args: vec![
                lock(),
                ArgDoc {
                    optional: true,
                    ..mode_choice(c"Delete the lock only if it is in this mode")
                },
            ],
        },
        Command {
            name: c"rwlock.info",
            entry: entry!(rwlock::info),
            flags: c"readonly",
            summary: c"Shows the lock's mode, TTL and owners with their read and write counts and read leases",
            complexity: c"O(R) where R is the number of read holds on the lock",
            since: V1,
            arity: 2,
            key: INFO_KEY,
            key_notes: RWLOCK_KEYS,
            args: vec![lock()],
        },
        acquisition(
            c"lock.acquire",
            V2,
            entry!(lock::acquire_lock),
            c"Takes a Redisson reentrant lock (RLock). Replies nil when held, else the lock's PTTL",
            LOCK_KEYS,
            vec![
                fenced(),
                no_reentry(),
            ],
        ),
        Command {
            name: c"lock.unlock",
            entry: entry!(lock::unlock),
            flags: c"write",
            summary: c"Releases one hold of a Redisson lock. Replies nil (not held), 0 (still held) or 1 (released)",
            complexity: c"O(1)",
            since: V2,
            arity: -3,
            key: RELEASE_KEY,
            key_notes: LOCK_KEYS,
            args: hash_release_args(),
        },
        Command {
            name: c"lock.renew",
            entry: entry!(lock::renew),
            flags: c"write",
            summary: c"Sets the lock's TTL to the lease if the owner holds it (the watchdog's call). Replies 1, else 0",
            complexity: c"O(1)",
            since: V2,
            arity: 4,
            key: ACQUIRE_KEY,
            key_notes: LOCK_KEYS,
            args: vec![lock(), owner(), lease()],
        },
        Command {
            name: c"lock.forceunlock",
            entry: entry!(lock::force_unlock),
            flags: c"write",
            summary: c"Deletes the lock whoever holds it. Replies 1 if deleted, else 0",
            complexity: c"O(1)",
            since: V2,
            arity: 2,
            key: FORCE_KEY,
            key_notes: LOCK_KEYS,
            args: vec![lock()],
        },
        Command {
            name: c"lock.info",
            entry: entry!(lock::info),
            flags: c"readonly",
            summary: c"Shows the lock's holders with their counts, its TTL and its fencing token",
            complexity: c"O(1)",
            since: V2,
            arity: 2,
            key: INFO_KEY,
            key_notes: LOCK_KEYS,
            args: vec![lock()],
        },
        Command {
            name: c"lock.acquireall",
            entry: entry!(multi::acquire_all),
            flags: c"write deny-oom blocking getkeys-api",
            summary: c"Takes every listed hold (plain lock, read or write hold) at once or none. Replies nil when all were taken, else the largest PTTL in the way",
            complexity: c"O(N) where N is the number of holds listed",
            since: V3,
            arity: -7,
            key: ACQUIRE_KEY,
            key_notes: MULTI_KEYS,
            args: multi_args(vec![owner(), lease(), block(), session(V3)]),
        },
        Command {
            name: c"lock.unlockall",
            entry: entry!(multi::unlock_all),
            flags: c"write getkeys-api",
            summary: c"Releases one hold of each listed lock. Replies the array of the single unlocks' replies (nil, 0 or 1)",
            complexity: c"O(N) where N is the number of holds listed, plus each unlock's",
            since: V3,
            arity: -6,
            key: RELEASE_KEY,
            key_notes: MULTI_KEYS,
            args: multi_args(vec![owner()]),
        },
        Command {
            name: c"lock.renewall",
            entry: entry!(multi::renew_all),
            flags: c"write getkeys-api",
            summary: c"Renews the owner's holds of each listed lock (the watchdog's call). Replies the array of 1 (renewed) or 0",
            complexity: c"O(N) where N is the number of holds listed, plus each renewal's",
            since: V3,
            arity: -7,
            key: ACQUIRE_KEY,
            key_notes: MULTI_KEYS,
            args: multi_args(vec![owner(), lease()]),
        },
        Command {
            name: c"lock.waiting",
            entry: entry!(inspect::waiting_locks),
            flags: c"readonly",
            summary: c"Lists the locks clients wait for now, the longest-waiting first, with their holders",
            complexity: c"O(L log L + W) where L is the number of locks with waiters and W their waiters",
            since: V4,
            arity: -1,
            key: INFO_KEY,
            key_notes: c"None: keyless",
            args: vec![optional(
                c"COUNT",
                arg(c"n", ArgKind::Int, c"How many locks at most (10 without COUNT)"),
            )],
        },
        Command {
            name: c"rwlock.deadlocks",
            entry: entry!(inspect::deadlocks),
            flags: c"readonly",
            summary: c"Shows the last cycles of waits found (deadlocks), the newest first",
            complexity: c"O(1)",
            since: V4,
            arity: 1,
            key: INFO_KEY,
            key_notes: c"None: keyless",
            args: vec![],
        },
    ];
    table.extend(fair_commands());
    table.extend(semaphore::commands());
    table.extend(latch::commands());
    table.extend(permit::commands());
    table
}

/// Creates every command of the table and describes it to Redis.
pub fn register(ctx: &Context) -> Result<(), String> {
    for command in table() {
        let keyless = !command.args.iter().any(docs::has_key);
        let first_key = if keyless || command.flags.to_bytes().ends_with(b"getkeys-api") {
            0
        } else {
            1
        };
        if !server::create_command(ctx, command.name, command.entry, command.flags, first_key) {
            let name = command.name.to_string_lossy();
            return Err(format!("cannot create command {name}"));
        }
        docs::describe(ctx, &command)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::docs::syntax;
    use super::table;

    #[test]
    fn the_readme_lists_every_command_with_its_syntax() {
        let readme = include_str!("../../README.md");
        for command in table() {
            let line = syntax(&command);
            assert!(
                readme.contains(&line),
                "the README lacks the syntax line `{line}`"
            );
        }
    }

    #[test]
    fn syntax_lines_read_as_users_type_them() {
        let lines: Vec<String> = table().iter().map(syntax).collect();
        assert_eq!(
            lines,
            [
                "RWLOCK.READ lock owner lease [BLOCK ms] [SESSION] [REQUEST id ttl] [HELD n]",
                "RWLOCK.WRITE lock owner lease [BLOCK ms] [SESSION] [FENCED] [REQUEST id ttl] [HELD n]",
                "RWLOCK.UNLOCK lock owner READ|WRITE [LEASE ms] [REQUEST id ttl] [HELD n]",
                "RWLOCK.RENEW lock owner lease",
                "RWLOCK.FORCEUNLOCK lock [READ|WRITE]",
                "RWLOCK.INFO lock",
                "LOCK.ACQUIRE lock owner lease [BLOCK ms] [SESSION] [FENCED] [NOREENTRY] [REQUEST id ttl] [HELD n]",
                "LOCK.UNLOCK lock owner [LEASE ms] [REQUEST id ttl] [HELD n]",
                "LOCK.RENEW lock owner lease",
                "LOCK.FORCEUNLOCK lock",
                "LOCK.INFO lock",
                "LOCK.ACQUIREALL owner lease [BLOCK ms] [SESSION] HOLDS n LOCK|READ|WRITE name [LOCK|READ|WRITE name ...]",
                "LOCK.UNLOCKALL owner HOLDS n LOCK|READ|WRITE name [LOCK|READ|WRITE name ...]",
                "LOCK.RENEWALL owner lease HOLDS n LOCK|READ|WRITE name [LOCK|READ|WRITE name ...]",
                "LOCK.WAITING [COUNT n]",
                "RWLOCK.DEADLOCKS",
                "FAIRLOCK.ACQUIRE lock owner lease [WAIT ms] [NOQUEUE] [NOREENTRY] [BLOCK ms] [REQUEST id ttl] [HELD n]",
                "FAIRLOCK.CANCEL lock owner [WAIT ms]",
                "FAIRLOCK.UNLOCK lock owner [LEASE ms] [REQUEST id ttl] [HELD n]",
                "FAIRLOCK.FORCEUNLOCK lock",
                "FAIRLOCK.INFO lock",
                "SEMAPHORE.ACQUIRE name permits [BLOCK ms] [SESSION] [REQUEST id ttl]",
                "SEMAPHORE.RELEASE name permits [IFEXISTS] [REQUEST id ttl]",
                "SEMAPHORE.TRYSETPERMITS name permits [TTL ms]",
                "SEMAPHORE.ADDPERMITS name permits",
                "SEMAPHORE.DRAIN name",
                "SEMAPHORE.AVAILABLE name",
                "LATCH.TRYSETCOUNT name count",
                "LATCH.COUNTDOWN name",
                "LATCH.COUNT name",
                "LATCH.DELETE name",
                "LATCH.AWAIT name [BLOCK ms]",
                "PERMIT.ACQUIRE name permits lease [BLOCK ms] [SESSION] [REQUEST id ttl]",
                "PERMIT.RELEASE name id [id ...]",
                "PERMIT.TRYRELEASE name id",
                "PERMIT.UPDATELEASE name id lease",
                "PERMIT.LEASETIME name id",
                "PERMIT.TRYSETPERMITS name permits",
                "PERMIT.SETPERMITS name permits",
                "PERMIT.ADDPERMITS name permits",
                "PERMIT.AVAILABLE name",
                "PERMIT.PERMITS name",
                "PERMIT.ACQUIRED name",
            ]
        );
    }

    #[test]
    fn names_are_unique_and_arities_fit_the_arguments() {
        let table = table();
        let mut names: Vec<_> = table.iter().map(|c| c.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), table.len());
        // The words an argument takes: its keyword, and each of a block's.
        fn words(a: &super::docs::ArgDoc) -> i32 {
            let own = match &a.kind {
                super::docs::ArgKind::Block(subs) => subs.iter().map(words).sum(),
                _ => 1,
            };
            own + i32::from(a.token.is_some())
        }
        for c in &table {
            let required: i32 = c
                .args
                .iter()
                .filter(|a| !a.optional)
                .map(words)
                .sum::<i32>()
                + 1;
            assert_eq!(c.arity.abs(), required, "{:?}", c.name);
            assert_eq!(
                c.arity < 0,
                c.args.iter().any(|a| a.optional || a.multiple),
                "{:?}",
                c.name
            );
        }
    }
}
