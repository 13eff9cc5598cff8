//! AWS targets: the external id is generated at creation (random per target), shown with the
//! target, kept by an update (even one that sends another value) and refused a change by the
//! database itself; a malformed region or role ARN is INVALID_ARGUMENT naming the field.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cairn_proto::tenancy as pb;
use common::*;

fn aws_spec(region: &str, role_arn: &str, external_id: &str) -> pb::TargetSpec {
    pb::TargetSpec {
        provider: Some(pb::target_spec::Provider::Aws(pb::AwsProvider {
            region: region.into(),
            role_arn: role_arn.into(),
            external_id: external_id.into(),
        })),
        credential_ref: "platform-aws".into(),
        max_concurrent_deployments: 2,
        enabled: true,
    }
}

fn aws_of(t: &pb::Target) -> pb::AwsProvider {
    match t.spec.as_ref().and_then(|s| s.provider.clone()) {
        Some(pb::target_spec::Provider::Aws(a)) => a,
        other => panic!("not an AWS target: {other:?}"),
    }
}

const ROLE: &str = "arn:aws:iam::123456789012:role/cairn-deploy";

#[tokio::test]
async fn external_ids_are_generated_shown_and_never_changed() {
    let app = spawn_app().await;
    let t = &app.a;
    let create = |name: &'static str, external_id: &'static str| {
        let mut client = app.targets(&t.owner_token);
        let tenant_id = t.id.to_string();
        async move {
            client
                .create_target(pb::CreateTargetRequest {
                    tenant_id,
                    name: name.into(),
                    spec: Some(aws_spec("eu-west-1", ROLE, external_id)),
                })
                .await
                .expect("create target")
                .into_inner()
                .target
                .unwrap()
        }
    };
    // A value sent by the caller is ignored: tenancy generates it.
    let one = create("aws-one", "chosen-by-the-caller").await;
    let two = create("aws-two", "").await;
    let id_one = aws_of(&one).external_id;
    let id_two = aws_of(&two).external_id;
    assert!(
        id_one.starts_with("cairn-") && id_one.len() == 38,
        "{id_one}"
    );
    assert_ne!(id_one, id_two, "random per target");

    // Shown on read.
    let got = app
        .targets(&t.owner_token)
        .get_target(pb::GetTargetRequest {
            tenant_id: t.id.to_string(),
            target_id: one.target_id.clone(),
            name: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .target
        .unwrap();
    assert_eq!(aws_of(&got).external_id, id_one);

    // An update (new region and role, another external id sent) keeps it.
    let updated = app
        .targets(&t.owner_token)
        .update_target(pb::UpdateTargetRequest {
            tenant_id: t.id.to_string(),
            target_id: one.target_id.clone(),
            spec: Some(aws_spec(
                "us-east-2",
                "arn:aws:iam::210987654321:role/other",
                "attacker-chosen",
            )),
        })
        .await
        .unwrap()
        .into_inner()
        .target
        .unwrap();
    let a = aws_of(&updated);
    assert_eq!(
        (a.region.as_str(), a.external_id.as_str()),
        ("us-east-2", id_one.as_str())
    );

    // The database refuses a change, whoever asks.
    let mut conn = app.runtime_conn().await;
    let err = sqlx::query("UPDATE targets SET external_id = 'cairn-other' WHERE target_id = $1")
        .bind(one.target_id.parse::<uuid::Uuid>().unwrap())
        .execute(&mut conn)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("never changes"), "{err}");
    app.finish().await;
}

#[tokio::test]
async fn malformed_regions_and_role_arns_are_invalid_arguments() {
    let app = spawn_app().await;
    let t = &app.a;
    for (region, role, field) in [
        ("euwest1", ROLE, "aws.region"),
        ("EU-WEST-1", ROLE, "aws.region"),
        ("eu-west-1", "arn:aws:iam::12345:role/x", "aws.role_arn"),
        (
            "eu-west-1",
            "arn:aws:iam::123456789012:user/x",
            "aws.role_arn",
        ),
        ("eu-west-1", "arn:aws:s3:::bucket", "aws.role_arn"),
    ] {
        let err = app
            .targets(&t.owner_token)
            .create_target(pb::CreateTargetRequest {
                tenant_id: t.id.to_string(),
                name: "bad".into(),
                spec: Some(aws_spec(region, role, "")),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{region} {role}");
        assert!(err.message().contains(field), "{}", err.message());
    }
    app.finish().await;
}
