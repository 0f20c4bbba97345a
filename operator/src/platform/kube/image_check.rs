//! Whether an etcd image runs, found out with a short-lived Job (`etcd
//! --version` in the image) before a step that cannot be undone depends on
//! it: an emptyDir member whose upgrade needs a new pod loses its data with
//! its pod, so a version whose image cannot be pulled (a typo such as
//! 3.5.99) must cost nothing. A good image is remembered for the
//! operator's life; a bad one is asked again after [`RETRY_AFTER`].

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Container;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::jobs::{Jobs, job, job_name};
use super::placement;
use super::pod::image;
use super::{Error, KubePlatform};
use crate::crd::MemberPodSpec;
use crate::version::Version;

/// The check's container.
pub const IMAGE_CHECK_CONTAINER: &str = "etcd-version";
/// How long the check may take (a pull of a large image included).
const CHECK_LIMIT: Duration = Duration::from_secs(180);
/// How soon a failed check is tried again.
pub const RETRY_AFTER: Duration = Duration::from_secs(60);

/// What is known of an image.
#[derive(Clone, Debug)]
pub(super) enum Known {
    /// It ran `etcd --version`.
    Runs,
    /// It did not, for this reason, at this time.
    Fails(String, Instant),
}

/// The Job that runs `etcd --version` in `repository:vVERSION`, pulled
/// and scheduled as members are (`spec.pod`'s pull secrets, nodes,
/// tolerations: a mirror may be reachable from some nodes only).
pub fn image_check_job(
    name: &str,
    cluster: &str,
    repository: &str,
    version: Version,
    template: Option<&MemberPodSpec>,
    owner: &OwnerReference,
) -> Job {
    let container = Container {
        name: IMAGE_CHECK_CONTAINER.into(),
        image: Some(image(repository, version)),
        command: Some(vec!["etcd".into(), "--version".into()]),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Container::default()
    };
    let mut job = job(name, cluster, "image-check", container, Vec::new(), owner);
    if let Some(pod) = job.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        placement::apply_to_job(template, pod);
    }
    job
}

impl KubePlatform {
    /// Ok when the image of `version` runs etcd; else why not, in words
    /// that say what to do. The image is the spec's (`spec.image.repository`,
    /// else the operator's).
    pub(super) async fn check_image(
        &self,
        cluster: &str,
        version: Version,
        owner: &OwnerReference,
    ) -> Result<(), Error> {
        let reg = self.registration(cluster)?;
        let repository = reg.repository.as_deref().unwrap_or(&self.image);
        let wanted = image(repository, version);
        let known = self
            .images
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&wanted)
            .cloned();
        let refused = |why: &str| {
            Error::Busy(format!(
                "the image {wanted} does not run etcd ({why}); members are left as they are (an \
                 emptyDir member would lose its data in a new pod): make the image available, \
                 or set spec.version back"
            ))
        };
        match known {
            Some(Known::Runs) => return Ok(()),
            Some(Known::Fails(why, at)) if at.elapsed() < RETRY_AFTER => return Err(refused(&why)),
            _ => {}
        }
        let name = job_name(cluster, "image-check");
        let template = reg.template.as_ref();
        let job = image_check_job(&name, cluster, repository, version, template, owner);
        tracing::info!(%cluster, image = %wanted, job = %name, "checking that the image runs etcd");
        let jobs = Jobs::new(self.client.clone(), &self.namespace);
        let outcome = jobs
            .run_within(&job, IMAGE_CHECK_CONTAINER, CHECK_LIMIT)
            .await;
        let result = match outcome {
            Ok(o) if o.succeeded => Known::Runs,
            Ok(o) => Known::Fails(o.why.unwrap_or_else(|| "it failed".into()), Instant::now()),
            Err(e) => Known::Fails(e.to_string(), Instant::now()),
        };
        let mut images = self.images.lock().unwrap_or_else(|e| e.into_inner());
        images.insert(wanted.clone(), result.clone());
        match result {
            Known::Runs => Ok(()),
            Known::Fails(why, _) => Err(refused(&why)),
        }
    }
}
