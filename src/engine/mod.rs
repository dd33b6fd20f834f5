//! The pure lock engine: each lock kind's state machine over one small
//! storage trait ([`store::Store`]), sharing names, errors, integers, the
//! waiting queue and the agenda of what falls due when. No Redis in it, so
//! every machine is tested in memory (tests/engine: an in-memory store, reference
//! models, fuzzers) against a reference model and Redisson's own scripts'
//! behaviour.

pub mod agenda;
pub mod error;
pub mod fair;
pub mod hold;
pub mod holders;
pub mod index;
pub mod int;
pub mod kinds;
pub mod latch;
pub mod lock;
pub mod multi;
pub mod names;
pub mod permit;
pub mod queue;
pub mod rwlock;
pub mod semaphore;
pub mod store;
