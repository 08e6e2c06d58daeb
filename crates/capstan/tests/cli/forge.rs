//! `capstan bootstrap github|gitlab` against local API fakes: a real HTTP server per forge
//! (axum, in-memory repositories, deploy keys, teams and groups) answering the paths, JSON
//! fields and statuses the forges answer (404 for what is missing, 401 for a wrong token, 422
//! for a second repository or key of the same name). A created repository is a real Git
//! repository served by `capstan_testkit::GitServer` (its https clone URL) and by a loopback
//! `sshd` (its ssh clone URL) whose authorized_keys are the registered deploy keys, read-only
//! keys restricted to `git-upload-pack`, as a forge restricts them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use capstan_testkit::{GitServer, eventually, git};
use serde_json::{Value, json};

use crate::support::{Dev, capstan, kubectl};

/// The token the fakes accept.
const TOKEN: &str = "forge-test-token-4711";

/// Which API a [`Fake`] plays.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    GitHub,
    GitLab,
}

/// A repository on the fake.
struct Repo {
    id: u64,
    owner: String,
    name: String,
    visibility: String,
    description: String,
    default_branch: String,
    server: GitServer,
    keys: Vec<Key>,
    /// GitHub: team slug → permission; GitLab: shared group path → access level.
    teams: BTreeMap<String, Value>,
}

#[derive(Clone)]
struct Key {
    id: u64,
    title: String,
    /// The public key, `type base64`.
    public: String,
    read_only: bool,
}

#[derive(Default)]
struct Forge {
    kind: Option<Kind>,
    /// The token's user.
    user: String,
    /// Organizations (GitHub) or groups (GitLab) with their ids.
    orgs: BTreeMap<String, u64>,
    /// GitHub organization teams (`org/slug`); GitLab groups double as teams.
    teams: Vec<String>,
    repos: BTreeMap<String, Repo>,
    next_id: u64,
    /// Every authenticated call, `METHOD /path` (API prefix stripped).
    calls: Vec<String>,
    /// The sshd's authorized_keys file, rewritten on every key change.
    authorized_keys: Option<PathBuf>,
    /// `ssh://user@127.0.0.1:PORT` of the sshd.
    ssh_base: Option<String>,
}

type Shared = Arc<Mutex<Forge>>;

/// A forge API fake on 127.0.0.1.
struct Fake {
    address: SocketAddr,
    state: Shared,
    _sshd: Option<Sshd>,
}

impl Fake {
    async fn start(kind: Kind, user: &str, orgs: &[&str], ssh: bool) -> Self {
        let sshd = if ssh { Some(Sshd::start().await) } else { None };
        let mut forge = Forge {
            kind: Some(kind),
            user: user.to_owned(),
            next_id: 100,
            ..Forge::default()
        };
        for (index, org) in orgs.iter().enumerate() {
            forge.orgs.insert((*org).to_owned(), 10 + index as u64);
        }
        if let Some(sshd) = &sshd {
            forge.authorized_keys = Some(sshd.dir.path().join("authorized_keys"));
            forge.ssh_base = Some(sshd.base());
        }
        let state = Arc::new(Mutex::new(forge));
        let app = Router::new().fallback(handle).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            address,
            state,
            _sshd: sshd,
        }
    }

    /// The `--hostname` to give: the fake's loopback address (spoken to over plain HTTP).
    fn hostname(&self) -> String {
        self.address.to_string()
    }

    fn calls(&self) -> Vec<String> {
        self.state.lock().unwrap().calls.clone()
    }

    fn count(&self, call: &str) -> usize {
        self.calls().iter().filter(|c| c.as_str() == call).count()
    }

    fn keys(&self, full_name: &str) -> Vec<Key> {
        self.state.lock().unwrap().repos[full_name].keys.clone()
    }

    fn bare(&self, full_name: &str) -> PathBuf {
        self.state.lock().unwrap().repos[full_name].server.bare()
    }

    fn repo_field(&self, full_name: &str, field: &str) -> String {
        let forge = self.state.lock().unwrap();
        let repo = &forge.repos[full_name];
        match field {
            "visibility" => repo.visibility.clone(),
            "description" => repo.description.clone(),
            "default_branch" => repo.default_branch.clone(),
            other => panic!("no field {other}"),
        }
    }

    fn teams(&self, full_name: &str) -> BTreeMap<String, Value> {
        self.state.lock().unwrap().repos[full_name].teams.clone()
    }

    /// Registers a key directly (as someone did by hand before the bootstrap).
    fn add_key(&self, full_name: &str, title: &str, key: &str, read_only: bool) {
        let mut forge = self.state.lock().unwrap();
        forge.next_id += 1;
        let id = forge.next_id;
        forge.repos.get_mut(full_name).unwrap().keys.push(Key {
            id,
            title: title.to_owned(),
            public: key.to_owned(),
            read_only,
        });
        write_authorized_keys(&forge);
    }
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "message": message }))).into_response()
}

fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "Not Found")
}

/// Every request: authentication, then the forge's routes.
async fn handle(
    State(state): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let kind = state.lock().unwrap().kind.unwrap();
    let prefix = match kind {
        Kind::GitHub => "/api/v3",
        Kind::GitLab => "/api/v4",
    };
    let Some(path) = uri.path().strip_prefix(prefix) else {
        return not_found();
    };
    let path = path.to_owned();
    let authorized = match kind {
        Kind::GitHub => headers
            .get("authorization")
            .is_some_and(|v| v.as_bytes() == format!("Bearer {TOKEN}").as_bytes()),
        Kind::GitLab => headers
            .get("private-token")
            .is_some_and(|v| v.as_bytes() == TOKEN.as_bytes()),
    };
    if !authorized {
        return match kind {
            Kind::GitHub => error(StatusCode::UNAUTHORIZED, "Bad credentials"),
            Kind::GitLab => error(StatusCode::UNAUTHORIZED, "401 Unauthorized"),
        };
    }
    state.lock().unwrap().calls.push(format!("{method} {path}"));
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let segments: Vec<String> = path.split('/').skip(1).map(percent_decode).collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    match kind {
        Kind::GitHub => github(&state, &method, &segments, body).await,
        Kind::GitLab => gitlab(&state, &method, &segments, body).await,
    }
}

fn percent_decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// Creates a repository backed by a new Git server; `auto_init` commits a README on
/// `default_branch`.
async fn create_repo(
    state: &Shared,
    owner: &str,
    name: &str,
    visibility: &str,
    description: &str,
    default_branch: &str,
) -> Result<String, Response> {
    let full_name = format!("{owner}/{name}");
    if state.lock().unwrap().repos.contains_key(&full_name) {
        return Err(error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "name already exists on this account",
        ));
    }
    let server = GitServer::start().await;
    let work = server.work();
    git(&work, &["checkout", "-q", "-b", default_branch]);
    capstan_testkit::write_files(&work, &[("README.md", &format!("# {name}\n"))]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "Initial commit"]);
    git(&work, &["push", "-q", "origin", default_branch]);
    git(
        &server.bare(),
        &[
            "symbolic-ref",
            "HEAD",
            &format!("refs/heads/{default_branch}"),
        ],
    );
    let mut forge = state.lock().unwrap();
    forge.next_id += 1;
    let id = forge.next_id;
    forge.repos.insert(
        full_name.clone(),
        Repo {
            id,
            owner: owner.to_owned(),
            name: name.to_owned(),
            visibility: visibility.to_owned(),
            description: description.to_owned(),
            default_branch: default_branch.to_owned(),
            server,
            keys: Vec::new(),
            teams: BTreeMap::new(),
        },
    );
    Ok(full_name)
}

fn ssh_url(forge: &Forge, repo: &Repo) -> String {
    match &forge.ssh_base {
        Some(base) => format!("{base}{}", repo.server.bare().display()),
        None => format!("git@forge.invalid:{}/{}.git", repo.owner, repo.name),
    }
}

fn github_repo(forge: &Forge, repo: &Repo) -> Value {
    json!({
        "id": repo.id,
        "name": repo.name,
        "full_name": format!("{}/{}", repo.owner, repo.name),
        "owner": {"login": repo.owner},
        "private": repo.visibility == "private",
        "visibility": repo.visibility,
        "description": if repo.description.is_empty() { Value::Null } else { json!(repo.description) },
        "default_branch": repo.default_branch,
        "clone_url": repo.server.url(),
        "ssh_url": ssh_url(forge, repo),
    })
}

fn key_json(kind: Kind, key: &Key) -> Value {
    match kind {
        Kind::GitHub => {
            json!({"id": key.id, "title": key.title, "key": key.public, "read_only": key.read_only})
        }
        Kind::GitLab => {
            json!({"id": key.id, "title": key.title, "key": key.public, "can_push": !key.read_only})
        }
    }
}

/// The sshd's authorized_keys: every registered key, read-only ones allowed only to fetch.
fn write_authorized_keys(forge: &Forge) {
    let Some(file) = &forge.authorized_keys else {
        return;
    };
    let mut text = String::new();
    for repo in forge.repos.values() {
        for key in &repo.keys {
            if key.read_only {
                let _ = writeln!(
                    text,
                    "restrict,command=\"git-upload-pack '{}'\" {}",
                    repo.server.bare().display(),
                    key.public
                );
            } else {
                let _ = writeln!(text, "{}", key.public);
            }
        }
    }
    std::fs::write(file, text).unwrap();
}

fn add_key(state: &Shared, full_name: &str, title: &str, key: &str, read_only: bool) -> Response {
    let mut forge = state.lock().unwrap();
    let kind = forge.kind.unwrap();
    let key = key.trim().to_owned();
    let identity: Vec<&str> = key.split_whitespace().take(2).collect();
    if key.is_empty() || title.is_empty() {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
    }
    let in_use = forge.repos[full_name].keys.iter().any(|k| {
        k.title == title || k.public.split_whitespace().take(2).collect::<Vec<_>>() == identity
    });
    if in_use {
        return match kind {
            Kind::GitHub => (
                StatusCode::UNPROCESSABLE_ENTITY,
                Json(json!({"message": "Validation Failed",
                    "errors": [{"resource": "PublicKey", "code": "custom", "message": "key is already in use"}]})),
            )
                .into_response(),
            Kind::GitLab => (
                StatusCode::BAD_REQUEST,
                Json(json!({"message": {"deploy_key.fingerprint_sha256": ["has already been taken"]}})),
            )
                .into_response(),
        };
    }
    forge.next_id += 1;
    let id = forge.next_id;
    let record = Key {
        id,
        title: title.to_owned(),
        public: key,
        read_only,
    };
    let answer = key_json(kind, &record);
    forge.repos.get_mut(full_name).unwrap().keys.push(record);
    write_authorized_keys(&forge);
    (StatusCode::CREATED, Json(answer)).into_response()
}

fn delete_key(state: &Shared, full_name: &str, id: &str) -> Response {
    let mut forge = state.lock().unwrap();
    let keys = &mut forge.repos.get_mut(full_name).unwrap().keys;
    let before = keys.len();
    keys.retain(|k| k.id.to_string() != id);
    if keys.len() == before {
        return not_found();
    }
    write_authorized_keys(&forge);
    StatusCode::NO_CONTENT.into_response()
}

async fn github(state: &Shared, method: &Method, path: &[&str], body: Value) -> Response {
    let text = |field: &str| body[field].as_str().unwrap_or_default().to_owned();
    match (method.as_str(), path) {
        ("GET", ["user"]) => {
            let user = state.lock().unwrap().user.clone();
            Json(json!({"login": user, "id": 1})).into_response()
        }
        ("POST", ["user", "repos"] | ["orgs", _, "repos"]) => {
            let owner = match path {
                [_, org, _] if path[0] == "orgs" => {
                    if !state.lock().unwrap().orgs.contains_key(*org) {
                        return not_found();
                    }
                    (*org).to_owned()
                }
                _ => state.lock().unwrap().user.clone(),
            };
            if body["auto_init"] != json!(true) {
                return error(StatusCode::BAD_REQUEST, "the fake wants auto_init");
            }
            let visibility = if body["private"] == json!(true) {
                "private"
            } else {
                "public"
            };
            match create_repo(
                state,
                &owner,
                &text("name"),
                visibility,
                &text("description"),
                "main",
            )
            .await
            {
                Ok(full_name) => {
                    let forge = state.lock().unwrap();
                    let repo = &forge.repos[&full_name];
                    (StatusCode::CREATED, Json(github_repo(&forge, repo))).into_response()
                }
                Err(response) => response,
            }
        }
        (_, ["repos", owner, name, rest @ ..]) => {
            let full_name = format!("{owner}/{name}");
            if !state.lock().unwrap().repos.contains_key(&full_name) {
                return not_found();
            }
            github_repo_route(state, method, &full_name, rest, &body)
        }
        ("PUT", ["orgs", org, "teams", slug, "repos", owner, name]) => {
            let full_name = format!("{owner}/{name}");
            let mut forge = state.lock().unwrap();
            if !forge.teams.contains(&format!("{org}/{slug}"))
                || !forge.repos.contains_key(&full_name)
            {
                return not_found();
            }
            let permission = body["permission"].clone();
            forge
                .repos
                .get_mut(&full_name)
                .unwrap()
                .teams
                .insert((*slug).to_owned(), permission);
            StatusCode::NO_CONTENT.into_response()
        }
        _ => not_found(),
    }
}

fn github_repo_route(
    state: &Shared,
    method: &Method,
    full_name: &str,
    rest: &[&str],
    body: &Value,
) -> Response {
    match (method.as_str(), rest) {
        ("GET", []) => {
            let forge = state.lock().unwrap();
            Json(github_repo(&forge, &forge.repos[full_name])).into_response()
        }
        ("PATCH", []) => {
            let mut forge = state.lock().unwrap();
            let repo = forge.repos.get_mut(full_name).unwrap();
            if let Some(description) = body["description"].as_str() {
                description.clone_into(&mut repo.description);
            }
            if let Some(private) = body["private"].as_bool() {
                if private { "private" } else { "public" }.clone_into(&mut repo.visibility);
            }
            let forge = &*forge;
            Json(github_repo(forge, &forge.repos[full_name])).into_response()
        }
        ("GET", ["keys"]) => {
            let forge = state.lock().unwrap();
            let keys: Vec<Value> = forge.repos[full_name]
                .keys
                .iter()
                .map(|k| key_json(Kind::GitHub, k))
                .collect();
            Json(Value::Array(keys)).into_response()
        }
        ("POST", ["keys"]) => add_key(
            state,
            full_name,
            body["title"].as_str().unwrap_or_default(),
            body["key"].as_str().unwrap_or_default(),
            body["read_only"].as_bool().unwrap_or(false),
        ),
        ("DELETE", ["keys", id]) => delete_key(state, full_name, id),
        ("GET", ["teams"]) => {
            let forge = state.lock().unwrap();
            let teams: Vec<Value> = forge.repos[full_name]
                .teams
                .iter()
                .map(|(slug, permission)| json!({"slug": slug, "permission": permission}))
                .collect();
            Json(Value::Array(teams)).into_response()
        }
        _ => not_found(),
    }
}

fn gitlab_project(forge: &Forge, repo: &Repo) -> Value {
    let shared: Vec<Value> = repo
        .teams
        .iter()
        .map(|(group, access)| json!({"group_full_path": group, "group_access_level": access}))
        .collect();
    json!({
        "id": repo.id,
        "name": repo.name,
        "path": repo.name,
        "path_with_namespace": format!("{}/{}", repo.owner, repo.name),
        "visibility": repo.visibility,
        "description": repo.description,
        "default_branch": repo.default_branch,
        "http_url_to_repo": repo.server.url(),
        "ssh_url_to_repo": ssh_url(forge, repo),
        "shared_with_groups": shared,
    })
}

/// The project a GitLab id names: a number or a full path.
fn gitlab_find(forge: &Forge, id: &str) -> Option<String> {
    forge
        .repos
        .iter()
        .find(|(full_name, repo)| *full_name == id || repo.id.to_string() == id)
        .map(|(full_name, _)| full_name.clone())
}

async fn gitlab(state: &Shared, method: &Method, path: &[&str], body: Value) -> Response {
    let text = |field: &str| body[field].as_str().unwrap_or_default().to_owned();
    match (method.as_str(), path) {
        ("GET", ["user"]) => {
            let user = state.lock().unwrap().user.clone();
            Json(json!({"username": user, "id": 1})).into_response()
        }
        ("GET", ["groups", group]) => {
            let forge = state.lock().unwrap();
            match forge.orgs.get(*group) {
                Some(id) => Json(json!({"id": id, "full_path": group})).into_response(),
                None => error(StatusCode::NOT_FOUND, "404 Group Not Found"),
            }
        }
        ("POST", ["projects"]) => {
            let owner = match body["namespace_id"].as_u64() {
                Some(id) => {
                    let forge = state.lock().unwrap();
                    match forge.orgs.iter().find(|(_, group)| **group == id) {
                        Some((name, _)) => name.clone(),
                        None => return error(StatusCode::NOT_FOUND, "404 Namespace Not Found"),
                    }
                }
                None => state.lock().unwrap().user.clone(),
            };
            if body["initialize_with_readme"] != json!(true) {
                return error(
                    StatusCode::BAD_REQUEST,
                    "the fake wants initialize_with_readme",
                );
            }
            let branch = body["default_branch"].as_str().unwrap_or("main").to_owned();
            let visibility = body["visibility"].as_str().unwrap_or("private").to_owned();
            match create_repo(
                state,
                &owner,
                &text("path"),
                &visibility,
                &text("description"),
                &branch,
            )
            .await
            {
                Ok(full_name) => {
                    let forge = state.lock().unwrap();
                    (
                        StatusCode::CREATED,
                        Json(gitlab_project(&forge, &forge.repos[&full_name])),
                    )
                        .into_response()
                }
                Err(_) => (
                    StatusCode::BAD_REQUEST,
                    Json(json!({"message": {"name": ["has already been taken"]}})),
                )
                    .into_response(),
            }
        }
        (_, ["projects", id, rest @ ..]) => {
            let Some(full_name) = gitlab_find(&state.lock().unwrap(), id) else {
                return error(StatusCode::NOT_FOUND, "404 Project Not Found");
            };
            gitlab_project_route(state, method, &full_name, rest, &body)
        }
        _ => not_found(),
    }
}

fn gitlab_project_route(
    state: &Shared,
    method: &Method,
    full_name: &str,
    rest: &[&str],
    body: &Value,
) -> Response {
    match (method.as_str(), rest) {
        ("GET", []) => {
            let forge = state.lock().unwrap();
            Json(gitlab_project(&forge, &forge.repos[full_name])).into_response()
        }
        ("PUT", []) => {
            let mut forge = state.lock().unwrap();
            let repo = forge.repos.get_mut(full_name).unwrap();
            if let Some(description) = body["description"].as_str() {
                description.clone_into(&mut repo.description);
            }
            if let Some(visibility) = body["visibility"].as_str() {
                visibility.clone_into(&mut repo.visibility);
            }
            let forge = &*forge;
            Json(gitlab_project(forge, &forge.repos[full_name])).into_response()
        }
        ("GET", ["deploy_keys"]) => {
            let forge = state.lock().unwrap();
            let keys: Vec<Value> = forge.repos[full_name]
                .keys
                .iter()
                .map(|k| key_json(Kind::GitLab, k))
                .collect();
            Json(Value::Array(keys)).into_response()
        }
        ("POST", ["deploy_keys"]) => add_key(
            state,
            full_name,
            body["title"].as_str().unwrap_or_default(),
            body["key"].as_str().unwrap_or_default(),
            !body["can_push"].as_bool().unwrap_or(false),
        ),
        ("DELETE", ["deploy_keys", id]) => delete_key(state, full_name, id),
        ("POST", ["share"]) => {
            let mut forge = state.lock().unwrap();
            let group_id = body["group_id"].as_u64();
            let Some(group) = forge
                .orgs
                .iter()
                .find(|(_, id)| Some(**id) == group_id)
                .map(|(name, _)| name.clone())
            else {
                return error(StatusCode::NOT_FOUND, "404 Group Not Found");
            };
            let repo = forge.repos.get_mut(full_name).unwrap();
            if repo.teams.contains_key(&group) {
                return (
                    StatusCode::CONFLICT,
                    Json(json!({"message": "The project is already shared with this group"})),
                )
                    .into_response();
            }
            repo.teams.insert(group, body["group_access"].clone());
            StatusCode::CREATED.into_response()
        }
        _ => not_found(),
    }
}

/// `sshd` in the foreground on 127.0.0.1, killed on drop; its authorized_keys are the fake's
/// registered deploy keys.
struct Sshd {
    child: std::process::Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Sshd {
    async fn start() -> Self {
        let sshd = Path::new("/usr/sbin/sshd");
        assert!(
            sshd.is_file(),
            "sshd is not installed; hint: run ./scripts/setup"
        );
        capstan_testkit::require("ssh-keygen");
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(dir.path().join("host_key"))
            .status()
            .unwrap();
        assert!(status.success());
        std::fs::write(dir.path().join("authorized_keys"), "").unwrap();
        let config_path = dir.path().join("sshd_config");
        let log_path = dir.path().join("sshd.log");
        let (child, port) = capstan_testkit::spawn_listening("sshd", |port| {
            let config = format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {root}/host_key\n\
                 AuthorizedKeysFile {root}/authorized_keys\nStrictModes no\nUsePAM no\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PermitRootLogin prohibit-password\nAcceptEnv GIT_PROTOCOL\nPidFile {root}/sshd.pid\n",
                root = dir.path().display()
            );
            std::fs::write(&config_path, config).unwrap();
            let log = std::fs::File::create(&log_path).unwrap();
            let mut command = std::process::Command::new(sshd);
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

    /// `ssh://<user>@127.0.0.1:<port>`.
    fn base(&self) -> String {
        let user = String::from_utf8(
            std::process::Command::new("id")
                .arg("-un")
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        format!("ssh://{}@127.0.0.1:{}", user.trim(), self.port)
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `capstan bootstrap <forge> <args> --kubeconfig <dev>` with the forge's token variable set
/// to `token`; answers (success, stderr).
async fn bootstrap(dev: &Dev, forge: &str, token: &str, args: &[&str]) -> (bool, String) {
    let variable = if forge == "github" {
        "GITHUB_TOKEN"
    } else {
        "GITLAB_TOKEN"
    };
    let mut all = vec!["bootstrap", forge];
    all.extend_from_slice(args);
    let output = capstan(&dev.kubeconfig, &all)
        .env(variable, token)
        .env_remove(if forge == "github" {
            "GITLAB_TOKEN"
        } else {
            "GITHUB_TOKEN"
        })
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        !stderr.contains(TOKEN) && !stdout.contains(TOKEN),
        "the token leaked: {stderr}{stdout}"
    );
    (output.status.success(), stderr)
}

/// The branch's head commit in `bare`.
fn head(bare: &Path, branch: &str) -> String {
    git(bare, &["rev-parse", &format!("refs/heads/{branch}")])
}

/// The files of the branch's tree in `bare`.
fn files(bare: &Path, branch: &str) -> Vec<String> {
    git(bare, &["ls-tree", "-r", "--name-only", branch])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The repository's history holds nothing with `needle`.
fn history_lacks(bare: &Path, needle: &str) {
    let found = std::process::Command::new("git")
        .current_dir(bare)
        .args(["grep", "-l", needle])
        .args(
            git(bare, &["rev-list", "--all"])
                .lines()
                .collect::<Vec<_>>(),
        )
        .output()
        .unwrap();
    assert!(
        found.stdout.is_empty(),
        "{needle} is in the repository: {}",
        String::from_utf8_lossy(&found.stdout)
    );
}

/// Kustomization flux-system becomes Ready at `branch@sha1:<head>`.
async fn converges(dev: &Dev, bare: &Path, branch: &str) {
    let commit = head(bare, branch);
    let want = format!("{branch}@sha1:{commit}");
    eventually(
        Duration::from_secs(120),
        "Kustomization flux-system Ready at the pushed commit",
        || async {
            let run = kubectl(
                &dev.kubeconfig,
                dev.dir.path(),
                &[
                    "get",
                    "kustomizations.kustomize.toolkit.fluxcd.io",
                    "flux-system",
                    "-n",
                    "flux-system",
                    "-o",
                    "json",
                ],
            )
            .await;
            if run.status != 0 {
                return None;
            }
            let object = run.json();
            (object["status"]["lastAppliedRevision"] == json!(want)).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn forge_github_token_auth_creates_the_repository_and_converges_idempotently() {
    let fake = Fake::start(Kind::GitHub, "octo", &["acme"], false).await;
    let dev = Dev::start(&[]).await;
    let host = fake.hostname();
    let args = [
        "--owner",
        "acme",
        "--repository",
        "fleet",
        "--path",
        "clusters/dev",
        "--hostname",
        &host,
        "--token-auth",
        "--description",
        "the fleet",
    ];
    // A wrong token: the call and the status, never the token.
    let (ok, stderr) = bootstrap(&dev, "github", "not-the-token", &args).await;
    assert!(!ok);
    assert!(
        stderr.contains("GitHub API GET /repos/acme/fleet answered 401 Unauthorized: the token is not valid for http://"),
        "{stderr}"
    );
    assert!(!stderr.contains("not-the-token"), "{stderr}");
    assert!(fake.state.lock().unwrap().repos.is_empty());

    let (ok, stderr) = bootstrap(&dev, "github", TOKEN, &args).await;
    assert!(ok, "{stderr}");
    assert_eq!(fake.count("POST /orgs/acme/repos"), 1, "{:?}", fake.calls());
    assert_eq!(fake.repo_field("acme/fleet", "visibility"), "private");
    assert_eq!(fake.repo_field("acme/fleet", "description"), "the fleet");
    assert!(
        fake.keys("acme/fleet").is_empty(),
        "no deploy key with --token-auth"
    );
    let bare = fake.bare("acme/fleet");
    let tree = files(&bare, "main");
    for file in [
        "README.md",
        "clusters/dev/flux-system/gotk-components.yaml",
        "clusters/dev/flux-system/gotk-sync.yaml",
        "clusters/dev/flux-system/kustomization.yaml",
    ] {
        assert!(tree.contains(&file.to_owned()), "{file} in {tree:?}");
    }
    history_lacks(&bare, TOKEN);
    converges(&dev, &bare, "main").await;
    let secret = kubectl(
        &dev.kubeconfig,
        dev.dir.path(),
        &[
            "get",
            "secret",
            "flux-system",
            "-n",
            "flux-system",
            "-o",
            "json",
        ],
    )
    .await
    .ok()
    .json();
    assert_eq!(secret["data"]["username"], json!("Z2l0"), "user name git");

    // Again: no second repository, no new commit.
    let commit = head(&bare, "main");
    let (ok, stderr) = bootstrap(&dev, "github", TOKEN, &args).await;
    assert!(ok, "{stderr}");
    assert_eq!(fake.count("POST /orgs/acme/repos"), 1);
    assert_eq!(head(&bare, "main"), commit);
}

#[tokio::test]
async fn forge_github_deploy_key_is_registered_read_only_once() {
    let fake = Fake::start(Kind::GitHub, "octo", &[], true).await;
    let dev = Dev::start(&[]).await;
    let host = fake.hostname();
    let args = [
        "--owner",
        "octo",
        "--personal",
        "--private=false",
        "--repository",
        "fleet",
        "--path",
        "clusters/dev",
        "--hostname",
        &host,
        "--ssh-key-algorithm",
        "ed25519",
    ];
    let (ok, stderr) = bootstrap(&dev, "github", TOKEN, &args).await;
    assert!(ok, "{stderr}");
    assert_eq!(fake.count("GET /user"), 1);
    assert_eq!(fake.count("POST /user/repos"), 1);
    assert_eq!(fake.repo_field("octo/fleet", "visibility"), "public");
    let keys = fake.keys("octo/fleet");
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].title, "flux-system-main-flux-system-./clusters/dev");
    assert!(keys[0].read_only);
    assert!(
        keys[0].public.starts_with("ssh-ed25519 "),
        "{}",
        keys[0].public
    );
    let bare = fake.bare("octo/fleet");
    converges(&dev, &bare, "main").await;

    let commit = head(&bare, "main");
    let (ok, stderr) = bootstrap(&dev, "github", TOKEN, &args).await;
    assert!(ok, "{stderr}");
    assert_eq!(fake.count("POST /user/repos"), 1);
    assert_eq!(
        fake.count("POST /repos/octo/fleet/keys"),
        1,
        "{:?}",
        fake.calls()
    );
    assert_eq!(fake.keys("octo/fleet").len(), 1);
    assert_eq!(head(&bare, "main"), commit);

    deploy_key_cannot_push(&dev, &fake, "octo/fleet", &commit).await;
    assert_eq!(head(&bare, "main"), commit);
}

/// The deploy key (the sync Secret's) fetches over ssh but cannot push, as on a forge: the
/// bootstrap's commits went over https with the token.
async fn deploy_key_cannot_push(dev: &Dev, fake: &Fake, full_name: &str, commit: &str) {
    let secret = kubectl(
        &dev.kubeconfig,
        dev.dir.path(),
        &[
            "get",
            "secret",
            "flux-system",
            "-n",
            "flux-system",
            "-o",
            "json",
        ],
    )
    .await
    .ok()
    .json();
    let identity = decode(&secret["data"]["identity"]);
    let key_file = dev.dir.path().join("deploy-key");
    std::fs::write(&key_file, identity).unwrap();
    let mut permissions = std::fs::metadata(&key_file).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o600);
    std::fs::set_permissions(&key_file, permissions).unwrap();
    let ssh = format!(
        "ssh -i {} -o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
        key_file.display()
    );
    let url = {
        let forge = fake.state.lock().unwrap();
        ssh_url(&forge, &forge.repos[full_name])
    };
    let with_key = |args: &[&str]| {
        std::process::Command::new("git")
            .env("GIT_SSH_COMMAND", &ssh)
            .current_dir(dev.dir.path())
            .args(args)
            .output()
            .unwrap()
    };
    let listed = with_key(&["ls-remote", &url, "main"]);
    assert!(listed.status.success(), "{listed:?}");
    assert!(String::from_utf8_lossy(&listed.stdout).contains(commit));
    let clone = dev.dir.path().join("clone");
    let cloned = with_key(&["clone", "-q", &url, &clone.to_string_lossy()]);
    assert!(cloned.status.success(), "{cloned:?}");
    git(
        &clone,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
    );
    let pushed = std::process::Command::new("git")
        .env("GIT_SSH_COMMAND", &ssh)
        .current_dir(&clone)
        .args(["push", "-q", "origin", "HEAD:main"])
        .output()
        .unwrap();
    assert!(!pushed.status.success(), "a read-only key pushed");
    assert_eq!(head(&fake.bare(full_name), "main"), commit);
}

/// A base64 `data` value of a Secret, decoded.
fn decode(value: &Value) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(value.as_str().expect("a data value"))
        .unwrap()
}

#[tokio::test]
async fn forge_github_teams_and_a_drifted_deploy_key_need_reconcile() {
    let fake = Fake::start(Kind::GitHub, "octo", &["acme"], true).await;
    fake.state.lock().unwrap().teams = vec!["acme/platform".to_owned(), "acme/ops".to_owned()];
    // The repository exists, with someone else's key under the bootstrap's key name.
    create_repo(&fake.state, "acme", "fleet", "private", "", "main")
        .await
        .unwrap_or_else(|_| panic!("the repository"));
    let title = "flux-system-main-flux-system-./clusters/prod";
    let other = generated_public_key();
    fake.add_key("acme/fleet", title, &other, true);
    let dev = Dev::start(&[]).await;
    let host = fake.hostname();
    let mut args = vec![
        "--owner",
        "acme",
        "--repository",
        "fleet",
        "--path",
        "./clusters/prod/",
        "--hostname",
        &host,
        "--team",
        "platform:push,ops",
    ];
    let (ok, stderr) = bootstrap(&dev, "github", TOKEN, &args).await;
    assert!(!ok);
    assert!(
        stderr.contains(&format!(
            "the deploy key {title:?} of acme/fleet has another public key"
        )) && stderr.contains("--reconcile"),
        "{stderr}"
    );
    assert_eq!(
        fake.count("POST /orgs/acme/repos"),
        0,
        "the repository was found"
    );
    let teams = fake.teams("acme/fleet");
    assert_eq!(teams["platform"], json!("push"));
    assert_eq!(teams["ops"], json!("maintain"));
    assert_eq!(
        fake.keys("acme/fleet")[0].public,
        other,
        "the key is left alone"
    );

    args.push("--reconcile");
    let (ok, stderr) = bootstrap(&dev, "github", TOKEN, &args).await;
    assert!(ok, "{stderr}");
    let keys = fake.keys("acme/fleet");
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].title, title);
    assert_ne!(keys[0].public, other, "replaced");
    assert!(
        keys[0].public.starts_with("ecdsa-sha2-nistp384 "),
        "Flux's default algorithm"
    );
    assert_eq!(
        fake.count("PUT /orgs/acme/teams/platform/repos/acme/fleet"),
        1
    );
    converges(&dev, &fake.bare("acme/fleet"), "main").await;
}

/// A public key nobody holds the private half of here.
fn generated_public_key() -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("key");
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "", "-f"])
        .arg(&file)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read_to_string(file.with_extension("pub"))
        .unwrap()
        .trim()
        .to_owned()
}

#[tokio::test]
async fn forge_gitlab_group_project_with_a_deploy_key_converges_idempotently() {
    let fake = Fake::start(Kind::GitLab, "dev1", &["platform", "ops"], true).await;
    let dev = Dev::start(&[]).await;
    let host = fake.hostname();
    let args = [
        "--owner",
        "platform",
        "--repository",
        "fleet",
        "--path",
        "clusters/dev",
        "--hostname",
        &host,
        "--team",
        "ops",
        "--branch",
        "prod",
    ];
    let (ok, stderr) = bootstrap(&dev, "gitlab", "not-the-token", &args).await;
    assert!(!ok);
    assert!(
        stderr.contains("GitLab API GET /projects/platform%2Ffleet answered 401 Unauthorized: the token is not valid for http://"),
        "{stderr}"
    );
    let (ok, stderr) = bootstrap(&dev, "gitlab", TOKEN, &args).await;
    assert!(ok, "{stderr}");
    assert_eq!(fake.count("GET /groups/platform"), 1);
    assert_eq!(fake.count("POST /projects"), 1);
    assert_eq!(fake.repo_field("platform/fleet", "visibility"), "private");
    assert_eq!(
        fake.teams("platform/fleet")["ops"],
        json!(40),
        "shared as Maintainer"
    );
    let keys = fake.keys("platform/fleet");
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].title, "flux-system-prod-flux-system-./clusters/dev");
    assert!(keys[0].read_only);
    let bare = fake.bare("platform/fleet");
    let tree = files(&bare, "prod");
    assert!(
        tree.contains(&"clusters/dev/flux-system/gotk-sync.yaml".to_owned()),
        "{tree:?}"
    );
    history_lacks(&bare, TOKEN);
    converges(&dev, &bare, "prod").await;

    let commit = head(&bare, "prod");
    let (ok, stderr) = bootstrap(&dev, "gitlab", TOKEN, &args).await;
    assert!(ok, "{stderr}");
    assert_eq!(fake.count("POST /projects"), 1);
    let project = fake.state.lock().unwrap().repos["platform/fleet"].id;
    assert_eq!(
        fake.count(&format!("POST /projects/{project}/deploy_keys")),
        1
    );
    assert_eq!(fake.count(&format!("POST /projects/{project}/share")), 1);
    assert_eq!(head(&bare, "prod"), commit);
}

#[tokio::test]
async fn forge_gitlab_personal_project_with_token_auth() {
    let fake = Fake::start(Kind::GitLab, "dev1", &[], false).await;
    let dev = Dev::start(&[]).await;
    let host = fake.hostname();
    let mut args = vec![
        "--owner",
        "someone-else",
        "--personal",
        "--repository",
        "fleet",
        "--path",
        "clusters/dev",
        "--hostname",
        &host,
        "--token-auth",
        "--visibility",
        "internal",
    ];
    // The owner must be the token's user.
    let (ok, stderr) = bootstrap(&dev, "gitlab", TOKEN, &args).await;
    assert!(!ok);
    assert!(
        stderr.contains("is not the user the token belongs to (\"dev1\")"),
        "{stderr}"
    );
    args[1] = "dev1";
    let (ok, stderr) = bootstrap(&dev, "gitlab", TOKEN, &args).await;
    assert!(ok, "{stderr}");
    assert_eq!(fake.repo_field("dev1/fleet", "visibility"), "internal");
    assert!(fake.keys("dev1/fleet").is_empty());
    let bare = fake.bare("dev1/fleet");
    history_lacks(&bare, TOKEN);
    converges(&dev, &bare, "main").await;
    let commit = head(&bare, "main");
    let (ok, stderr) = bootstrap(&dev, "gitlab", TOKEN, &args).await;
    assert!(ok, "{stderr}");
    assert_eq!(fake.count("POST /projects"), 1);
    assert_eq!(head(&bare, "main"), commit);
}
