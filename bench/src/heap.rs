//! The bench's allocator: the server's (mimalloc, `src/main.rs`), so that
//! the service is measured as it runs, counting the bytes allocated and
//! freed while a measurement asks it to (`Window`). The resident set of the
//! process cannot say what a measurement adds once the allocator keeps
//! memory freed earlier (the second store's run reuses what the first
//! freed, and a figure from VmRSS shrinks to nothing); the count of live
//! heap bytes can. Off, it costs a relaxed load per allocation.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};

use mimalloc::MiMalloc;

/// Counters a thread adds to: each thread takes one (the next, wrapping),
/// so that threads allocating at once do not contend on one cache line.
const COUNTERS: usize = 64;

/// One counter on a cache line of its own.
#[repr(align(64))]
struct Counter(AtomicI64);

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE_BYTES: [Counter; COUNTERS] = [const { Counter(AtomicI64::new(0)) }; COUNTERS];
static NEXT_COUNTER: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's counter (`usize::MAX` until it allocates while
    /// counting). Constant-initialised, without a destructor: reading it
    /// never allocates, which an allocator must not.
    static MY_COUNTER: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn count(bytes: i64) {
    if !COUNTING.load(Ordering::Relaxed) {
        return;
    }
    let counter = MY_COUNTER
        .try_with(|mine| {
            if mine.get() == usize::MAX {
                mine.set(NEXT_COUNTER.fetch_add(1, Ordering::Relaxed) % COUNTERS);
            }
            mine.get()
        })
        .unwrap_or(0);
    LIVE_BYTES[counter].0.fetch_add(bytes, Ordering::Relaxed);
}

fn signed(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// The server's allocator, counting (see the module's note).
pub struct Counting;

// SAFETY: every call is passed on to `MiMalloc` unchanged; counting touches
// only atomics and a constant-initialised thread-local, and never
// allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc`, passed on.
        let ptr = unsafe { MiMalloc.alloc(layout) };
        if !ptr.is_null() {
            count(signed(layout.size()));
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        let ptr = unsafe { MiMalloc.alloc_zeroed(layout) };
        if !ptr.is_null() {
            count(signed(layout.size()));
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { MiMalloc.dealloc(ptr, layout) };
        count(-signed(layout.size()));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc`, passed on.
        let moved = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            count(signed(new_size) - signed(layout.size()));
        }
        moved
    }
}

/// A measurement of the heap: bytes allocated and not freed since it
/// began, by any thread of the process. One at a time.
pub struct Window(());

impl Window {
    pub fn open() -> Self {
        for counter in &LIVE_BYTES {
            counter.0.store(0, Ordering::Relaxed);
        }
        COUNTING.store(true, Ordering::SeqCst);
        Window(())
    }

    /// Bytes allocated minus bytes freed since the window opened.
    pub fn live_bytes(&self) -> i64 {
        LIVE_BYTES
            .iter()
            .map(|counter| counter.0.load(Ordering::Relaxed))
            .sum()
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        COUNTING.store(false, Ordering::SeqCst);
    }
}
