//! A full disk under the state folder: the state folder is a small tmpfs
//! (mounted by the test, as root; unmounted on drop, also on a panic),
//! filled with a file until writes fail. `etcd-operator status` must not
//! show the last status written as if it were current: it asks the running
//! operator, whose status (kept in memory) says "state folder full".

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use etcd_operator::crd::EtcdCluster;
use etcd_operator::testing::{Env, manifest, workspace_binary};

/// An [`Env`] whose state folder is a tmpfs of `size`.
struct OnTmpfs {
    env: Env,
    mount: PathBuf,
}

impl OnTmpfs {
    fn new(size: &str) -> Self {
        let env = Env::new();
        std::fs::create_dir_all(&env.state).expect("state folder");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&env.state)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "this test mounts a tmpfs and needs root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mount = env.state.clone();
        OnTmpfs { env, mount }
    }
}

impl Drop for OnTmpfs {
    fn drop(&mut self) {
        self.env.stop_operator();
        etcd_operator::platform::local::kill_all(&self.env.state);
        let _ = Command::new("umount").arg(&self.mount).status();
    }
}

/// Writes zeros into `path` until the disk is full.
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).expect("filler");
    let chunk = vec![0u8; 1 << 20];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
}

/// `etcd-operator status demo -o json`: the resource and the source line.
fn status(state: &Path) -> (EtcdCluster, String) {
    let out = Command::new(workspace_binary("etcd-operator"))
        .args(["status", "demo", "-o", "json", "--state-dir"])
        .arg(state)
        .output()
        .expect("run status");
    assert!(out.status.success(), "{out:?}");
    let c = serde_json::from_slice(&out.stdout).expect("status json");
    (c, String::from_utf8_lossy(&out.stderr).to_string())
}

fn degraded(c: &EtcdCluster) -> (String, String) {
    let d = c
        .status
        .as_ref()
        .and_then(|s| s.condition("Degraded"))
        .expect("a Degraded condition");
    (d.reason.clone(), d.message.clone())
}

#[test]
fn a_full_state_folder_is_reported_from_memory() {
    let mut t = OnTmpfs::new("320m");
    t.env
        .write_manifest("demo.yaml", &manifest("demo", 3, "3.4.23"));
    t.env.start_operator();
    t.env.wait_running("demo", 3);
    let filler = t.env.state.join("filler");
    fill(&filler);
    let (c, source) = t
        .env
        .wait_for("status to say the state folder is full", || {
            let (c, source) = status(&t.env.state);
            (degraded(&c).0 == "StateFolderFull").then_some((c, source))
        });
    assert!(source.contains("the running operator"), "{source}");
    let (_, message) = degraded(&c);
    assert!(message.contains("state folder full"), "{message}");
    assert!(message.contains("No space left on device"), "{message}");
    // The file still holds the last status written, which knows nothing
    // of it.
    let file = t.env.status_file("demo").expect("status file");
    assert_ne!(degraded(&file).0, "StateFolderFull");
    // Space back: the file is written again and the condition clears.
    std::fs::remove_file(&filler).expect("remove filler");
    t.env.wait_for("the status file written again", || {
        let c = t.env.status_file("demo")?;
        (degraded(&c).0 != "StateFolderFull"
            && degraded(&status(&t.env.state).0).0 != "StateFolderFull")
            .then_some(())
    });
    t.env.wait_running("demo", 3);
    // No operator: the files, and the output says so.
    t.env.stop_operator();
    let (_, source) = status(&t.env.state);
    assert!(source.contains("status files"), "{source}");
}
