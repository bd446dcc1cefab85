//! Shared pieces of the command-line programs: logging and waiting for a stop signal.

/// The name server's TLS from Java's `tls.*` keys in `props` and the `tls.config.file` they
/// name (`disabled` without them); the error names the key or the file.
pub fn namesrv_tls<'a>(
    props: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<rocketmq_remoting::transport::TlsServerConfig, String> {
    let mut settings = rocketmq_remoting::transport::TlsSettings::default();
    for (k, v) in props {
        settings.set(k, v).map_err(|e| e.to_string())?;
    }
    settings.load_config_file().map_err(|e| e.to_string())?;
    Ok(settings.server())
}

/// Logs to stderr; `RUST_LOG` overrides the `info` default (colours only on a terminal). The
/// programs use [`crate::log_file::init`], which also takes `--log-format` and `--log-dir`.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .try_init();
}

/// Listens for SIGINT and SIGTERM from the moment it is called; the returned future completes
/// on the first. Call it before the program says it is ready: a signal that arrives before
/// anything listens takes its default action (the process dies, no graceful stop).
pub fn stop_signal() -> futures::future::BoxFuture<'static, ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, Signal, SignalKind};
        async fn first(s: Option<Signal>) {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        let (term, int) = (
            signal(SignalKind::terminate()).ok(),
            signal(SignalKind::interrupt()).ok(),
        );
        Box::pin(async move {
            if term.is_none() && int.is_none() {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
            tokio::select! {
                _ = first(term) => {}
                _ = first(int) => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Box::pin(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}
