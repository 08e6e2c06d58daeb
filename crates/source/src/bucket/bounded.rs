//! An HTTP connector for object_store that bounds what a listing may make us read.
//!
//! object_store reads each page of a listing (S3 `ListObjectsV2`, Azure `List Blobs`) whole
//! before parsing it; an honest server sends at most 1,000 keys a page (a few hundred KiB), a
//! hostile endpoint could send gigabytes. [`BoundedConnector`] wraps reqwest's connector and
//! caps the body of every listing response at [`MAX_LISTING_PAGE_BYTES`], and of every error
//! answer (which object_store also reads whole) at [`MAX_ERROR_BODY_BYTES`], as it streams: past
//! it the read fails (a decode error, which object_store does not retry). Object downloads are
//! left alone; the fetch bounds them by their listed size.

use std::future::Future;
use std::pin::Pin;

use http_body_util::{BodyExt as _, Limited};
use object_store::ClientOptions;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse,
    HttpResponseBody, HttpService, ReqwestConnector,
};

/// The largest listing page read, in bytes (a page of 1,000 long keys is well below 1 MiB).
pub const MAX_LISTING_PAGE_BYTES: usize = 16 << 20;

/// The largest body of an error answer read (object_store reads it whole into the message).
pub const MAX_ERROR_BODY_BYTES: usize = 1 << 20;

/// [`ReqwestConnector`] with listing responses capped at [`MAX_LISTING_PAGE_BYTES`].
#[derive(Debug, Default)]
pub(crate) struct BoundedConnector;

impl HttpConnector for BoundedConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(Bounded {
            inner,
            max: MAX_LISTING_PAGE_BYTES,
        }))
    }
}

#[derive(Debug)]
struct Bounded {
    inner: HttpClient,
    max: usize,
}

/// Whether `request` asks for a listing page (S3 `list-type=2`, Azure `comp=list`).
fn is_listing(request: &HttpRequest) -> bool {
    request.uri().query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| pair.starts_with("list-type=") || pair == "comp=list")
    })
}

impl HttpService for Bounded {
    fn call<'a, 'b>(
        &'a self,
        request: HttpRequest,
    ) -> Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(async move {
            let listing = is_listing(&request);
            let response = self.inner.execute(request).await?;
            // object_store reads the body of an error answer whole: cap it too.
            let max = if !response.status().is_success() {
                MAX_ERROR_BODY_BYTES
            } else if listing {
                self.max
            } else {
                return Ok(response);
            };
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, max).map_err(move |error| {
                HttpError::new(
                    HttpErrorKind::Decode,
                    std::io::Error::other(format!(
                        "listing or error response larger than the limit of {max} bytes ({error})"
                    )),
                )
            });
            Ok(HttpResponse::from_parts(parts, HttpResponseBody::new(body)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uri: &str) -> HttpRequest {
        http::Request::builder()
            .uri(uri)
            .body(object_store::client::HttpRequestBody::empty())
            .unwrap()
    }

    #[test]
    fn listings_are_recognised_by_their_query() {
        assert!(is_listing(&request(
            "http://s3.test/bucket?list-type=2&prefix=a%2F"
        )));
        assert!(is_listing(&request(
            "http://blob.test/container?restype=container&comp=list"
        )));
        assert!(!is_listing(&request("http://s3.test/bucket/apps/a.yaml")));
        assert!(!is_listing(&request(
            "http://s3.test/bucket/list-type=2?x=1"
        )));
    }
}
