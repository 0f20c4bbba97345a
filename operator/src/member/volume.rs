//! A member's data volume as its platform sees it (Kubernetes: its data
//! claim; none locally, where a member's data is a folder): what the plan
//! reads to grow volumes one member at a time when `spec.storage.size`
//! grows, and what status says of each member's volume.

/// A member's data volume.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Volume {
    /// What its claim requests, in bytes.
    pub requested: u64,
    /// What it has (the claim's status), in bytes; `None` while the claim
    /// is not bound (it cannot be grown then).
    pub capacity: Option<u64>,
    /// Its storage class, as the claim names it (`None`: the default
    /// class, not named).
    pub class: Option<String>,
    /// Whether that class allows expansion (`allowVolumeExpansion`);
    /// `None` when it could not be read (then growing is tried, and the API
    /// server says whether it may).
    pub expandable: Option<bool>,
    /// The volume grew but its filesystem waits for the pod to restart
    /// (`FileSystemResizePending`: a driver that resizes offline).
    pub waits_for_restart: bool,
}

impl Volume {
    /// The volume is on its way to a larger size it was asked for.
    pub fn growing(&self) -> bool {
        self.waits_for_restart || self.capacity.is_some_and(|c| c < self.requested)
    }
}

/// `bytes` as a person reads a volume size: `5Gi`, `1536Mi`, `7`.
pub fn size_text(bytes: u64) -> String {
    for (unit, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_written() {
        assert_eq!(size_text(5 << 30), "5Gi");
        assert_eq!(size_text(1536 << 20), "1536Mi");
        assert_eq!(size_text(7), "7");
        assert_eq!(size_text(1 << 40), "1Ti");
    }

    #[test]
    fn a_volume_grows_until_it_has_what_it_asked_for() {
        let mut v = Volume {
            requested: 10 << 30,
            capacity: Some(5 << 30),
            ..Volume::default()
        };
        assert!(v.growing());
        v.capacity = Some(10 << 30);
        assert!(!v.growing());
        v.waits_for_restart = true;
        assert!(v.growing());
    }
}
