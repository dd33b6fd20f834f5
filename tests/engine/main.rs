//! The pure parts tested in memory, without a server: each lock machine of
//! `rwlock::engine` over an in-memory store (`memstore`), against reference
//! models written from the contract (`model`, `lock_model`, `fair_model`;
//! Redisson's semaphore scripts in `semaphore_tests`, the permit-expirable
//! semaphore's in `permit_tests`), with fuzzers (proptest: `fuzz`, `lock_fuzz`, and `args_fuzz` for the
//! argument parser), and the unit tests of the engine's modules that need a
//! store (`latch_tests` holds the latch machine and its model of Redisson's
//! scripts). Scaffolding, kept out of `src/` so that `src/` is the product.

mod args_fuzz;
mod fair_model;
mod fuzz;
mod fuzz_cases;
mod holders_tests;
mod kinds_tests;
mod latch_tests;
mod lock_fuzz;
mod lock_model;
mod lock_tests;
mod memstore;
mod model;
mod multi_tests;
mod permit_tests;
mod queue_tests;
mod rwlock_tests;
mod semaphore_tests;
