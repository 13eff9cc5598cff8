//! Every service that keeps an outbox copies this library's migration SQL into a migration
//! of its own, unchanged: checked here once for every service's migrations directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;

/// Each copied migration: its SQL and the services whose schema must hold it.
const COPIES: [(&str, &str, &[&str]); 3] = [
    (
        "OUTBOX_MIGRATION_SQL",
        cairn_bus::OUTBOX_MIGRATION_SQL,
        &["deployments", "drift", "state-coordinator", "tenancy"],
    ),
    (
        "MESSAGE_OUTBOX_MIGRATION_SQL",
        cairn_bus::MESSAGE_OUTBOX_MIGRATION_SQL,
        &["deployments", "drift", "tenancy"],
    ),
    (
        "MESSAGE_OUTBOX_TRACE_MIGRATION_SQL",
        cairn_bus::MESSAGE_OUTBOX_TRACE_MIGRATION_SQL,
        &["deployments", "drift", "tenancy"],
    ),
];

/// Every `migrations/<service>/*.sql` file: (service, file name, contents).
fn migrations() -> Vec<(String, String, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let mut files = Vec::new();
    for service in std::fs::read_dir(&root).unwrap() {
        let service = service.unwrap().path();
        if !service.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&service).unwrap() {
            let file = file.unwrap().path();
            if file.extension().is_some_and(|e| e == "sql") {
                files.push((
                    service.file_name().unwrap().to_string_lossy().into_owned(),
                    file.file_name().unwrap().to_string_lossy().into_owned(),
                    std::fs::read_to_string(&file).unwrap(),
                ));
            }
        }
    }
    files
}

#[test]
fn every_service_with_an_outbox_copies_its_migrations_unchanged() {
    let files = migrations();
    assert!(files.len() > 20, "the migrations directory was not found");
    for (name, sql, services) in COPIES {
        // A copy names where it comes from on its first line; a file that does so must be
        // the library's SQL to the byte.
        let header = sql.lines().next().unwrap();
        assert!(header.contains(name), "{name}'s first line names it");
        let mut holders = BTreeSet::new();
        for (service, file, contents) in &files {
            if contents.lines().next() == Some(header) {
                assert_eq!(
                    contents, sql,
                    "migrations/{service}/{file} is not cairn-bus {name} unchanged"
                );
                assert!(
                    holders.insert(service.as_str()),
                    "{service} copies {name} twice"
                );
            }
        }
        assert_eq!(
            holders,
            services.iter().copied().collect::<BTreeSet<_>>(),
            "the services whose migrations copy {name}"
        );
    }
}
