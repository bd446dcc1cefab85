//! The broker's TLS: Java's `tls.*` keys from `broker.conf` and `tls.config.file`, resolved
//! into the contexts of its ports (listen, VIP, HA) and of its connections to name servers.

use rocketmq_remoting::transport::{ClientTlsContext, ServerTlsContext, TlsMode, TlsServerConfig};

use super::{BrokerConfig, BrokerError};
use crate::ha::HaTls;

/// The broker's TLS contexts, built (files read and checked) before anything starts.
#[derive(Debug)]
pub(crate) struct BrokerTls {
    /// The listen port and the VIP port.
    pub(crate) server: ServerTlsContext,
    /// Connections to the name servers: `tls.enable`, by default on when the broker's own mode
    /// is `enforcing` (as Java's `BrokerStartup`).
    pub(crate) namesrv: Option<ClientTlsContext>,
    /// The HA port and a slave's connection to its master (`haTlsEnable`).
    pub(crate) ha: Option<HaTls>,
}

fn config_error(what: &str, e: rocketmq_remoting::RemotingError) -> BrokerError {
    BrokerError::Config(format!("{what}: {e}"))
}

/// Reads `tls.config.file` and builds every context `cfg` asks for.
pub(crate) fn resolve(cfg: &BrokerConfig) -> Result<BrokerTls, BrokerError> {
    let mut settings = cfg.tls.clone();
    settings
        .load_config_file()
        .map_err(|e| config_error("TLS", e))?;
    let server_cfg = settings.server();
    let server = server_cfg
        .build()
        .map_err(|e| config_error("TLS of the listen port", e))?;
    let namesrv = settings
        .client(server_cfg.mode == TlsMode::Enforcing)
        .map(|c| c.build())
        .transpose()
        .map_err(|e| config_error("TLS towards the name servers (tls.enable)", e))?;
    let ha = if cfg.ha.tls {
        let server = TlsServerConfig {
            mode: TlsMode::Enforcing,
            ..server_cfg
        }
        .build()
        .map_err(|e| config_error("haTlsEnable (the HA port uses tls.server.*)", e))?;
        let client = settings
            .client
            .build()
            .map_err(|e| config_error("haTlsEnable (a slave uses tls.client.*)", e))?;
        Some(HaTls { server, client })
    } else {
        None
    };
    Ok(BrokerTls {
        server,
        namesrv,
        ha,
    })
}
