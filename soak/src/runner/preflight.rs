//! What is checked before anything is touched: the programs a run needs,
//! the etcd versions it asks for, and what the platform cannot do.

use std::path::Path;

use super::{Error, Options, PlatformKind, local};
use crate::scenario::Scenario;

/// Checks, before anything is touched (the output folder included), that
/// the programs the run needs exist and the scenario fits the platform.
pub fn check_binaries(o: &Options) -> Result<(), Error> {
    let problems = platform_problems(&o.scenario, o.platform);
    if !problems.is_empty() {
        return Err(Error::Setup(format!(
            "{}: {}",
            o.scenario_file.display(),
            problems.join("; ")
        )));
    }
    let missing = |what: &str, p: &Path, flag: &str, env: &str| {
        Error::Setup(format!(
            "the {what} binary is not at {}: run `cargo build --workspace` (or `make build`), \
             or pass {flag} / set {env}",
            p.display()
        ))
    };
    if o.platform == PlatformKind::Local && !o.operator_bin.is_file() {
        return Err(missing(
            "etcd-operator",
            &o.operator_bin,
            "--operator-bin",
            "SOAK_OPERATOR_BIN",
        ));
    }
    if o.scenario.chaos.is_some() && !o.chaos_bin.is_file() {
        return Err(missing(
            "chaos-monkey",
            &o.chaos_bin,
            "--chaos-bin",
            "SOAK_CHAOS_BIN",
        ));
    }
    if o.platform == PlatformKind::Local {
        let s = &o.scenario;
        let in_file = |e: Error| Error::Setup(format!("{}: {e}", o.scenario_file.display()));
        local::check_etcd(&s.cluster.spec.version, "cluster.version", &o.etcd_binaries)
            .map_err(in_file)?;
        for (i, c) in s.changes.iter().enumerate() {
            if let Some(v) = &c.version {
                local::check_etcd(v, &format!("changes[{i}].version"), &o.etcd_binaries)
                    .map_err(in_file)?;
            }
        }
        if let Some(w) = &o.work_dir {
            local::check_work_dir(w)?;
        }
    }
    Ok(())
}

/// What a scenario asks of the platform that the platform cannot do, each
/// as `field: why; what to do`.
pub fn platform_problems(s: &Scenario, platform: PlatformKind) -> Vec<String> {
    let mut p = Vec::new();
    if platform != PlatformKind::Kube {
        return p;
    }
    if let Some(fault) = s.chaos.as_ref().map(|c| c.fault)
        && let Some(why) = chaos_monkey::config::kube_refusal(fault)
    {
        p.push(format!(
            "chaos.fault: {} is not supported on kube ({why}); use kill, destroy or partition \
             with --platform kube",
            fault.as_str()
        ));
    }
    if s.standby.is_some() {
        p.push(
            "standby: a standby is for the local platform only (the operator's spec.standby \
             is refused on Kubernetes); run it without --platform kube, or drop standby"
                .into(),
        );
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(extra_cluster: &str, extra_bounds: &str) -> Scenario {
        let text = format!(
            "name: t\nduration: 60s\n\
             cluster: {{name: t, size: 3, version: \"3.4.23\"{extra_cluster}}}\n\
             chaos: {{killInterval: 10s}}\n\
             bounds: {{recoveryP99: 5s, recoveryMax: 10s, availability: 0.9{extra_bounds}}}\n"
        );
        let s = crate::scenario::parse(Path::new("t.yaml"), &text).expect("parses");
        crate::scenario::validate(&s).expect("valid");
        s
    }

    #[test]
    fn backups_restores_and_backup_age_are_taken_on_both_platforms() {
        let backups = scenario(
            ", backup: {interval: 10s, maxBackups: 3}, restore: {backup: b1}",
            ", maxBackupAge: 30s",
        );
        for platform in [PlatformKind::Local, PlatformKind::Kube] {
            assert!(platform_problems(&backups, platform).is_empty());
        }
    }

    #[test]
    fn a_standby_is_refused_on_kube_by_name() {
        let mut s = scenario(
            ", backup: {interval: 10s, maxBackups: 3, continuous: {segmentInterval: 1s}}",
            "",
        );
        s.standby = Some(crate::scenario::Standby {
            size: 1,
            stream: true,
            max_lag: crate::scenario::Dur(std::time::Duration::from_secs(10)),
            catch_up: crate::scenario::Dur(std::time::Duration::from_secs(60)),
            chaos: None,
            lose_primary_at: None,
        });
        assert!(platform_problems(&s, PlatformKind::Local).is_empty());
        let p = platform_problems(&s, PlatformKind::Kube);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("standby: "), "{p:?}");
    }

    #[test]
    fn the_kube_rejection_names_the_file_and_is_bad_input() {
        let text = "name: t\nduration: 60s\ncluster: {name: t, size: 3, version: \"3.4.23\"}\n\
                    chaos: {killInterval: 10s, fault: corrupt, corrupt: wal}\n\
                    bounds: {recoveryP99: 5s, recoveryMax: 10s, availability: 0.9}\n";
        let corrupt = crate::scenario::parse(Path::new("t.yaml"), text).expect("parses");
        let o = Options {
            scenario: corrupt,
            scenario_file: "scenarios/x.yaml".into(),
            platform: PlatformKind::Kube,
            out: "/nonexistent/out".into(),
            seed: None,
            operator_bin: "/nonexistent/etcd-operator".into(),
            chaos_bin: "/nonexistent/chaos-monkey".into(),
            etcd_binaries: "/nonexistent".into(),
            work_dir: None,
            kubeconfig: None,
            namespace: "default".into(),
            tty: false,
            sabotage: None,
        };
        match check_binaries(&o) {
            Err(Error::Setup(m)) => {
                assert!(m.starts_with("scenarios/x.yaml: chaos.fault: "), "{m}");
            }
            other => panic!("expected a Setup error, got {other:?}"),
        }
    }
}
