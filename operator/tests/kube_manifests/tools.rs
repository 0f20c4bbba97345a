//! The tools the checks run: kubernetes-validate (and its python, for the
//! CRD's schema), `kubectl kustomize`, and `ldd` for this machine's glibc.
//! Without kubernetes-validate or kubectl a check says how to install it
//! and passes, except under CI.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Kubernetes versions validated against.
const VERSIONS: [&str; 2] = ["1.37.0", "1.30.0"];

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// How to run the tool (program and leading arguments), or `None` after
/// saying why (and failing under CI).
pub fn tool() -> Option<(PathBuf, Vec<String>)> {
    let venv = root().join(".venv/bin");
    if venv.join("kubernetes-validate").is_file() {
        return Some((
            venv.join("python"),
            vec!["-m".into(), "kubernetes_validate".into()],
        ));
    }
    let python = PathBuf::from("python3");
    let importable = Command::new(&python)
        .args(["-c", "import kubernetes_validate, jsonschema"])
        .status()
        .is_ok_and(|s| s.success());
    if importable {
        return Some((python, vec!["-m".into(), "kubernetes_validate".into()]));
    }
    let hint = "kubernetes-validate is not installed: run `bash ci/setup` (it installs it into \
                .venv/), or `python3 -m venv .venv && .venv/bin/pip install kubernetes-validate`";
    assert!(std::env::var_os("CI").is_none(), "{hint}");
    println!("SKIPPED (not validated): {hint}");
    eprintln!("SKIPPED (not validated): {hint}");
    None
}

pub fn validate(tool: &(PathBuf, Vec<String>), files: &[PathBuf]) {
    for version in VERSIONS {
        let out = Command::new(&tool.0)
            .args(&tool.1)
            .args(["--strict", "-k", version])
            .args(files)
            .output()
            .expect("kubernetes-validate runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "kubernetes-validate {version} failed:\n{text}"
        );
        // A kind without a schema is only a warning: none is expected.
        assert!(
            !text.contains("WARN") && !text.contains("ERROR"),
            "{version}:\n{text}"
        );
        let passed = text.matches(" passed for resource ").count();
        assert!(
            passed >= files.len(),
            "{version}: not every file validated:\n{text}"
        );
    }
}

/// `kubectl kustomize DIR`'s documents, or `None` (after saying so, and
/// failing under CI) without kubectl.
pub fn kustomize(dir: &str) -> Option<Vec<serde_json::Value>> {
    let out = match Command::new("kubectl")
        .arg("kustomize")
        .arg(root().join(dir))
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            let hint = format!("kubectl not found ({e}): run `bash ci/setup`");
            assert!(std::env::var_os("CI").is_none(), "{hint}");
            println!("SKIPPED (not rendered): {hint}");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "kubectl kustomize {dir}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    Some(serde_saphyr::from_multiple(&text).expect("kustomize's YAML"))
}

/// Checks an EtcdCluster file against the CRD's schema (with the tool's
/// python and jsonschema).
pub fn matches_crd_schema(python: &Path, file: &Path) {
    if let Err(e) = crd_schema_verdict(python, file) {
        panic!("{} does not match the CRD's schema:\n{e}", file.display());
    }
}

/// Whether an EtcdCluster file matches the CRD's schema (its bounds and
/// patterns; CEL rules are an API server's), or why not.
pub fn crd_schema_verdict(python: &Path, file: &Path) -> Result<(), String> {
    let script = r#"
import sys, yaml, jsonschema
crd = yaml.safe_load(open(sys.argv[1]))
schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
example = yaml.safe_load(open(sys.argv[2]))
jsonschema.validate(example, schema)
print("example matches the CRD schema")
"#;
    let out = Command::new(python)
        .args(["-c", script])
        .arg(root().join("deploy/base/crd.yaml"))
        .arg(file)
        .output()
        .expect("python runs");
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

pub fn this_machines_glibc() -> Option<(u32, u32)> {
    let out = Command::new("ldd").arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next()?;
    if !first.contains("GLIBC") && !first.contains("GNU libc") {
        return None;
    }
    let (major, minor) = first.split_whitespace().last()?.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}
