//! What a command's writes cause beyond the data: the replicated effect,
//! the keyspace event and the lock's message, each sent only when someone
//! could observe it (`observers`). The low-level key API does none of them
//! by itself.

pub mod notify;
pub mod observers;
pub mod publish;
pub mod replicate;
