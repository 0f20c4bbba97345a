//! Volumes grow to `spec.storage.size` one member at a time, in place,
//! and never shrink.

use super::*;
use crate::member::Volume;
use crate::validate::VolumeSize;

const GI: u64 = 1 << 30;

fn sized(gib: u64) -> Desired {
    Desired {
        volume: Some(VolumeSize {
            text: format!("{gib}Gi"),
            bytes: gib * GI,
        }),
        ..desired(3)
    }
}

/// A member whose claim asks `requested` GiB and has `capacity` GiB.
fn on(m: Member, requested: u64, capacity: u64, expandable: Option<bool>) -> Member {
    with(m, |m| {
        if let Some(p) = &mut m.platform {
            p.volume = Some(Volume {
                requested: requested * GI,
                capacity: Some(capacity * GI),
                class: Some("fast".into()),
                expandable,
                waits_for_restart: false,
            });
        }
    })
}

fn volumes(v: &[(u64, u64)], expandable: Option<bool>) -> Observed {
    let members = three()
        .into_iter()
        .zip(v)
        .map(|(m, (r, c))| on(m, *r, *c, expandable))
        .collect();
    cluster(members)
}

#[test]
fn a_larger_size_grows_one_volume_at_a_time_in_member_order() {
    let d = sized(10);
    let expand = |member: &str| Step::ExpandVolume {
        member: member.into(),
        to: "10Gi".into(),
    };
    assert_eq!(
        plan(&d, &volumes(&[(5, 5); 3], Some(true))),
        expand("demo-0")
    );
    // demo-0 asked and grows: nothing else grows meanwhile.
    let growing = volumes(&[(10, 5), (5, 5), (5, 5)], Some(true));
    assert_eq!(
        plan(&d, &growing),
        Step::Wait(Wait::VolumeGrowing {
            member: "demo-0".into(),
            to: "10Gi".into()
        })
    );
    assert_eq!(
        plan(&d, &volumes(&[(10, 10), (5, 5), (5, 5)], Some(true))),
        expand("demo-1")
    );
    // The leader (demo-0 here) is no exception: nothing restarts.
    let unknown = volumes(&[(10, 10), (10, 10), (5, 5)], None);
    assert_eq!(plan(&d, &unknown), expand("demo-2"));
    assert_eq!(plan(&d, &volumes(&[(10, 10); 3], None)), Step::Converged);
    // No size in the spec: volumes are left as they are.
    assert_eq!(
        plan(&desired(3), &volumes(&[(5, 5); 3], Some(true))),
        Step::Converged
    );
}

#[test]
fn a_class_that_cannot_grow_is_said_and_nothing_is_patched() {
    let o = volumes(&[(5, 5); 3], Some(false));
    let step = plan(&sized(10), &o);
    let Step::Wait(w) = &step else {
        panic!("a wait, got {step:?}");
    };
    assert!(w.is_problem());
    assert_eq!(
        w,
        &Wait::VolumeNotExpandable {
            members: vec!["demo-0".into(), "demo-1".into(), "demo-2".into()],
            class: "fast".into(),
            wanted: "10Gi".into(),
        }
    );
    assert!(
        w.to_string()
            .starts_with("spec.storage.size: 10Gi, but storage class fast")
    );
}

#[test]
fn a_smaller_size_is_refused_by_name_and_adds_no_member() {
    let o = volumes(&[(5, 5); 3], Some(true));
    let shrink = Step::Wait(Wait::VolumeShrink {
        member: "demo-0".into(),
        has: "5Gi".into(),
        wanted: "4Gi".into(),
    });
    assert_eq!(plan(&sized(4), &o), shrink);
    // Scaling up would put a new member on a 4Gi claim: refused too.
    let up = Desired {
        size: 5,
        ..sized(4)
    };
    assert_eq!(plan(&up, &o), shrink);
    let Step::Wait(w) = shrink else { return };
    assert!(w.is_problem());
    assert!(
        w.to_string()
            .starts_with("spec.storage.size: 4Gi is smaller than member demo-0")
    );
}

#[test]
fn a_filesystem_that_grows_offline_restarts_its_member_as_planned() {
    let mut o = volumes(&[(10, 10), (5, 5), (5, 5)], Some(true));
    if let Some(v) = o.members[0]
        .platform
        .as_mut()
        .and_then(|p| p.volume.as_mut())
    {
        v.waits_for_restart = true;
    }
    // demo-0 leads: it hands over first, as for any planned restart.
    let step = plan(&sized(10), &o);
    assert!(
        matches!(step, Step::MoveLeader { ref from, .. } if from == "demo-0"),
        "{step:?}"
    );
    let o = cluster(led_by(o.members, "demo-1"));
    assert_eq!(
        plan(&sized(10), &o),
        Step::Restart {
            member: "demo-0".into(),
            why: RestartWhy::GrowFilesystem
        }
    );
}

#[test]
fn an_unbound_claim_waits_to_be_grown() {
    let mut o = volumes(&[(5, 5); 3], Some(true));
    for m in &mut o.members {
        if let Some(v) = m.platform.as_mut().and_then(|p| p.volume.as_mut()) {
            v.capacity = None;
        }
    }
    assert_eq!(plan(&sized(10), &o), Step::Converged);
}

/// A member whose 5Gi claim is of storage class `class`.
fn of_class(m: Member, class: &str) -> Member {
    with(on(m, 5, 5, Some(true)), |m| {
        if let Some(v) = m.platform.as_mut().and_then(|p| p.volume.as_mut()) {
            v.class = Some(class.into());
        }
    })
}

fn classed(class: &str) -> Desired {
    Desired {
        storage_class: Some(class.into()),
        ..desired(3)
    }
}

#[test]
fn a_new_class_adds_a_member_on_it_before_one_on_the_old_class_goes() {
    let d = classed("ssd");
    let old: Vec<Member> = three().into_iter().map(|m| of_class(m, "hdd")).collect();
    // Three voters on the old class: a fourth member first.
    assert_eq!(plan(&d, &cluster(old.clone())), Step::AddLearner);
    // It caught up: promoted beside them, not removed as one too many.
    let learner = with(of_class(up("demo-3", 4), "ssd"), |m| {
        if let Some(e) = &mut m.etcd {
            e.learner = true;
        }
    });
    let mut four = old.clone();
    four.push(learner);
    assert_eq!(
        plan(&d, &cluster(four.clone())),
        Step::Promote {
            member: "demo-3".into(),
            id: 4
        }
    );
    // Four voters: the first old follower goes (demo-0 leads).
    let promoted = with(four.pop().expect("demo-3"), |m| {
        if let Some(e) = &mut m.etcd {
            e.learner = false;
        }
    });
    four.push(promoted);
    assert_eq!(
        plan(&d, &cluster(four.clone())),
        Step::Remove {
            member: "demo-1".into(),
            id: 2,
            why: RemoveWhy::StorageClass
        }
    );
    // Back to three, two on the old class: the next new member.
    four.retain(|m| m.name != "demo-1");
    assert_eq!(plan(&d, &cluster(four.clone())), Step::AddLearner);
    // The leader's turn comes last, after it hands over.
    let last = vec![
        of_class(up("demo-0", 1), "hdd"),
        of_class(up("demo-3", 4), "ssd"),
        of_class(up("demo-4", 5), "ssd"),
        of_class(up("demo-5", 6), "ssd"),
    ];
    let step = plan(&d, &cluster(last.clone()));
    assert!(
        matches!(step, Step::MoveLeader { ref from, .. } if from == "demo-0"),
        "{step:?}"
    );
    let last = led_by(last, "demo-3");
    assert!(
        matches!(
            plan(&d, &cluster(last.clone())),
            Step::Remove {
                ref member,
                why: RemoveWhy::StorageClass,
                ..
            } if member == "demo-0"
        ),
        "the old leader goes last"
    );
    let done: Vec<Member> = last.into_iter().filter(|m| m.name != "demo-0").collect();
    assert_eq!(plan(&d, &cluster(done)), Step::Converged);
}

#[test]
fn a_class_move_waits_for_every_member_and_leaves_unnamed_classes_alone() {
    let d = classed("ssd");
    // A member down: it is restarted first; nothing is added or removed.
    let mut old: Vec<Member> = three().into_iter().map(|m| of_class(m, "hdd")).collect();
    old[2] = killed(old[2].clone());
    if let Some(p) = old[2].platform.as_mut() {
        p.has_data = true;
    }
    assert!(
        matches!(plan(&d, &cluster(old)), Step::Start { .. }),
        "a stopped member is started first"
    );
    // Claims that name no class, or no class in the spec: nothing moves.
    let unnamed: Vec<Member> = three()
        .into_iter()
        .map(|m| on(m, 5, 5, Some(true)))
        .map(|m| {
            with(m, |m| {
                if let Some(v) = m.platform.as_mut().and_then(|p| p.volume.as_mut()) {
                    v.class = None;
                }
            })
        })
        .collect();
    assert_eq!(plan(&d, &cluster(unnamed)), Step::Converged);
    let old: Vec<Member> = three().into_iter().map(|m| of_class(m, "hdd")).collect();
    assert_eq!(plan(&desired(3), &cluster(old)), Step::Converged);
}
