//! The pure lock engine: Redisson's read-write lock over an abstract store,
//! with no Redis in it, so it is tested in memory.

pub mod error;
pub mod index;
pub mod lock;
pub mod names;
pub mod queue;
pub mod store;

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod memstore;
#[cfg(test)]
mod model;
#[cfg(test)]
mod tests;
