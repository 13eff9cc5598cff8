//! Who you are and who may do what: login, whoami, contexts, tenants, users, API tokens.
use std::io::IsTerminal;

use cairn_proto::tenancy as pb;
use cairn_sdk::{AccessClaims, Cairn, CallOptions, Credential, Endpoint};

use crate::app::{App, all_pages, read_stdin_secret};
use crate::cli::{ContextCmd, LoginArgs, OutputFormat, TenantsCmd, TokensCmd, UsersCmd};
use crate::config::Config;
use crate::error::{CliError, Result};
use crate::output;
use crate::views::{
    ApiTokenView, ContextView, CreatedTokenView, MemberView, TenantView, WhoamiView, ts,
};

fn password(stdin: bool, prompt: &str) -> Result<String> {
    if stdin {
        return read_stdin_secret();
    }
    if !std::io::stdin().is_terminal() {
        return Err(CliError::Usage(
            "no terminal to prompt for the password: pass --password-stdin".into(),
        ));
    }
    rpassword::prompt_password(prompt)
        .map_err(|e| CliError::Other(format!("read the password: {e}")))
}

pub async fn login(app: &App, args: &LoginArgs) -> Result {
    let token = match (&args.api_token_file, &args.email) {
        (Some(file), _) => {
            let credential = Credential::from_file(file)
                .map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
            let client = Cairn::builder()
                .endpoints(app.config.endpoints())
                .options(app.cairn.options().clone())
                .credential(credential.clone())
                .build()?;
            // Prove it works before storing it.
            client.access_token().await?;
            match credential {
                Credential::ApiToken(t) | Credential::AccessToken(t) => t,
            }
        }
        (None, Some(email)) => {
            let tenant_slug = args.tenant.clone().ok_or_else(|| {
                CliError::Usage("--email needs --tenant SLUG (the tenant to log in to)".into())
            })?;
            let password = password(args.password_stdin, "password: ")?;
            let answer = app
                .cairn
                .tokens()
                .login(pb::LoginRequest {
                    tenant_slug,
                    email: email.clone(),
                    password,
                })
                .await?;
            answer.access_token
        }
        (None, None) => {
            return Err(CliError::Usage(
                "pass --api-token-file FILE, or --tenant SLUG --email EMAIL".into(),
            ));
        }
    };
    let path = app.config.store_credential(&token)?;
    let me = Cairn::builder()
        .endpoints(app.config.endpoints())
        .credential(Credential::parse(&token).map_err(|e| CliError::Other(e.to_string()))?)
        .build()?
        .identity()
        .await?;
    eprintln!(
        "logged in to context {:?} as {} ({}{}); credential stored in {}",
        app.config.context,
        me.sub,
        me.role,
        me.tid.map(|t| format!(", tenant {t}")).unwrap_or_default(),
        path.display()
    );
    if matches!(Credential::parse(&token), Ok(Credential::AccessToken(_))) {
        eprintln!(
            "note: a password login stores a short-lived access token; log in again when it expires"
        );
    }
    Ok(())
}

pub fn logout(app: &App) -> Result {
    if app.config.forget_credential()? {
        eprintln!("forgot the credential of context {:?}", app.config.context);
    } else {
        eprintln!("context {:?} had no stored credential", app.config.context);
    }
    Ok(())
}

pub async fn whoami(app: &App) -> Result {
    let claims: AccessClaims = app.cairn.identity().await?;
    let mut view = WhoamiView {
        context: app.config.context.clone(),
        subject: claims.sub.clone(),
        tenant_id: claims.tid.clone(),
        tenant_slug: None,
        email: None,
        role: claims.role.clone(),
        scopes: claims.scopes.clone(),
        expires_at: ts(&Some(prost_types::Timestamp {
            seconds: claims.exp,
            nanos: 0,
        })),
    };
    if let Some(tid) = &claims.tid {
        let tenant = app
            .cairn
            .tenants()
            .get_tenant(pb::GetTenantRequest {
                tenant_id: tid.clone(),
            })
            .await?;
        view.tenant_slug = tenant.tenant.map(|t| t.slug);
        // The subject of a user token is the user id; an API token acts as its user.
        if let Ok(member) = app
            .cairn
            .users()
            .get_user(pb::GetUserRequest {
                tenant_id: tid.clone(),
                user_id: claims.sub.clone(),
            })
            .await
        {
            view.email = member.member.map(|m| m.email);
        }
    }
    output::one(app.output, &view)
}

fn context_view(config: &Config, name: &str) -> ContextView {
    let e = config.file.contexts.get(name).cloned().unwrap_or_default();
    ContextView {
        name: name.to_owned(),
        current: config.context == name,
        tenancy: e.url(Endpoint::Tenancy).to_owned(),
        templates: e.url(Endpoint::Templates).to_owned(),
        state: e.url(Endpoint::State).to_owned(),
        runner: e.url(Endpoint::Runner).to_owned(),
        deployments: e.url(Endpoint::Deployments).to_owned(),
        drift: e.url(Endpoint::Drift).to_owned(),
    }
}

/// Contexts need no client: they only touch the config file.
pub fn context(mut config: Config, format: OutputFormat, cmd: &ContextCmd) -> Result {
    match cmd {
        ContextCmd::List => {
            let mut names: Vec<String> = config.file.contexts.keys().cloned().collect();
            if !names.contains(&config.context) {
                names.push(config.context.clone());
            }
            let views: Vec<ContextView> = names.iter().map(|n| context_view(&config, n)).collect();
            output::list(format, &views)
        }
        ContextCmd::Show { name } => {
            let name = name.clone().unwrap_or_else(|| config.context.clone());
            output::one(format, &context_view(&config, &name))
        }
        ContextCmd::Set {
            name,
            tenancy,
            templates,
            state,
            runner,
            deployments,
            drift,
        } => {
            let entry = config.file.contexts.entry(name.clone()).or_default();
            for (endpoint, url) in [
                (Endpoint::Tenancy, tenancy),
                (Endpoint::Templates, templates),
                (Endpoint::State, state),
                (Endpoint::Runner, runner),
                (Endpoint::Deployments, deployments),
                (Endpoint::Drift, drift),
            ] {
                if let Some(url) = url {
                    entry.set(endpoint, url.clone());
                }
            }
            if config.file.current_context.is_none() {
                config.file.current_context = Some(name.clone());
            }
            config.save()?;
            // Check the URLs now rather than at the next command.
            Cairn::builder()
                .endpoints(config.file.contexts.get(name).cloned().unwrap_or_default())
                .options(CallOptions::default())
                .build()?;
            eprintln!("context {name:?} saved");
            Ok(())
        }
        ContextCmd::Use { name } => {
            if !config.file.contexts.contains_key(name) {
                return Err(CliError::Usage(format!(
                    "no context {name:?} (create it with `cairn context set {name}`)"
                )));
            }
            config.file.current_context = Some(name.clone());
            config.save()?;
            eprintln!("now using context {name:?}");
            Ok(())
        }
    }
}

pub async fn tenants(app: &App, cmd: &TenantsCmd) -> Result {
    match cmd {
        TenantsCmd::Create {
            slug,
            display_name,
            owner_email,
            owner_name,
            owner_password_stdin,
        } => {
            let owner_password = if *owner_password_stdin {
                read_stdin_secret()?
            } else {
                String::new()
            };
            let r = app
                .cairn
                .tenants()
                .create_tenant(pb::CreateTenantRequest {
                    slug: slug.clone(),
                    display_name: display_name.clone().unwrap_or_else(|| slug.clone()),
                    owner_email: owner_email.clone(),
                    owner_display_name: owner_name
                        .clone()
                        .unwrap_or_else(|| name_of_email(owner_email)),
                    owner_password,
                })
                .await?;
            output::one(app.output, &TenantView::from(r.tenant.unwrap_or_default()))
        }
        TenantsCmd::List => {
            let views: Vec<TenantView> = app
                .list_tenants()
                .await?
                .into_iter()
                .map(TenantView::from)
                .collect();
            output::list(app.output, &views)
        }
    }
}

pub async fn users(app: &App, cmd: &UsersCmd) -> Result {
    let tenant_id = app.tenant_id().await?;
    let users = app.cairn.users();
    match cmd {
        UsersCmd::Add {
            email,
            role,
            display_name,
            password_stdin,
        } => {
            let password = if *password_stdin {
                read_stdin_secret()?
            } else {
                String::new()
            };
            let r = users
                .add_user(pb::AddUserRequest {
                    tenant_id,
                    email: email.clone(),
                    display_name: display_name.clone().unwrap_or_else(|| name_of_email(email)),
                    password,
                    role: role.clone(),
                })
                .await?;
            output::one(app.output, &MemberView::from(r.member.unwrap_or_default()))
        }
        UsersCmd::List => {
            let members = all_pages(|page_token| {
                let users = users.clone();
                let tenant_id = tenant_id.clone();
                async move {
                    let r = users
                        .list_users(pb::ListUsersRequest {
                            tenant_id,
                            page_size: 100,
                            page_token,
                        })
                        .await?;
                    Ok((r.members, r.next_page_token))
                }
            })
            .await?;
            let views: Vec<MemberView> = members.into_iter().map(MemberView::from).collect();
            output::list(app.output, &views)
        }
        UsersCmd::SetRole { user, role } => {
            let member = app.member(user).await?;
            let r = users
                .set_role(pb::SetRoleRequest {
                    tenant_id,
                    user_id: member.user_id,
                    role: role.clone(),
                })
                .await?;
            output::one(app.output, &MemberView::from(r.member.unwrap_or_default()))
        }
        UsersCmd::Remove { user } => {
            let member = app.member(user).await?;
            users
                .remove_user(pb::RemoveUserRequest {
                    tenant_id,
                    user_id: member.user_id.clone(),
                })
                .await?;
            eprintln!("removed {} from the tenant", member.email);
            Ok(())
        }
    }
}

pub async fn tokens(app: &App, cmd: &TokensCmd) -> Result {
    let tenant_id = app.tenant_id().await?;
    let tokens = app.cairn.tokens();
    match cmd {
        TokensCmd::Create {
            name,
            role,
            scopes,
            ttl,
        } => {
            let r = tokens
                .create_api_token(pb::CreateApiTokenRequest {
                    tenant_id,
                    name: name.clone(),
                    role: role.clone().unwrap_or_default(),
                    scopes: scopes.clone(),
                    ttl_seconds: ttl.map(|d| d.as_secs()).unwrap_or(0),
                })
                .await?;
            let view = CreatedTokenView {
                token: ApiTokenView::from(r.token.unwrap_or_default()),
                secret: r.secret,
            };
            if app.output == OutputFormat::Table {
                eprintln!("the secret is shown once; store it now");
            }
            output::one(app.output, &view)
        }
        TokensCmd::List => {
            let list = all_pages(|page_token| {
                let tokens = tokens.clone();
                let tenant_id = tenant_id.clone();
                async move {
                    let r = tokens
                        .list_api_tokens(pb::ListApiTokensRequest {
                            tenant_id,
                            page_size: 100,
                            page_token,
                        })
                        .await?;
                    Ok((r.tokens, r.next_page_token))
                }
            })
            .await?;
            let views: Vec<ApiTokenView> = list.into_iter().map(ApiTokenView::from).collect();
            output::list(app.output, &views)
        }
        TokensCmd::Revoke { token_id } => {
            let r = tokens
                .revoke_api_token(pb::RevokeApiTokenRequest {
                    tenant_id,
                    token_id: token_id.clone(),
                })
                .await?;
            output::one(app.output, &ApiTokenView::from(r.token.unwrap_or_default()))
        }
    }
}

/// A person's display name when none is given: the part of their email before the `@`.
fn name_of_email(email: &str) -> String {
    email.split('@').next().unwrap_or(email).to_owned()
}
