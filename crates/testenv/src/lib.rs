//! The policy for tests whose real part needs root, a tool or a device: on a developer's
//! machine they print `skipped: <why>` and pass; in CI (`CI` set, where the test command runs
//! as root and installs every tool) they fail with the reason, so a green run never hides a
//! test that did not run. It owns only that decision; it never checks prerequisites itself.
#![deny(missing_docs)]

/// Whether this is a CI run (`CI` set and not `false`/`0`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// The test cannot run its real part because of `why`: panic in CI, else print why it is
/// skipped (the caller then returns).
#[track_caller]
pub fn skip(why: &str) {
    if in_ci() {
        panic!("this test must run in CI but cannot: {why}");
    }
    println!("skipped: {why}");
}

/// `skip` when `missing` says what is missing; true when the test can run.
#[track_caller]
pub fn can_run(missing: Option<String>) -> bool {
    match missing {
        None => true,
        Some(why) => {
            skip(&why);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn can_run_when_nothing_is_missing() {
        assert!(super::can_run(None));
    }
}
