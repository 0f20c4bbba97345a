//! Reading the manifests folder: every entry named `*.yaml` or `*.yml` is
//! a manifest, and one that is not a readable regular file is reported
//! with the reason (a symlink loop, a dangling symlink, a folder, a FIFO,
//! no permission), never skipped in silence. Nothing here can block: a
//! FIFO is never opened, and files are opened non-blocking in case one
//! became a FIFO meanwhile.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

/// The largest manifest read (the API server refuses objects of more than
/// about 1.5 MiB; a manifest is a few hundred bytes).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// The manifest entries of `dir` (not recursive), in name order; a
/// missing folder has none.
pub(super) fn manifest_entries(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            for entry in entries {
                let path = entry?.path();
                let is_yaml = path
                    .extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| e == "yaml" || e == "yml");
                if is_yaml {
                    files.push(path);
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    files.sort();
    Ok(files)
}

/// What kind of thing a non-regular file is.
fn kind(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Why an I/O error keeps a file from being read, in words.
fn why(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::PermissionDenied => {
            "permission denied: let the operator's user read it".into()
        }
        _ => e.to_string(),
    }
}

/// The text of the manifest at `path`, or why it cannot be used.
pub(super) fn read(path: &Path) -> Result<String, String> {
    let link =
        std::fs::symlink_metadata(path).map_err(|e| format!("cannot read it: {}", why(&e)))?;
    if link.file_type().is_symlink() {
        let target = std::fs::read_link(path)
            .map(|t| t.display().to_string())
            .unwrap_or_else(|_| "?".into());
        match std::fs::metadata(path) {
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                return Err(format!(
                    "a symlink (to {target}) that loops: it never reaches a file; fix or remove it"
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(format!(
                    "a symlink to {target}, which does not exist; fix or remove it"
                ));
            }
            Err(e) => {
                return Err(format!(
                    "a symlink to {target} that cannot be followed: {}",
                    why(&e)
                ));
            }
            Ok(_) => {}
        }
    }
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read it: {}", why(&e)))?;
    if !meta.is_file() {
        return Err(format!(
            "{}, not a file: not read; rename it (the name ends with .yaml or .yml) or move it out",
            kind(meta.file_type())
        ));
    }
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("cannot read it: {}", why(&io::Error::from(e))))?;
    let file = File::from(fd);
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read it: {}", why(&e)))?;
    if !meta.is_file() {
        return Err(format!("{}, not a file: not read", kind(meta.file_type())));
    }
    if meta.len() > MAX_MANIFEST_BYTES {
        return Err(too_big(meta.len()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {}", why(&e)))?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    crate::yaml::utf8(&bytes).map(str::to_string)
}

/// `message` about the manifest `path` of the folder `dir`, without
/// anything quoted from the file when the file is not inside `dir` (a
/// symlink to `/etc/shadow` put its first line in status and the log):
/// only where the problem is.
pub(super) fn unquoted(dir: &Path, path: &Path, message: String) -> String {
    let (Ok(dir), Ok(target)) = (dir.canonicalize(), path.canonicalize()) else {
        return message;
    };
    if target.starts_with(&dir) {
        return message;
    }
    let at = message
        .split_once(": ")
        .map(|(head, _)| head)
        .filter(|head| head.starts_with("line ") && head.contains(" column "));
    format!(
        "{}not a valid EtcdCluster manifest; the file is {}, outside the manifests \
         folder, so nothing of it is quoted here: check that file, or link only manifests",
        at.map(|a| format!("{a}: ")).unwrap_or_default(),
        target.display()
    )
}

fn too_big(len: u64) -> String {
    format!(
        "{len} bytes is more than the {} KiB a manifest may have",
        MAX_MANIFEST_BYTES / 1024
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_files_say_what_they_are() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        std::os::unix::fs::symlink(d.join("loop.yaml"), d.join("loop.yaml")).expect("loop");
        std::os::unix::fs::symlink(d.join("nowhere.yaml"), d.join("dangling.yaml"))
            .expect("dangling");
        std::fs::create_dir(d.join("folder.yaml")).expect("folder");
        crate::testing::files::mkfifo(&d.join("fifo.yaml"));
        std::fs::write(d.join("big.yaml"), vec![b'#'; 2 << 20]).expect("big");
        std::fs::write(d.join("latin1.yaml"), b"kind: \xe9\n").expect("latin1");
        std::fs::write(d.join("good.yml"), "kind: x\n").expect("good");
        std::fs::write(d.join("notes.txt"), "x").expect("other");
        let names: Vec<String> = manifest_entries(d)
            .expect("list")
            .iter()
            .map(|p| {
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(
            names,
            [
                "big.yaml",
                "dangling.yaml",
                "fifo.yaml",
                "folder.yaml",
                "good.yml",
                "latin1.yaml",
                "loop.yaml"
            ]
        );
        let why = |n: &str| read(&d.join(n)).expect_err(n);
        assert!(why("loop.yaml").contains("loops"), "{}", why("loop.yaml"));
        assert!(why("dangling.yaml").contains("does not exist"));
        assert!(why("folder.yaml").starts_with("a folder, not a file"));
        assert!(why("fifo.yaml").starts_with("a FIFO (named pipe), not a file"));
        assert!(why("big.yaml").contains("1024 KiB"), "{}", why("big.yaml"));
        assert!(
            why("latin1.yaml").contains("line 1 column 7"),
            "{}",
            why("latin1.yaml")
        );
        assert_eq!(read(&d.join("good.yml")).as_deref(), Ok("kind: x\n"));
    }

    #[test]
    fn an_unreadable_file_says_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("secret.yaml");
        std::fs::write(&path, "kind: x\n").expect("write");
        rustix::fs::chmod(&path, Mode::empty()).expect("chmod");
        // root reads anything: then only the wording can be checked.
        if std::fs::read(&path).is_err() {
            let e = read(&path).expect_err("unreadable");
            assert!(e.contains("permission denied"), "{e}");
        }
        let denied = why(&io::Error::from(io::ErrorKind::PermissionDenied));
        assert!(
            denied.contains("let the operator's user read it"),
            "{denied}"
        );
    }
}
