//! Git providers: GitHub repository dispatch, and commit statuses on GitHub, GitLab, Gitea,
//! Bitbucket Cloud, Bitbucket Server/Data Center and Azure DevOps.

use base64::Engine;
use capstan_api::notification::v1beta3::ProviderType;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::json;
use sha1::Digest;

use super::{Ctx, hex, name_and_description};
use crate::event::{PROGRESSING_REASON, Severity, commit_of};
use crate::gojson;
use crate::request::{Method, Request};
use crate::settings::ProviderSettings;

/// The GitHub REST API version sent with every request.
pub const GITHUB_API_VERSION: &str = "2022-11-28";

/// Go's `url.PathEscape` leaves these unescaped.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@');

fn escape(segment: &str) -> String {
    utf8_percent_encode(segment, PATH_SEGMENT).to_string()
}

/// A repository address split as Flux's `parseGitAddress` (util.go) does: `scheme://host`
/// (`ssh` becomes `https`; scp-like `git@host:path` too) and the path without its leading `/`
/// and trailing `.git`. Errors never quote the address: it may come from a Secret or hold
/// credentials.
pub(crate) fn parse_git_address(address: &str) -> Result<(String, String), String> {
    let (scheme, rest) = match address.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
        None => match address.split_once(':') {
            // scp-like: [user@]host:path
            Some((host, path)) if !host.contains('/') && !host.is_empty() => {
                let host = host.rsplit('@').next().unwrap_or(host);
                let id = path.trim_start_matches('/').trim_end_matches(".git");
                return Ok((format!("https://{host}"), id.to_owned()));
            }
            _ => return Err("is not a repository URL".to_owned()),
        },
    };
    let scheme = if scheme == "ssh" {
        "https".to_owned()
    } else {
        scheme
    };
    if !matches!(scheme.as_str(), "http" | "https") {
        return Err("is not an http(s) or ssh repository URL".to_owned());
    }
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let host = authority.rsplit('@').next().unwrap_or(authority);
    if host.is_empty() {
        return Err("has no host".to_owned());
    }
    let id = path.trim_end_matches(".git");
    Ok((format!("{scheme}://{host}"), id.to_owned()))
}

/// `(owner, repository)` of a two-segment repository ID.
fn owner_repo(id: &str) -> Result<(&str, &str), String> {
    match id.split('/').collect::<Vec<_>>()[..] {
        [owner, repo] if !owner.is_empty() && !repo.is_empty() => Ok((owner, repo)),
        _ => Err(format!(
            "invalid repository id '{id}': expected <owner>/<repository>"
        )),
    }
}

/// GitHub's API base: `https://api.github.com` for github.com, `<host>/api/v3` for GitHub
/// Enterprise unless the host already is an API host (`api.*` or `*.api.*`), as go-github v64's
/// `WithEnterpriseURLs` does.
fn github_api(host: &str) -> String {
    let name = host.split_once("://").map_or(host, |(_, name)| name);
    if name == "github.com" {
        "https://api.github.com".to_owned()
    } else if name.starts_with("api.") || name.contains(".api.") {
        host.to_owned()
    } else {
        format!("{host}/api/v3")
    }
}

/// Azure DevOps address: `<host>/<organisation>/<project>/_git/<repository>`.
fn azure_parts(id: &str) -> Result<(&str, &str, &str), String> {
    match id.split('/').collect::<Vec<_>>()[..] {
        [org, project, _, repo] => Ok((org, project, repo)),
        _ => Err(format!(
            "invalid repository id '{id}': expected <organisation>/<project>/_git/<repository>"
        )),
    }
}

/// Bitbucket Server clone URL `http(s)://host[/context]/scm/<project>/<repo>.git`: the commits
/// endpoint `…[/context]/rest/api/latest/projects/<project>/repos/<repo>/commits`.
fn bitbucket_server_commits(address: &str) -> Result<String, String> {
    let url =
        reqwest::Url::parse(address).map_err(|e| format!("could not parse git address: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "unsupported scheme type in address: {}. Must be http or https",
            url.scheme()
        ));
    }
    let path = url.path().trim_end_matches(".git");
    let index = path
        .rfind("/scm/")
        .ok_or("supplied provider address is not http(s) git clone url (no /scm/)")?;
    let context = &path[..index];
    let id = &path[index + "/scm/".len()..];
    let (project, repo) = owner_repo(id)?;
    let host = url.host_str().unwrap_or_default();
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    Ok(format!(
        "{}://{authority}{context}/rest/api/latest/projects/{project}/repos/{repo}/commits",
        url.scheme()
    ))
}

/// Resolve-time checks of the Git providers (their constructors in Flux).
pub(crate) fn validate(settings: &ProviderSettings) -> Result<(), (&'static str, String)> {
    let address = settings
        .address
        .as_ref()
        .map(crate::secret::Secret::expose)
        .ok_or(("spec.address", "the repository URL is required".to_owned()))?;
    let token_or_password = || {
        settings
            .token_or_password()
            .filter(|t| !t.expose().is_empty())
            .ok_or((
                "secretRef",
                "a 'token' (or 'password') key is required; GitHub App and workload identity auth are not supported yet".to_owned(),
            ))
    };
    match settings.type_ {
        ProviderType::Bitbucketserver => {
            bitbucket_server_commits(address).map_err(|e| ("address", e))?;
            let has_token = settings
                .token
                .as_ref()
                .is_some_and(|t| !t.expose().is_empty());
            let has_basic = settings.username.is_some() && settings.password.is_some();
            if !has_token && !has_basic {
                return Err((
                    "secretRef",
                    "invalid credentials, expected to be one of username/password or API Token"
                        .to_owned(),
                ));
            }
            return Ok(());
        }
        ProviderType::Bitbucket => {
            let (_, id) = parse_git_address(address).map_err(|e| ("address", e))?;
            owner_repo(&id).map_err(|e| ("address", e))?;
            let token = settings.token.as_ref().map_or("", |t| t.expose());
            if token.split(':').count() != 2 {
                return Err((
                    "secretRef",
                    "a 'token' key of the form <user>:<app password> is required".to_owned(),
                ));
            }
            return Ok(());
        }
        _ => {}
    }
    let (_, id) = parse_git_address(address).map_err(|e| ("address", e))?;
    match settings.type_ {
        ProviderType::Azuredevops => {
            azure_parts(&id).map_err(|e| ("address", e))?;
            if settings
                .token
                .as_ref()
                .is_none_or(|t| t.expose().is_empty())
            {
                return Err((
                    "secretRef",
                    "a 'token' key (personal access token) is required; managed identity is not supported yet".to_owned(),
                ));
            }
        }
        ProviderType::Gitlab => {
            if id.is_empty() {
                return Err(("address", "has no project path".to_owned()));
            }
            token_or_password()?;
        }
        _ => {
            owner_repo(&id).map_err(|e| ("address", e))?;
            token_or_password()?;
        }
    }
    Ok(())
}

fn github_request(ctx: &Ctx<'_>, url: String, body: Vec<u8>) -> Request {
    let token = ctx.settings.token_or_password().map_or("", |t| t.expose());
    Request::json(Method::Post, url, false, body)
        .header("Accept", "application/vnd.github.v3+json")
        .header("X-GitHub-Api-Version", GITHUB_API_VERSION)
        .secret_header("Authorization", format!("Bearer {token}"))
}

/// go-github writes request bodies with `json.Encoder` (HTML not escaped, trailing newline).
fn github_body(value: &serde_json::Value) -> Vec<u8> {
    let mut body = gojson::to_vec_unescaped(value);
    body.push(b'\n');
    body
}

/// github_dispatch.go: a repository dispatch with `event_type` `Kind/name.namespace` and the
/// event (as Flux marshals it) as `client_payload`.
pub(crate) fn github_dispatch(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    let (host, id) = parse_git_address(ctx.address())?;
    let (owner, repo) = owner_repo(&id)?;
    let o = &ctx.event.involved_object;
    // `client_payload` is the event embedded as raw JSON: the bytes Flux's json.Marshal makes.
    let event_type = format!("{}/{}.{}", o.kind, o.name, o.namespace);
    let mut body = b"{\"event_type\":".to_vec();
    body.extend(gojson::to_vec_unescaped(&event_type));
    body.extend(b",\"client_payload\":");
    body.extend(ctx.event.to_go_json());
    body.extend(b"}\n");
    let url = format!(
        "{}/repos/{}/{}/dispatches",
        github_api(&host),
        escape(owner),
        escape(repo)
    );
    Ok(vec![github_request(ctx, url, body)])
}

/// The commit-status request of `ctx`'s provider for the event's commit, under status `key`.
///
/// As Flux: `Progressing` events are skipped (but Gitea posts them as `pending`); the commit
/// comes from metadata `commit`, `originRevision` or `revision` and must be a 40-character SHA;
/// `info` is success and `error` failure; the description is the reason in words
/// (`reconciliation succeeded`).
// One flat arm per provider reads better than six helpers taking the same eight values.
#[allow(clippy::too_many_lines)]
pub(crate) fn commit_status(ctx: &Ctx<'_>, key: &str) -> Result<Vec<Request>, String> {
    let event = ctx.event;
    let type_ = ctx.settings.type_;
    let progressing = event.reason == PROGRESSING_REASON;
    if progressing && type_ != ProviderType::Gitea {
        return Ok(Vec::new());
    }
    let revision = event.revision().ok_or("missing revision metadata")?;
    let sha = commit_of(revision)
        .ok_or_else(|| format!("failed to extract commit hash from '{revision}' revision"))?;
    let success = match event.severity {
        Severity::Info => true,
        Severity::Error => false,
        Severity::Trace => return Err("can't convert a trace event to a commit state".into()),
    };
    let (name, description) = name_and_description(event);
    let address = ctx.address();
    let request = match type_ {
        ProviderType::Github => {
            // github.go: state success|failure, context = the key.
            let (host, id) = parse_git_address(address)?;
            let (owner, repo) = owner_repo(&id)?;
            let body = github_body(&json!({
                "state": if success { "success" } else { "failure" },
                "description": description,
                "context": key,
            }));
            let url = format!(
                "{}/repos/{}/{}/statuses/{sha}",
                github_api(&host),
                escape(owner),
                escape(repo)
            );
            github_request(ctx, url, body)
        }
        ProviderType::Gitlab => {
            // gitlab.go: state success|failed, name = the key; the project path URL-escaped.
            let (host, id) = parse_git_address(address)?;
            let body = gojson::to_vec(&json!({
                "state": if success { "success" } else { "failed" },
                "name": key,
                "description": description,
            }));
            let token = ctx.settings.token_or_password().map_or("", |t| t.expose());
            Request::json(
                Method::Post,
                format!("{host}/api/v4/projects/{}/statuses/{sha}", escape(&id)),
                false,
                body,
            )
            .header("Accept", "application/json")
            .secret_header("PRIVATE-TOKEN", token)
        }
        ProviderType::Gitea => {
            // gitea.go: state pending (Progressing)|success|failure, context = the key.
            let (host, id) = parse_git_address(address)?;
            let (owner, repo) = owner_repo(&id)?;
            let state = if progressing {
                "pending"
            } else if success {
                "success"
            } else {
                "failure"
            };
            let body = gojson::to_vec(&json!({
                "state": state,
                "target_url": "",
                "description": description,
                "context": key,
            }));
            let token = ctx.settings.token_or_password().map_or("", |t| t.expose());
            Request::json(
                Method::Post,
                format!(
                    "{host}/api/v1/repos/{}/{}/statuses/{sha}",
                    escape(owner),
                    escape(repo)
                ),
                false,
                body,
            )
            .secret_header("Authorization", format!("token {token}"))
        }
        ProviderType::Bitbucket => {
            // bitbucket.go: key = hex SHA-1 of the status key (Bitbucket's 40-character limit),
            // state SUCCESSFUL|FAILED, url https://bitbucket.org, basic auth from token
            // `<user>:<app password>`. Flux always calls api.bitbucket.org; an address on
            // another host is used as the API host (`<host>/2.0`).
            let (host, id) = parse_git_address(address)?;
            let (owner, repo) = owner_repo(&id)?;
            let api = if host.ends_with("://bitbucket.org") || host.ends_with(".bitbucket.org") {
                "https://api.bitbucket.org/2.0".to_owned()
            } else {
                format!("{host}/2.0")
            };
            let body = gojson::to_vec(&json!({
                "key": hex(&sha1::Sha1::digest(key)),
                "url": "https://bitbucket.org",
                "state": if success { "SUCCESSFUL" } else { "FAILED" },
                "name": name,
                "description": description,
            }));
            let token = ctx.settings.token.as_ref().map_or("", |t| t.expose());
            Request::json(
                Method::Post,
                format!(
                    "{api}/repositories/{}/{}/commit/{sha}/statuses/build",
                    escape(owner),
                    escape(repo)
                ),
                false,
                body,
            )
            .secret_header(
                "Authorization",
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(token)
                ),
            )
        }
        ProviderType::Bitbucketserver => {
            // bitbucketserver.go: build status with key = hex SHA-1 of the status key, name
            // `kind/name [description]`, url = the Provider address; bearer token or basic auth;
            // written by json.Encoder (trailing newline).
            let commits = bitbucket_server_commits(address)?;
            let mut body = gojson::to_vec(&json!({
                "description": description,
                "key": hex(&sha1::Sha1::digest(key)),
                "name": format!("{name} [{description}]"),
                "state": if success { "SUCCESSFUL" } else { "FAILED" },
                "url": address,
            }));
            body.push(b'\n');
            let s = ctx.settings;
            let auth = match &s.token {
                Some(token) if !token.expose().is_empty() => format!("Bearer {}", token.expose()),
                _ => format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!(
                        "{}:{}",
                        s.username.as_deref().unwrap_or_default(),
                        s.password.as_ref().map_or("", |p| p.expose())
                    ))
                ),
            };
            Request::json(Method::Post, format!("{commits}/{sha}/builds"), false, body)
                .secret_header("Authorization", auth)
                .header("x-atlassian-token", "no-check")
                .header("x-requested-with", "XMLHttpRequest")
        }
        ProviderType::Azuredevops => {
            // azure_devops.go: state succeeded|error, context genre `fluxcd` (or
            // `fluxcd:<summary>`) and name = the key; PAT as basic auth with an empty user.
            let (host, id) = parse_git_address(address)?;
            let (org, project, repo) = azure_parts(&id)?;
            let genre = match event.metadata.get(crate::event::META_SUMMARY) {
                Some(summary) => format!("fluxcd:{summary}"),
                None => "fluxcd".to_owned(),
            };
            let body = gojson::to_vec(&json!({
                "context": {"genre": genre, "name": key},
                "description": description,
                "state": if success { "succeeded" } else { "error" },
            }));
            let token = ctx.settings.token.as_ref().map_or("", |t| t.expose());
            Request::json(
                Method::Post,
                format!(
                    "{host}/{}/{}/_apis/git/repositories/{}/commits/{sha}/statuses",
                    escape(org),
                    escape(project),
                    escape(repo)
                ),
                false,
                body,
            )
            // azure-devops-go-api v6: the API version rides in Accept.
            .header("Content-Type", "application/json;charset=utf-8")
            .header("Accept", "application/json;api-version=6.0")
            .secret_header(
                "Authorization",
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!(":{token}"))
                ),
            )
        }
        other => {
            return Err(format!(
                "type '{}' does not post commit statuses",
                crate::settings::type_name(other)
            ));
        }
    };
    Ok(vec![request])
}
