//! [`crate::grpc_service!`]: the [`Service`](crate::Service) impl and the accessors every gRPC
//! service's `Server` has, written once. The `Server` is a struct with the fields
//! `addrs: Addresses` (what [`GrpcServer::spawn`](crate::GrpcServer::spawn) returned),
//! `app: <its App>` and `tasks: Tasks`, and an inherent
//! `async fn start(config) -> Result<Server, StartError>`; the config flattens
//! [`SharedArgs`](crate::SharedArgs) as `shared`:
//!
//! ```ignore
//! cairn_service::grpc_service!(Server {
//!     binary: "cairn-templates",
//!     name: "templates",
//!     config: Config,
//!     app: App,
//!     start_error: StartError,
//! });
//! ```
//!
//! A service with one-off subcommands adds `cli: Cli, tool: Tool`, where
//! `Cli::into_command(self) -> Command<Config, Tool>` says what the command line asks for.
//! The generated accessors: `grpc_addr()`, `metrics_addr()`, `health_addr()`, `app()`,
//! `shutdown_token()`, `shutdown()` (stop taking requests, let in-flight ones finish, wait
//! for every task) and `wait()`.

/// See the [module documentation](self).
#[macro_export]
macro_rules! grpc_service {
    ($server:ident {
        binary: $binary:literal,
        name: $name:literal,
        config: $config:ty,
        app: $app:ty,
        start_error: $start_error:ty $(,)?
    }) => {
        $crate::grpc_service!(@accessors $server, $app);
        impl $crate::Service for $server {
            const BINARY: &'static str = $binary;
            const NAME: &'static str = $name;
            type Cli = $config;
            type Config = $config;
            type Tool = $crate::NoTool;
            type StartError = $start_error;

            fn command(cli: $config) -> $crate::Command<$config, $crate::NoTool> {
                $crate::Command::Serve(cli)
            }
            $crate::grpc_service!(@lifecycle $server, $config, $start_error);
        }
    };
    ($server:ident {
        binary: $binary:literal,
        name: $name:literal,
        config: $config:ty,
        app: $app:ty,
        start_error: $start_error:ty,
        cli: $cli:ty,
        tool: $tool:ty $(,)?
    }) => {
        $crate::grpc_service!(@accessors $server, $app);
        impl $crate::Service for $server {
            const BINARY: &'static str = $binary;
            const NAME: &'static str = $name;
            type Cli = $cli;
            type Config = $config;
            type Tool = $tool;
            type StartError = $start_error;

            fn command(cli: $cli) -> $crate::Command<$config, $tool> {
                cli.into_command()
            }
            $crate::grpc_service!(@lifecycle $server, $config, $start_error);
        }
    };
    (@lifecycle $server:ident, $config:ty, $start_error:ty) => {
        fn shared(config: &$config) -> &$crate::SharedArgs {
            &config.shared
        }

        async fn start(config: $config) -> ::std::result::Result<Self, $start_error> {
            $server::start(config).await
        }

        fn shutdown_token(&self) -> $crate::__private::CancellationToken {
            self.tasks.token()
        }

        async fn wait(self) {
            self.tasks.wait().await;
        }
    };
    (@accessors $server:ident, $app:ty) => {
        impl $server {
            /// The bound gRPC address (port 0 in the settings picks a free one).
            pub fn grpc_addr(&self) -> ::std::net::SocketAddr {
                self.addrs.grpc
            }

            /// The bound metrics address, when metrics are served (port 0 picks a free one).
            pub fn metrics_addr(&self) -> ::std::option::Option<::std::net::SocketAddr> {
                self.addrs.metrics
            }

            /// The bound plaintext health address, when one is served.
            pub fn health_addr(&self) -> ::std::option::Option<::std::net::SocketAddr> {
                self.addrs.health
            }

            /// The use cases (tests call them directly).
            pub fn app(&self) -> &$app {
                &self.app
            }

            /// A handle that begins the graceful stop when cancelled.
            pub fn shutdown_token(&self) -> $crate::__private::CancellationToken {
                self.tasks.token()
            }

            /// Stops taking requests, lets in-flight ones finish and waits for every task.
            pub async fn shutdown(self) {
                self.tasks.shutdown().await;
            }

            /// Waits until the stop has begun (its token is cancelled), then for every task.
            pub async fn wait(self) {
                self.tasks.wait().await;
            }
        }
    };
}
