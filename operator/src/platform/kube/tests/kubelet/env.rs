//! What the stand-in kubelet makes of a container's environment and
//! Secret volumes: `env` and `envFrom` Secrets as the Job's environment,
//! Secret volumes written as files into folders standing in for their
//! mounts.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::super::fake::Fake;
use super::super::rbac::collection;
use crate::backup::object::client::StoreEnv;

/// The environment of container `c` as the kubelet makes it: its `env`
/// values and the keys of each Secret its `envFrom` names (one missing is
/// an error, as the kubelet's CreateContainerConfigError).
pub(super) fn container_env(fake: &Fake, c: &Value) -> Result<StoreEnv, String> {
    let mut vars = Vec::new();
    for e in c["env"].as_array().into_iter().flatten() {
        if let (Some(k), Some(v)) = (e["name"].as_str(), e["value"].as_str()) {
            vars.push((k.to_string(), v.to_string()));
        }
    }
    for from in c["envFrom"].as_array().into_iter().flatten() {
        let Some(name) = from["secretRef"]["name"].as_str() else {
            continue;
        };
        let found = fake.get(&format!("{}/{name}", collection("secrets")));
        let secret: k8s_openapi::api::core::v1::Secret = found
            .and_then(|v| serde_json::from_value(v).ok())
            .ok_or_else(|| format!("secret {name:?} not found"))?;
        for (k, v) in secret.data.unwrap_or_default() {
            vars.push((k, String::from_utf8_lossy(&v.0).into_owned()));
        }
    }
    Ok(StoreEnv::new(vars))
}

/// The Secret volumes of `pod` (a pod spec) that container `c` mounts,
/// written as the kubelet would (a file per key) into folders under
/// `root`: (mount path, folder) for each.
pub(super) fn secret_mounts(
    fake: &Fake,
    root: &Path,
    pod: &Value,
    c: &Value,
) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for v in pod["volumes"].as_array().into_iter().flatten() {
        let (Some(volume), Some(name)) = (v["name"].as_str(), v["secret"]["secretName"].as_str())
        else {
            continue;
        };
        let mounts = c["volumeMounts"].as_array().into_iter().flatten();
        let Some(path) = mounts
            .filter(|m| m["name"] == volume)
            .find_map(|m| m["mountPath"].as_str())
        else {
            continue;
        };
        let found = fake.get(&format!("{}/{name}", collection("secrets")));
        let secret: Option<k8s_openapi::api::core::v1::Secret> =
            found.and_then(|v| serde_json::from_value(v).ok());
        let dir = root.join(format!("secret-{name}"));
        std::fs::create_dir_all(&dir).expect("a secret folder");
        for (k, v) in secret.and_then(|s| s.data).unwrap_or_default() {
            std::fs::write(dir.join(k), v.0).expect("a secret file");
        }
        out.push((path.to_string(), dir));
    }
    out
}

/// `arg` with a mount path at its start replaced by the folder standing in
/// for it.
pub(super) fn in_mounts(arg: String, mounts: &[(String, PathBuf)]) -> String {
    for (path, dir) in mounts {
        if let Some(rest) = arg.strip_prefix(path.as_str()) {
            return format!("{}{rest}", dir.display());
        }
    }
    arg
}
