//! Sprig's `urlParse` and `urlJoin` over Go's `net/url` rules: how a URL splits into scheme,
//! authority, path, query and fragment, which escapes are decoded, and how `URL.String`
//! escapes each part again.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::cast::{go_string, want_args};
use crate::template::Call;
use crate::value::Value;

/// The parts of a URL as Go's `url.URL` holds them (decoded path, fragment and user).
#[derive(Default, Debug)]
struct Url {
    scheme: String,
    opaque: String,
    user: Option<(String, Option<String>)>,
    host: String,
    path: String,
    omit_host: bool,
    force_query: bool,
    raw_query: String,
    fragment: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    Fragment,
}

fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone)
        && matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
        )
    {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => return c == b'?',
            Mode::UserPassword => return matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::Fragment => return false,
            Mode::Host | Mode::Zone => {}
        },
        _ => {}
    }
    if mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*') {
        return false;
    }
    true
}

fn escape(s: &str, mode: Mode) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if should_escape(b, mode) {
            let _ = write!(out, "%{b:02X}");
        } else {
            out.push(char::from(b));
        }
    }
    out
}

fn unhex(c: u8) -> Option<u8> {
    char::from(c)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// Go's `unescape`: `%XX` decoded, with the host rules (few escapes, no reserved characters).
fn unescape(s: &str, mode: Mode) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let escape = || {
                    let end = (i + 3).min(bytes.len());
                    format!(
                        "invalid URL escape {}",
                        crate::fmt::quote_bytes(&bytes[i..end])
                    )
                };
                let (Some(hi), Some(lo)) = (
                    bytes.get(i + 1).copied().and_then(unhex),
                    bytes.get(i + 2).copied().and_then(unhex),
                ) else {
                    return Err(escape());
                };
                if mode == Mode::Host && hi < 8 && &bytes[i..i + 3] != b"%25" {
                    return Err(escape());
                }
                if mode == Mode::Zone {
                    let v = hi << 4 | lo;
                    if &bytes[i..i + 3] != b"%25" && v != b' ' && should_escape(v, Mode::Host) {
                        return Err(escape());
                    }
                }
                out.push(hi << 4 | lo);
                i += 3;
            }
            c if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) => {
                return Err(format!(
                    "invalid character {} in host name",
                    crate::fmt::quote(&char::from(c).to_string())
                ));
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(crate::fmt::lossy_utf8(&out))
}

/// `:port` with digits only (or nothing).
fn valid_optional_port(port: &str) -> bool {
    if port.is_empty() {
        return true;
    }
    port.strip_prefix(':')
        .is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
}

fn parse_host(host: &str) -> Result<String, String> {
    if host.starts_with('[') {
        let Some(close) = host.rfind(']') else {
            return Err("missing ']' in host".into());
        };
        let colon_port = &host[close + 1..];
        if !valid_optional_port(colon_port) {
            return Err(format!(
                "invalid port {} after host",
                crate::fmt::quote(colon_port)
            ));
        }
        // Only an IPv6 address may stand in brackets (Go checks it with netip.ParseAddr).
        let literal = &host[1..close];
        let address = literal
            .split_once('%')
            .map_or(literal, |(address, _)| address);
        if address.parse::<std::net::Ipv4Addr>().is_ok() {
            return Err("invalid IP-literal".into());
        }
        if address.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!(
                "invalid host: ParseAddr({}): unable to parse IP",
                crate::fmt::quote(literal)
            ));
        }
        // An IPv6 zone (`%25eth0`) has its own escaping rules.
        if let Some(zone) = host[..close].find("%25") {
            let head = unescape(&host[..zone], Mode::Host)?;
            let zone_part = unescape(&host[zone..close], Mode::Zone)?;
            let tail = unescape(&host[close..], Mode::Host)?;
            return Ok(head + &zone_part + &tail);
        }
    } else if host.contains('[') {
        return Err("invalid IP-literal".into());
    } else if let Some(colon) = host.rfind(':') {
        let colon_port = &host[colon..];
        if !valid_optional_port(colon_port) {
            return Err(format!(
                "invalid port {} after host",
                crate::fmt::quote(colon_port)
            ));
        }
    }
    unescape(host, Mode::Host)
}

/// RFC 3986 userinfo characters (what Go's `validUserinfo` accepts).
fn valid_userinfo(s: &str) -> bool {
    s.chars().all(|c| {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                '-' | '.'
                    | '_'
                    | ':'
                    | '~'
                    | '!'
                    | '$'
                    | '&'
                    | '\''
                    | '('
                    | ')'
                    | '*'
                    | '+'
                    | ','
                    | ';'
                    | '='
                    | '%'
                    | '@'
            )
    })
}

type User = Option<(String, Option<String>)>;

fn parse_authority(authority: &str) -> Result<(User, String), String> {
    let Some(at) = authority.rfind('@') else {
        return Ok((None, parse_host(authority)?));
    };
    let host = parse_host(&authority[at + 1..])?;
    let userinfo = &authority[..at];
    if !valid_userinfo(userinfo) {
        return Err("net/url: invalid userinfo".into());
    }
    let user = match userinfo.split_once(':') {
        None => (unescape(userinfo, Mode::UserPassword)?, None),
        Some((name, password)) => (
            unescape(name, Mode::UserPassword)?,
            Some(unescape(password, Mode::UserPassword)?),
        ),
    };
    Ok((Some(user), host))
}

/// `url.Parse`; errors read as Go's `*url.Error` (`parse "URL": reason`).
fn parse(raw: &str) -> Result<Url, String> {
    let failed = |what: &str, e: String| format!("parse {}: {e}", crate::fmt::quote(what));
    let (rest, fragment) = raw.split_once('#').unwrap_or((raw, ""));
    let mut url = parse_without_fragment(rest).map_err(|e| failed(rest, e))?;
    if !fragment.is_empty() {
        url.fragment = unescape(fragment, Mode::Fragment).map_err(|e| failed(raw, e))?;
    }
    Ok(url)
}

fn parse_without_fragment(raw: &str) -> Result<Url, String> {
    if raw.bytes().any(|b| b < b' ' || b == 0x7F) {
        return Err("net/url: invalid control character in URL".into());
    }
    let mut url = Url::default();
    if raw == "*" {
        url.path = "*".into();
        return Ok(url);
    }
    // The scheme: letters, then letters, digits, `+`, `-`, `.` up to a colon.
    let mut rest = raw;
    for (i, c) in raw.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err("missing protocol scheme".into()),
            ':' => {
                url.scheme = raw[..i].to_ascii_lowercase();
                rest = &raw[i + 1..];
                break;
            }
            _ => break,
        }
    }
    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        url.force_query = true;
        rest = &rest[..rest.len() - 1];
    } else if let Some((head, query)) = rest.split_once('?') {
        url.raw_query = query.into();
        rest = head;
    }
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            url.opaque = rest.into();
            return Ok(url);
        }
        let segment = rest.split('/').next().unwrap_or("");
        if segment.contains(':') {
            return Err("first path segment in URL cannot contain colon".into());
        }
    }
    if (!url.scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
        let after = &rest[2..];
        let (authority, path) = match after.find('/') {
            Some(slash) => (&after[..slash], &after[slash..]),
            None => (after, ""),
        };
        let (user, host) = parse_authority(authority)?;
        url.user = user;
        url.host = host;
        rest = path;
    } else if !url.scheme.is_empty() && rest.starts_with('/') {
        url.omit_host = true;
    }
    url.path = unescape(rest, Mode::Path)?;
    Ok(url)
}

/// `URL.Hostname`: the host without its port and IPv6 brackets.
fn hostname(host: &str) -> &str {
    let host = match host.rfind(':') {
        Some(colon) if valid_optional_port(&host[colon..]) => &host[..colon],
        _ => host,
    };
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

fn user_string(user: &(String, Option<String>)) -> String {
    let mut out = escape(&user.0, Mode::UserPassword);
    if let Some(password) = &user.1 {
        out.push(':');
        out.push_str(&escape(password, Mode::UserPassword));
    }
    out
}

/// `URL.String`.
fn to_string(url: &Url) -> String {
    let mut out = String::new();
    if !url.scheme.is_empty() {
        out.push_str(&url.scheme);
        out.push(':');
    }
    if url.opaque.is_empty() {
        let has_authority = !url.scheme.is_empty() || !url.host.is_empty() || url.user.is_some();
        let omitted = url.omit_host && url.host.is_empty() && url.user.is_none();
        if has_authority && !omitted {
            if !url.host.is_empty() || !url.path.is_empty() || url.user.is_some() {
                out.push_str("//");
            }
            if let Some(user) = &url.user {
                out.push_str(&user_string(user));
                out.push('@');
            }
            out.push_str(&escape(&url.host, Mode::Host));
        }
        let path = if url.path == "*" {
            "*".to_string()
        } else {
            escape(&url.path, Mode::Path)
        };
        if !path.is_empty() && !path.starts_with('/') && !url.host.is_empty() {
            out.push('/');
        }
        if out.is_empty() && path.split('/').next().is_some_and(|s| s.contains(':')) {
            out.push_str("./");
        }
        out.push_str(&path);
    } else {
        out.push_str(&url.opaque);
    }
    if url.force_query || !url.raw_query.is_empty() {
        out.push('?');
        out.push_str(&url.raw_query);
    }
    if !url.fragment.is_empty() {
        out.push('#');
        out.push_str(&escape(&url.fragment, Mode::Fragment));
    }
    out
}

/// Sprig's `urlParse`: a dict of `scheme`, `host`, `hostname`, `path`, `query`, `opaque`,
/// `fragment` and `userinfo`.
pub(super) fn url_parse(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call.name, args, 1)?;
    let raw = go_string(&args[0])?;
    let url = parse(raw).map_err(|e| format!("unable to parse url: {e}"))?;
    let entries = [
        ("scheme", url.scheme.clone()),
        ("host", url.host.clone()),
        ("hostname", hostname(&url.host).to_string()),
        ("path", url.path.clone()),
        ("query", url.raw_query.clone()),
        ("opaque", url.opaque.clone()),
        ("fragment", url.fragment.clone()),
        (
            "userinfo",
            url.user.as_ref().map(user_string).unwrap_or_default(),
        ),
    ];
    Ok(Value::map(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::from(v)))
            .collect::<BTreeMap<_, _>>(),
    ))
}

/// Sprig's `urlJoin`: the URL a `urlParse`-shaped dict describes.
pub(super) fn url_join(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call.name, args, 1)?;
    let map = match &args[0] {
        Value::Map(map) => map.borrow().clone(),
        other => {
            return Err(format!(
                "wrong type for value; expected map[string]interface {{}}; got {}",
                if other.is_nil() {
                    "interface {}".to_string()
                } else {
                    other.type_name()
                }
            ));
        }
    };
    let get = |key: &str| -> Result<String, String> {
        match map.get(key) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.to_string()),
            Some(Value::Nil) => {
                Err("runtime error: invalid memory address or nil pointer dereference".into())
            }
            Some(other) => Err(format!(
                "unable to parse {key} key, must be of type string, but {} found",
                other.kind_name()
            )),
        }
    };
    let mut url = Url {
        scheme: get("scheme")?,
        host: get("host")?,
        path: get("path")?,
        raw_query: get("query")?,
        opaque: get("opaque")?,
        fragment: get("fragment")?,
        ..Url::default()
    };
    let userinfo = get("userinfo")?;
    if !userinfo.is_empty() {
        let raw = format!("proto://{userinfo}@host");
        let parsed = parse(&raw).map_err(|e| format!("unable to parse userinfo in dict: {e}"))?;
        url.user = parsed.user;
    }
    Ok(Value::str(to_string(&url)))
}
