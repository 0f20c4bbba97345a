//! The safety rules of database maintenance every step is checked
//! against: defragmentation one member at a time, clearing NOSPACE in one
//! step, replacing a corrupt member, disarming.

use super::*;

/// The rules of database maintenance: one defragmentation at a time, never
/// while quorum is at risk, the leader last; a member replaced as corrupt
/// is corrupt, and never on a corrupt majority's word; NOSPACE disarmed
/// only with room again.
pub(super) fn check_db_step(
    model: &Model,
    obs: &Observed,
    d: &Desired,
    step: &Step,
) -> Result<(), String> {
    let all_healthy = obs.members.iter().all(|m| m.healthy);
    let voters = model.voters().count();
    match step {
        Step::Defragment { member, why } => {
            if model.members.iter().any(|m| m.defragging) {
                return Err(format!("{step} while another defragmentation runs"));
            }
            if !all_healthy {
                return Err(format!("{step} while a member is unhealthy"));
            }
            let target = obs.members.iter().find(|m| &m.name == member);
            let target = target.ok_or_else(|| format!("{step}: no such member"))?;
            let e = target.etcd.ok_or_else(|| format!("{step}: not in etcd"))?;
            let others = obs
                .members
                .iter()
                .filter(|m| m.name != *member && m.healthy && m.etcd.is_some_and(|e| !e.learner))
                .count();
            if voters > 1 && others < quorum(voters) {
                return Err(format!(
                    "{step} leaves {others} of {voters} voters: quorum at risk"
                ));
            }
            let needs = |m: &Member| {
                let free = m.db.reclaimable();
                match why {
                    DefragWhy::Fragmented => {
                        free >= MIN_RECLAIM
                            && d.db
                                .fragmentation
                                .is_some_and(|p| free * 100 >= m.db.size * i64::from(p))
                    }
                    DefragWhy::Scheduled => m.db.defrag_due,
                }
            };
            if !needs(target) {
                return Err(format!("{step}: it does not need it"));
            }
            let follower_waits = obs
                .members
                .iter()
                .any(|m| m.etcd.is_some_and(|f| !f.leader) && needs(m));
            if e.leader && follower_waits {
                return Err(format!(
                    "{step}: the leader before a follower that needs it"
                ));
            }
        }
        Step::Remove {
            member,
            why: RemoveWhy::Corrupt,
            ..
        } => {
            let m = model.members.iter().find(|m| &m.name == member);
            if m.is_none_or(|m| m.hash == TRUTH) {
                return Err(format!("{step}: its data is good"));
            }
            if model.corrupt_voters() >= quorum(voters) {
                return Err(format!("{step}: a majority of voters is corrupt"));
            }
        }
        Step::ClearNoSpace {
            defrag_order,
            disarm,
            ..
        } => check_clear_nospace(model, obs, step, defrag_order, disarm)?,
        Step::Disarm { .. } => {
            let full = model
                .members
                .iter()
                .filter(|m| m.in_etcd)
                .any(|m| m.size * 100 >= QUOTA * DISARM_BELOW);
            if full {
                return Err(format!(
                    "{step} while a database file is still at the quota"
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// The rules of clearing NOSPACE in one step: only with the alarm raised;
/// the defragmentations one after the other, each only with every member
/// healthy and a quorum left besides it, each of a member that needs it
/// (once per alarm, whatever its bytes in use say), followers first, the
/// leader last and only after every follower that needs it; the alarms
/// disarmed only when every member that needs it is defragmented, and
/// only NOSPACE alarms.
fn check_clear_nospace(
    model: &Model,
    obs: &Observed,
    step: &Step,
    defrag_order: &[String],
    disarm: &[Alarm],
) -> Result<(), String> {
    if model.nospace.is_none() {
        return Err(format!("{step} without a NOSPACE alarm"));
    }
    let needs = |m: &Member| !m.db.defragged_since_alarm || m.db.reclaimable() >= MIN_RECLAIM;
    let voters = model.voters().count();
    if !defrag_order.is_empty() {
        if model.members.iter().any(|m| m.defragging) {
            return Err(format!("{step} while another defragmentation runs"));
        }
        if !obs.members.iter().all(|m| m.healthy) {
            return Err(format!("{step} while a member is unhealthy"));
        }
    }
    let mut seen_leader = false;
    for (i, name) in defrag_order.iter().enumerate() {
        if defrag_order[..i].contains(name) {
            return Err(format!("{step}: {name} twice"));
        }
        let m = obs.members.iter().find(|m| &m.name == name);
        let m = m.ok_or_else(|| format!("{step}: no member {name}"))?;
        let e = m
            .etcd
            .ok_or_else(|| format!("{step}: {name} not in etcd"))?;
        let others = obs
            .members
            .iter()
            .filter(|o| o.name != *name && o.healthy && o.etcd.is_some_and(|e| !e.learner))
            .count();
        if voters > 1 && others < quorum(voters) {
            return Err(format!(
                "{step}: {name} leaves {others} of {voters} voters: quorum at risk"
            ));
        }
        if !needs(m) {
            return Err(format!("{step}: {name} does not need it"));
        }
        if seen_leader {
            return Err(format!("{step}: {name} after the leader"));
        }
        seen_leader = e.leader;
    }
    let left_out = obs
        .members
        .iter()
        .filter(|m| needs(m) && !defrag_order.contains(&m.name))
        .map(|m| m.name.clone())
        .collect::<Vec<_>>();
    if seen_leader {
        let followers: Vec<&String> = left_out
            .iter()
            .filter(|n| {
                obs.members
                    .iter()
                    .any(|m| &m.name == *n && m.etcd.is_some_and(|e| !e.leader))
            })
            .collect();
        if !followers.is_empty() {
            return Err(format!("{step}: the leader before {followers:?}"));
        }
    }
    if !disarm.is_empty() && !left_out.is_empty() {
        return Err(format!(
            "{step}: disarms with {left_out:?} not defragmented"
        ));
    }
    if let Some(a) = disarm.iter().find(|a| a.kind != AlarmKind::NoSpace) {
        return Err(format!("{step}: disarms {a:?}"));
    }
    Ok(())
}
