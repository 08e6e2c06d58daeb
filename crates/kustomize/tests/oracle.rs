//! Oracle tests: every case under `tests/oracle/` is built by `kubectl kustomize` (installed by
//! `scripts/setup`; kustomize v5.5.0) at test time and by the engine, and the outputs must be
//! the same bytes. Each case is one kustomization directory written for one fidelity point
//! (its name says which).

use std::path::{Path, PathBuf};
use std::process::Command;

use capstan_kustomize::{BuildOptions, build, to_yaml};

fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn kubectl_kustomize(dir: &Path) -> Result<String, String> {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap_or_else(|error| {
            panic!("kubectl is needed by the oracle tests (scripts/setup installs it): {error}")
        });
    if output.status.success() {
        Ok(String::from_utf8(output.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

fn first_differing_line(ours: &str, theirs: &str) -> String {
    let (ours_lines, their_lines): (Vec<_>, Vec<_>) =
        (ours.lines().collect(), theirs.lines().collect());
    for (i, (a, b)) in ours_lines.iter().zip(&their_lines).enumerate() {
        if a != b {
            return format!("line {}: ours {a:?}, kubectl {b:?}", i + 1);
        }
    }
    format!(
        "ours has {} lines, kubectl {}",
        ours_lines.len(),
        their_lines.len()
    )
}

/// How the engine's build of `dir` differs from `kubectl kustomize`'s, if it does (both
/// refusing is agreement).
fn difference(dir: &Path, name: &str) -> Option<String> {
    let theirs = kubectl_kustomize(dir);
    let ours = build(dir, &BuildOptions::default()).map(|objects| to_yaml(&objects));
    match (ours, theirs) {
        (Ok(ours), Ok(theirs)) if ours == theirs => None,
        (Err(_), Err(_)) => None,
        (Ok(ours), Ok(theirs)) => Some(format!("{name}: {}", first_differing_line(&ours, &theirs))),
        (Ok(_), Err(theirs)) => Some(format!("{name}: kubectl fails: {theirs}")),
        (Err(ours), Ok(_)) => Some(format!("{name}: engine fails: {ours}")),
    }
}

#[test]
fn engine_output_is_kubectl_kustomize_output() {
    let mut failures = Vec::new();
    let cases = cases();
    assert!(!cases.is_empty());
    for dir in &cases {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        failures.extend(difference(dir, &name));
    }
    assert!(
        failures.is_empty(),
        "differences from kubectl:\n{}",
        failures.join("\n")
    );
}

/// Every kustomization directory of the public Flux repositories in `../shared/corpus`
/// (not only the build paths of the golden index: bases, components and overlays alike).
#[test]
fn every_flux_corpus_directory_builds_as_kubectl_builds_it() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let mut dirs = Vec::new();
    let mut pending: Vec<PathBuf> = ["flux-example", "flux-extra", "podinfo", "helm-pipeline"]
        .iter()
        .map(|group| corpus.join(group))
        .collect();
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if ["kustomization.yaml", "kustomization.yml", "Kustomization"]
                .iter()
                .any(|name| path.file_name().is_some_and(|n| n == *name))
            {
                dirs.push(dir.clone());
            }
        }
    }
    dirs.sort();
    assert!(dirs.len() > 30, "{} directories", dirs.len());
    let mut failures = Vec::new();
    for dir in &dirs {
        let name = dir
            .strip_prefix(&corpus)
            .unwrap_or(dir)
            .display()
            .to_string();
        failures.extend(difference(dir, &name));
    }
    println!("{} corpus directories compared", dirs.len());
    assert!(
        failures.is_empty(),
        "differences from kubectl:\n{}",
        failures.join("\n")
    );
}
