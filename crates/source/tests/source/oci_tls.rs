//! Push, pull, sign and verify against a `docker-registry` serving HTTPS with a certificate from
//! a test CA made here; `skopeo` with `--cert-dir` is the independent client.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use capstan_source::oci::{self, PullOptions, PushOptions, RegistryOptions, SigningKey};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};

use crate::support::{eventually, free_port, require, sample_source, skopeo, tree};

/// A test CA and a server certificate and key for 127.0.0.1 and localhost, all PEM.
struct TestPki {
    ca: String,
    server_cert: String,
    server_key: String,
}

fn test_pki() -> TestPki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "capstan test CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);

    let server_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params
        .subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    params
        .distinguished_name
        .push(DnType::CommonName, "registry");
    let server_cert = params.signed_by(&server_key, &issuer).unwrap();
    TestPki {
        ca: ca_cert.pem(),
        server_cert: server_cert.pem(),
        server_key: server_key.serialize_pem(),
    }
}

/// `docker-registry` serving HTTPS on 127.0.0.1, killed on drop.
struct TlsRegistry {
    child: Child,
    address: String,
    dir: tempfile::TempDir,
}

impl TlsRegistry {
    async fn start(pki: &TestPki) -> Self {
        require("docker-registry");
        let dir = tempfile::tempdir().unwrap();
        let storage = dir.path().join("storage");
        std::fs::create_dir(&storage).unwrap();
        let cert = dir.path().join("server.crt");
        let key = dir.path().join("server.key");
        std::fs::write(&cert, &pki.server_cert).unwrap();
        std::fs::write(&key, &pki.server_key).unwrap();
        // skopeo reads CA certificates as `*.crt` from a directory.
        let certs = dir.path().join("certs");
        std::fs::create_dir(&certs).unwrap();
        std::fs::write(certs.join("ca.crt"), &pki.ca).unwrap();
        let address = format!("127.0.0.1:{}", free_port());
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: {address}\n  secret: capstan-test-secret\n  tls:\n    \
             certificate: {}\n    key: {}\n",
            storage.display(),
            cert.display(),
            key.display()
        );
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config_path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let registry = Self {
            child,
            address,
            dir,
        };
        let address = registry.address.clone();
        eventually(Duration::from_secs(30), "docker-registry to listen", || {
            let address = address.clone();
            async move {
                tokio::net::TcpStream::connect(&address)
                    .await
                    .ok()
                    .map(drop)
            }
        })
        .await;
        registry
    }

    fn url(&self, repository: &str) -> String {
        format!("oci://{}/{repository}", self.address)
    }

    fn cert_dir(&self) -> String {
        self.dir.path().join("certs").display().to_string()
    }
}

impl Drop for TlsRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The error and its causes, joined.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

#[tokio::test]
async fn oci_tls_registry_with_a_private_ca() {
    let pki = test_pki();
    let registry = TlsRegistry::start(&pki).await;
    let with_ca = RegistryOptions {
        ca_certificates: vec![pki.ca.clone().into_bytes()],
        ..RegistryOptions::default()
    };
    let source = sample_source();
    let url = format!("{}:v1", registry.url("fleet/tls"));
    let pushed = oci::push(source.path(), &url, &PushOptions::default(), &with_ca)
        .await
        .unwrap();

    // skopeo trusts the same CA and sees what we pushed, over HTTPS.
    let raw = skopeo(&[
        "inspect",
        "--raw",
        "--no-creds",
        "--cert-dir",
        &registry.cert_dir(),
        &format!("docker://{}/fleet/tls:v1", registry.address),
    ]);
    assert_eq!(capstan_source::Digest::of(raw.as_bytes()), pushed.digest);

    let target = tempfile::tempdir().unwrap();
    let out = target.path().join("out");
    let pulled = oci::pull(&url, &out, &PullOptions::default(), &with_ca)
        .await
        .unwrap();
    assert_eq!(pulled.digest, pushed.digest);
    assert_eq!(tree(&out), tree(source.path()));

    // Signatures travel over the same TLS settings.
    let key = SigningKey::generate();
    oci::sign(&url, &key, &with_ca).await.unwrap();
    let verified = oci::verify(&url, &[key.public_key("tls.pub")], &with_ca)
        .await
        .unwrap();
    assert_eq!(verified.digest, pushed.digest);

    // Without the CA the certificate is refused, and the error says so.
    let error = oci::pull(
        &url,
        &target.path().join("refused"),
        &PullOptions::default(),
        &RegistryOptions::default(),
    )
    .await
    .unwrap_err();
    let message = chain(&error);
    assert!(
        message.contains("certificate") && message.contains("UnknownIssuer"),
        "{message}"
    );
    assert!(!target.path().join("refused").exists());
    let error = oci::resolve_digest(&url, &RegistryOptions::default())
        .await
        .unwrap_err();
    assert!(chain(&error).contains("certificate"), "{error}");

    // Another CA is no better than none.
    let other = test_pki();
    let wrong_ca = RegistryOptions {
        ca_certificates: vec![other.ca.into_bytes()],
        ..RegistryOptions::default()
    };
    let error = oci::resolve_digest(&url, &wrong_ca).await.unwrap_err();
    assert!(chain(&error).contains("certificate"), "{error}");
}
