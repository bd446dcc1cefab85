//! The ACL on the request path: a server RPC hook that checks every request against the rules
//! in force (refused: SYSTEM_ERROR with Java's `AclException` remark, nothing processed), and
//! the watcher that re-reads the ACL files ([`super::files`]) when they change, appear or go.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rocketmq_remoting::protocol::RemotingCommand;
use rocketmq_remoting::transport::RpcHook;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use super::address::client_ip;
use super::files::AclFiles;
use super::request::AccessRequest;
use super::{refusal_remark, PlainAcl};

/// How often the files are looked at (Java's `AclFileWatchService`: 5 s).
pub const WATCH_INTERVAL: Duration = Duration::from_secs(5);

/// The rules in force, replaced whole on reload, and the files they come from.
#[derive(Debug, Clone, Default)]
pub struct AclRules(Arc<Rules>);

#[derive(Debug, Default)]
struct Rules {
    acl: RwLock<Arc<PlainAcl>>,
    reloads: AtomicU64,
    last_error: Mutex<Option<String>>,
    /// The files (none for rules given directly); locked for a whole reload or edit.
    files: Mutex<Option<AclFiles>>,
}

impl AclRules {
    /// Rules starting as `acl`, from no file.
    pub fn new(acl: PlainAcl) -> Self {
        Self(Arc::new(Rules {
            acl: RwLock::new(Arc::new(acl)),
            ..Rules::default()
        }))
    }

    /// The rules `files` state together, kept up to date with them by [`AclRules::reload`],
    /// [`AclRules::edit`] and [`spawn_watcher`].
    pub fn from_files(files: AclFiles) -> Self {
        Self(Arc::new(Rules {
            acl: RwLock::new(Arc::new(files.rules())),
            files: Mutex::new(Some(files)),
            ..Rules::default()
        }))
    }

    /// Runs `f` over the files alone (one reload or edit at a time) and, when it succeeds,
    /// puts the rules they then state in force at once. An error when the rules come from no
    /// file.
    pub fn edit<R>(&self, f: impl FnOnce(&mut AclFiles) -> Result<R, String>) -> Result<R, String> {
        let mut guard = self.0.files.lock().unwrap_or_else(|p| p.into_inner());
        let Some(files) = guard.as_mut() else {
            return Err("the ACL rules come from no file".into());
        };
        let out = f(files)?;
        self.replace(files.rules());
        Ok(out)
    }

    /// Reads `f`'s view of the files (`None` when the rules come from no file).
    pub fn with_files<R>(&self, f: impl FnOnce(&AclFiles) -> R) -> Option<R> {
        let guard = self.0.files.lock().unwrap_or_else(|p| p.into_inner());
        guard.as_ref().map(f)
    }

    /// Looks at the files once: changed, new and gone files are taken in (a file that does
    /// not load is logged, and the rules it stated stay). Blocking file I/O.
    pub fn reload(&self) {
        let mut guard = self.0.files.lock().unwrap_or_else(|p| p.into_inner());
        let Some(files) = guard.as_mut() else {
            return;
        };
        let r = files.reload();
        if !r.changed.is_empty() {
            let acl = files.rules();
            info!(files = ?r.changed, accounts = acl.accounts.len(), "ACL files reloaded");
            self.replace(acl);
        }
        for e in r.errors {
            error!(error = %e, "an ACL file does not load; the rules it stated stay in force");
            self.failed(e);
        }
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
        // Checked under the read lock, without taking a reference to the rules (a reload
        // waits for the checks in progress).
        let acl = self.0.acl.read().unwrap_or_else(|p| p.into_inner());
        acl.validate(&req).map_err(|e| refusal_remark(&e))
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

/// Looks at the ACL files every `interval` until `stop` ([`AclRules::reload`], as Java's
/// `AclFileWatchService`: changed files are re-read, new and removed ones taken in).
pub fn spawn_watcher(
    rules: AclRules,
    interval: Duration,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            let r = rules.clone();
            if let Err(e) = tokio::task::spawn_blocking(move || r.reload()).await {
                error!(error = %e, "ACL reload failed");
                rules.failed(e.to_string());
            }
        }
    })
}
