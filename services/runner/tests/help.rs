//! `cairn-runner serve --help` lists every setting the service reads: the ones libs/service
//! applies (profile, TLS, health listener, metrics, traces) with the service's own.

#[tokio::test]
async fn help_lists_the_shared_settings() {
    cairn_testkit::assert_help_lists(
        env!("CARGO_BIN_EXE_cairn-runner"),
        &["serve", "--help"],
        &cairn_service::SharedArgs::env_names(),
    )
    .await;
}
