//! `capstan version [--client]`.

use std::process::ExitCode;

use clap::Args;

use crate::cmd::ClusterArgs;

/// The version of this binary, as `flux version` prints its own.
pub const CLIENT_VERSION: &str = concat!("v", env!("CARGO_PKG_VERSION"));

/// The commit this binary was built from, when its build said so: `scripts/build-image` sets
/// `CAPSTAN_COMMIT`. Read with `option_env!`, so an ordinary build neither needs nor tracks
/// Git (cargo rebuilds the crate only when the variable's value changes, not on every commit).
pub const COMMIT: Option<&str> = option_env!("CAPSTAN_COMMIT");

/// What `capstan --version` prints after the name: `0.1.0 (commit 0123abc…)`, or `0.1.0`
/// when the build did not record its commit.
pub static VERSION_TEXT: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| with_commit(env!("CARGO_PKG_VERSION"), COMMIT));

/// `version (commit C)`, or `version` alone without a (non-empty) commit.
pub fn with_commit(version: &str, commit: Option<&str>) -> String {
    match commit.map(str::trim).filter(|c| !c.is_empty()) {
        Some(commit) => format!("{version} (commit {commit})"),
        None => version.to_owned(),
    }
}

#[derive(Debug, Args)]
pub struct VersionArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Print only the client version; do not contact the cluster.
    #[arg(long)]
    pub client: bool,
}

/// Prints `capstan: vX.Y.Z` and, without `--client`, the controllers' version.
///
/// Capstan records its version in the one place it always controls: the `/version` of its
/// embedded control plane (`capstan dev`), whose `gitVersion` ends in `-capstan.X.Y.Z`. Against
/// any other cluster there is no record yet (no installed Deployments), so the controllers'
/// version is printed as `unknown` with the reason, never guessed.
pub async fn run(args: VersionArgs) -> anyhow::Result<ExitCode> {
    outln!("capstan: {}", with_commit(CLIENT_VERSION, COMMIT));
    if args.client {
        return Ok(ExitCode::SUCCESS);
    }
    let client = args.cluster.client().await?;
    let server = client
        .apiserver_version()
        .await
        .map_err(|e| anyhow::anyhow!("reading the cluster's /version: {e}"))?;
    match server.git_version.split_once("-capstan.") {
        Some((_, version)) => outln!("controllers: v{version} (embedded, capstan dev)"),
        None => outln!(
            "controllers: unknown (the cluster, Kubernetes {}, records no Capstan controller version)",
            server.git_version
        ),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::with_commit;

    #[test]
    fn the_version_names_the_commit_when_the_build_recorded_it() {
        assert_eq!(
            with_commit("0.1.0", Some("0123abcd")),
            "0.1.0 (commit 0123abcd)"
        );
        assert_eq!(with_commit("0.1.0", Some(" ")), "0.1.0");
        assert_eq!(with_commit("v0.1.0", None), "v0.1.0");
    }
}
