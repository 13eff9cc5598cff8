//! The command line: every command and flag of `cairn` (clap derive).
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version,
    about = "Operate Cairn: tenants, targets, templates, instances and their deployments"
)]
pub struct Cli {
    /// The context (endpoints and credential) to use [default: the current context].
    #[arg(long, global = true, env = "CAIRN_CONTEXT")]
    pub context: Option<String>,
    /// Output format.
    #[arg(long, short = 'o', global = true, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// Act in this tenant (id or slug) instead of the credential's own (platform admins).
    #[arg(long = "tenant-id", global = true, env = "CAIRN_TENANT")]
    pub tenant_id: Option<String>,
    /// The deadline of each call, e.g. `30s`.
    #[arg(long, global = true, default_value = "30s", value_parser = humantime::parse_duration)]
    pub timeout: std::time::Duration,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Store a credential for the current context (0600).
    Login(LoginArgs),
    /// Forget the current context's stored credential.
    Logout,
    /// Who the credential speaks for.
    Whoami,
    /// Contexts: endpoints per service.
    #[command(subcommand)]
    Context(ContextCmd),
    /// Tenants (platform admins create them).
    #[command(subcommand)]
    Tenants(TenantsCmd),
    /// Members of the tenant and their roles.
    #[command(subcommand)]
    Users(UsersCmd),
    /// API tokens.
    #[command(subcommand)]
    Tokens(TokensCmd),
    /// Deployment targets.
    #[command(subcommand)]
    Targets(TargetsCmd),
    /// Templates and their versions.
    #[command(subcommand)]
    Templates(TemplatesCmd),
    /// Instances of templates on targets.
    #[command(subcommand)]
    Instances(InstancesCmd),
    /// Deploy an instance (apply its template with its parameters).
    Deploy(DeployArgs),
    /// Plan an instance without changing anything.
    Preview(RunArgs),
    /// Destroy an instance's resources.
    Destroy(DestroyArgs),
    /// Deployments: list, inspect, follow, cancel.
    #[command(subcommand)]
    Deployments(DeploymentsCmd),
    /// Approve a deployment awaiting approval (shows the plans and the plan-set hash).
    Approve(DecisionArgs),
    /// Reject a deployment awaiting approval.
    Reject(DecisionArgs),
    /// OpenTofu states (admins: recovery).
    #[command(subcommand)]
    State(StateCmd),
    /// Drift of deployed instances: status, findings, scans, ignore rules.
    #[command(subcommand)]
    Drift(DriftCmd),
    /// Webhook subscriptions and their deliveries (admins).
    #[command(subcommand)]
    Webhooks(WebhooksCmd),
    /// The tenant's audit log.
    #[command(subcommand)]
    Audit(AuditCmd),
    /// A runner instance's admin API (platform admins).
    #[command(subcommand)]
    Runner(RunnerCmd),
    /// Print a shell completion script.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// A file holding an API token (`cairn_…`) or an access token.
    #[arg(long, conflicts_with_all = ["email", "password_stdin"])]
    pub api_token_file: Option<PathBuf>,
    /// The tenant (slug) to log in to with a password.
    #[arg(long, requires = "email")]
    pub tenant: Option<String>,
    /// Log in with email and password (prompted unless --password-stdin).
    #[arg(long)]
    pub email: Option<String>,
    /// Read the password from standard input (scripts).
    #[arg(long, requires = "email")]
    pub password_stdin: bool,
}

#[derive(Debug, Subcommand)]
pub enum ContextCmd {
    /// List the contexts.
    List,
    /// Show a context's endpoints.
    Show { name: Option<String> },
    /// Create or change a context (unset endpoints keep the local defaults).
    Set {
        name: String,
        #[arg(long)]
        tenancy: Option<String>,
        #[arg(long)]
        templates: Option<String>,
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        runner: Option<String>,
        #[arg(long)]
        deployments: Option<String>,
        #[arg(long)]
        drift: Option<String>,
    },
    /// Make a context the current one.
    Use { name: String },
}

#[derive(Debug, Subcommand)]
pub enum TenantsCmd {
    /// Create a tenant and its first owner (platform admins).
    Create {
        slug: String,
        #[arg(long)]
        display_name: Option<String>,
        #[arg(long)]
        owner_email: String,
        #[arg(long)]
        owner_name: Option<String>,
        /// Read the owner's password (used when the owner is new) from standard input.
        #[arg(long)]
        owner_password_stdin: bool,
    },
    /// List tenants (a user sees their own).
    List,
}

#[derive(Debug, Subcommand)]
pub enum UsersCmd {
    /// Add a member (creating the user when the email is new).
    Add {
        email: String,
        #[arg(long)]
        role: String,
        #[arg(long)]
        display_name: Option<String>,
        /// Read the new user's password from standard input.
        #[arg(long)]
        password_stdin: bool,
    },
    List,
    /// Change a member's role (by email or user id).
    SetRole {
        user: String,
        #[arg(long)]
        role: String,
    },
    /// Remove a member (by email or user id).
    Remove {
        user: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokensCmd {
    /// Create an API token for yourself; the secret is shown once.
    Create {
        name: String,
        /// At most your own role [default: your role].
        #[arg(long)]
        role: Option<String>,
        #[arg(long = "scope")]
        scopes: Vec<String>,
        /// Lifetime, e.g. `30d` [default: never expires].
        #[arg(long, value_parser = humantime::parse_duration)]
        ttl: Option<std::time::Duration>,
    },
    List,
    Revoke {
        token_id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TargetsCmd {
    /// Create a target (a local directory, or an AWS account).
    Create {
        name: String,
        /// A local directory target writing under DIR.
        #[arg(long, conflicts_with_all = ["aws_region", "aws_role_arn"])]
        local_dir: Option<PathBuf>,
        /// An AWS target in REGION (with --aws-role-arn); tenancy generates its external id.
        #[arg(long, requires = "aws_role_arn")]
        aws_region: Option<String>,
        /// The role an AWS target's runs assume (its trust policy requires the external id).
        #[arg(long, requires = "aws_region")]
        aws_role_arn: Option<String>,
        /// The credential reference the runner-side registry resolves.
        #[arg(long, default_value = "local-default")]
        credential_ref: String,
        /// Deployments running at once on this target.
        #[arg(long, default_value_t = 1)]
        max_concurrent: u32,
        /// Create it disabled.
        #[arg(long)]
        disabled: bool,
    },
    List,
    /// A target by name or id.
    Get {
        target: String,
    },
    /// Ask the runner serving an AWS target to assume its role and identify the session
    /// (admins). Prints the target with its new validation, pending; with --wait, waits for
    /// the answer: exit 0 succeeded, 1 failed (or no answer in time).
    Validate {
        /// Target name or id.
        target: String,
        /// Wait until the runner answered.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits, e.g. `2m`.
        #[arg(long, default_value = "2m", value_parser = humantime::parse_duration, requires = "wait")]
        wait_timeout: std::time::Duration,
    },
}

#[derive(Debug, Subcommand)]
pub enum TemplatesCmd {
    /// Create a template (and publish FILE as its first version).
    Create {
        name: String,
        #[arg(long, default_value = "")]
        description: String,
        #[arg(short = 'f', long = "file")]
        file: Option<PathBuf>,
    },
    /// Validate FILE and publish it as a new version of the template.
    Publish {
        template: String,
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    List,
    /// A template by name or id.
    Get {
        template: String,
    },
    /// The versions of a template.
    Versions {
        template: String,
    },
    /// Check a template document; problems print as `file:line:col: message`.
    Validate {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct ParamArgs {
    /// A parameter `key=value` (the value is JSON when it parses as JSON, else a string;
    /// `key=null` removes it on update).
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// A JSON object of parameters.
    #[arg(long)]
    pub params_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum InstancesCmd {
    Create {
        name: String,
        /// Template name or id, optionally `@VERSION`.
        #[arg(long)]
        template: String,
        /// Target name or id.
        #[arg(long)]
        target: String,
        #[arg(long = "env")]
        environment: String,
        #[command(flatten)]
        params: ParamArgs,
    },
    List,
    /// An instance by name or id: status, resources and outputs.
    Get {
        instance: String,
    },
    /// Change parameters or the template version (takes effect at the next deploy).
    Update {
        instance: String,
        #[command(flatten)]
        params: ParamArgs,
        #[arg(long)]
        version: Option<u32>,
    },
    /// Delete an instance (only once destroyed or never deployed).
    Delete {
        instance: String,
    },
}

#[derive(Debug, Args, Clone, Copy)]
pub struct FollowArgs {
    /// Wait for the end: exit 0 succeeded, 1 failed, 3 awaiting approval.
    #[arg(long)]
    pub wait: bool,
    /// Show live progress (implies --wait).
    #[arg(long)]
    pub watch: bool,
}

#[derive(Debug, Args)]
pub struct DeployArgs {
    pub instance: String,
    #[command(flatten)]
    pub params: ParamArgs,
    #[arg(long)]
    pub version: Option<u32>,
    /// Requests with the same key return the same deployment.
    #[arg(long)]
    pub idempotency_key: Option<String>,
    #[command(flatten)]
    pub follow: FollowArgs,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    pub instance: String,
    #[command(flatten)]
    pub params: ParamArgs,
    #[command(flatten)]
    pub follow: FollowArgs,
}

#[derive(Debug, Args)]
pub struct DestroyArgs {
    pub instance: String,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    #[command(flatten)]
    pub follow: FollowArgs,
}

#[derive(Debug, Subcommand)]
pub enum DeploymentsCmd {
    List {
        /// Only this instance's (name or id).
        #[arg(long)]
        instance: Option<String>,
    },
    Get {
        deployment: String,
    },
    /// Follow a deployment's live progress.
    Watch {
        deployment: String,
    },
    /// The per-resource plans and the plan-set hash an approval binds to.
    Plans {
        deployment: String,
    },
    /// The log lines of a deployment's steps.
    Logs {
        deployment: String,
        /// Only this step (resource name or step id).
        #[arg(long)]
        step: Option<String>,
        /// Keep printing new lines until the deployment ends.
        #[arg(long)]
        follow: bool,
    },
    Cancel {
        deployment: String,
        #[arg(long, default_value = "cancelled from the cli")]
        reason: String,
    },
}

#[derive(Debug, Args)]
pub struct DecisionArgs {
    pub deployment: String,
    #[arg(long, default_value = "")]
    pub comment: String,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

#[derive(Debug, Subcommand)]
pub enum StateCmd {
    /// The tenant's states.
    List {
        #[arg(long)]
        instance: Option<String>,
        /// Only fenced (recovery_required) states.
        #[arg(long)]
        fenced: bool,
    },
    /// A state and every generation, verified.
    Inspect { state_id: String },
    /// Clear a fence (0) or roll back to a verified generation.
    Recover {
        state_id: String,
        #[arg(long, default_value_t = 0)]
        rollback_to: u64,
        #[arg(long)]
        reason: String,
    },
    /// Check every state end to end (platform admins).
    VerifyAll,
    /// Release a state's lock held by a lock id.
    ForceUnlock {
        state_id: String,
        #[arg(long)]
        lock_id: String,
        #[arg(long)]
        reason: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum DriftCmd {
    /// Per resource of an instance: drift status, last and next scan, error class.
    Status { instance: String },
    /// Drift findings of the tenant, newest first (every page).
    Findings {
        /// Only this instance's (name or id).
        #[arg(long)]
        instance: Option<String>,
        /// Only open findings.
        #[arg(long, conflicts_with = "resolved")]
        open: bool,
        /// Only resolved findings.
        #[arg(long)]
        resolved: bool,
    },
    /// Scan an instance now (every resource, or one).
    Scan {
        instance: String,
        /// Only this resource of the instance.
        #[arg(long)]
        resource: Option<String>,
    },
    /// Replace an instance's ignore rules: attribute paths drift does not report
    /// (`tags.LastSeen`, `tags.*`, `ingress[*].description`).
    Ignore {
        instance: String,
        /// An attribute path to ignore (repeat for more).
        #[arg(long = "path", value_name = "PATH", required_unless_present = "clear")]
        paths: Vec<String>,
        /// Remove every ignore rule.
        #[arg(long, conflicts_with = "paths")]
        clear: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum WebhooksCmd {
    /// Subscribe a URL to event types; the signing secret is shown once.
    Create {
        /// Where deliveries are POSTed (https; http and loopback only on a local platform).
        #[arg(long)]
        url: String,
        /// Event types, comma-separated (e.g. `deployment.succeeded,instance.drift_detected`).
        #[arg(long, value_delimiter = ',', required = true, value_name = "TYPE,TYPE")]
        events: Vec<String>,
        #[arg(long, default_value = "")]
        description: String,
    },
    /// The tenant's subscriptions (without their secrets).
    List,
    /// A subscription's deliveries, newest first, with every attempt.
    Deliveries { webhook_id: String },
    /// Queue a `ping` delivery to a subscription.
    Test { webhook_id: String },
    /// Delete a subscription (its pending deliveries are dropped).
    Delete { webhook_id: String },
}

#[derive(Debug, Subcommand)]
pub enum AuditCmd {
    List {
        #[arg(long)]
        actor: Option<String>,
        #[arg(long)]
        object_type: Option<String>,
        #[arg(long)]
        object_id: Option<String>,
        #[arg(long)]
        action: Option<String>,
        /// Only entries newer than this, e.g. `1h`.
        #[arg(long, value_parser = humantime::parse_duration)]
        since: Option<std::time::Duration>,
        /// At most this many entries (newest first).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
}

#[derive(Debug, Subcommand)]
pub enum RunnerCmd {
    /// The runs this runner executes now.
    List,
    /// Cancel a run on this runner.
    Cancel {
        run_id: String,
        #[arg(long, default_value = "cancelled from the cli")]
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }

    #[test]
    fn targets_validate_and_aws_create_parse() {
        use super::{Cli, Command, TargetsCmd};
        use clap::Parser;
        let parse = |args: &[&str]| Cli::try_parse_from([&["cairn"], args].concat());
        let cli = parse(&[
            "targets",
            "validate",
            "aws-prod",
            "--wait",
            "--wait-timeout",
            "5s",
        ])
        .unwrap();
        match cli.command {
            Command::Targets(TargetsCmd::Validate {
                target,
                wait,
                wait_timeout,
            }) => {
                assert_eq!(target, "aws-prod");
                assert!(wait);
                assert_eq!(wait_timeout, std::time::Duration::from_secs(5));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["targets", "validate", "aws-prod"]).unwrap().command {
            Command::Targets(TargetsCmd::Validate { wait, .. }) => assert!(!wait),
            other => panic!("{other:?}"),
        }
        // A deadline without waiting, a region without a role: usage errors.
        assert!(parse(&["targets", "validate", "x", "--wait-timeout", "5s"]).is_err());
        assert!(parse(&["targets", "create", "x", "--aws-region", "eu-west-1"]).is_err());
        let cli = parse(&[
            "targets",
            "create",
            "x",
            "--aws-region",
            "eu-west-1",
            "--aws-role-arn",
            "arn:aws:iam::210987654321:role/r",
            "--credential-ref",
            "platform-aws",
        ])
        .unwrap();
        match cli.command {
            Command::Targets(TargetsCmd::Create {
                aws_region,
                aws_role_arn,
                credential_ref,
                local_dir,
                ..
            }) => {
                assert_eq!(aws_region.as_deref(), Some("eu-west-1"));
                assert_eq!(
                    aws_role_arn.as_deref(),
                    Some("arn:aws:iam::210987654321:role/r")
                );
                assert_eq!(credential_ref, "platform-aws");
                assert!(local_dir.is_none());
            }
            other => panic!("{other:?}"),
        }
    }
}
