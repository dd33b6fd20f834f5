//! The pure lock engine: each lock kind's state machine over one small
//! storage trait ([`store::Store`]), sharing names, errors, integers, the
//! waiting queue and the agenda of what falls due when. No Redis in it, so
//! every machine is tested in memory, against a reference model and
//! Redisson's own scripts' behaviour.

pub mod agenda;
pub mod error;
pub mod fair;
pub mod hold;
pub mod holders;
pub mod index;
pub mod int;
pub mod kinds;
pub mod lock;
pub mod multi;
pub mod names;
pub mod queue;
pub mod rwlock;
pub mod store;

#[cfg(test)]
mod fair_model;
#[cfg(test)]
mod fuzz;
#[cfg(test)]
pub(crate) mod fuzz_cases;
#[cfg(test)]
mod lock_fuzz;
#[cfg(test)]
mod lock_model;
#[cfg(test)]
mod lock_tests;
#[cfg(test)]
mod memstore;
#[cfg(test)]
mod model;
#[cfg(test)]
mod tests;
