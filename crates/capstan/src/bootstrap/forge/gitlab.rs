//! GitLab's REST calls (v4), the ones Flux's go-git-providers makes for a bootstrap: the
//! project (in a group, or the token user's namespace), the groups it is shared with, and its
//! deploy keys.

use anyhow::Context as _;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::api::{Api, encode_segment};
use super::{DeployKey, Repository, RepositorySpec};

/// GitLab's project visibilities.
pub const VISIBILITIES: [&str; 3] = ["private", "internal", "public"];

/// GitLab's Maintainer access level, which Flux gives the `--team` groups.
const MAINTAINER: u64 = 40;

/// Finds the project `owner/name`, or creates it (in the group `owner`, or with `personal` in
/// the token user's namespace) with a README so the default branch exists. With
/// `spec.reconcile`, an existing project's description, default branch and visibility are set
/// to the flags'.
pub async fn repository(api: &Api, spec: &RepositorySpec) -> anyhow::Result<Repository> {
    let full_path = format!("{}/{}", spec.owner, spec.name);
    let path = format!("/projects/{}", encode_segment(&full_path));
    let (status, body) = api.send(Method::GET, &path, None).await?;
    let (body, created) = match status {
        StatusCode::OK => (body, false),
        StatusCode::NOT_FOUND => (create(api, spec).await?, true),
        other => return Err(api.error(Method::GET, &path, other, &body).into()),
    };
    let mut repository =
        read(&body).with_context(|| format!("GitLab API GET {path}: the project's answer"))?;
    repository.created = created;
    if spec.reconcile && !created {
        let mut update = serde_json::Map::new();
        if let Some(description) = &spec.description
            && body["description"].as_str().unwrap_or_default() != description
        {
            update.insert("description".into(), json!(description));
        }
        if let Some(branch) = &spec.default_branch
            && &repository.default_branch != branch
        {
            update.insert("default_branch".into(), json!(branch));
        }
        if body["visibility"].as_str() != Some(spec.visibility.as_str()) {
            update.insert("visibility".into(), json!(spec.visibility));
        }
        if !update.is_empty() {
            let path = format!("/projects/{}", repository.id);
            let body = api
                .call(Method::PUT, &path, Some(&Value::Object(update)))
                .await?;
            repository = Repository {
                reconciled: true,
                ..read(&body).with_context(|| format!("GitLab API PUT {path}: the answer"))?
            };
        }
    }
    Ok(repository)
}

async fn create(api: &Api, spec: &RepositorySpec) -> anyhow::Result<Value> {
    let mut body = json!({
        "name": spec.name,
        "path": spec.name,
        "visibility": spec.visibility,
        "initialize_with_readme": true,
    });
    if spec.personal {
        let user = api.call(Method::GET, "/user", None).await?;
        let login = user["username"].as_str().unwrap_or_default();
        if !login.eq_ignore_ascii_case(&spec.owner) {
            anyhow::bail!(
                "cannot create the project {}/{}: the owner {:?} is not the user the token belongs to ({login:?}); without --personal the owner is a group",
                spec.owner,
                spec.name,
                spec.owner
            );
        }
    } else {
        let group = group(api, &spec.owner).await?;
        body["namespace_id"] = group["id"].clone();
    }
    if let Some(description) = &spec.description {
        body["description"] = json!(description);
    }
    if let Some(branch) = &spec.default_branch {
        body["default_branch"] = json!(branch);
    }
    api.call(Method::POST, "/projects", Some(&body)).await
}

async fn group(api: &Api, name: &str) -> anyhow::Result<Value> {
    api.call(
        Method::GET,
        &format!("/groups/{}", encode_segment(name)),
        None,
    )
    .await
}

fn read(body: &Value) -> anyhow::Result<Repository> {
    let field = |name: &str| -> anyhow::Result<String> {
        body[name]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("no {name:?}"))
    };
    Ok(Repository {
        id: body["id"]
            .as_u64()
            .map(|id| id.to_string())
            .context("no \"id\"")?,
        https_url: field("http_url_to_repo")?,
        ssh_url: field("ssh_url_to_repo")?,
        default_branch: body["default_branch"].as_str().unwrap_or("main").to_owned(),
        created: false,
        reconciled: false,
        shared_with: body["shared_with_groups"]
            .as_array()
            .map(|groups| {
                groups
                    .iter()
                    .filter_map(|g| g["group_full_path"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// Shares the project with each group in `teams` at Maintainer level (Flux's `--team` for
/// GitLab); a group it is already shared with is left alone.
pub async fn grant_teams(
    api: &Api,
    repository: &Repository,
    teams: &[(String, String)],
) -> anyhow::Result<Vec<String>> {
    let mut granted = Vec::new();
    for (team, _) in teams {
        if repository
            .shared_with
            .iter()
            .any(|shared| shared.eq_ignore_ascii_case(team))
        {
            continue;
        }
        let group = group(api, team).await?;
        let path = format!("/projects/{}/share", repository.id);
        let body = json!({"group_id": group["id"], "group_access": MAINTAINER});
        api.call(Method::POST, &path, Some(&body)).await?;
        granted.push(team.clone());
    }
    Ok(granted)
}

/// The project's deploy keys.
pub async fn deploy_keys(api: &Api, repository: &Repository) -> anyhow::Result<Vec<DeployKey>> {
    let path = format!("/projects/{}/deploy_keys?per_page=100", repository.id);
    let listed = api.call(Method::GET, &path, None).await?;
    let keys = listed
        .as_array()
        .with_context(|| format!("GitLab API GET {path}: the answer is not a list"))?;
    Ok(keys
        .iter()
        .map(|key| DeployKey {
            id: key["id"].to_string(),
            title: key["title"].as_str().unwrap_or_default().to_owned(),
            key: key["key"].as_str().unwrap_or_default().to_owned(),
            read_only: !key["can_push"].as_bool().unwrap_or(false),
        })
        .collect())
}

/// Registers a deploy key.
pub async fn add_deploy_key(
    api: &Api,
    repository: &Repository,
    title: &str,
    key: &str,
    read_only: bool,
) -> anyhow::Result<()> {
    let path = format!("/projects/{}/deploy_keys", repository.id);
    let body = json!({"title": title, "key": key, "can_push": !read_only});
    api.call(Method::POST, &path, Some(&body)).await.map(drop)
}

/// Removes a deploy key.
pub async fn delete_deploy_key(api: &Api, repository: &Repository, id: &str) -> anyhow::Result<()> {
    let path = format!("/projects/{}/deploy_keys/{id}", repository.id);
    api.call(Method::DELETE, &path, None).await.map(drop)
}
