//! Files a spec names: anything but a small regular file is refused, and
//! nothing blocks.

use super::*;

use crate::testing::files::mkfifo as fifo;

#[test]
fn a_small_regular_file_is_read_through_a_symlink() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("ca.crt");
    std::fs::write(&file, "PEM").expect("write");
    let link = dir.path().join("link.crt");
    std::os::unix::fs::symlink(&file, &link).expect("symlink");
    assert_eq!(read_blocking(&link, 10).expect("read"), b"PEM");
}

#[test]
fn fifos_devices_folders_and_large_files_are_refused_naming_what_they_are() {
    let dir = tempfile::tempdir().expect("dir");
    let pipe = dir.path().join("tls.crt");
    fifo(&pipe);
    let zero = dir.path().join("ca.crt");
    std::os::unix::fs::symlink("/dev/zero", &zero).expect("symlink");
    let big = dir.path().join("tls.key");
    std::fs::File::create(&big)
        .and_then(|f| f.set_len(PEM_MAX_BYTES + 1))
        .expect("a sparse file");
    for (path, words) in [
        (pipe, "is a FIFO, not a regular file"),
        (zero, "is a character device"),
        (dir.path().to_path_buf(), "is a folder"),
        (big, &format!("larger than {PEM_MAX_BYTES} bytes") as &str),
    ] {
        let e = read_blocking(&path, PEM_MAX_BYTES).expect_err("refused");
        let m = e.to_string();
        assert!(
            m.contains(words) && m.contains(&path.display().to_string()),
            "{m}"
        );
    }
    let missing = read_blocking(&dir.path().join("nope"), 10).expect_err("missing");
    assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
}

/// Many FIFOs read at once from async code on a 2-worker runtime: every
/// read ends (refused), none holds a worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifos_never_hold_the_runtime() {
    let dir = tempfile::tempdir().expect("dir");
    let mut reads = Vec::new();
    for i in 0..8 {
        let p = dir.path().join(format!("f{i}"));
        fifo(&p);
        reads.push(tokio::spawn(async move { read_pem(&p).await }));
    }
    // The runtime still answers while they run.
    tokio::task::yield_now().await;
    for r in reads {
        let e = r.await.expect("joined").expect_err("a FIFO is refused");
        assert!(e.to_string().contains("FIFO"), "{e}");
    }
}
