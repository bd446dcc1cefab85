//! Time-zone tests (test builds only): the host's zone is read once per process, so a test of
//! another zone runs again in a child process of its own.

/// Zones the time-zone tests run in: China (UTC+8, no daylight saving), New York (UTC-5 with US
/// daylight saving) and UTC, as POSIX rules, so no zone database is needed.
pub(crate) const TEST_ZONES: [&str; 3] = ["CST-8", "EST5EDT,M3.2.0,M11.1.0", "UTC0"];

/// In the test process: runs the test named `test` (its path in the test binary) again in a
/// child process for each of [`TEST_ZONES`], with `TZ` set, asserts that each passed, and
/// returns `true` (the caller returns then). In such a child: returns `false`, and the caller
/// checks the zone its `TZ` names.
pub(crate) fn ran_in_zones(test: &str) -> bool {
    if std::env::var_os("RMQ_TZ_CHILD").is_some() {
        return false;
    }
    let exe = std::env::current_exe().expect("the test binary");
    for tz in TEST_ZONES {
        let ok = std::process::Command::new(&exe)
            .args([test, "--exact", "--test-threads=1"])
            .env("TZ", tz)
            .env("RMQ_TZ_CHILD", "1")
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "{test} in {tz}");
    }
    true
}
