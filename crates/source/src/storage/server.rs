//! The HTTP file server for stored artifacts.

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

pub(super) fn router(root: PathBuf) -> axum::Router {
    axum::Router::new()
        .route("/{*path}", get(serve))
        .fallback(|| async { not_found() })
        .with_state(Arc::new(root))
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "404 page not found\n").into_response()
}

async fn serve(State(root): State<Arc<PathBuf>>, Path(path): Path<String>) -> Response {
    let mut local = root.as_ref().clone();
    for segment in path.split('/') {
        if !super::valid_segment(segment) {
            return not_found();
        }
        local.push(segment);
    }
    // Only regular files: no directories, no symlinks that could point anywhere. A link
    // `Storage::symlink` made names a file of the same directory: it is served as that file.
    let Ok(mut metadata) = tokio::fs::symlink_metadata(&local).await else {
        return not_found();
    };
    if metadata.file_type().is_symlink() {
        let Ok(target) = tokio::fs::read_link(&local).await else {
            return not_found();
        };
        let Some(target) = target
            .to_str()
            .filter(|t| !t.contains('/') && super::valid_segment(t))
        else {
            return not_found();
        };
        local.set_file_name(target);
        let Ok(resolved) = tokio::fs::symlink_metadata(&local).await else {
            return not_found();
        };
        metadata = resolved;
    }
    if !metadata.is_file() {
        return not_found();
    }
    let Ok(file) = tokio::fs::File::open(&local).await else {
        return not_found();
    };
    // Artifact file names are generated in lower case.
    let content_type = if path.ends_with(".tar.gz")
        || std::path::Path::new(&path)
            .extension()
            .is_some_and(|e| e == "tgz")
    {
        "application/gzip"
    } else {
        "application/octet-stream"
    };
    let body = Body::from_stream(tokio_util::io::ReaderStream::new(file));
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (header::CONTENT_LENGTH, metadata.len().to_string()),
        ],
        body,
    )
        .into_response()
}
