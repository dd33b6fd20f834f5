//! The module allocates through Redis (so `INFO memory` and `maxmemory` see
//! it) once Redis has handed over its API; a process without Redis, such as a
//! test or benchmark linking the library, uses the system allocator.

use std::alloc::{GlobalAlloc, Layout, System};

use redis_module::alloc::RedisAlloc;
use redis_module::raw;

pub struct ModuleAlloc;

fn in_redis() -> bool {
    // Read here, not through `server`: the allocator sits below every other
    // part of the module, and this reads the API table rather than calling it.
    // SAFETY: the pointer is written once, by RedisModule_Init, before any
    // command runs; until then it is None and nothing Redis-owned exists.
    unsafe { (*std::ptr::addr_of!(raw::RedisModule_Alloc)).is_some() }
}

// SAFETY: both allocators are sound, and a pointer is always freed by the one
// that made it: the choice flips once, at load, before the module allocates.
unsafe impl GlobalAlloc for ModuleAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if in_redis() {
            unsafe { RedisAlloc.alloc(layout) }
        } else {
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if in_redis() {
            unsafe { RedisAlloc.dealloc(ptr, layout) }
        } else {
            unsafe { System.dealloc(ptr, layout) }
        }
    }
}
