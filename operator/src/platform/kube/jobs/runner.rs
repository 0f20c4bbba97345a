//! Running a Job to its end: [`Jobs::run`] creates it, waits (bounded)
//! until it succeeds, fails or its pod is stuck, reads its pod's log and
//! deletes it.

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use kube::{Client, ResourceExt};

use super::{JOB_DEADLINE, JOB_NAME_LABEL};
use crate::platform::kube::Error;
use crate::platform::kube::error::is_not_found;
use crate::platform::kube::trouble::{any_config_error, any_image_unavailable, problem};

/// How a Job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// It completed.
    pub succeeded: bool,
    /// The end of its container's log.
    pub log: String,
    /// Why it failed, as its status or its pod says.
    pub why: Option<String>,
}

/// Runs the platform's Jobs in one namespace.
#[derive(Clone)]
pub struct Jobs {
    client: Client,
    namespace: String,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jobs")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// How often a running Job is looked at: often at first (most end within
/// seconds), then every second.
fn poll_interval(since: Instant) -> Duration {
    if since.elapsed() < Duration::from_secs(5) {
        Duration::from_millis(250)
    } else {
        Duration::from_secs(1)
    }
}

impl Jobs {
    /// Jobs in `namespace`.
    pub fn new(client: Client, namespace: &str) -> Self {
        Jobs {
            client,
            namespace: namespace.into(),
        }
    }

    /// The client, for other calls in the namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Creates `job`, waits until it ends (at most [`JOB_DEADLINE`] and a
    /// minute; a pod whose image cannot be pulled ends it at once), reads
    /// the end of `container`'s log and deletes the Job with its pod.
    pub async fn run(&self, job: &Job, container: &str) -> Result<Outcome, Error> {
        self.run_within(job, container, JOB_DEADLINE + Duration::from_secs(60))
            .await
    }

    /// [`Jobs::run`], waiting at most `limit` for the Job to end.
    pub async fn run_within(
        &self,
        job: &Job,
        container: &str,
        limit: Duration,
    ) -> Result<Outcome, Error> {
        let name = job.name_any();
        let jobs = self.api::<Job>();
        crate::fence::check()?;
        jobs.create(&PostParams::default(), job)
            .await
            .map_err(Error::api(format!("cannot create job {name}")))?;
        let outcome = self.wait(&name, container, limit).await;
        let dp = DeleteParams::background();
        if let Err(e) = jobs.delete(&name, &dp).await
            && !is_not_found(&e)
        {
            tracing::warn!("cannot delete job {name} (it goes by itself within an hour): {e}");
        }
        outcome
    }

    async fn wait(&self, name: &str, container: &str, limit: Duration) -> Result<Outcome, Error> {
        let jobs = self.api::<Job>();
        let pods = self.api::<Pod>();
        let lp = ListParams::default().labels(&format!("{JOB_NAME_LABEL}={name}"));
        let since = Instant::now();
        loop {
            let job = jobs
                .get_opt(name)
                .await
                .map_err(Error::api(format!("cannot read job {name}")))?
                .ok_or_else(|| Error::Busy(format!("job {name} was deleted before it ended")))?;
            let status = job.status.unwrap_or_default();
            let listed = pods
                .list(&lp)
                .await
                .map_err(Error::api(format!("cannot list the pods of job {name}")))?;
            let pod = listed.items.into_iter().next();
            let stuck = pod.as_ref().and_then(|p| {
                let image = any_image_unavailable(p).map(|r| problem(p).unwrap_or(r.into()));
                image.or_else(|| any_config_error(p))
            });
            let succeeded = status.succeeded.unwrap_or(0) > 0;
            let failed = status.failed.unwrap_or(0) > 0;
            if succeeded || failed || stuck.is_some() {
                let failure = status
                    .conditions
                    .iter()
                    .flatten()
                    .find(|c| c.type_ == "Failed");
                let why = stuck.or_else(|| {
                    let c = failure?;
                    Some(format!(
                        "{}: {}",
                        c.reason.clone().unwrap_or_default(),
                        c.message.clone().unwrap_or_default()
                    ))
                });
                let log = match &pod {
                    Some(p) => self.log(&p.name_any(), container).await,
                    None => String::new(),
                };
                return Ok(Outcome {
                    succeeded,
                    log,
                    why: why.filter(|_| !succeeded),
                });
            }
            if since.elapsed() >= limit {
                return Err(Error::Busy(format!(
                    "job {name} did not end within {}s",
                    limit.as_secs()
                )));
            }
            tokio::time::sleep(poll_interval(since)).await;
        }
    }

    /// The last lines of `container`'s log in `pod` (empty when it cannot
    /// be read: a pod that never started has none).
    async fn log(&self, pod: &str, container: &str) -> String {
        let lp = LogParams {
            container: Some(container.into()),
            tail_lines: Some(200),
            ..LogParams::default()
        };
        match self.api::<Pod>().logs(pod, &lp).await {
            Ok(text) => text,
            Err(e) => {
                tracing::warn!("cannot read the log of pod {pod}: {e}");
                String::new()
            }
        }
    }
}
