//! The ACL on the request path: a server RPC hook that checks every request against the rules
//! in force (refused: SYSTEM_ERROR with Java's `AclException` remark, nothing processed), and
//! the watcher that re-reads `plain_acl.yml` when it changes.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use rocketmq_remoting::protocol::RemotingCommand;
use rocketmq_remoting::transport::RpcHook;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use super::address::client_ip;
use super::request::AccessRequest;
use super::{file, refusal_remark, PlainAcl};

/// How often the file is looked at (Java's `AclFileWatchService`: 5 s).
pub const WATCH_INTERVAL: Duration = Duration::from_secs(5);

/// The rules in force, replaced whole on reload.
#[derive(Debug, Clone, Default)]
pub struct AclRules(Arc<Rules>);

#[derive(Debug, Default)]
struct Rules {
    acl: RwLock<Arc<PlainAcl>>,
    reloads: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl AclRules {
    /// Rules starting as `acl`.
    pub fn new(acl: PlainAcl) -> Self {
        Self(Arc::new(Rules {
            acl: RwLock::new(Arc::new(acl)),
            ..Rules::default()
        }))
    }

    /// The rules now.
    pub fn current(&self) -> Arc<PlainAcl> {
        self.0.acl.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the rules.
    pub fn replace(&self, acl: PlainAcl) {
        *self.0.acl.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(acl);
        self.0.reloads.fetch_add(1, Ordering::Relaxed);
        *self.0.last_error.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// How many times the file was reloaded.
    pub fn reloads(&self) -> u64 {
        self.0.reloads.load(Ordering::Relaxed)
    }

    /// Why the file's last change was not taken (cleared by the next reload).
    pub fn last_error(&self) -> Option<String> {
        self.0
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn failed(&self, why: String) {
        *self.0.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
    }

    /// Checks a request from `remote` (`ip:port`).
    pub fn check(&self, remote: &str, cmd: &RemotingCommand) -> Result<(), String> {
        let req = AccessRequest::parse(cmd, client_ip(remote)).map_err(|e| refusal_remark(&e))?;
        self.current()
            .validate(&req)
            .map_err(|e| refusal_remark(&e))
    }
}

/// The server hook.
#[derive(Debug, Clone)]
pub struct AclHook(pub AclRules);

impl RpcHook for AclHook {
    fn before_request(&self, remote: &str, request: &mut RemotingCommand) -> Result<(), String> {
        self.0.check(remote, request)
    }

    fn wants_response(&self) -> bool {
        false
    }
}

fn modified(path: &PathBuf) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Re-reads `path` into `rules` whenever its modification time changes, every `interval`,
/// until `stop`. A file that does not load is logged and the rules in force stay.
pub fn spawn_watcher(
    path: PathBuf,
    rules: AclRules,
    interval: Duration,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut seen = modified(&path);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            let now = modified(&path);
            if now == seen {
                continue;
            }
            seen = now;
            let p = path.clone();
            match tokio::task::spawn_blocking(move || file::load(&p)).await {
                Ok(Ok(acl)) => {
                    info!(file = %path.display(), accounts = acl.accounts.len(), "ACL file reloaded");
                    rules.replace(acl);
                }
                Ok(Err(e)) => {
                    error!(error = %e, "the changed ACL file does not load; the rules in force stay");
                    rules.failed(e);
                }
                Err(e) => {
                    error!(error = %e, "ACL reload failed");
                    rules.failed(e.to_string());
                }
            }
        }
    })
}
