//! Benchmark: capstan's OCI pull of a Flux artifact (about 1,000 files, a few MB, pushed with
//! capstan's push to a local `docker-registry`) against `skopeo copy docker://… dir:…` of the
//! same artifact. skopeo only downloads the blobs, so capstan is measured twice: pull with
//! extraction (what OCIRepository does) against `skopeo copy` followed by `tar -xzf` of the
//! layer, and pull of the layer as a file (`Copy`, the same work as skopeo) against `skopeo
//! copy` alone.
//!
//! Run with `cargo bench -p capstan-source --bench oci_pull` (or `scripts/bench-sources`).

mod common;

use std::path::Path;
use std::process::Command;

use capstan_source::oci::{
    self, Created, LayerOperation, LayerSelector, PullOptions, PushOptions, RegistryOptions,
};

use capstan_testkit::{Registry, require};
use common::{RUNS, Rng, ratio, report, time};

/// Files in the pushed artifact.
const FILES: usize = 1_000;

/// About 1,000 files of 2-6 KiB in 20 directories.
fn generate(dir: &Path) {
    let mut rng = Rng::new(7);
    for index in 0..FILES {
        let sub = dir.join(format!("deploy/component-{:02}", index % 20));
        std::fs::create_dir_all(&sub).unwrap();
        let len = 2048 + usize::try_from(rng.next() % 4096).unwrap();
        std::fs::write(
            sub.join(format!("manifest-{index:04}.yaml")),
            rng.manifest(index, len),
        )
        .unwrap();
    }
}

fn skopeo_copy(reference: &str, dest: &Path) {
    let output = Command::new("skopeo")
        .args(["copy", "-q", "--src-tls-verify=false", "--src-no-creds"])
        .arg(format!("docker://{reference}"))
        .arg(format!("dir:{}", dest.display()))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "skopeo copy failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn main() {
    require("skopeo");
    capstan_source::tls::install_default_provider();
    let root = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(Registry::start());
    let address = server.address.clone();
    let source = root.path().join("source");
    generate(&source);
    let registry = RegistryOptions {
        insecure: true,
        ..RegistryOptions::default()
    };
    let url = format!("oci://{address}/bench/manifests:v1");
    let pushed = runtime
        .block_on(oci::push(
            &source,
            &url,
            &PushOptions {
                source: "https://example.invalid/bench.git".to_owned(),
                revision: "main@sha1:0000000000000000000000000000000000000000".to_owned(),
                created: Created::Now,
                ..PushOptions::default()
            },
            &registry,
        ))
        .unwrap();
    let layer_size = pushed.manifest.layers[0].size;
    let layer_file = pushed.manifest.layers[0]
        .digest
        .trim_start_matches("sha256:")
        .to_owned();
    let scratch = tempfile::tempdir().unwrap();

    let capstan_pull = |name: String, operation: LayerOperation| {
        let target = scratch.path().join(name);
        let options = PullOptions {
            layer_selector: LayerSelector {
                media_type: None,
                operation,
            },
            ..PullOptions::default()
        };
        let (elapsed, pulled) =
            time(|| runtime.block_on(oci::pull(&url, &target, &options, &registry)));
        assert_eq!(pulled.unwrap().digest, pushed.digest);
        elapsed
    };
    let skopeo_pull = |name: String, extract: bool| {
        let target = scratch.path().join(name);
        let (elapsed, ()) = time(|| {
            skopeo_copy(&format!("{address}/bench/manifests:v1"), &target);
            if extract {
                let files = target.join("files");
                std::fs::create_dir(&files).unwrap();
                common::run(
                    "tar",
                    &[
                        "-xzf",
                        target.join(&layer_file).to_str().unwrap(),
                        "-C",
                        files.to_str().unwrap(),
                    ],
                );
            }
        });
        elapsed
    };

    // Warm-up, then alternating measured runs.
    capstan_pull("warm-extract".to_owned(), LayerOperation::Extract);
    capstan_pull("warm-copy".to_owned(), LayerOperation::Copy);
    skopeo_pull("warm-skopeo".to_owned(), true);
    let (mut extract, mut copy) = (Vec::new(), Vec::new());
    let (mut skopeo, mut skopeo_tar) = (Vec::new(), Vec::new());
    for run in 0..RUNS {
        extract.push(capstan_pull(
            format!("extract-{run}"),
            LayerOperation::Extract,
        ));
        skopeo_tar.push(skopeo_pull(format!("skopeo-tar-{run}"), true));
        copy.push(capstan_pull(format!("copy-{run}"), LayerOperation::Copy));
        skopeo.push(skopeo_pull(format!("skopeo-{run}"), false));
    }

    println!();
    println!(
        "OCI pull of {FILES} files (layer {} KiB) from docker-registry at {address}",
        layer_size / 1024
    );
    let extract = report("capstan oci::pull (download + extract)", &mut extract);
    let skopeo_tar = report("skopeo copy docker:// dir: + tar -xzf", &mut skopeo_tar);
    let copy = report("capstan oci::pull (download layer, Copy)", &mut copy);
    let skopeo = report("skopeo copy docker:// dir:", &mut skopeo);
    ratio("skopeo+tar (download + extract)", extract, skopeo_tar);
    ratio("skopeo (download only)", copy, skopeo);
}
