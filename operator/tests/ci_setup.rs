//! `ci/setup` and the Makefile: `make build` installs only what building
//! needs (no test servers), and the policy-rc.d that keeps Debian's etcd
//! service from starting during an install leaves a policy-rc.d the
//! machine already had as it was.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `with_services_off` of ci/services-off.sh with `policy` as the
/// policy-rc.d, around `cmd` (a shell command).
fn services_off(policy: &Path, cmd: &str) -> Output {
    let script = format!(". ci/services-off.sh; with_services_off sh -c '{cmd}'; echo \"rc=$?\"");
    Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &script])
        .env("POLICY_RC_D", policy)
        .current_dir(root())
        .output()
        .expect("bash runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_policy_rc_d_that_was_there_is_put_back_as_it_was() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let policy = dir.path().join("policy-rc.d");
    let mine = "#!/bin/sh\n# the machine's own policy\nexit 0\n";
    std::fs::write(&policy, mine).expect("write");
    std::fs::set_permissions(&policy, std::fs::Permissions::from_mode(0o750)).expect("chmod");

    // During the command the file refuses services; afterwards it is the
    // machine's again, content and mode, also when the command failed.
    for (cmd, rc) in [("cat \"$POLICY_RC_D\"", 0), ("exit 7", 7)] {
        let out = services_off(&policy, cmd);
        let text = stdout(&out);
        assert!(text.contains(&format!("rc={rc}")), "{cmd}: {text}");
        if rc == 0 {
            assert!(text.contains("exit 101"), "{text}");
        }
        assert_eq!(std::fs::read_to_string(&policy).expect("still there"), mine);
        let mode = std::fs::metadata(&policy)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o750);
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("list").collect();
        assert_eq!(left.len(), 1, "a kept copy was left behind");
    }
}

#[test]
fn a_policy_rc_d_written_for_the_install_is_removed_after_it() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let policy = dir.path().join("policy-rc.d");
    let out = services_off(&policy, "test -x \"$POLICY_RC_D\" && echo refused");
    let text = stdout(&out);
    assert!(text.contains("refused") && text.contains("rc=0"), "{text}");
    assert!(!policy.exists());
}

#[test]
fn ci_setup_names_its_parts_and_refuses_others() {
    let out = Command::new("bash")
        .args(["ci/setup", "servers"])
        .current_dir(root())
        .output()
        .expect("bash runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("choose from build, etcd, test, docs"), "{err}");
}

/// The ci/setup parts `make -n TARGET` would install.
fn setup_parts(target: &str) -> Option<Vec<String>> {
    let out = match Command::new("make")
        .args(["-n", "--no-print-directory", target])
        .current_dir(root())
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            assert!(std::env::var_os("CI").is_none(), "make: {e}");
            println!("SKIPPED: no make ({e})");
            return None;
        }
    };
    let text = stdout(&out);
    Some(
        text.lines()
            .filter_map(|l| l.trim().strip_prefix("bash ci/setup"))
            .flat_map(|parts| parts.split_whitespace().map(str::to_string))
            .collect(),
    )
}

#[test]
fn make_build_installs_only_what_building_needs() {
    for target in ["build", "release", "lint"] {
        if let Some(parts) = setup_parts(target) {
            assert_eq!(parts, ["build"], "make {target}");
        }
    }
    if let Some(parts) = setup_parts("test") {
        for part in ["build", "etcd", "test"] {
            assert!(parts.iter().any(|p| p == part), "make test: {parts:?}");
        }
    }
}
