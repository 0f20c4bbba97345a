//! The rules of rebuilding a cluster that lost a majority for good: from
//! the most advanced survivor, never while a paused majority might come
//! back (the properties that drive them: [`super::rebuild_props`]).

use super::*;

/// The rules of a rebuild ([`crate::plan::lost`]): only once quorum
/// cannot come back, even counting paused members; from the most advanced
/// survivor, which every member running with its data has been compared
/// with; from a backup only when the spec allows it and no survivor is
/// allowed to seed the cluster.
pub(super) fn check_rebuild(
    model: &Model,
    obs: &Observed,
    d: &Desired,
    step: &Step,
) -> Result<(), String> {
    let rebuild = matches!(
        step,
        Step::RestoreFromBackup | Step::RebuildFromSurvivor { .. }
    );
    if !rebuild {
        return Ok(());
    }
    if !model.bootstrapped || obs.membership_known || model.could_come_back() {
        return Err(format!("rebuilt although quorum could come back: {step}"));
    }
    let persistent = d.storage == StoragePolicy::Persistent;
    let survivors: Vec<&M> = model
        .members
        .iter()
        .filter(|m| m.on_platform && m.running && m.has_data)
        .collect();
    match step {
        Step::RestoreFromBackup => {
            if !d.restore_from_backup || !model.backup {
                return Err(
                    "restored from a backup the spec does not allow or that is not there".into(),
                );
            }
            if d.from_survivor && persistent && !survivors.is_empty() {
                return Err(format!(
                    "restored from a backup while survivors kept data: {:?}",
                    survivors.iter().map(|m| &m.name).collect::<Vec<_>>()
                ));
            }
        }
        Step::RebuildFromSurvivor { member, .. } => {
            if !d.from_survivor || !persistent {
                return Err(format!(
                    "rebuilt from a survivor the spec does not allow: {step}"
                ));
            }
            let seed = survivors
                .iter()
                .find(|m| &m.name == member)
                .ok_or_else(|| format!("seed {member} does not run with its data"))?;
            if let Some(ahead) = survivors.iter().find(|m| m.pos > seed.pos) {
                return Err(format!(
                    "seeded from {member} at {} though {} runs at {} (paused or not)",
                    seed.pos, ahead.name, ahead.pos
                ));
            }
        }
        _ => {}
    }
    Ok(())
}
