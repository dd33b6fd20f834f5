//! How many cases a property test runs, shared by the engine's and the
//! parser's fuzz tests so that one `PROPTEST_CASES` (as `make fuzz` sets it)
//! scales them all.

/// `PROPTEST_CASES` when it is a number, else the test's own `default`.
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
