//! `../shared/corpus/helm-pipeline`: ingress-nginx's static manifests, end to end. Upstream makes
//! each `deploy/static/<target>/deploy.yaml` with
//! `helm template ingress-nginx charts/ingress-nginx --values hack/manifest-templates/<target>/values.yaml
//! --namespace ingress-nginx --kube-version 1.22 > hack/manifest-templates/common/manifest.yaml`,
//! deletes the lines naming `app.kubernetes.io/managed-by: Helm` or `helm.sh`, then
//! `kustomize build --load-restrictor=LoadRestrictionsNone hack/manifest-templates/<target>`.
//! Here the render is ours and the build is capstan-kustomize's, with the generated
//! `manifest.yaml` in an overlay file system (the corpus stays read-only).

use std::path::{Path, PathBuf};

use capstan_helm::output::Template;
use capstan_helm::template::Env;
use capstan_kustomize::{BuildOptions, DiskFs, LoadRestrictor, OverlayFs};

use crate::common;

/// The targets: directories under `hack/manifest-templates/provider` with a values.yaml.
fn targets(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                if path.join("values.yaml").is_file() && path.join("kustomization.yaml").is_file() {
                    out.push(path.clone());
                }
                walk(&path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root.join("hack/manifest-templates/provider"), &mut out);
    out.sort();
    out
}

fn check(root: &Path, target: &Path) -> Result<(), String> {
    let templates = root.join("hack/manifest-templates");
    let relative = target
        .strip_prefix(&templates)
        .map_err(|e| e.to_string())?
        .to_string_lossy()
        .into_owned();
    let values = format!("hack/manifest-templates/{relative}/values.yaml");
    let args = [
        "ingress-nginx",
        "charts/ingress-nginx",
        "--values",
        &values,
        "--namespace",
        "ingress-nginx",
        "--kube-version",
        "1.22",
    ];
    let template = Template::from_args(&args).map_err(|e| e.to_string())?;
    let rendered = template
        .execute(root, &mut Env::new())
        .map_err(|e| format!("helm template: {}", common::short(&e.message)))?;
    let manifest: String = rendered
        .stdout
        .split_inclusive('\n')
        .filter(|l| !l.contains("app.kubernetes.io/managed-by: Helm") && !l.contains("helm.sh"))
        .collect();
    let root = std::fs::canonicalize(root).map_err(|e| e.to_string())?;
    let mut fs = OverlayFs::new(DiskFs);
    fs.insert(
        root.join("hack/manifest-templates/common/manifest.yaml"),
        manifest,
    );
    let options = BuildOptions {
        load_restrictor: LoadRestrictor::None,
        ..BuildOptions::default()
    };
    // The overlay holds the canonical path, so the build starts from the canonical tree too (the
    // corpus may sit behind a symbolic link).
    let target = root.join("hack/manifest-templates").join(&relative);
    let objects = capstan_kustomize::build_with(&fs, &target, &options)
        .map_err(|e| format!("kustomize build: {e}"))?;
    let got = capstan_kustomize::to_yaml(&objects);
    let expected_path = root.join(format!("deploy/static/{relative}/deploy.yaml"));
    let want = std::fs::read_to_string(&expected_path)
        .map_err(|e| format!("{}: {e}", expected_path.display()))?;
    if got == want {
        return Ok(());
    }
    Err(common::first_text_difference(&want, &got))
}

#[test]
fn ingress_nginx_pipeline() {
    let root = common::corpus().join("helm-pipeline/ingress-nginx");
    let targets = targets(&root);
    assert_eq!(targets.len(), 9, "ingress-nginx has 9 static targets");
    let mut passed = 0;
    let mut failures = Vec::new();
    for target in &targets {
        let name = target
            .strip_prefix(root.join("hack/manifest-templates"))
            .unwrap_or(target)
            .display()
            .to_string();
        match check(&root, target) {
            Ok(()) => passed += 1,
            Err(summary) => {
                println!("  {name}: FAIL {summary}");
                failures.push(name);
            }
        }
    }
    println!("{passed}/{} ingress-nginx targets pass", targets.len());
    assert!(
        failures.is_empty(),
        "failing targets: {}",
        failures.join(", ")
    );
}
