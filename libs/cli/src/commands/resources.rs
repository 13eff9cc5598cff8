//! What deployments are made of: targets, templates (validate, publish) and instances.
use std::path::Path;

use cairn_proto::{deployments as dpb, templates as tpb, tenancy as tnpb};
use serde_json::{Map, Value};

use crate::app::{App, all_pages};
use crate::cli::{InstancesCmd, OutputFormat, ParamArgs, TargetsCmd, TemplatesCmd};
use crate::error::{CliError, Result};
use crate::output;
use crate::views::{
    InstanceView, ProblemView, PublishedView, TargetView, TemplateView, ValidationView, VersionView,
};

pub async fn targets(app: &App, cmd: &TargetsCmd) -> Result {
    let tenant_id = app.tenant_id().await?;
    let targets = app.cairn.targets();
    match cmd {
        TargetsCmd::Create {
            name,
            local_dir,
            aws_region,
            aws_role_arn,
            credential_ref,
            max_concurrent,
            disabled,
        } => {
            let provider = match (local_dir, aws_region, aws_role_arn) {
                (Some(dir), _, _) => {
                    let dir = std::path::absolute(dir).map_err(|e| {
                        CliError::Usage(format!("--local-dir {}: {e}", dir.display()))
                    })?;
                    tnpb::target_spec::Provider::Local(tnpb::LocalProvider {
                        base_dir: dir.display().to_string(),
                    })
                }
                (None, Some(region), Some(role_arn)) => {
                    tnpb::target_spec::Provider::Aws(tnpb::AwsProvider {
                        region: region.clone(),
                        role_arn: role_arn.clone(),
                    })
                }
                _ => {
                    return Err(CliError::Usage(
                        "pass --local-dir DIR, or --aws-region and --aws-role-arn".into(),
                    ));
                }
            };
            let r = targets
                .create_target(tnpb::CreateTargetRequest {
                    tenant_id,
                    name: name.clone(),
                    spec: Some(tnpb::TargetSpec {
                        provider: Some(provider),
                        credential_ref: credential_ref.clone(),
                        max_concurrent_deployments: *max_concurrent,
                        enabled: !disabled,
                    }),
                })
                .await?;
            output::one(app.output, &TargetView::from(r.target.unwrap_or_default()))
        }
        TargetsCmd::List => {
            let list = all_pages(|page_token| {
                let targets = targets.clone();
                let tenant_id = tenant_id.clone();
                async move {
                    let r = targets
                        .list_targets(tnpb::ListTargetsRequest {
                            tenant_id,
                            page_size: 100,
                            page_token,
                        })
                        .await?;
                    Ok((r.targets, r.next_page_token))
                }
            })
            .await?;
            let views: Vec<TargetView> = list.into_iter().map(TargetView::from).collect();
            output::list(app.output, &views)
        }
        TargetsCmd::Get { target } => {
            output::one(app.output, &TargetView::from(app.target(target).await?))
        }
    }
}

fn read_document(file: &Path) -> Result<String> {
    std::fs::read_to_string(file)
        .map_err(|e| CliError::Usage(format!("read {}: {e}", file.display())))
}

/// Validates `document`; prints its problems as `file:line:col: message` on stderr (and
/// the whole report with `--output json` on stdout when `report`). Ok(true) when valid.
async fn validate(app: &App, file: &Path, document: &str, report: bool) -> Result<bool> {
    let r = app
        .cairn
        .resolver()
        .validate(tpb::ValidateRequest {
            document: document.to_owned(),
        })
        .await?;
    let name = file.display().to_string();
    let problems: Vec<ProblemView> = r
        .problems
        .into_iter()
        .map(|p| ProblemView {
            file: name.clone(),
            line: p.line,
            column: p.column,
            kind: p.kind,
            path: p.path,
            message: p.message,
        })
        .collect();
    for p in &problems {
        let message = p.message.replace('\n', " ");
        if p.line == 0 {
            eprintln!("{}: {message}", p.file);
        } else {
            eprintln!("{}:{}:{}: {message}", p.file, p.line, p.column.max(1));
        }
    }
    let valid = r.valid && problems.is_empty();
    if report {
        let view = ValidationView {
            file: name,
            valid,
            content_hash: r.content_hash,
            problems,
        };
        match app.output {
            OutputFormat::Json => output::json(&view)?,
            OutputFormat::Table if valid => {
                println!("{}: valid (content hash {})", view.file, view.content_hash);
            }
            OutputFormat::Table => {}
        }
    }
    Ok(valid)
}

fn invalid(file: &Path) -> CliError {
    eprintln!("error: {} is not a valid template", file.display());
    CliError::Exit(1)
}

async fn publish(app: &App, template: tpb::Template, file: &Path) -> Result {
    let document = read_document(file)?;
    if !validate(app, file, &document, false).await? {
        return Err(invalid(file));
    }
    let r = app
        .cairn
        .templates()
        .publish_version(tpb::PublishVersionRequest {
            template_id: template.template_id.clone(),
            document,
        })
        .await?;
    let version = VersionView::from(r.version.unwrap_or_default());
    let mut template = TemplateView::from(template);
    template.latest_version = template.latest_version.max(version.number);
    output::one(
        app.output,
        &PublishedView {
            template,
            version,
            created: r.created,
        },
    )
}

pub async fn templates(app: &App, cmd: &TemplatesCmd) -> Result {
    match cmd {
        TemplatesCmd::Create {
            name,
            description,
            file,
        } => {
            let document = file.as_deref().map(read_document).transpose()?;
            if let (Some(file), Some(document)) = (file, &document)
                && !validate(app, file, document, false).await?
            {
                return Err(invalid(file));
            }
            let r = app
                .cairn
                .templates()
                .create_template(tpb::CreateTemplateRequest {
                    tenant_id: app.tenant_id().await?,
                    name: name.clone(),
                    description: description.clone(),
                })
                .await?;
            let template = r.template.unwrap_or_default();
            match file {
                Some(file) => publish(app, template, file).await,
                None => output::one(app.output, &TemplateView::from(template)),
            }
        }
        TemplatesCmd::Publish { template, file } => {
            let template = app.template(template).await?;
            publish(app, template, file).await
        }
        TemplatesCmd::List => {
            let tenant_id = app.tenant_id().await?;
            let templates = app.cairn.templates();
            let list = all_pages(|page_token| {
                let templates = templates.clone();
                let tenant_id = tenant_id.clone();
                async move {
                    let r = templates
                        .list_templates(tpb::ListTemplatesRequest {
                            tenant_id,
                            page_size: 100,
                            page_token,
                        })
                        .await?;
                    Ok((r.templates, r.next_page_token))
                }
            })
            .await?;
            let views: Vec<TemplateView> = list.into_iter().map(TemplateView::from).collect();
            output::list(app.output, &views)
        }
        TemplatesCmd::Get { template } => output::one(
            app.output,
            &TemplateView::from(app.template(template).await?),
        ),
        TemplatesCmd::Versions { template } => {
            let template_id = app.template(template).await?.template_id;
            let templates = app.cairn.templates();
            let list = all_pages(|page_token| {
                let templates = templates.clone();
                let template_id = template_id.clone();
                async move {
                    let r = templates
                        .list_versions(tpb::ListVersionsRequest {
                            template_id,
                            page_size: 100,
                            page_token,
                        })
                        .await?;
                    Ok((r.versions, r.next_page_token))
                }
            })
            .await?;
            let views: Vec<VersionView> = list.into_iter().map(VersionView::from).collect();
            output::list(app.output, &views)
        }
        TemplatesCmd::Validate { file } => {
            let document = read_document(file)?;
            if validate(app, file, &document, true).await? {
                Ok(())
            } else {
                Err(invalid(file))
            }
        }
    }
}

/// `--param k=v`: the value as JSON when it parses (numbers, booleans, null, arrays,
/// objects, quoted strings), else the text as a string.
pub fn parse_params(args: &ParamArgs) -> Result<Map<String, Value>> {
    let mut params = match &args.params_file {
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| CliError::Usage(format!("read {}: {e}", file.display())))?;
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(map)) => map,
                Ok(_) => {
                    return Err(CliError::Usage(format!(
                        "{}: parameters must be a JSON object",
                        file.display()
                    )));
                }
                Err(e) => {
                    return Err(CliError::Usage(format!(
                        "{}:{}:{}: {e}",
                        file.display(),
                        e.line(),
                        e.column()
                    )));
                }
            }
        }
        None => Map::new(),
    };
    for p in &args.params {
        let (key, value) = p
            .split_once('=')
            .ok_or_else(|| CliError::Usage(format!("--param {p:?}: expected KEY=VALUE")))?;
        if key.is_empty() {
            return Err(CliError::Usage(format!("--param {p:?}: empty key")));
        }
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
        params.insert(key.to_owned(), value);
    }
    Ok(params)
}

pub fn params_patch(args: &ParamArgs) -> Result<String> {
    let params = parse_params(args)?;
    Ok(if params.is_empty() {
        String::new()
    } else {
        Value::Object(params).to_string()
    })
}

pub async fn instances(app: &App, cmd: &InstancesCmd) -> Result {
    let tenant_id = app.tenant_id().await?;
    let instances = app.cairn.instances();
    match cmd {
        InstancesCmd::Create {
            name,
            template,
            target,
            environment,
            params,
        } => {
            let (template_ref, version) = match template.rsplit_once('@') {
                Some((t, v)) => (
                    t.to_owned(),
                    v.parse::<u32>().map_err(|_| {
                        CliError::Usage(format!("--template {template:?}: @VERSION is a number"))
                    })?,
                ),
                None => (template.clone(), 0),
            };
            let r = instances
                .create_instance(dpb::CreateInstanceRequest {
                    tenant_id,
                    name: name.clone(),
                    template_ref,
                    template_version: version,
                    target_ref: target.clone(),
                    environment: environment.clone(),
                    parameters_json: Value::Object(parse_params(params)?).to_string(),
                })
                .await?;
            output::one(
                app.output,
                &InstanceView::from(r.instance.unwrap_or_default()),
            )
        }
        InstancesCmd::List => {
            let list = all_pages(|page_token| {
                let instances = instances.clone();
                let tenant_id = tenant_id.clone();
                async move {
                    let r = instances
                        .list_instances(dpb::ListInstancesRequest {
                            tenant_id,
                            page_size: 100,
                            page_token,
                        })
                        .await?;
                    Ok((r.instances, r.next_page_token))
                }
            })
            .await?;
            let views: Vec<InstanceView> = list.into_iter().map(InstanceView::from).collect();
            output::list(app.output, &views)
        }
        InstancesCmd::Get { instance } => {
            let r = instances
                .get_instance(dpb::GetInstanceRequest {
                    tenant_id,
                    instance_ref: instance.clone(),
                })
                .await?;
            output::one(
                app.output,
                &InstanceView::from(r.instance.unwrap_or_default()),
            )
        }
        InstancesCmd::Update {
            instance,
            params,
            version,
        } => {
            let r = instances
                .update_instance(dpb::UpdateInstanceRequest {
                    tenant_id,
                    instance_ref: instance.clone(),
                    template_version: version.unwrap_or(0),
                    parameters_patch_json: params_patch(params)?,
                })
                .await?;
            output::one(
                app.output,
                &InstanceView::from(r.instance.unwrap_or_default()),
            )
        }
        InstancesCmd::Delete { instance } => {
            instances
                .delete_instance(dpb::DeleteInstanceRequest {
                    tenant_id,
                    instance_ref: instance.clone(),
                })
                .await?;
            eprintln!("deleted instance {instance}");
            Ok(())
        }
    }
}
