//! Running the OpenSSH client for `ssh://` remotes without a shell.
//!
//! gitoxide runs `core.sshCommand` through `sh -c` as soon as it holds an argument, and
//! Capstan's image has no shell. So each fetch writes its own `ssh_config` (identity, known
//! hosts, strict host key checking, batch mode, connect timeout) next to the key, and
//! `core.sshCommand` names a per-fetch `ssh` link to the running binary: a binary that called
//! [`use_current_exe_as_ssh`] (the `capstan` CLI) and starts under that name runs
//! [`ssh_wrapper_main`], which replaces itself with `ssh -F <that config> <gitoxide's args>`.
//! Elsewhere (tests, libraries) the command is `ssh -F '<config>'`, run by `sh`.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use crate::{Error, Result};

/// The name of the per-fetch link, and of the program it finally runs (found in `PATH`).
const SSH: &str = "ssh";
/// The per-fetch ssh configuration, next to the link.
const CONFIG: &str = "ssh_config";

static SELF_AS_SSH: OnceLock<PathBuf> = OnceLock::new();

/// Makes ssh remotes run `ssh` through this executable (a link to it named `ssh`), so no shell
/// is needed. The executable's `main` must call [`ssh_wrapper_main`] first.
pub fn use_current_exe_as_ssh() {
    if let Ok(exe) = std::env::current_exe() {
        let _ = SELF_AS_SSH.set(exe);
    }
}

/// When this process was started as a per-fetch `ssh` link, runs the real `ssh` with the
/// fetch's configuration and never returns (its exit code on failure to start it); otherwise
/// `None`, doing nothing.
#[must_use]
pub fn ssh_wrapper_main() -> Option<std::process::ExitCode> {
    use std::os::unix::process::CommandExt as _;
    let mut args = std::env::args_os();
    let argv0 = PathBuf::from(args.next()?);
    if argv0.file_name()? != SSH {
        return None;
    }
    let config = argv0.parent()?.join(CONFIG);
    if !config.is_file() {
        return None;
    }
    let error = std::process::Command::new(SSH)
        .arg("-F")
        .arg(&config)
        .args(args.collect::<Vec<OsString>>())
        .exec();
    eprintln!("{}", not_found_or(&error));
    Some(std::process::ExitCode::from(255))
}

fn not_found_or(error: &std::io::Error) -> String {
    if error.kind() == std::io::ErrorKind::NotFound {
        missing_ssh().to_string()
    } else {
        format!("cannot run the ssh program: {error}")
    }
}

fn missing_ssh() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::NotFound,
        "the ssh program was not found in PATH (Git over ssh runs the OpenSSH client `ssh`)",
    )
}

/// Whether `program` is an executable file in one of the `path` directories.
fn in_path(program: &str, path: Option<&std::ffi::OsStr>) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    path.into_iter()
        .flat_map(std::env::split_paths)
        .filter(|dir| !dir.as_os_str().is_empty())
        .any(|dir| {
            std::fs::metadata(dir.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Refuses early, with a clear error, when there is no `ssh` to run.
pub(super) fn require_ssh(url: &str) -> Result<()> {
    if in_path(SSH, std::env::var_os("PATH").as_deref()) {
        Ok(())
    } else {
        Err(super::git_error("connect to", url, missing_ssh()))
    }
}

/// Writes the fetch's key, known hosts and ssh configuration into `dir` (all 0600) and
/// returns the `core.sshCommand` that uses them.
pub(super) fn prepare(
    dir: &Path,
    identity: &[u8],
    passphrase: Option<&[u8]>,
    known_hosts: &[u8],
    timeout: Option<Duration>,
) -> Result<String> {
    let identity_path = dir.join("identity");
    let known_hosts_path = dir.join("known_hosts");
    let config_path = dir.join(CONFIG);
    let mut key = usable_identity(identity, passphrase)?;
    if !key.ends_with(b"\n") {
        // OpenSSH refuses a private key without its final newline.
        key.push(b'\n');
    }
    super::write_private(&identity_path, &key)?;
    super::write_private(&known_hosts_path, known_hosts)?;
    let mut config = format!(
        "Host *\n  IdentityFile \"{}\"\n  IdentitiesOnly yes\n  BatchMode yes\n  \
         StrictHostKeyChecking yes\n  UserKnownHostsFile \"{}\"\n  GlobalKnownHostsFile none\n",
        identity_path.display(),
        known_hosts_path.display()
    );
    if let Some(timeout) = timeout {
        writeln!(config, "  ConnectTimeout {}", timeout.as_secs().max(1))
            .expect("writing to a String cannot fail");
    }
    super::write_private(&config_path, config.as_bytes())?;
    ssh_command(dir, SELF_AS_SSH.get().map(PathBuf::as_path))
}

/// The `core.sshCommand` for the fetch in `dir`: a link named `ssh` to `self_as_ssh` when
/// there is one and gitoxide can run the link without a shell, else `ssh -F <config>` (by `sh`).
fn ssh_command(dir: &Path, self_as_ssh: Option<&Path>) -> Result<String> {
    let config_path = dir.join(CONFIG);
    if let Some(exe) = self_as_ssh {
        let link = dir.join(SSH);
        // gitoxide runs a command without shell characters directly.
        let plain = !link
            .as_os_str()
            .as_encoded_bytes()
            .iter()
            .any(|b| b"|&;<>()$`\\\"' \t\n*?[#~=%".contains(b));
        if plain {
            std::os::unix::fs::symlink(exe, &link).map_err(|e| Error::io("create", &link, e))?;
            return Ok(link.display().to_string());
        }
    }
    Ok(format!("ssh -F {}", super::shell_quote(&config_path)))
}

/// The key `ssh` reads in batch mode: an encrypted OpenSSH key decrypted with the secret's
/// `password`; any other key as it is.
fn usable_identity(identity: &[u8], passphrase: Option<&[u8]>) -> Result<Vec<u8>> {
    let refused = |reason: &str| Error::UnsupportedGitAuth {
        reason: reason.to_owned(),
    };
    let Ok(key) = ssh_key::PrivateKey::from_openssh(identity) else {
        let text = String::from_utf8_lossy(identity);
        if text.contains("ENCRYPTED") {
            return Err(refused(
                "the secret's identity is an encrypted PEM key, which Capstan cannot decrypt: \
                 convert it to the OpenSSH format (ssh-keygen -p -f KEY) and keep its \
                 passphrase in password",
            ));
        }
        // PEM and other formats: ssh reads them, and says what is wrong if it cannot.
        return Ok(identity.to_vec());
    };
    if !key.is_encrypted() {
        return Ok(identity.to_vec());
    }
    let Some(passphrase) = passphrase else {
        return Err(refused(
            "the secret's identity is encrypted and the secret has no password (its passphrase)",
        ));
    };
    let decrypted = key.decrypt(passphrase).map_err(|_| {
        refused("the secret's password does not decrypt its identity (wrong passphrase)")
    })?;
    let openssh = decrypted
        .to_openssh(ssh_key::LineEnding::LF)
        .map_err(|_| refused("the secret's decrypted identity cannot be written for ssh"))?;
    Ok(openssh.as_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_is_looked_up_in_path() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        assert!(!in_path("ssh", Some(dir.path().as_os_str())));
        assert!(!in_path("ssh", None));
        let ssh = dir.path().join("ssh");
        std::fs::write(&ssh, "").unwrap();
        assert!(
            !in_path("ssh", Some(dir.path().as_os_str())),
            "not executable"
        );
        std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths(["/nonexistent".as_ref(), dir.path()]).unwrap();
        assert!(in_path("ssh", Some(&path)));
    }

    #[test]
    fn a_fetch_runs_ssh_through_its_own_link_to_the_binary_without_a_shell() {
        let dir = tempfile::tempdir().unwrap();
        let exe = Path::new("/capstan");
        let command = ssh_command(dir.path(), Some(exe)).unwrap();
        assert_eq!(command, dir.path().join("ssh").display().to_string());
        assert_eq!(std::fs::read_link(dir.path().join("ssh")).unwrap(), exe);
        // Without the binary's help (tests, libraries): ssh by sh, with the fetch's config.
        let other = tempfile::tempdir().unwrap();
        assert_eq!(
            ssh_command(other.path(), None).unwrap(),
            format!("ssh -F '{}'", other.path().join("ssh_config").display())
        );
    }

    #[test]
    fn a_missing_ssh_says_so() {
        let error =
            super::super::git_error("connect to", "ssh://git@example.test/r", missing_ssh());
        assert_eq!(
            error.to_string(),
            "cannot connect to ssh://git@example.test/r: the ssh program was not found in PATH \
             (Git over ssh runs the OpenSSH client `ssh`)"
        );
    }
}
