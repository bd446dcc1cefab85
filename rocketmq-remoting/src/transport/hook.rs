//! RPC hooks: code run on every request and response, e.g. ACL request signing.

use crate::protocol::RemotingCommand;

/// Called around every request a client sends (and every request a server receives).
///
/// `before_request` may modify the request (add `AccessKey` and `Signature` extFields, say) or
/// refuse it with a reason; `after_response` may inspect or modify the response.
pub trait RpcHook: Send + Sync + 'static {
    /// Before the request is written (client) or processed (server).
    fn before_request(
        &self,
        remote_addr: &str,
        request: &mut RemotingCommand,
    ) -> Result<(), String>;

    /// Whether [`RpcHook::before_request`] reads or changes the request's fields through
    /// `ext_fields` only: the channel then moves fields already encoded as JSON
    /// ([`RemotingCommand::ext_json`]) into the map first (true unless overridden). A hook that
    /// handles `ext_json` itself says false and saves that decoding.
    fn needs_field_map(&self) -> bool {
        true
    }

    /// Whether [`RpcHook::after_response`] does anything: a server keeps a copy of each
    /// request for it only when a hook says so (true unless overridden).
    fn wants_response(&self) -> bool {
        true
    }

    /// After the response arrived (client) or was produced (server).
    fn after_response(
        &self,
        _remote_addr: &str,
        _request: &RemotingCommand,
        _response: &mut RemotingCommand,
    ) -> Result<(), String> {
        Ok(())
    }
}
