//! Waiting on the server (docs/design.md, contract §4): who waits for which
//! lock and what falls due when (`registry`, pure), and the clients parked
//! and woken on the server (`clients`), every kind through one blocked-client
//! lifecycle (`parking`); fair-lock waiters parked in their
//! lock's line (`fair`, its registry `lines`); the wait-for graph across
//! both (`graph`, `deadlock`).

pub mod clients;
pub mod deadlock;
pub mod fair;
pub mod graph;
pub mod lines;
pub mod parking;
pub mod queues;
pub mod registry;
pub mod stats;
