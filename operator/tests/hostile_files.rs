//! Files a spec names may be anything. Two clusters whose provided TLS
//! files are FIFOs (an `open()` that never returned blocked both runtime
//! workers of a 2-core machine, and then nothing healed) and one whose CA
//! is `/dev/zero` (the operator grew to 24 GB): each is refused naming
//! what the file is, and a killed member of an unrelated cluster is still
//! brought back.

use std::path::Path;

use etcd_operator::testing::files::mkfifo as fifo;
use etcd_operator::testing::{Env, kill9, manifest};

fn provided(name: &str, dir: &Path) -> String {
    format!(
        "{}  tls:\n    peer: {{mode: Provided, path: {p}}}\n    client: {{mode: Provided, path: \
         {p}}}\n",
        manifest(name, 1, "3.4.23"),
        p = dir.display()
    )
}

fn degraded_saying(env: &Env, cluster: &str, needle: &str) -> String {
    env.wait_for(&format!("{cluster} refused: {needle}"), || {
        let c = env.status(cluster)?;
        let d = c.status.as_ref()?.condition("Degraded")?.clone();
        (d.message.contains(needle)).then_some(d.message)
    })
}

#[test]
fn fifos_and_dev_zero_as_certificates_are_refused_and_healing_goes_on() {
    let mut env = Env::new();
    env.write_manifest("healthy.yaml", &manifest("healthy", 1, "3.4.23"));
    for (cluster, file) in [("fifo-a", "ca.crt"), ("fifo-b", "tls.crt")] {
        let dir = env.dir.path().join(cluster);
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in ["ca.crt", "tls.crt", "tls.key"] {
            if f == file {
                fifo(&dir.join(f));
            } else {
                std::fs::write(dir.join(f), "not a certificate").expect("write");
            }
        }
        env.write_manifest(&format!("{cluster}.yaml"), &provided(cluster, &dir));
    }
    let zero = env.dir.path().join("zero");
    std::fs::create_dir_all(&zero).expect("mkdir");
    std::os::unix::fs::symlink("/dev/zero", zero.join("ca.crt")).expect("symlink");
    env.write_manifest("zero.yaml", &provided("zero", &zero));
    env.start_operator();

    env.wait_running("healthy", 1);
    let m = degraded_saying(&env, "fifo-a", "is a FIFO, not a regular file");
    assert!(m.contains("ca.crt"), "{m}");
    degraded_saying(&env, "fifo-b", "is a FIFO, not a regular file");
    degraded_saying(&env, "zero", "is a character device");

    // An unrelated cluster still heals while those are refused.
    let pid = env.pid("healthy", "healthy-0").expect("a pid");
    kill9(pid);
    env.wait_for("healthy-0 back", || {
        let now = env.pid("healthy", "healthy-0")?;
        let c = env.status("healthy")?;
        let ready = c.status.as_ref()?.members.iter().all(|m| m.ready);
        (now != pid && ready).then_some(())
    });
}
