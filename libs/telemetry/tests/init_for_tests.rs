//! `init_for_tests` is quiet by default and safe to call from every test.

#[test]
fn init_for_tests_installs_a_subscriber_only_with_test_log() {
    let wanted = matches!(
        std::env::var("TEST_LOG").ok().as_deref().map(str::trim),
        Some("1" | "true")
    );
    cairn_telemetry::init_for_tests();
    cairn_telemetry::init_for_tests();
    assert_eq!(tracing::dispatcher::has_been_set(), wanted);
}

#[test]
fn init_for_tests_from_many_threads_is_fine() {
    let handles: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(cairn_telemetry::init_for_tests))
        .collect();
    for handle in handles {
        assert!(handle.join().is_ok());
    }
}
