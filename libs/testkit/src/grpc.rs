//! gRPC clients for tests: [`connect`] opens a channel to a server a test started, and
//! `Client::with_interceptor(channel, Bearer::new(t))` authenticates its calls.

use std::net::SocketAddr;
use std::sync::Arc;

use tonic::metadata::MetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// Adds `authorization: Bearer <token>` to every call (nothing when the token is empty, to
/// test calls without credentials).
#[derive(Clone)]
pub struct Bearer(pub Arc<str>);

impl Bearer {
    /// An interceptor sending `token`.
    pub fn new(token: impl Into<Arc<str>>) -> Self {
        Self(token.into())
    }
}

impl Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if !self.0.is_empty() {
            let value: MetadataValue<_> = match format!("Bearer {}", self.0).parse() {
                Ok(v) => v,
                Err(_) => panic!("test token is not valid header text"),
            };
            req.metadata_mut().insert("authorization", value);
        }
        Ok(req)
    }
}

/// A channel whose calls carry a [`Bearer`] token.
pub type Authed = InterceptedService<Channel, Bearer>;

/// A connected channel to the plaintext gRPC server at `addr` (panics, naming the address,
/// when it does not answer).
pub async fn connect(addr: SocketAddr) -> Channel {
    let url = format!("http://{addr}");
    match Channel::from_shared(url.clone()) {
        Ok(endpoint) => match endpoint.connect().await {
            Ok(channel) => channel,
            Err(e) => panic!("connect gRPC {url}: {e}"),
        },
        Err(e) => panic!("gRPC endpoint {url}: {e}"),
    }
}
