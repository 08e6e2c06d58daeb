//! `sshd` on loopback serving Git over SSH to the current user, with test keys.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::require;

/// `sshd` in the foreground on 127.0.0.1 with a fresh ed25519 host key and one authorized
/// client key, killed on drop. Repositories are reached by absolute path as the current user
/// ([`SshServer::url`]), so `git-upload-pack`/`git-receive-pack` run as for any ssh remote.
pub struct SshServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

/// Makes an unencrypted ed25519 key pair at `path` (and `path.pub`); returns the public key.
pub fn keygen(path: &Path) -> String {
    require("ssh-keygen");
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "capstan-test", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen runs");
    assert!(status.success(), "ssh-keygen failed");
    std::fs::read_to_string(path.with_extension("pub")).expect("the public key")
}

impl SshServer {
    /// Starts sshd (hint: `./scripts/setup` installs it).
    pub async fn start() -> Self {
        let sshd = Path::new("/usr/sbin/sshd");
        assert!(
            sshd.is_file(),
            "sshd is not installed; hint: run ./scripts/setup"
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        keygen(&dir.path().join("host_key"));
        let client_public = keygen(&dir.path().join("client_key"));
        std::fs::write(dir.path().join("authorized_keys"), client_public).expect("authorized_keys");
        let config_path = dir.path().join("sshd_config");
        let log_path = dir.path().join("sshd.log");
        let (child, port) = crate::spawn_listening("sshd", |port| {
            let config = format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {root}/host_key\n\
                 AuthorizedKeysFile {root}/authorized_keys\nStrictModes no\nUsePAM no\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PermitRootLogin prohibit-password\nAcceptEnv GIT_PROTOCOL\nPidFile {root}/sshd.pid\n",
                root = dir.path().display()
            );
            std::fs::write(&config_path, config).expect("sshd_config");
            let log = std::fs::File::create(&log_path).expect("the sshd log");
            let mut command = Command::new(sshd);
            command
                .arg("-D")
                .arg("-e")
                .arg("-f")
                .arg(&config_path)
                .stdout(Stdio::null())
                .stderr(log);
            command
        })
        .await;
        Self { child, port, dir }
    }

    /// The port sshd listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The host's public key (`ssh-ed25519 AAAA… comment`).
    pub fn host_key(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("host_key.pub")).expect("the host key")
    }

    /// A known_hosts line for the server.
    pub fn known_hosts(&self) -> String {
        format!("[127.0.0.1]:{} {}", self.port, self.host_key())
    }

    /// The authorized client key file (OpenSSH format; `<file>.pub` beside it).
    pub fn client_key_file(&self) -> std::path::PathBuf {
        self.dir.path().join("client_key")
    }

    /// The authorized client's private key.
    pub fn client_key(&self) -> String {
        std::fs::read_to_string(self.client_key_file()).expect("the client key")
    }

    /// Authorizes one more client key (an OpenSSH public key line), as a forge registering a
    /// deploy key would; sshd reads the file at every login.
    pub fn authorize(&self, public_key: &str) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join("authorized_keys"))
            .expect("authorized_keys");
        writeln!(file, "{}", public_key.trim_end()).expect("append to authorized_keys");
    }

    /// `ssh://<current user>@127.0.0.1:<port><path>`.
    pub fn url(&self, path: &Path) -> String {
        let user = Command::new("id").arg("-un").output().expect("id -un");
        let user = String::from_utf8_lossy(&user.stdout);
        format!(
            "ssh://{}@127.0.0.1:{}{}",
            user.trim(),
            self.port,
            path.display()
        )
    }
}

impl Drop for SshServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
