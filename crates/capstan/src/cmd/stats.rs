//! `capstan stats`: one row per served kind with how many objects are running (not
//! suspended), failing (`Ready=False`) and suspended, and the storage their artifacts take, as
//! `flux stats` prints it.

use std::process::ExitCode;

use clap::Args;
use kube::Client;
use serde_json::Value;

use super::{
    ALERT, BUCKET, ClusterArgs, GIT, HELM_CHART, HELM_RELEASE, HELM_REPOSITORY, KUSTOMIZATION,
    Kind, OCI, PROVIDER, RECEIVER, condition_of, print_table, suspended,
};

/// `capstan stats [-A]`.
#[derive(Clone, Debug, Args)]
pub struct StatsArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Count objects across all namespaces.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
}

/// The counts of one kind.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    total: usize,
    failing: usize,
    suspended: usize,
    storage: u64,
}

impl Counts {
    fn of(objects: &[Value]) -> Self {
        let mut counts = Counts {
            total: objects.len(),
            ..Counts::default()
        };
        for object in objects {
            counts.suspended += usize::from(suspended(object));
            counts.failing += usize::from(
                condition_of(object, capstan_api::meta::condition::READY)
                    .is_some_and(|c| c["status"] == "False"),
            );
            counts.storage += object["status"]["artifact"]["size"].as_u64().unwrap_or(0);
        }
        counts
    }

    fn row(&self, kind: &str) -> Vec<String> {
        vec![
            kind.to_owned(),
            (self.total - self.suspended).to_string(),
            self.failing.to_string(),
            self.suspended.to_string(),
            format_size(self.storage),
        ]
    }
}

/// Prints the table.
pub async fn run(args: StatsArgs) -> anyhow::Result<ExitCode> {
    let client = args.cluster.client().await?;
    let namespace = (!args.all_namespaces).then_some(args.cluster.namespace.as_str());
    let mut rows = Vec::new();
    for kind in STATS {
        let objects = list(&client, kind, namespace).await?;
        rows.push(Counts::of(&objects).row(kind.type_name));
    }
    print_table(
        &["RECONCILERS", "RUNNING", "FAILING", "SUSPENDED", "STORAGE"],
        &rows,
    );
    Ok(ExitCode::SUCCESS)
}

/// The rows of `stats`, in the order of Flux's table. Every kind of [`super::ALL`] is here but
/// ExternalArtifact, which Flux's `stats` does not count either.
const STATS: [&Kind; 10] = [
    &GIT,
    &OCI,
    &HELM_REPOSITORY,
    &HELM_CHART,
    &BUCKET,
    &KUSTOMIZATION,
    &HELM_RELEASE,
    &ALERT,
    &PROVIDER,
    &RECEIVER,
];

/// The objects of one kind; none when the kind is not installed (as Flux counts a missing CRD).
async fn list(client: &Client, kind: &Kind, namespace: Option<&str>) -> anyhow::Result<Vec<Value>> {
    match kind.list(client, namespace).await {
        Err(e) if matches!(e.downcast_ref(), Some(kube::Error::Api(s)) if s.code == 404) => {
            Ok(Vec::new())
        }
        listed => listed,
    }
}

/// A byte count as Flux prints it: `-` for none, `512 B`, `1.5 KiB`, `3.0 MiB`.
fn format_size(bytes: u64) -> String {
    const UNIT: u64 = 1024;
    if bytes == 0 {
        return "-".to_owned();
    }
    if bytes < UNIT {
        return format!("{bytes} B");
    }
    let (mut div, mut exp) = (UNIT, 0);
    let mut n = bytes / UNIT;
    while n >= UNIT {
        div *= UNIT;
        exp += 1;
        n /= UNIT;
    }
    #[allow(clippy::cast_precision_loss)] // one decimal of a size
    let value = bytes as f64 / div as f64;
    format!("{value:.1} {}iB", &"KMGTPE"[exp..=exp])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_follow_flux_order_and_cover_every_served_kind() {
        let kinds: Vec<&str> = STATS.iter().map(|k| k.type_name).collect();
        assert_eq!(
            kinds,
            [
                "GitRepository",
                "OCIRepository",
                "HelmRepository",
                "HelmChart",
                "Bucket",
                "Kustomization",
                "HelmRelease",
                "Alert",
                "Provider",
                "Receiver"
            ]
        );
        let mut listed = kinds.clone();
        listed.sort_unstable();
        let mut served: Vec<&str> = super::super::ALL
            .iter()
            .map(|k| k.type_name)
            .filter(|k| *k != "ExternalArtifact")
            .collect();
        served.sort_unstable();
        assert_eq!(listed, served);
    }

    #[test]
    fn sizes_print_as_flux_prints_them() {
        assert_eq!(format_size(0), "-");
        assert_eq!(format_size(512), "512 B");
        assert_eq!(format_size(1536), "1.5 KiB");
        assert_eq!(format_size(3 * 1024 * 1024), "3.0 MiB");
        assert_eq!(format_size(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn counts_read_suspend_ready_and_artifact_size() {
        let objects = [
            serde_json::json!({"spec": {"suspend": true}, "status": {"artifact": {"size": 100}}}),
            serde_json::json!({"status": {"conditions": [{"type": "Ready", "status": "False"}],
                "artifact": {"size": 24}}}),
            serde_json::json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        ];
        let counts = Counts::of(&objects);
        assert_eq!(
            counts,
            Counts {
                total: 3,
                failing: 1,
                suspended: 1,
                storage: 124
            }
        );
        assert_eq!(counts.row("Bucket"), ["Bucket", "2", "1", "1", "124 B"]);
    }
}
