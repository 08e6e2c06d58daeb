//! GitHub's REST calls (v3; GitHub Enterprise at `/api/v3`), the ones Flux's go-git-providers
//! makes for a bootstrap: the repository, its teams and its deploy keys.

use anyhow::Context as _;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::api::Api;
use super::{DeployKey, Repository, RepositorySpec};

/// GitHub's repository permissions, in increasing order.
pub const PERMISSIONS: [&str; 5] = ["pull", "triage", "push", "maintain", "admin"];

/// Finds `owner/name`, or creates it (in the organization, or with `personal` for the token's
/// user) with `auto_init` so the default branch exists. With `spec.reconcile`, an existing
/// repository's description, default branch and visibility are set to the flags'.
pub async fn repository(api: &Api, spec: &RepositorySpec) -> anyhow::Result<Repository> {
    let path = format!("/repos/{}/{}", spec.owner, spec.name);
    let (status, body) = api.send(Method::GET, &path, None).await?;
    let (body, created) = match status {
        StatusCode::OK => (body, false),
        StatusCode::NOT_FOUND => (create(api, spec).await?, true),
        other => return Err(api.error(Method::GET, &path, other, &body).into()),
    };
    let mut repository =
        read(&body).with_context(|| format!("GitHub API {path}: the repository's answer"))?;
    repository.created = created;
    if spec.reconcile && !created {
        let mut patch = serde_json::Map::new();
        if let Some(description) = &spec.description
            && body["description"].as_str().unwrap_or_default() != description
        {
            patch.insert("description".into(), json!(description));
        }
        if let Some(branch) = &spec.default_branch
            && &repository.default_branch != branch
        {
            patch.insert("default_branch".into(), json!(branch));
        }
        if body["private"].as_bool() != Some(spec.private) {
            patch.insert("private".into(), json!(spec.private));
        }
        if !patch.is_empty() {
            let body = api
                .call(Method::PATCH, &path, Some(&Value::Object(patch)))
                .await?;
            repository = Repository {
                reconciled: true,
                ..read(&body).with_context(|| format!("GitHub API PATCH {path}: the answer"))?
            };
        }
    }
    Ok(repository)
}

async fn create(api: &Api, spec: &RepositorySpec) -> anyhow::Result<Value> {
    let path = if spec.personal {
        let user = api.call(Method::GET, "/user", None).await?;
        let login = user["login"].as_str().unwrap_or_default();
        if !login.eq_ignore_ascii_case(&spec.owner) {
            anyhow::bail!(
                "cannot create the repository {}/{}: the owner {:?} is not the user the token belongs to ({login:?}); without --personal the owner is an organization",
                spec.owner,
                spec.name,
                spec.owner
            );
        }
        "/user/repos".to_owned()
    } else {
        format!("/orgs/{}/repos", spec.owner)
    };
    let mut body = json!({
        "name": spec.name,
        "private": spec.private,
        "visibility": if spec.private { "private" } else { "public" },
        "auto_init": true,
    });
    if let Some(description) = &spec.description {
        body["description"] = json!(description);
    }
    let created = api.call(Method::POST, &path, Some(&body)).await?;
    if let Some(branch) = &spec.default_branch
        && created["default_branch"].as_str() != Some(branch)
    {
        // Creation takes no default branch: the auto-initialised one is renamed.
        let rename = format!(
            "/repos/{}/{}/branches/{}/rename",
            spec.owner,
            spec.name,
            created["default_branch"].as_str().unwrap_or("main")
        );
        return api
            .call(Method::POST, &rename, Some(&json!({"new_name": branch})))
            .await
            .map(|_| {
                let mut created = created;
                created["default_branch"] = json!(branch);
                created
            });
    }
    Ok(created)
}

fn read(body: &Value) -> anyhow::Result<Repository> {
    let field = |name: &str| -> anyhow::Result<String> {
        body[name]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("no {name:?}"))
    };
    Ok(Repository {
        id: field("full_name")?,
        https_url: field("clone_url")?,
        ssh_url: field("ssh_url")?,
        default_branch: body["default_branch"].as_str().unwrap_or("main").to_owned(),
        created: false,
        reconciled: false,
        shared_with: Vec::new(),
    })
}

/// Gives each `(team slug, permission)` access to the organization's repository: a team that
/// already has access is left alone, unless `reconcile` and its permission differs.
pub async fn grant_teams(
    api: &Api,
    owner: &str,
    repository: &Repository,
    teams: &[(String, String)],
    reconcile: bool,
) -> anyhow::Result<Vec<String>> {
    if teams.is_empty() {
        return Ok(Vec::new());
    }
    let listed = api
        .call(
            Method::GET,
            &format!("/repos/{}/teams?per_page=100", repository.id),
            None,
        )
        .await?;
    let mut granted = Vec::new();
    for (slug, permission) in teams {
        let current = listed.as_array().and_then(|teams| {
            teams
                .iter()
                .find(|team| team["slug"].as_str() == Some(slug))
                .map(|team| team["permission"].as_str().unwrap_or_default().to_owned())
        });
        match current {
            Some(_) if !reconcile => continue,
            Some(current) if current == *permission => continue,
            _ => {}
        }
        let path = format!("/orgs/{owner}/teams/{slug}/repos/{}", repository.id);
        api.call(
            Method::PUT,
            &path,
            Some(&json!({ "permission": permission })),
        )
        .await?;
        granted.push(format!("{slug}:{permission}"));
    }
    Ok(granted)
}

/// The repository's deploy keys.
pub async fn deploy_keys(api: &Api, repository: &Repository) -> anyhow::Result<Vec<DeployKey>> {
    let path = format!("/repos/{}/keys?per_page=100", repository.id);
    let listed = api.call(Method::GET, &path, None).await?;
    let keys = listed
        .as_array()
        .with_context(|| format!("GitHub API GET {path}: the answer is not a list"))?;
    Ok(keys
        .iter()
        .map(|key| DeployKey {
            id: key["id"].to_string(),
            title: key["title"].as_str().unwrap_or_default().to_owned(),
            key: key["key"].as_str().unwrap_or_default().to_owned(),
            read_only: key["read_only"].as_bool().unwrap_or(true),
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
    let path = format!("/repos/{}/keys", repository.id);
    let body = json!({"title": title, "key": key, "read_only": read_only});
    api.call(Method::POST, &path, Some(&body)).await.map(drop)
}

/// Removes a deploy key.
pub async fn delete_deploy_key(api: &Api, repository: &Repository, id: &str) -> anyhow::Result<()> {
    let path = format!("/repos/{}/keys/{id}", repository.id);
    api.call(Method::DELETE, &path, None).await.map(drop)
}
