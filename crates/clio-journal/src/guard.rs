//! The journal's boundary against panics of the storage engine.
//!
//! redb trusts the pages it reads and panics on some damaged files (a malformed allocator
//! state, an offset past the end of a page). A panic that crossed this crate would end the
//! process with exit code 101 and a message about redb's source, telling a person nothing
//! about their journal. Every entry point that touches the file (opening, each read, each
//! write operation and the writer thread) runs inside [`catching`], which turns a panic into
//! [`JournalError::Damaged`] naming the file.
//!
//! What this cannot do: the process's panic hook still runs before the unwind is caught, so
//! the default hook prints redb's message to stderr first (changing the hook is the
//! program's decision, not a library's); and a panic while a panic unwinds (a second one
//! from a destructor) aborts the process, which nothing can catch.

use std::any::Any;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;

use crate::error::{JournalError, Result};

/// Runs `f`, turning a panic inside it into [`JournalError::Damaged`] for `path` that says
/// what was being done (`doing`, such as "opening it").
///
/// `AssertUnwindSafe` is sound here because nothing `f` touched is used after a panic
/// except through redb, which then reports its own errors, or through this crate's own
/// state, which is dropped (a batch is abandoned, a read's transaction discarded).
pub(crate) fn catching<T>(
    path: &Path,
    doing: impl fmt::Display,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    panic::catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|payload| Err(panicked(path, doing, payload.as_ref())))
}

/// Builds the error for a panic of the storage engine while `doing` something to `path`.
pub(crate) fn panicked(
    path: &Path,
    doing: impl fmt::Display,
    payload: &(dyn Any + Send),
) -> JournalError {
    JournalError::damaged(
        path,
        format!("the storage engine failed while {doing} ({})", message(payload)),
    )
}

/// Drops `value`, a handle of the storage engine whose destructor (closing or flushing a
/// damaged file) may panic, ignoring such a panic: a destructor has no caller to tell, and
/// the operations that mattered have already reported their errors.
pub(crate) fn drop_quietly<T>(value: T) {
    let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(value)));
}

/// Returns a panic's message, as the standard hook would print it.
pub(crate) fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_damage_error_naming_the_file_and_what_was_done() {
        let path = Path::new("/tmp/j.redb");
        let res: Result<()> = catching(path, "reading run 3", || panic!("range start index 9"));
        let err = res.unwrap_err();
        assert!(matches!(&err, JournalError::Damaged { path: p, .. } if p == path), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("reading run 3") && text.contains("range start index 9"), "{text}");
        let ok: Result<u8> = catching(path, "reading", || Ok(4));
        assert_eq!(ok.ok(), Some(4));
    }
}
