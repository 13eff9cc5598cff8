//! A NATS connection per test with a subject and stream-name prefix of its own, so tests on
//! the shared server never see each other's messages.
use async_nats::jetstream;
use futures::TryStreamExt;

use crate::env;

/// A connection to the `CAIRN_TEST_NATS_URL` server and a random namespace.
#[derive(Debug, Clone)]
pub struct TestNats {
    pub url: String,
    pub client: async_nats::Client,
    pub jetstream: jetstream::Context,
    /// `t` followed by 10 lowercase hex digits: a valid subject token and stream-name part.
    pub prefix: String,
}

/// Connects to the test NATS server with a fresh prefix. Panics when the variable is unset
/// or the server cannot be reached.
pub async fn connect_nats() -> TestNats {
    let url = env::nats_url();
    let client = match async_nats::connect(url.as_str()).await {
        Ok(client) => client,
        Err(err) => panic!("connect to NATS at {} ({url}): {err}", env::NATS_URL_VAR),
    };
    let jetstream = jetstream::new(client.clone());
    TestNats {
        url,
        client,
        jetstream,
        prefix: random_prefix(),
    }
}

fn random_prefix() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("t{}", &id[..10])
}

impl TestNats {
    /// `<prefix>.<rest>`.
    pub fn subject(&self, rest: &str) -> String {
        format!("{}.{rest}", self.prefix)
    }

    /// `<prefix>_<name>`: a stream or consumer name owned by this test.
    pub fn stream_name(&self, name: &str) -> String {
        format!("{}_{name}", self.prefix)
    }

    /// Deletes every JetStream stream whose name starts with this test's prefix; returns how
    /// many. Call at the end of a test to keep the server's store small.
    pub async fn delete_streams(&self) -> usize {
        let own = format!("{}_", self.prefix);
        let names: Vec<String> = match self.jetstream.stream_names().try_collect().await {
            Ok(names) => names,
            Err(err) => panic!("list JetStream streams: {err}"),
        };
        let mut deleted = 0;
        for name in names.into_iter().filter(|n| n.starts_with(&own)) {
            if let Err(err) = self.jetstream.delete_stream(&name).await {
                panic!("delete JetStream stream {name}: {err}");
            }
            deleted += 1;
        }
        deleted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_lowercase_alphanumeric_and_distinct() {
        let a = random_prefix();
        let b = random_prefix();
        assert_ne!(a, b);
        for p in [&a, &b] {
            assert_eq!(p.len(), 11, "{p}");
            assert!(p.starts_with('t'), "{p}");
            assert!(
                p.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
                "{p}"
            );
        }
    }
}
