//! Text safe to show: URLs without credentials, error chains for condition messages.
//!
//! A Git, registry or bucket URL may carry credentials in its userinfo
//! (`https://user:token@host/repo.git`). Every message, Event and log line that names such a
//! URL shows it through [`url`] (one URL) or [`urls`] (any text that may contain some, e.g. an
//! error message from a transport library).
//!
//! # Guarantees
//! - The userinfo (everything up to the last `@` of the authority) of every `scheme://` URL is
//!   removed, except an ssh URL's user name (`ssh://git@host/…`), which is no secret; nothing
//!   else changes.
//! - [`error_chain`] text has passed through [`urls`].

use std::fmt::Write as _;

/// `url` without its userinfo: `https://user:pass@host/x` becomes `https://host/x`. Text
/// without `://` is returned unchanged (scp-like `git@host:path` carries no password).
pub fn url(url: &str) -> String {
    urls(url)
}

/// `text` with the userinfo of every `scheme://…` URL in it removed.
pub fn urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(index) = rest.find("://") {
        let (head, tail) = rest.split_at(index + 3);
        out.push_str(head);
        // The authority ends at the first `/`, `?`, `#` or character no URL contains.
        let end = tail
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace() || c == ')')
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        let scheme: String = head[..index]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        match authority.rfind('@') {
            // An ssh user name (`git@`) is no secret and selects the account; its password is.
            Some(at) if scheme.to_ascii_lowercase().contains("ssh") => {
                let userinfo = &authority[..at];
                let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
                out.push_str(user);
                out.push_str(&authority[at..]);
            }
            // Over HTTP a user name alone can be a token: drop all of it.
            Some(at) => out.push_str(&authority[at + 1..]),
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// `error` and its causes, `outer: inner: …` (a cause whose text is already in the message
/// is skipped), with credentials removed from every URL: the cause a transport failure hides
/// under a generic message (connection refused, a TLS or certificate error, an HTTP status,
/// a DNS failure, an ssh host key) is named.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = urls(&error.to_string());
    let mut source = error.source();
    while let Some(cause) = source {
        // Compared once redacted: a message may already show its cause without credentials.
        let text = urls(&cause.to_string());
        if !text.is_empty() && !message.contains(&text) {
            let _ = write!(message, ": {text}");
        }
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_userinfo() {
        assert_eq!(
            url("https://user:s3cret@example.com/org/repo.git"),
            "https://example.com/org/repo.git"
        );
        assert_eq!(
            url("ssh://git@example.com:22/repo"),
            "ssh://git@example.com:22/repo",
            "an ssh user is kept"
        );
        assert_eq!(
            url("ssh://git:s3cret@example.com/repo"),
            "ssh://git@example.com/repo"
        );
        assert_eq!(
            url("https://ghp_token@example.com/r"),
            "https://example.com/r"
        );
        assert_eq!(url("http://a:b@host"), "http://host");
        assert_eq!(url("git@example.com:repo"), "git@example.com:repo");
        assert_eq!(
            url("https://example.com/a@b"),
            "https://example.com/a@b",
            "an @ in the path is not userinfo"
        );
        assert_eq!(url("https://u:p@@h/x"), "https://h/x");
    }

    #[test]
    fn removes_userinfo_from_every_url_in_text() {
        assert_eq!(
            urls(
                "error sending request for url (https://u:tok@h/x.git/info/refs?service=git), then http://v:w@i"
            ),
            "error sending request for url (https://h/x.git/info/refs?service=git), then http://i"
        );
    }

    #[test]
    fn chains_causes() {
        #[derive(Debug, thiserror::Error)]
        #[error("handshake failed")]
        struct Outer(#[source] std::io::Error);
        let error = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connect https://u:p@h/: connection refused",
        ));
        assert_eq!(
            error_chain(&error),
            "handshake failed: connect https://h/: connection refused"
        );
    }

    #[test]
    fn a_cause_already_shown_redacted_is_not_repeated() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot list bucket b: {}", urls(&.0.to_string()))]
        struct Outer(#[source] std::io::Error);
        let error = Outer(std::io::Error::other("GET https://key:secret@s3/b failed"));
        assert_eq!(
            error_chain(&error),
            "cannot list bucket b: GET https://s3/b failed"
        );
    }
}
