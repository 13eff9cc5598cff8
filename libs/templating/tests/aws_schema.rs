//! Every `resource` and `data` block of the AWS module family is checked against the
//! argument schema of the pinned provider (hashicorp/aws 6.25.0): no unknown argument, no
//! missing required argument or block, blocks where the schema has blocks (and only one of a
//! single block), attributes where it has attributes. The index is
//! `modules/aws/schema/args-6.25.0.json`, extracted by `modules/aws/schema/extract.py` from
//! the cdktf provider assembly (its source and version are in the file).
//!
//! `ephemeral "random_password"` (hashicorp/random 3.7.2) is checked against the argument
//! list below, from that provider's documentation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use hcl::{Block, Body};
use serde_json::Value;

/// Arguments of `ephemeral "random_password"` in hashicorp/random 3.7.2 (all optional but
/// `length`).
const RANDOM_PASSWORD: [&str; 12] = [
    "length",
    "keepers",
    "lower",
    "min_lower",
    "min_numeric",
    "min_special",
    "min_upper",
    "numeric",
    "override_special",
    "special",
    "upper",
    "count",
];
/// Meta-arguments every resource and data source takes.
const META_ARGUMENTS: [&str; 4] = ["count", "for_each", "depends_on", "provider"];

fn modules_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("modules/aws").is_dir())
        .map(|d| d.join("modules"))
        .expect("no modules/aws above the crate")
}

fn index() -> Value {
    let path = modules_root().join("aws/schema/args-6.25.0.json");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let index: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(index["provider"], "hashicorp/aws 6.25.0");
    index
}

/// Checks `body` against the arguments `args` (`{name: {required, block?, list?}}`).
fn check_body(
    index: &Value,
    args: &Value,
    body: &Body,
    at: &str,
    top: bool,
    out: &mut Vec<String>,
) {
    let Some(args) = args.as_object() else {
        out.push(format!("{at}: no schema"));
        return;
    };
    let mut given: BTreeMap<String, usize> = BTreeMap::new();
    for a in body.attributes() {
        let k = a.key();
        if top && META_ARGUMENTS.contains(&k) {
            continue;
        }
        match args.get(k) {
            None => out.push(format!("{at}: unknown argument {k}")),
            Some(s) if s.get("block").is_some() => out.push(format!(
                "{at}: {k} is a block in the schema, set as an attribute"
            )),
            Some(_) => *given.entry(k.to_owned()).or_default() += 1,
        }
    }
    for b in body.blocks() {
        let (name, content) = match b.identifier() {
            "lifecycle" if top => continue,
            "dynamic" => (label(b), dynamic_content(b)),
            other => (other.to_owned(), Some(b.body())),
        };
        let Some(schema) = args.get(&name) else {
            out.push(format!("{at}: unknown block {name}"));
            continue;
        };
        let Some(block) = schema.get("block").and_then(Value::as_str) else {
            out.push(format!(
                "{at}: {name} is an attribute in the schema, written as a block"
            ));
            continue;
        };
        let n = given.entry(name.clone()).or_default();
        *n += 1;
        if *n > 1 && schema["list"] == false {
            out.push(format!("{at}: {name} may appear once"));
        }
        if let Some(content) = content {
            check_body(
                index,
                &index["blocks"][block],
                content,
                &format!("{at}.{name}"),
                false,
                out,
            );
        } else {
            out.push(format!("{at}: dynamic {name} has no content"));
        }
    }
    for (name, s) in args {
        if s["required"] == true && !given.contains_key(name) {
            out.push(format!("{at}: missing required argument {name}"));
        }
    }
}

fn label(b: &Block) -> String {
    b.labels()
        .first()
        .map(|l| l.as_str().to_owned())
        .unwrap_or_default()
}

fn dynamic_content(b: &Block) -> Option<&Body> {
    b.body()
        .blocks()
        .find(|x| x.identifier() == "content")
        .map(Block::body)
}

/// The schema violations of every block of the `.tf` files under `family`.
fn violations(family: &Path, index: &Value) -> (Vec<String>, BTreeSet<String>) {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    let mut dirs: Vec<PathBuf> = fs::read_dir(family)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("module.cairn.json").is_file())
        .collect();
    dirs.sort();
    for dir in dirs {
        let kind = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut files: Vec<PathBuf> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "tf"))
            .collect();
        files.sort();
        for f in files {
            let body = hcl::parse(&fs::read_to_string(&f).unwrap()).unwrap();
            for b in body.blocks() {
                let (what, ty) = (b.identifier(), label(b));
                let name = b
                    .labels()
                    .get(1)
                    .map(|l| l.as_str().to_owned())
                    .unwrap_or_default();
                let at = format!("{kind}: {what} {ty}.{name}");
                match what {
                    "resource" | "data" => {
                        seen.insert(format!("{what} {ty}"));
                        let args = &index[what][&ty];
                        if args.is_null() {
                            out.push(format!(
                                "{at}: {ty} is not in the schema index (extract it again with modules/aws/schema/extract.py)"
                            ));
                            continue;
                        }
                        check_body(index, args, b.body(), &at, true, &mut out);
                    }
                    "ephemeral" => {
                        if ty != "random_password" {
                            out.push(format!("{at}: unknown ephemeral resource"));
                            continue;
                        }
                        let known: BTreeSet<&str> = RANDOM_PASSWORD.into_iter().collect();
                        for a in b.body().attributes() {
                            if !known.contains(a.key()) {
                                out.push(format!("{at}: unknown argument {}", a.key()));
                            }
                        }
                        if !b.body().attributes().any(|a| a.key() == "length") {
                            out.push(format!("{at}: missing required argument length"));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    (out, seen)
}

#[test]
fn every_block_of_the_aws_family_fits_the_provider_schema() {
    let index = index();
    let (v, seen) = violations(&modules_root().join("aws"), &index);
    assert!(
        v.is_empty(),
        "{} schema violation(s):\n  {}",
        v.len(),
        v.join("\n  ")
    );
    // The check covered the family's blocks, and the index holds no type no module uses.
    assert!(seen.len() >= 40, "{seen:?}");
    let indexed: BTreeSet<String> = ["resource", "data"]
        .iter()
        .flat_map(|w| {
            index[*w]
                .as_object()
                .unwrap()
                .keys()
                .map(move |k| format!("{w} {k}"))
        })
        .collect();
    assert_eq!(
        indexed, seen,
        "index and modules disagree (re-run extract.py)"
    );
}

#[test]
fn the_schema_check_catches_unknown_missing_and_misnested_arguments() {
    let index = index();
    let cases = [
        (
            "resource \"aws_db_instance\" \"x\" {\n  engine = \"postgres\"\n  passwrd_wo = \"x\"\n}\n",
            [
                "unknown argument passwrd_wo",
                "missing required argument instance_class",
            ]
            .as_slice(),
        ),
        (
            "resource \"aws_s3_bucket_versioning\" \"x\" {\n  bucket = \"b\"\n  versioning_configuration = { status = \"Enabled\" }\n}\n",
            ["versioning_configuration is a block in the schema"].as_slice(),
        ),
        (
            "resource \"aws_s3_bucket_versioning\" \"x\" {\n  bucket = \"b\"\n  versioning_configuration {\n    status = \"Enabled\"\n  }\n  versioning_configuration {\n    status = \"Enabled\"\n  }\n}\n",
            ["may appear once"].as_slice(),
        ),
        (
            "resource \"aws_vpc\" \"x\" {\n  cidr_block = \"10.0.0.0/16\"\n  tags {\n    a = \"b\"\n  }\n}\n",
            ["tags is an attribute in the schema"].as_slice(),
        ),
        (
            "resource \"aws_lb_listener_rule\" \"x\" {\n  listener_arn = \"a\"\n  action {\n    type = \"forward\"\n  }\n  condition {\n    path_patern {\n      values = [\"/\"]\n    }\n  }\n}\n",
            ["unknown block path_patern"].as_slice(),
        ),
        (
            "resource \"aws_kinesis_stream\" \"x\" {\n  name = \"s\"\n}\n",
            ["not in the schema index"].as_slice(),
        ),
    ];
    for (tf, expected) in cases {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("broken");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("module.cairn.json"), "{}").unwrap();
        fs::write(dir.join("main.tf"), tf).unwrap();
        let (v, _) = violations(scratch.path(), &index);
        for e in expected {
            assert!(
                v.iter().any(|x| x.contains(e)),
                "{e:?} not reported for\n{tf}\n{v:?}"
            );
        }
    }
}
