//! Serves an embedded control plane and writes its kubeconfig to the path given as the first
//! argument (default `kubeconfig`), until interrupted.

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "kubeconfig".into());
    let server = capstan_apiserver::ApiServer::start(capstan_apiserver::Config::default()).await?;
    std::fs::write(&path, server.kubeconfig())?;
    println!("serving on {}; kubeconfig in {path}", server.url());
    tokio::signal::ctrl_c().await?;
    server.shutdown().await;
    Ok(())
}
