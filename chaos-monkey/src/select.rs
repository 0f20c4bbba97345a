//! Victim choice: a pure function of the seed, the tick number and the
//! sorted list of candidate members with their roles, so the same seed and
//! clusters give the same victims, and the rules can be property-tested
//! without etcd.

use etcd_operator::faults::Role;

use crate::rng::{Rng, Stream};

/// Which members a tick aims at (also a soak scenario's `chaos.target`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// One random member of the selected clusters.
    Random,
    /// The leader of one random selected cluster.
    Leader,
    /// One random follower (a voting member that is not the leader).
    Follower,
    /// As many members of one cluster as it can lose and keep quorum:
    /// (voters-1)/2, less the voters already down.
    Minority,
    /// More than half of one cluster's members: quorum is lost (needs
    /// `--allow-quorum-loss`).
    Majority,
    /// The operator itself.
    Operator,
    /// The object store the backups go to (`--store-addr`): its process
    /// paused, a store that stops answering (local platform).
    Store,
    /// The member a standby's applier writes through: the leader of one
    /// random selected cluster that is a standby still following its
    /// source (its published `status.standby`); every source revision is a
    /// transaction sent there.
    Applier,
}

impl Target {
    /// Its name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Random => "random",
            Target::Leader => "leader",
            Target::Follower => "follower",
            Target::Minority => "minority",
            Target::Majority => "majority",
            Target::Operator => "operator",
            Target::Store => "store",
            Target::Applier => "applier",
        }
    }
}

/// A member as a tick sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberView {
    /// Member name.
    pub name: String,
    /// Its role now.
    pub role: Role,
    /// Its process (pod) runs and is not paused by us.
    pub running: bool,
    /// It may be hit: running and old enough (`--min-age`).
    pub eligible: bool,
}

/// A selected cluster as a tick sees it; members in the operator's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterView {
    /// Cluster name.
    pub name: String,
    /// Every member the platform has, running or not.
    pub members: Vec<MemberView>,
}

/// A chosen victim: indices into the clusters and their members.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pick {
    /// Index of the cluster.
    pub cluster: usize,
    /// Index of the member in that cluster.
    pub member: usize,
}

impl MemberView {
    fn can_hit(&self) -> bool {
        self.running && self.eligible
    }
    fn votes(&self) -> bool {
        self.role != Role::Learner
    }
}

impl ClusterView {
    /// Voting members (members not known to be learners).
    pub fn voters(&self) -> usize {
        self.members.iter().filter(|m| m.votes()).count()
    }

    /// Voters that are down (not running, or paused by us).
    pub fn voters_down(&self) -> usize {
        self.members
            .iter()
            .filter(|m| m.votes() && !m.running)
            .count()
    }

    /// How many more voters can go down while a quorum keeps running,
    /// whatever the members of unknown role turn out to be: they count as
    /// voters in the quorum to keep, but not as voters that keep it. (A
    /// member just added as a learner does not answer yet: counted as a
    /// voter that keeps quorum, it let a second member go while the
    /// cluster had two voters, and quorum was lost for good.)
    pub fn safe_losses(&self) -> usize {
        let sure = self
            .members
            .iter()
            .filter(|m| m.running && matches!(m.role, Role::Leader | Role::Follower))
            .count();
        sure.saturating_sub(self.voters() / 2 + 1)
    }

    fn hittable(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&i| self.members[i].can_hit())
            .collect()
    }
}

/// The victims of tick `tick`: at most `cap` members, all eligible, all in
/// `clusters`. Empty when nothing fits the target (or for
/// [`Target::Operator`] and [`Target::Store`], which are not members).
pub fn choose(
    seed: u64,
    tick: u64,
    clusters: &[ClusterView],
    target: Target,
    cap: usize,
) -> Vec<Pick> {
    let mut rng = Rng::for_tick(seed, tick, Stream::Victims);
    let mut picks = match target {
        Target::Random => one_of(&mut rng, clusters, |_| true),
        // The monkey hands over the standbys alone (the published status
        // says which): their leader takes the applier's transactions.
        Target::Leader | Target::Applier => one_of(&mut rng, clusters, |m| m.role == Role::Leader),
        Target::Follower => one_of(&mut rng, clusters, |m| m.role == Role::Follower),
        Target::Minority => group(&mut rng, clusters, ClusterView::safe_losses),
        Target::Majority => group(&mut rng, clusters, |c| c.members.len() / 2 + 1),
        Target::Operator | Target::Store => Vec::new(),
    };
    picks.truncate(cap);
    picks.sort();
    picks
}

/// One random hittable member among those that match.
fn one_of(
    rng: &mut Rng,
    clusters: &[ClusterView],
    want: impl Fn(&MemberView) -> bool,
) -> Vec<Pick> {
    let all: Vec<Pick> = clusters
        .iter()
        .enumerate()
        .flat_map(|(c, cluster)| {
            cluster
                .members
                .iter()
                .enumerate()
                .filter(|(_, m)| m.can_hit() && want(m))
                .map(move |(member, _)| Pick { cluster: c, member })
        })
        .collect();
    if all.is_empty() {
        return Vec::new();
    }
    vec![all[rng.below(all.len())]]
}

/// `count(cluster)` random hittable members of one random cluster among
/// those where that count is at least one.
fn group(
    rng: &mut Rng,
    clusters: &[ClusterView],
    count: impl Fn(&ClusterView) -> usize,
) -> Vec<Pick> {
    let fits: Vec<(usize, usize)> = clusters
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let n = count(c).min(c.hittable().len());
            (n > 0).then_some((i, n))
        })
        .collect();
    if fits.is_empty() {
        return Vec::new();
    }
    let (c, n) = fits[rng.below(fits.len())];
    let hittable = clusters[c].hittable();
    rng.sample(hittable.len(), n)
        .into_iter()
        .map(|i| Pick {
            cluster: c,
            member: hittable[i],
        })
        .collect()
}

#[cfg(test)]
mod tests;
