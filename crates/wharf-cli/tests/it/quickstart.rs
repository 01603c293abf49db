//! The README's quick start, run as written: the `sh` blocks of its "Quick start" section, read
//! from README.md when the test runs (never copied here), joined into one bash script and run
//! in a fresh directory against a real `wharf serve` on the embedded PostgreSQL.
//!
//! Two things differ from a person at a terminal, both outside the blocks' text except one:
//! `cargo` on PATH is a shim that runs the `wharf` under test for `cargo run … -- ARGS`, and
//! port 8080 becomes a free port (`localhost:8080` in the text; `WHARF_LISTEN` and `WHARF_URL`
//! for the commands' defaults), so the test never meets another server on 8080.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{free_port, postgres_running_under, wharf};

/// The whole quick start may take this long: initdb, migrations and a dozen commands on a loaded
/// 2-core machine take about 20 s.
const QUICKSTART_MS_MAX: u64 = 120_000;

/// The `sh` blocks under `## Quick start`, up to the next `## ` heading, in order.
pub fn quickstart_blocks(readme: &str) -> Vec<String> {
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Quick start"))
        .expect("README.md has a `## Quick start` section");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in section.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(_), "```") => blocks.push(current.take().unwrap_or_default()),
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "an unterminated ```sh block");
    blocks
}

const CARGO_SHIM: &str = r#"#!/bin/sh
# The quick start's `cargo run --release [-q] -- ARGS…`, run as the wharf under test.
[ "$1" = run ] || { echo "cargo shim: only 'cargo run … -- ARGS' is supported" >&2; exit 2; }
shift
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done
[ "$#" -gt 0 ] && shift
exec "$WHARF_BIN" "$@"
"#;

#[test]
fn the_readme_quick_start_runs_as_written() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .expect("read README.md");
    let blocks = quickstart_blocks(&readme);
    assert!(
        blocks.len() >= 4,
        "the quick start has {} sh blocks",
        blocks.len()
    );
    let port = free_port();
    let script = format!(
        "set -euo pipefail\n{}",
        blocks
            .join("\n")
            .replace("localhost:8080", &format!("localhost:{port}"))
    );

    let cwd = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let shim = bin.path().join("cargo");
    std::fs::write(&shim, CARGO_SHIM).unwrap();
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let stdout_path = cwd.path().join("quickstart.out");
    let stderr_path = cwd.path().join("quickstart.err");

    let mut cmd = Command::new("bash");
    // The same clean environment as every other wharf the tests run.
    for (key, _) in std::env::vars() {
        if key.starts_with("WHARF_") || key == "DATABASE_URL" {
            cmd.env_remove(key);
        }
    }
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.arg("-c")
        .arg(&script)
        .current_dir(cwd.path())
        .env("PATH", path)
        .env("WHARF_BIN", env!("CARGO_BIN_EXE_wharf"))
        .env("WHARF_LISTEN", format!("127.0.0.1:{port}"))
        .env("WHARF_URL", format!("http://127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        // Its own process group, so a script that hangs is stopped with everything it started.
        .process_group(0);
    let mut child = cmd.spawn().expect("run bash");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > Duration::from_millis(QUICKSTART_MS_MAX) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = || {
        format!(
            "script:\n{script}\nstdout:\n{}\nstderr:\n{}",
            std::fs::read_to_string(&stdout_path).unwrap_or_default(),
            std::fs::read_to_string(&stderr_path).unwrap_or_default()
        )
    };
    let cluster = cluster_dir(cwd.path());
    if status.is_none() {
        // SAFETY: kill has no memory-safety preconditions; the group is our child's.
        unsafe { kill(-(child.id() as i32), 9) };
        let _ = child.wait();
        stop_cluster(cwd.path());
        remove_cluster(cluster.as_deref());
        panic!(
            "the quick start did not finish in {QUICKSTART_MS_MAX} ms\n{}",
            output()
        );
    }
    let status = status.unwrap();
    let stdout = std::fs::read_to_string(&stdout_path).unwrap_or_default();
    let finished = || {
        assert!(
            status.success(),
            "the quick start failed ({status})\n{}",
            output()
        );
        for expected in [
            "ready",
            ".eml",
            "DONE",
            "accept-delayed (in-order)",
            "sequence 1",
        ] {
            assert!(
                stdout.contains(expected),
                "{expected:?} not printed\n{}",
                output()
            );
        }
        let mail: Vec<PathBuf> = std::fs::read_dir(cwd.path().join(".wharf/mail"))
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        assert_eq!(mail.len(), 1, "{mail:?}");
        // The last block stopped the server, and with it the embedded PostgreSQL.
        let cluster = cluster.clone().expect("the quick start made a cluster");
        assert!(
            !postgres_running_under(&cluster),
            "postgres still runs\n{}",
            output()
        );
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(finished));
    stop_cluster(cwd.path());
    remove_cluster(cluster.as_deref());
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// Where the embedded cluster of `cwd` really lives (as root, often under /var/lib/wharf).
fn cluster_dir(cwd: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(cwd.join(".wharf/pg")).ok()
}

fn stop_cluster(cwd: &Path) {
    let _ = wharf()
        .current_dir(cwd)
        .args(["db", "stop", "--force"])
        .output();
}

/// A cluster outside the temporary directory is not removed with it.
fn remove_cluster(cluster: Option<&Path>) {
    if let Some(dir) = cluster
        && dir.starts_with("/var/lib/wharf/clusters")
    {
        let _ = std::fs::remove_dir_all(dir);
    }
}

unsafe extern "C" {
    fn kill(pid: i32, signal: i32) -> i32;
}

#[test]
fn blocks_are_read_from_the_section_only() {
    let readme = "# x\n```sh\nnot this\n```\n## Quick start\ntext\n```sh\na\nb\n```\n\
                  ```toml\nno\n```\n```sh\nc\n```\n## Next\n```sh\nnor this\n```\n";
    assert_eq!(quickstart_blocks(readme), ["a\nb\n", "c\n"]);
}
