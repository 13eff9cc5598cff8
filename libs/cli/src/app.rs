//! What every command works with: the SDK client of the chosen context, the output format,
//! the tenant the command acts in, and lookups of objects named by name or id.
use std::future::Future;

use cairn_proto::{deployments as dpb, templates as tpb, tenancy as tnpb};
use cairn_sdk::{Cairn, CallOptions};
use tokio::sync::OnceCell;

use crate::cli::{Cli, OutputFormat};
use crate::config::Config;
use crate::error::{CliError, Result};

pub struct App {
    pub cairn: Cairn,
    pub config: Config,
    pub output: OutputFormat,
    tenant_override: Option<String>,
    tenant: OnceCell<String>,
}

/// Whether `s` is a UUID (then it names an object by id, else by name).
pub fn is_id(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok()
}

/// Every page of a list RPC: `fetch(page_token)` returns one page's items and the next
/// token (empty at the end).
pub async fn all_pages<T, F, Fut>(mut fetch: F) -> Result<Vec<T>>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = std::result::Result<(Vec<T>, String), cairn_sdk::Error>>,
{
    let mut items = Vec::new();
    let mut token = String::new();
    loop {
        let (page, next) = fetch(token).await?;
        items.extend(page);
        if next.is_empty() {
            return Ok(items);
        }
        token = next;
    }
}

impl App {
    pub fn new(cli: &Cli) -> Result<App> {
        let config = Config::load(cli.context.as_deref())?;
        let mut builder = Cairn::builder()
            .endpoints(config.endpoints())
            .options(CallOptions {
                deadline: cli.timeout,
                ..CallOptions::default()
            });
        if let Some(credential) = config.credential()? {
            builder = builder.credential(credential);
        }
        Ok(App {
            cairn: builder.build()?,
            config,
            output: cli.output,
            tenant_override: cli.tenant_id.clone(),
            tenant: OnceCell::new(),
        })
    }

    /// The tenant id the command acts in: `--tenant-id` (an id or a slug), else the
    /// credential's own tenant.
    pub async fn tenant_id(&self) -> Result<String> {
        self.tenant
            .get_or_try_init(|| async {
                if let Some(t) = &self.tenant_override {
                    if is_id(t) {
                        return Ok(t.clone());
                    }
                    let tenants = self.list_tenants().await?;
                    return tenants
                        .into_iter()
                        .find(|x| &x.slug == t)
                        .map(|x| x.tenant_id)
                        .ok_or_else(|| CliError::Other(format!("no tenant {t:?} visible to you")));
                }
                self.cairn.identity().await?.tid.ok_or_else(|| {
                    CliError::Usage(
                        "the credential is a service's, not a tenant user's: pass --tenant-id"
                            .to_owned(),
                    )
                })
            })
            .await
            .cloned()
    }

    pub async fn list_tenants(&self) -> Result<Vec<tnpb::Tenant>> {
        let tenants = self.cairn.tenants();
        all_pages(|page_token| {
            let tenants = tenants.clone();
            async move {
                let r = tenants
                    .list_tenants(tnpb::ListTenantsRequest {
                        page_size: 100,
                        page_token,
                    })
                    .await?;
                Ok((r.tenants, r.next_page_token))
            }
        })
        .await
    }

    /// A template by name or id.
    pub async fn template(&self, reference: &str) -> Result<tpb::Template> {
        let tenant_id = self.tenant_id().await?;
        let req = if is_id(reference) {
            tpb::GetTemplateRequest {
                template_id: reference.to_owned(),
                ..Default::default()
            }
        } else {
            tpb::GetTemplateRequest {
                template_id: String::new(),
                tenant_id,
                name: reference.to_owned(),
            }
        };
        self.cairn
            .templates()
            .get_template(req)
            .await?
            .template
            .ok_or_else(|| CliError::Other("templates answered without a template".into()))
    }

    /// An instance by name or id (deployments resolves either).
    pub async fn instance(&self, reference: &str) -> Result<dpb::Instance> {
        let tenant_id = self.tenant_id().await?;
        self.cairn
            .instances()
            .get_instance(dpb::GetInstanceRequest {
                tenant_id,
                instance_ref: reference.to_owned(),
            })
            .await?
            .instance
            .ok_or_else(|| CliError::Other("deployments answered without an instance".into()))
    }

    /// A target by name or id.
    pub async fn target(&self, reference: &str) -> Result<tnpb::Target> {
        let tenant_id = self.tenant_id().await?;
        let (target_id, name) = if is_id(reference) {
            (reference.to_owned(), String::new())
        } else {
            (String::new(), reference.to_owned())
        };
        self.cairn
            .targets()
            .get_target(tnpb::GetTargetRequest {
                tenant_id,
                target_id,
                name,
            })
            .await?
            .target
            .ok_or_else(|| CliError::Other("tenancy answered without a target".into()))
    }

    /// A member by email or user id.
    pub async fn member(&self, reference: &str) -> Result<tnpb::Member> {
        let tenant_id = self.tenant_id().await?;
        if is_id(reference) {
            return self
                .cairn
                .users()
                .get_user(tnpb::GetUserRequest {
                    tenant_id,
                    user_id: reference.to_owned(),
                })
                .await?
                .member
                .ok_or_else(|| CliError::Other("tenancy answered without a member".into()));
        }
        let users = self.cairn.users();
        let members = all_pages(|page_token| {
            let users = users.clone();
            let tenant_id = tenant_id.clone();
            async move {
                let r = users
                    .list_users(tnpb::ListUsersRequest {
                        tenant_id,
                        page_size: 100,
                        page_token,
                    })
                    .await?;
                Ok((r.members, r.next_page_token))
            }
        })
        .await?;
        members
            .into_iter()
            .find(|m| m.email.eq_ignore_ascii_case(reference))
            .ok_or_else(|| {
                CliError::Other(format!(
                    "no member {reference:?} in this tenant (NOT_FOUND)"
                ))
            })
    }
}

/// Reads a secret from standard input (the first line, trimmed of its newline).
pub fn read_stdin_secret() -> Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| CliError::Other(format!("read standard input: {e}")))?;
    let secret = line.trim_end_matches(['\n', '\r']).to_owned();
    if secret.is_empty() {
        return Err(CliError::Usage("standard input held no password".into()));
    }
    Ok(secret)
}
