use super::*;

#[test]
fn config_blob_matches_flux() {
    let diff_id = Digest::of(b"tar");
    let blob = config_blob("1970-01-01T00:00:00Z", &diff_id);
    assert_eq!(
        String::from_utf8(blob).unwrap(),
        format!(
            "{{\"architecture\":\"\",\"created\":\"1970-01-01T00:00:00Z\",\
             \"history\":[{{\"created\":\"0001-01-01T00:00:00Z\"}}],\"os\":\"\",\
             \"rootfs\":{{\"type\":\"layers\",\"diff_ids\":[\"{diff_id}\"]}},\"config\":{{}}}}"
        )
    );
}

#[test]
fn created_times_are_whole_seconds_in_utc() {
    assert_eq!(Created::Reproducible.to_rfc3339(), "1970-01-01T00:00:00Z");
    let at: k8s_openapi::jiff::Timestamp = "2024-05-06T07:08:09.123456Z".parse().unwrap();
    assert_eq!(Created::At(at).to_rfc3339(), "2024-05-06T07:08:09Z");
    let now = Created::Now.to_rfc3339();
    assert_eq!(now.len(), 20, "{now}");
    assert!(now.ends_with('Z'));
}

#[test]
fn manifest_serializes_in_go_field_order() {
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.to_owned()),
        config: Descriptor {
            media_type: CONFIG_MEDIA_TYPE.to_owned(),
            size: 1,
            digest: "sha256:c".to_owned(),
            annotations: BTreeMap::new(),
        },
        layers: vec![Descriptor {
            media_type: CONTENT_MEDIA_TYPE.to_owned(),
            size: 2,
            digest: "sha256:l".to_owned(),
            annotations: BTreeMap::new(),
        }],
        annotations: BTreeMap::from([
            (SOURCE_ANNOTATION.to_owned(), "s".to_owned()),
            (CREATED_ANNOTATION.to_owned(), "c".to_owned()),
        ]),
    };
    assert_eq!(
        serde_json::to_string(&manifest).unwrap(),
        "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\
         \"config\":{\"mediaType\":\"application/vnd.cncf.flux.config.v1+json\",\"size\":1,\"digest\":\"sha256:c\"},\
         \"layers\":[{\"mediaType\":\"application/vnd.cncf.flux.content.v1.tar+gzip\",\"size\":2,\"digest\":\"sha256:l\"}],\
         \"annotations\":{\"org.opencontainers.image.created\":\"c\",\"org.opencontainers.image.source\":\"s\"}}"
    );
}

#[test]
fn references_parse_with_or_without_scheme() {
    let reference = parse_reference("oci://127.0.0.1:5000/apps/podinfo:v1.2.3").unwrap();
    assert_eq!(reference.registry(), "127.0.0.1:5000");
    assert_eq!(reference.repository(), "apps/podinfo");
    assert_eq!(reference.tag(), Some("v1.2.3"));
    let digest = Digest::of(b"m");
    let reference = parse_reference(&format!("ghcr.io/org/repo@{digest}")).unwrap();
    assert_eq!(reference.digest(), Some(digest.to_string().as_str()));
    for bad in [
        "",
        "oci://",
        "https://ghcr.io/org/repo:v1",
        "oci://Bad Name",
    ] {
        assert!(
            matches!(parse_reference(bad), Err(Error::InvalidReference { .. })),
            "{bad}"
        );
    }
}

#[test]
fn revisions_follow_flux() {
    let digest = Digest::of(b"m");
    assert_eq!(revision(Some("v1"), &digest), format!("v1@{digest}"));
    assert_eq!(revision(None, &digest), digest.to_string());
}

#[test]
fn credentials_from_flag_and_docker_config() {
    let creds: Credentials = "user:pa:ss".parse().unwrap();
    assert_eq!(
        (creds.username.as_str(), creds.password.as_str()),
        ("user", "pa:ss")
    );
    assert!(
        !format!("{creds:?}").contains("pa:ss"),
        "Debug hides the password"
    );
    assert!("nocolon".parse::<Credentials>().is_err());
    assert!(":pass".parse::<Credentials>().is_err());

    let config = br#"{"auths":{
        "https://registry.example:5000/v1/":{"auth":"YWxpY2U6czNjcmV0"},
        "other.example":{"username":"bob","password":"pw"},
        "broken.example":{"auth":"!!!"}}}"#;
    let alice = Credentials::from_docker_config(config, "registry.example:5000")
        .unwrap()
        .unwrap();
    assert_eq!(
        (alice.username.as_str(), alice.password.as_str()),
        ("alice", "s3cret")
    );
    let bob = Credentials::from_docker_config(config, "OTHER.example")
        .unwrap()
        .unwrap();
    assert_eq!(bob.username, "bob");
    assert!(
        Credentials::from_docker_config(config, "unknown.example")
            .unwrap()
            .is_none()
    );
    let error = Credentials::from_docker_config(config, "broken.example").unwrap_err();
    assert!(error.to_string().contains("not base64"), "{error}");
    assert!(Credentials::from_docker_config(b"not json", "x").is_err());
}

#[test]
fn bad_ca_certificates_are_refused() {
    let options = RegistryOptions {
        ca_certificates: vec![b"garbage".to_vec()],
        ..RegistryOptions::default()
    };
    assert!(matches!(
        options.client(),
        Err(Error::InvalidCertificate { .. })
    ));
}

#[test]
fn tag_pages_end_short_or_when_nothing_is_new() {
    let page = |names: &[&str]| names.iter().map(|&n| n.to_owned()).collect::<Vec<_>>();
    let mut tags = Vec::new();
    let mut seen = std::collections::HashSet::new();
    assert!(!tags::append_page(
        &mut tags,
        &mut seen,
        page(&["a", "b"]),
        2
    ));
    assert!(tags::append_page(&mut tags, &mut seen, page(&["c"]), 2));
    assert_eq!(tags, ["a", "b", "c"]);
    // A registry ignoring `last` sends the first page again: the listing ends.
    let mut tags = Vec::new();
    let mut seen = std::collections::HashSet::new();
    assert!(!tags::append_page(
        &mut tags,
        &mut seen,
        page(&["a", "b"]),
        2
    ));
    assert!(tags::append_page(
        &mut tags,
        &mut seen,
        page(&["a", "b"]),
        2
    ));
    assert_eq!(tags, ["a", "b"]);
}

#[tokio::test]
async fn lists_every_tag_page_by_page() {
    let registry = capstan_testkit::Registry::start().await;
    let options = RegistryOptions {
        insecure: true,
        ..RegistryOptions::default()
    };
    let source = tempfile::tempdir().unwrap();
    std::fs::write(source.path().join("app.yaml"), "kind: ConfigMap\n").unwrap();
    let repository = format!("oci://{}/fleet/app", registry.address);
    let push_options = PushOptions {
        source: "https://example.invalid/fleet".to_owned(),
        revision: "main@sha1:0123456789abcdef0123456789abcdef01234567".to_owned(),
        created: Created::Reproducible,
        ..PushOptions::default()
    };
    let pushed = ["v1.0.0", "v1.1.0", "v2.0.0", "latest", "v0.9.0"];
    for tag in pushed {
        push(
            source.path(),
            &format!("{repository}:{tag}"),
            &push_options,
            &options,
        )
        .await
        .unwrap();
    }
    let mut expected = pushed.map(str::to_owned).to_vec();
    expected.sort();
    for page_size in [2, 5, 1000] {
        let mut listed = tags::list_tags_in_pages(&repository, &options, page_size)
            .await
            .unwrap();
        listed.sort();
        assert_eq!(listed, expected, "page size {page_size}");
    }
    let mut listed = list_tags(&format!("{repository}:v1.0.0"), &options)
        .await
        .unwrap();
    listed.sort();
    assert_eq!(listed, expected, "a tag in the reference is ignored");

    let missing = list_tags(&format!("oci://{}/fleet/none", registry.address), &options)
        .await
        .unwrap_err();
    let message = crate::redact::error_chain(&missing);
    assert!(
        message.starts_with(&format!(
            "cannot list the tags of {}/fleet/none: ",
            registry.address
        )),
        "{message}"
    );
    assert!(
        !message.contains(":latest"),
        "no tag was asked for: {message}"
    );

    // An unreachable registry without credentials: no login was attempted, none is named.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = closed.local_addr().unwrap();
    drop(closed);
    let unreachable = list_tags(&format!("oci://{address}/fleet/app"), &options)
        .await
        .unwrap_err();
    let message = crate::redact::error_chain(&unreachable);
    assert!(
        message.starts_with(&format!("cannot list the tags of {address}/fleet/app: ")),
        "{message}"
    );
}
