//! The executors against a real Docker engine and the tofu-sim binary and image.
#![allow(clippy::unwrap_used)]

mod helpers;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};
use cairn_runner::executor::{
    DockerExecutor, Executor, LABEL_RUN_ID, LABEL_RUNNER_INSTANCE, OutputStream, RunId,
};
use helpers::*;

async fn containers_with_label(exec: &DockerExecutor, label: String) -> Vec<String> {
    let filters = HashMap::from([("label", vec![label])]);
    exec.docker()
        .list_containers(Some(
            ListContainersOptionsBuilder::new()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|c| c.id)
        .collect()
}

async fn run_containers(exec: &DockerExecutor, run_id: RunId) -> Vec<String> {
    containers_with_label(exec, format!("{LABEL_RUN_ID}={run_id}")).await
}

#[tokio::test]
async fn tofu_version_through_both_executors() {
    let scratch = scratch();
    let docker = docker_executor(instance("ver-d"), scratch.path(), module_library()).await;
    let process = process_executor(instance("ver-p"), scratch.path()).await;
    for exec in [&docker as &dyn Executor, &process] {
        let run = run_id();
        exec.prepare_run(&run).await.unwrap();
        let (outcome, lines) = exec_cmd(exec, run, Cmd::new(&["version"])).await;
        assert!(outcome.success(), "{outcome:?}: {}", text(&lines));
        assert!(
            lines
                .iter()
                .any(|l| l.stream == OutputStream::Stdout && l.text.starts_with("OpenTofu v")),
            "{lines:?}"
        );
        exec.cleanup_run(&run).await.unwrap();
        assert!(!exec.work_dir(&run).exists());
    }
    assert!(run_containers_empty(&docker).await);
}

async fn run_containers_empty(exec: &DockerExecutor) -> bool {
    containers_with_label(
        exec,
        format!("{LABEL_RUNNER_INSTANCE}={}", instance_of(exec)),
    )
    .await
    .is_empty()
}

fn instance_of(exec: &DockerExecutor) -> String {
    // The work dir is <root>/<instance>/<run>.
    let dir = exec.work_dir(&run_id());
    dir.parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// init, validate, plan -out, apply of a config using `./modules/local/network`, with the
/// target's base_dir at the same path: the file tofu writes appears on the host. The base
/// directory does not exist before the first command (a new local target).
async fn init_plan_apply(exec: &dyn Executor) {
    let run = run_id();
    let parent = tempfile::tempdir().unwrap();
    let base = parent.path().join("new-target");
    let base_path = base.to_string_lossy().into_owned();
    exec.prepare_run(&run).await.unwrap();
    std::fs::write(exec.work_dir(&run).join("main.tf"), NETWORK_ROOT).unwrap();
    let with_base = |args: &[&str]| {
        let mut cmd = Cmd::new(args).plain("TF_VAR_base_dir", &base_path);
        cmd.base_dir = Some(base.clone());
        cmd
    };

    let (o, lines) = exec_cmd(exec, run, with_base(&["init", "-input=false"])).await;
    assert!(o.success(), "init: {o:?}\n{}", text(&lines));
    let (o, lines) = exec_cmd(exec, run, with_base(&["validate"])).await;
    assert!(o.success(), "validate: {o:?}\n{}", text(&lines));
    let (o, lines) = exec_cmd(
        exec,
        run,
        with_base(&[
            "plan",
            "-input=false",
            "-out=plan.bin",
            "-detailed-exitcode",
        ]),
    )
    .await;
    assert_eq!(o.exit_code, Some(2), "plan: {o:?}\n{}", text(&lines));
    assert!(exec.work_dir(&run).join("plan.bin").is_file());
    assert!(exec.work_dir(&run).join(".terraform.lock.hcl").is_file());
    let (o, lines) = exec_cmd(exec, run, with_base(&["apply", "-input=false", "plan.bin"])).await;
    assert!(o.success(), "apply: {o:?}\n{}", text(&lines));

    let recorded = base.join("net1/network.json");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&recorded).unwrap()).unwrap();
    assert_eq!(json["name"], "net1");
    assert!(exec.work_dir(&run).join("terraform.tfstate").is_file());
    exec.cleanup_run(&run).await.unwrap();
    assert!(!exec.work_dir(&run).exists());
}

#[tokio::test]
async fn docker_init_plan_apply_with_module_library_and_base_dir() {
    let scratch = scratch();
    let exec = docker_executor(instance("apply-d"), scratch.path(), module_library()).await;
    init_plan_apply(&exec).await;
    assert!(run_containers_empty(&exec).await);
}

#[tokio::test]
async fn process_init_plan_apply_with_module_library_and_base_dir() {
    let scratch = scratch();
    let exec = process_executor(instance("apply-p"), scratch.path()).await;
    init_plan_apply(&exec).await;
}

#[tokio::test]
async fn docker_module_library_is_read_only() {
    let scratch = scratch();
    let library = tempfile::tempdir().unwrap();
    std::fs::write(library.path().join("README"), "library").unwrap();
    let exec = docker_executor(instance("ro"), scratch.path(), library.path().to_path_buf()).await;
    let run = run_id();
    exec.prepare_run(&run).await.unwrap();
    std::fs::write(
        exec.work_dir(&run).join("main.tf"),
        r#"
resource "local_file" "intruder" {
  filename = "${path.module}/modules/intruder.txt"
  content  = "written into the library"
}
"#,
    )
    .unwrap();
    let (o, lines) = exec_cmd(&exec, run, Cmd::new(&["init", "-input=false"])).await;
    assert!(o.success(), "init: {o:?}\n{}", text(&lines));
    let (o, lines) = exec_cmd(
        &exec,
        run,
        Cmd::new(&["apply", "-input=false", "-auto-approve"]),
    )
    .await;
    assert_eq!(o.exit_code, Some(1), "apply: {o:?}\n{}", text(&lines));
    assert!(
        text(&lines).contains("Read-only file system"),
        "no read-only error in:\n{}",
        text(&lines)
    );
    assert!(!library.path().join("intruder.txt").exists());
    exec.cleanup_run(&run).await.unwrap();
}

#[tokio::test]
async fn docker_secrets_stay_out_of_command_line_logs_and_work_files() {
    let canary = format!("canary-{}", uuid::Uuid::new_v4().simple());
    let scratch = scratch();
    let base = tempfile::tempdir().unwrap();
    let base_path = base.path().to_string_lossy().into_owned();
    let exec = docker_executor(instance("canary"), scratch.path(), module_library()).await;
    let run = run_id();
    exec.prepare_run(&run).await.unwrap();
    let config = format!(
        "{NETWORK_ROOT}\n{}",
        r#"
variable "probe" {
  type    = string
  default = "0"
}

output "probe" {
  value = tonumber(var.probe)
}
"#
    );
    std::fs::write(exec.work_dir(&run).join("main.tf"), config).unwrap();
    let cmd = |args: &[&str]| {
        let mut c = Cmd::new(args)
            .plain("TF_VAR_base_dir", &base_path)
            .plain("TOFU_SIM_RESOURCE_DELAY", "1s")
            .secret("CAIRN_CANARY_CREDENTIAL", &canary);
        c.base_dir = Some(base.path().to_path_buf());
        c
    };
    let mut all_lines = Vec::new();
    for args in [
        &["init", "-input=false"][..],
        &["plan", "-input=false", "-out=plan.bin"],
    ] {
        let (o, lines) = exec_cmd(&exec, run, cmd(args)).await;
        assert!(o.success(), "{args:?}: {o:?}\n{}", text(&lines));
        all_lines.extend(lines);
    }

    // While apply runs, its container's command line holds no secret.
    let apply = {
        let exec = &exec;
        async move { exec_cmd(exec, run, cmd(&["apply", "-input=false", "plan.bin"])).await }
    };
    let inspect = async {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(id) = run_containers(&exec, run).await.first() {
                // The listing can name the plan's container just as it is removed: look again.
                let Ok(c) = exec.docker().inspect_container(id, None).await else {
                    assert!(Instant::now() < deadline, "no apply container seen");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                let config = c.config.unwrap();
                let mut command_line = vec![c.path.unwrap_or_default()];
                command_line.extend(c.args.unwrap_or_default());
                command_line.extend(config.cmd.unwrap_or_default());
                command_line.extend(config.entrypoint.unwrap_or_default());
                assert!(
                    command_line.iter().any(|a| a == "apply"),
                    "{command_line:?}"
                );
                assert!(
                    !command_line.iter().any(|a| a.contains(&canary)),
                    "{command_line:?}"
                );
                // The secret is an environment variable of that container only.
                assert!(config.env.unwrap().iter().any(|e| e.contains(&canary)));
                // Labels, limits, network and mounts as configured.
                let labels = config.labels.unwrap();
                assert_eq!(labels[LABEL_RUN_ID], run.to_string());
                assert_eq!(labels[LABEL_RUNNER_INSTANCE], instance_of(&exec));
                let host = c.host_config.unwrap();
                assert_eq!(host.memory, Some(256 << 20));
                assert_eq!(host.nano_cpus, Some(1_000_000_000));
                assert_eq!(host.network_mode.as_deref(), Some("host"));
                assert_eq!(host.log_config.unwrap().typ.as_deref(), Some("none"));
                let mounts = c.mounts.unwrap();
                let mount = |dest: &str| {
                    mounts
                        .iter()
                        .find(|m| m.destination.as_deref() == Some(dest))
                        .unwrap_or_else(|| panic!("no mount at {dest}: {mounts:?}"))
                };
                assert_eq!(mount("/work/modules").rw, Some(false));
                assert_eq!(mount("/work").rw, Some(true));
                assert_eq!(mount(&base_path).rw, Some(true));
                assert_eq!(
                    mount(&base_path).source.as_deref(),
                    Some(base_path.as_str())
                );
                return;
            }
            assert!(Instant::now() < deadline, "apply container never seen");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let ((o, lines), ()) = tokio::join!(apply, inspect);
    assert!(o.success(), "apply: {o:?}\n{}", text(&lines));
    all_lines.extend(lines);

    // A tofu error quoting the secret (a credential passed as a variable): redacted.
    let (o, lines) = exec_cmd(
        &exec,
        run,
        cmd(&["plan", "-input=false"]).secret("TF_VAR_probe", &canary),
    )
    .await;
    assert_eq!(o.exit_code, Some(1), "{o:?}\n{}", text(&lines));
    assert!(
        text(&lines).contains(r#"got "***""#),
        "the error should quote the masked value:\n{}",
        text(&lines)
    );
    all_lines.extend(lines);
    let (o, lines) = exec_cmd(
        &exec,
        run,
        cmd(&["plan", "-input=false", "-json"]).secret("TF_VAR_probe", &canary),
    )
    .await;
    assert_eq!(o.exit_code, Some(1), "{o:?}\n{}", text(&lines));
    all_lines.extend(lines);

    assert!(!all_lines.is_empty());
    for l in &all_lines {
        assert!(
            !l.text.contains(&canary),
            "leaked in a log line: {}",
            l.text
        );
    }
    let files = files_under(&exec.work_dir(&run));
    assert!(files.iter().any(|(p, _)| p.ends_with("terraform.tfstate")));
    for (path, bytes) in files {
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&canary),
            "leaked into {}",
            path.display()
        );
    }
    exec.cleanup_run(&run).await.unwrap();
    assert!(run_containers(&exec, run).await.is_empty());
}

/// Prepares a run with one slow resource, initialised.
async fn slow_run(exec: &dyn Executor) -> RunId {
    let run = run_id();
    exec.prepare_run(&run).await.unwrap();
    std::fs::write(exec.work_dir(&run).join("main.tf"), SLOW_ROOT).unwrap();
    let (o, lines) = exec_cmd(exec, run, Cmd::new(&["init", "-input=false"])).await;
    assert!(o.success(), "init: {o:?}\n{}", text(&lines));
    run
}

fn slow_apply(delay: &str) -> Cmd {
    Cmd::new(&["apply", "-input=false", "-auto-approve"]).plain("TOFU_SIM_RESOURCE_DELAY", delay)
}

#[tokio::test]
async fn docker_timeout_kills_tofu_that_ignores_sigint() {
    let scratch = scratch();
    let exec = docker_executor(instance("kill"), scratch.path(), module_library()).await;
    let run = slow_run(&exec).await;
    let mut cmd = slow_apply("120s").plain("TOFU_SIM_IGNORE_SIGINT", "1");
    cmd.timeout = Duration::from_secs(2);
    let started = Instant::now();
    let (o, _) = exec_cmd(&exec, run, cmd).await;
    let took = started.elapsed();
    assert!(o.timed_out && o.killed && !o.cancelled, "{o:?}");
    assert_eq!(o.exit_code, Some(137), "{o:?}");
    // 2s timeout + 2s grace, and nothing close to the 120s the resource would take.
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(30),
        "{took:?}"
    );
    assert!(run_containers(&exec, run).await.is_empty());
    exec.cleanup_run(&run).await.unwrap();
}

#[tokio::test]
async fn docker_timeout_stops_tofu_gracefully() {
    let scratch = scratch();
    let exec = docker_executor(instance("grace"), scratch.path(), module_library()).await;
    let run = slow_run(&exec).await;
    let mut cmd = slow_apply("1s");
    cmd.timeout = Duration::from_millis(300);
    let (o, lines) = exec_cmd(&exec, run, cmd).await;
    assert!(o.timed_out && !o.killed, "{o:?}\n{}", text(&lines));
    assert_eq!(o.exit_code, Some(1), "{o:?}\n{}", text(&lines));
    assert!(run_containers(&exec, run).await.is_empty());
    exec.cleanup_run(&run).await.unwrap();
}

#[tokio::test]
async fn docker_cancellation_stops_the_command() {
    let scratch = scratch();
    let exec = docker_executor(instance("cancel"), scratch.path(), module_library()).await;
    let run = slow_run(&exec).await;
    let cmd = slow_apply("120s").plain("TOFU_SIM_IGNORE_SIGINT", "1");
    let cancel = cmd.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(800)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let (o, _) = exec_cmd(&exec, run, cmd).await;
    assert!(o.cancelled && !o.timed_out && o.killed, "{o:?}");
    assert!(!o.success());
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(run_containers(&exec, run).await.is_empty());
    exec.cleanup_run(&run).await.unwrap();
}

#[tokio::test]
async fn process_timeout_kills_the_process_group() {
    let scratch = scratch();
    let exec = process_executor(instance("kill-p"), scratch.path()).await;
    let run = slow_run(&exec).await;
    let mut cmd = slow_apply("120s").plain("TOFU_SIM_IGNORE_SIGINT", "1");
    cmd.timeout = Duration::from_secs(1);
    let started = Instant::now();
    let (o, _) = exec_cmd(&exec, run, cmd).await;
    assert!(o.timed_out && o.killed, "{o:?}");
    assert_eq!(o.exit_code, Some(137), "{o:?}");
    assert!(started.elapsed() < Duration::from_secs(30));
    exec.cleanup_run(&run).await.unwrap();
}

#[tokio::test]
async fn process_cancellation_stops_tofu_gracefully() {
    let scratch = scratch();
    let exec = process_executor(instance("cancel-p"), scratch.path()).await;
    let run = slow_run(&exec).await;
    let cmd = slow_apply("1s");
    let cancel = cmd.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let (o, lines) = exec_cmd(&exec, run, cmd).await;
    assert!(o.cancelled && !o.killed, "{o:?}\n{}", text(&lines));
    assert_eq!(o.exit_code, Some(1), "{o:?}\n{}", text(&lines));
    exec.cleanup_run(&run).await.unwrap();
}

#[tokio::test]
async fn reap_orphans_removes_only_this_instances_containers() {
    let scratch = scratch();
    let mine = instance("reap-a");
    let other = instance("reap-b");
    let exec = docker_executor(mine.clone(), scratch.path(), module_library()).await;
    let other_exec = docker_executor(other.clone(), scratch.path(), module_library()).await;
    let (my_run, other_run) = (run_id(), run_id());
    exec.prepare_run(&my_run).await.unwrap();
    other_exec.prepare_run(&other_run).await.unwrap();
    let docker = exec.docker();
    let mut leftovers = HashMap::new();
    for (who, n) in [(&mine, 2), (&other, 1)] {
        for _ in 0..n {
            let labels = HashMap::from([
                (LABEL_RUNNER_INSTANCE.to_owned(), who.to_string()),
                (LABEL_RUN_ID.to_owned(), run_id().to_string()),
            ]);
            let c = docker
                .create_container(
                    None,
                    ContainerCreateBody {
                        image: Some(image()),
                        cmd: Some(vec!["version".to_owned()]),
                        labels: Some(labels),
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
            leftovers
                .entry(who.to_string())
                .or_insert_with(Vec::new)
                .push(c.id);
        }
    }
    // Two containers and one work volume; its work directory goes too.
    assert_eq!(exec.reap_orphans(&mine).await.unwrap(), 3);
    assert!(!exec.work_dir(&my_run).exists());
    assert!(other_exec.work_dir(&other_run).is_dir());
    let volume = |exec: &DockerExecutor, run: RunId| {
        let name = format!("cairn-work-{}-{run}", instance_of(exec));
        let docker = exec.docker().clone();
        async move { docker.inspect_volume(&name).await.is_ok() }
    };
    assert!(!volume(&exec, my_run).await);
    assert!(volume(&other_exec, other_run).await);
    assert!(
        containers_with_label(&exec, format!("{LABEL_RUNNER_INSTANCE}={mine}"))
            .await
            .is_empty()
    );
    let others = containers_with_label(&exec, format!("{LABEL_RUNNER_INSTANCE}={other}")).await;
    assert_eq!(others, leftovers[other.as_str()]);
    for id in others {
        docker
            .remove_container(
                &id,
                Some(RemoveContainerOptionsBuilder::new().force(true).build()),
            )
            .await
            .unwrap();
    }
    other_exec.cleanup_run(&other_run).await.unwrap();
    assert!(!volume(&other_exec, other_run).await);
}

#[tokio::test]
async fn process_reap_orphans_kills_only_this_instances_groups() {
    let scratch = scratch();
    let mine = instance("reap-pa");
    let exec = process_executor(mine.clone(), scratch.path()).await;
    let run = slow_run(&exec).await;
    // A command whose runner "dies": its future is dropped mid-run after it registered.
    let cmd = slow_apply("120s").plain("TOFU_SIM_IGNORE_SIGINT", "1");
    let other_instance = instance("reap-pb");
    let other = process_executor(other_instance.clone(), scratch.path()).await;
    assert_eq!(other.reap_orphans(&other_instance).await.unwrap(), 0);
    let running = async { exec_cmd(&exec, run, cmd).await };
    let reaper = async {
        tokio::time::sleep(Duration::from_millis(700)).await;
        // Another instance's reap leaves it alone …
        assert_eq!(other.reap_orphans(&other_instance).await.unwrap(), 0);
        // … this instance's kills it.
        assert_eq!(exec.reap_orphans(&mine).await.unwrap(), 1);
        assert!(!exec.work_dir(&run).exists());
    };
    let ((o, _), ()) = tokio::join!(running, reaper);
    assert_eq!(o.exit_code, Some(137), "{o:?}");
    assert!(!o.timed_out && !o.cancelled);
    exec.cleanup_run(&run).await.unwrap();
}

#[tokio::test]
async fn docker_container_is_stopped_and_removed_when_the_caller_gives_up() {
    let scratch = scratch();
    let exec = docker_executor(instance("drop"), scratch.path(), module_library()).await;
    let run = slow_run(&exec).await;
    let mut cmd = slow_apply("120s").plain("TOFU_SIM_IGNORE_SIGINT", "1");
    cmd.timeout = Duration::from_secs(1);
    // The caller stops waiting long before the command's own timeout and grace.
    let gave_up = tokio::time::timeout(Duration::from_millis(500), exec_cmd(&exec, run, cmd)).await;
    assert!(gave_up.is_err());
    assert_eq!(run_containers(&exec, run).await.len(), 1);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !run_containers(&exec, run).await.is_empty() {
        assert!(Instant::now() < deadline, "the container was left behind");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    exec.cleanup_run(&run).await.unwrap();
}
