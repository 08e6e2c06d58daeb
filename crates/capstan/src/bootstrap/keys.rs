//! The SSH deploy key of a bootstrap, as Flux's: generated in-process (ECDSA P-384 by default,
//! or Ed25519, or RSA; `--ssh-key-algorithm`, `--ssh-ecdsa-curve`, `--ssh-rsa-bits`) in
//! OpenSSH format, unencrypted and without a comment; reused from the source Secret
//! (`identity`, `identity.pub`) of an earlier bootstrap when there is one. The private key is
//! never printed; the public key is, so that it can be given access to the repository.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};
use clap::{Args, ValueEnum};
use k8s_openapi::api::core::v1::Secret;
use ssh_key::private::{KeypairData, RsaKeypair};
use ssh_key::rand_core::OsRng;
use ssh_key::{Algorithm, LineEnding, PrivateKey};

use super::SshKey;

/// The flags choosing the generated key (Flux's, with its defaults).
#[derive(Debug, Clone, Args)]
#[allow(clippy::struct_field_names)] // Flux's flag names
pub struct KeyFlags {
    /// The algorithm of a generated SSH key.
    #[arg(long, value_enum, default_value_t = KeyAlgorithm::Ecdsa)]
    pub ssh_key_algorithm: KeyAlgorithm,
    /// The size of a generated RSA key (at least 2048, a multiple of 8).
    #[arg(long, default_value_t = 2048, value_parser = parse_rsa_bits)]
    pub ssh_rsa_bits: u32,
    /// The curve of a generated ECDSA key.
    #[arg(long, value_enum, default_value_t = EcdsaCurve::P384)]
    pub ssh_ecdsa_curve: EcdsaCurve,
}

impl Default for KeyFlags {
    fn default() -> Self {
        Self {
            ssh_key_algorithm: KeyAlgorithm::Ecdsa,
            ssh_rsa_bits: 2048,
            ssh_ecdsa_curve: EcdsaCurve::P384,
        }
    }
}

/// The SSH key algorithms Flux generates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KeyAlgorithm {
    Rsa,
    Ecdsa,
    Ed25519,
}

/// The ECDSA curves Flux generates keys on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EcdsaCurve {
    P256,
    P384,
    P521,
}

fn parse_rsa_bits(text: &str) -> Result<u32, String> {
    let bits: u32 = text.parse().map_err(|e| format!("{e}"))?;
    if bits < 2048 || !bits.is_multiple_of(8) {
        return Err("RSA key bit size must be at least 2048 and a multiple of 8".to_owned());
    }
    Ok(bits)
}

/// A new key pair: the private key in OpenSSH format, the public key as an `identity.pub`
/// line (`ecdsa-sha2-nistp384 AAAA…`), no passphrase, no comment.
///
/// # Errors
/// The key cannot be generated or encoded (an RSA size the generator refuses).
pub fn generate(flags: &KeyFlags) -> anyhow::Result<SshKey> {
    let mut rng = OsRng;
    let key = match flags.ssh_key_algorithm {
        KeyAlgorithm::Ed25519 => PrivateKey::random(&mut rng, Algorithm::Ed25519),
        KeyAlgorithm::Ecdsa => PrivateKey::random(
            &mut rng,
            Algorithm::Ecdsa {
                curve: match flags.ssh_ecdsa_curve {
                    EcdsaCurve::P256 => ssh_key::EcdsaCurve::NistP256,
                    EcdsaCurve::P384 => ssh_key::EcdsaCurve::NistP384,
                    EcdsaCurve::P521 => ssh_key::EcdsaCurve::NistP521,
                },
            },
        ),
        KeyAlgorithm::Rsa => RsaKeypair::random(&mut rng, flags.ssh_rsa_bits as usize)
            .and_then(|pair| PrivateKey::new(KeypairData::from(pair), "")),
    }
    .map_err(|e| anyhow::anyhow!("cannot generate the SSH key: {e}"))?;
    let private_key = key
        .to_openssh(LineEnding::LF)
        .map_err(|e| anyhow::anyhow!("cannot encode the SSH key: {e}"))?;
    let public_key = key
        .public_key()
        .to_openssh()
        .map_err(|e| anyhow::anyhow!("cannot encode the SSH public key: {e}"))?;
    Ok(SshKey {
        private_key: private_key.as_str().to_owned(),
        public_key: Some(public_key),
        passphrase: None,
        username: None,
    })
}

/// The public key (`identity.pub` line) of `private_key`: read from an OpenSSH-format key
/// (even a passphrase-protected one, whose public half is in clear); a PEM key goes through
/// `ssh-keygen -y`.
///
/// # Errors
/// The key cannot be read (never its content).
pub fn public_key_of(private_key: &str) -> anyhow::Result<String> {
    if let Ok(key) = PrivateKey::from_openssh(private_key) {
        let mut public = key.public_key().clone();
        public.set_comment("");
        return public
            .to_openssh()
            .map_err(|e| anyhow::anyhow!("cannot encode the SSH public key: {e}"));
    }
    let dir = tempfile::Builder::new()
        .prefix(&format!("capstan-{}-bootstrap-key-", std::process::id()))
        .tempdir()
        .context("cannot create a temporary directory for the SSH key")?;
    let file = dir.path().join("identity");
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut handle = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&file)
            .with_context(|| format!("cannot write {}", file.display()))?;
        handle.write_all(private_key.as_bytes())?;
    }
    let output = Command::new("ssh-keygen")
        .args(["-y", "-P", "", "-f"])
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .context("cannot run ssh-keygen to read the public key of a PEM private key")?;
    if !output.status.success() {
        bail!(
            "cannot read the SSH private key (not an OpenSSH or PEM key, or a \
             passphrase-protected PEM key without its .pub file)"
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The key pair of the source Secret `namespace/name` an earlier bootstrap made (a re-run
/// reuses it, as Flux does), if it holds one (`identity`, and `identity.pub` or a public key
/// derived from it; `password` as the passphrase).
///
/// # Errors
/// The Secret cannot be read, or its key cannot.
pub async fn existing(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Option<SshKey>> {
    let secrets: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
    let Some(secret) = secrets
        .get_opt(name)
        .await
        .with_context(|| format!("cannot read the Secret {namespace}/{name}"))?
    else {
        return Ok(None);
    };
    let data = secret.data.unwrap_or_default();
    let text = |key: &str| {
        data.get(key)
            .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
    };
    let Some(private_key) = text("identity").filter(|key| !key.trim().is_empty()) else {
        return Ok(None);
    };
    let public_key = match text("identity.pub") {
        Some(public) if !public.trim().is_empty() => public.trim().to_owned(),
        _ => public_key_of(&private_key)
            .with_context(|| format!("the key of the Secret {namespace}/{name}"))?,
    };
    Ok(Some(SshKey {
        private_key,
        public_key: Some(public_key),
        passphrase: text("password").filter(|p| !p.is_empty()),
        username: None,
    }))
}

/// Stores a key pair in the source Secret before anything is cloned, so that a run that fails
/// because the key has no access yet reuses the same key when run again. The namespace is
/// created when missing; the full Secret (with `known_hosts`) is applied later.
///
/// # Errors
/// The namespace or the Secret cannot be applied.
pub async fn store(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    key: &SshKey,
) -> anyhow::Result<()> {
    use base64::Engine as _;
    let encode = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let mut data = serde_json::Map::new();
    data.insert("identity".to_owned(), encode(&key.private_key).into());
    if let Some(public) = &key.public_key {
        data.insert("identity.pub".to_owned(), encode(public).into());
    }
    let namespace_object = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace},
    });
    let secret = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "data": data,
    });
    crate::install::apply(client, &[namespace_object, secret])
        .await
        .with_context(|| format!("cannot store the SSH key in the Secret {namespace}/{name}"))?;
    Ok(())
}

/// Asks on the terminal whether the public key has access to the repository (`[y/N]`).
///
/// # Errors
/// The answer is not yes, or there is no terminal to ask on (then `--silent` is the way).
pub fn confirm_access(public_key: &str) -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        bail!(
            "cannot ask whether the deploy key has access to the repository: stdin is not a \
             terminal\nhint: give this public key access to the repository (read and write), \
             then run again with --silent: {public_key}"
        );
    }
    eprint!(
        "Give this public key read and write access to the repository (as a deploy key):\n\
         {public_key}\nDoes it have access now? [y/N] "
    );
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    stdin
        .lock()
        .read_line(&mut answer)
        .context("reading the answer")?;
    if matches!(answer.trim(), "y" | "Y" | "yes" | "Yes" | "YES") {
        Ok(())
    } else {
        bail!("aborted: the deploy key has no access to the repository yet")
    }
}

#[cfg(test)]
mod tests {
    use super::{EcdsaCurve, KeyAlgorithm, KeyFlags, generate, public_key_of};

    fn flags(algorithm: KeyAlgorithm, curve: EcdsaCurve) -> KeyFlags {
        KeyFlags {
            ssh_key_algorithm: algorithm,
            ssh_ecdsa_curve: curve,
            ..KeyFlags::default()
        }
    }

    #[test]
    fn generated_keys_of_each_algorithm_are_openssh_keys_whose_public_half_is_identity_pub() {
        let cases = [
            (
                flags(KeyAlgorithm::Ecdsa, EcdsaCurve::P384),
                "ecdsa-sha2-nistp384 ",
            ),
            (
                flags(KeyAlgorithm::Ecdsa, EcdsaCurve::P256),
                "ecdsa-sha2-nistp256 ",
            ),
            (
                flags(KeyAlgorithm::Ecdsa, EcdsaCurve::P521),
                "ecdsa-sha2-nistp521 ",
            ),
            (
                flags(KeyAlgorithm::Ed25519, EcdsaCurve::P384),
                "ssh-ed25519 ",
            ),
            (flags(KeyAlgorithm::Rsa, EcdsaCurve::P384), "ssh-rsa "),
        ];
        for (flags, prefix) in cases {
            let key = generate(&flags).unwrap();
            let public = key.public_key.clone().unwrap();
            assert!(public.starts_with(prefix), "{flags:?}: {public}");
            assert_eq!(public.split(' ').count(), 2, "no comment: {public}");
            assert!(
                key.private_key
                    .starts_with("-----BEGIN OPENSSH PRIVATE KEY-----\n"),
                "{flags:?}"
            );
            // Parses back, unencrypted, to the same public key.
            let parsed = ssh_key::PrivateKey::from_openssh(&key.private_key).unwrap();
            assert!(!parsed.is_encrypted());
            assert_eq!(public_key_of(&key.private_key).unwrap(), public);
            // OpenSSH itself reads it (as libssh2 does): same public key.
            if std::process::Command::new("ssh-keygen")
                .arg("-?")
                .output()
                .is_ok()
            {
                let dir = tempfile::tempdir().unwrap();
                let file = dir.path().join("identity");
                std::fs::write(&file, &key.private_key).unwrap();
                std::fs::set_permissions(
                    &file,
                    std::os::unix::fs::PermissionsExt::from_mode(0o600),
                )
                .unwrap();
                let out = std::process::Command::new("ssh-keygen")
                    .args(["-y", "-P", "", "-f"])
                    .arg(&file)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{flags:?}");
                assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), public);
            }
        }
        // Two keys are two keys.
        let flags = KeyFlags::default();
        assert_ne!(
            generate(&flags).unwrap().public_key,
            generate(&flags).unwrap().public_key
        );
    }

    /// Each kind of generated key authenticates libgit2 (libssh2) to a real sshd: the
    /// bootstrap's own clone succeeds once the public key is authorized, and not before.
    #[tokio::test]
    async fn generated_keys_of_each_algorithm_clone_over_ssh_with_libgit2() {
        use crate::bootstrap::{GitAuth, git};
        let sshd = capstan_testkit::sshd::SshServer::start().await;
        let dir = tempfile::tempdir().unwrap();
        let bare = dir.path().join("fleet.git");
        capstan_testkit::git(
            dir.path(),
            &["init", "-q", "--bare", bare.to_str().unwrap()],
        );
        let url = sshd.url(&bare);
        let authorized = sshd.client_key_file().with_file_name("authorized_keys");
        for flags in [
            flags(KeyAlgorithm::Ecdsa, EcdsaCurve::P256),
            flags(KeyAlgorithm::Ecdsa, EcdsaCurve::P384),
            flags(KeyAlgorithm::Ecdsa, EcdsaCurve::P521),
            flags(KeyAlgorithm::Ed25519, EcdsaCurve::P384),
            flags(KeyAlgorithm::Rsa, EcdsaCurve::P384),
        ] {
            let key = generate(&flags).unwrap();
            let public = key.public_key.clone().unwrap();
            let remote = git::Remote {
                url: url.clone(),
                auth: GitAuth::Ssh(key),
                ssh_hostname: None,
                ca: None,
            };
            let clone = |remote: git::Remote| {
                tokio::task::spawn_blocking(move || {
                    git::clone_trusting(&remote, "main", "").map(|_| ())
                })
            };
            assert!(
                clone(remote.clone()).await.unwrap().is_err(),
                "{flags:?}: not authorized yet"
            );
            let mut keys = std::fs::read_to_string(&authorized).unwrap();
            keys.push_str(&public);
            keys.push('\n');
            std::fs::write(&authorized, keys).unwrap();
            if let Err(e) = clone(remote).await.unwrap() {
                panic!("{flags:?}: {e:#}");
            }
        }
    }

    #[test]
    fn rsa_sizes_below_2048_bits_are_refused_by_the_flag() {
        assert!(super::parse_rsa_bits("1024").is_err());
        assert!(super::parse_rsa_bits("2049").is_err());
        assert_eq!(super::parse_rsa_bits("4096"), Ok(4096));
    }
}
