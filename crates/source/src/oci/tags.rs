//! Listing the tags of a repository (OCIRepository `spec.ref.semver`).

use std::collections::HashSet;

use oci_client::RegistryOperation;

use super::{RegistryOptions, parse_reference};
use crate::error::{Error, Result};

/// Tags asked for per page.
const PAGE_SIZE: usize = 1000;

/// Every tag of the repository of `reference` (`oci://host/repository`; a tag or digest in it
/// is ignored), in the registry's order, following the `n`/`last` pagination of the
/// distribution API, with the same client configuration as [`super::pull`] and
/// [`super::push`].
pub async fn list_tags(reference: &str, registry: &RegistryOptions) -> Result<Vec<String>> {
    list_tags_in_pages(reference, registry, PAGE_SIZE).await
}

pub(super) async fn list_tags_in_pages(
    reference: &str,
    registry: &RegistryOptions,
    page_size: usize,
) -> Result<Vec<String>> {
    let image = parse_reference(reference)?;
    let client = registry.client()?;
    let auth = registry.auth();
    // Errors name the repository: the tag the reference defaults to (`latest`) is not asked for.
    let repository = format!("{}/{}", image.registry(), image.repository());
    let listing_error = |operation, source| Error::Registry {
        operation,
        reference: repository.clone(),
        source: Box::new(source),
    };
    // The token handshake runs without credentials too: only with credentials is it a login.
    let handshake = if matches!(auth, oci_client::secrets::RegistryAuth::Anonymous) {
        "list the tags of"
    } else {
        "log in to list the tags of"
    };
    client
        .auth(&image, &auth, RegistryOperation::Pull)
        .await
        .map_err(|e| listing_error(handshake, e))?;
    let mut tags: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    loop {
        let page = client
            .list_tags(
                &image,
                &auth,
                Some(page_size),
                tags.last().map(String::as_str),
            )
            .await
            .map_err(|e| listing_error("list the tags of", e))?;
        if append_page(&mut tags, &mut seen, page.tags, page_size) {
            return Ok(tags);
        }
        if tags.len() > MAX_TAGS {
            return Err(Error::RegistryLimitExceeded {
                operation: "list the tags of",
                reference: repository.clone(),
                what: format!("tag count of more than {}", tags.len()),
                limit: MAX_TAGS as u64,
            });
        }
    }
}

/// The most tags read from one repository (pages stop being requested past it): semver
/// references select among tags, and a registry that never stops paging must not hold a worker.
pub const MAX_TAGS: usize = 100_000;

/// Appends the tags of one page not seen yet to `tags`; whether the listing is complete: a
/// short page ends it, and so does a page adding nothing new (a registry ignoring `last` would
/// otherwise be asked forever).
pub(super) fn append_page(
    tags: &mut Vec<String>,
    seen: &mut HashSet<String>,
    page: Vec<String>,
    page_size: usize,
) -> bool {
    let count = page.len();
    let before = tags.len();
    for tag in page {
        if seen.insert(tag.clone()) {
            tags.push(tag);
        }
    }
    count < page_size || tags.len() == before
}
