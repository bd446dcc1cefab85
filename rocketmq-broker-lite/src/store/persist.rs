//! JSON files replaced atomically (temporary file, sync, rename, directory sync): consumer
//! offsets, topic configs, subscription groups, delay offsets.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::error::{StoreError, StoreResult};
use super::vfs::Vfs;
use rocketmq_remoting::protocol::json::{self, JsonStyle};

/// Writes `value` as fastjson-style JSON (what a Java broker writes) to `path`, atomically.
///
/// The write syncs the file and its directory. Called from a request handler on a worker of a
/// multi-threaded runtime (creating a topic on send, a retry or dead-letter topic on
/// send-back, an admin update), it runs in `block_in_place`: the worker's other tasks move to
/// another thread instead of waiting for the disk with it.
pub fn save_json<T: Serialize>(vfs: &dyn Vfs, path: &Path, value: &T) -> StoreResult<()> {
    let bytes = json::to_vec(value, JsonStyle::Fastjson)
        .map_err(|e| StoreError::Corrupt(format!("cannot encode {}: {e}", path.display())))?;
    off_the_workers(|| vfs.write_file_atomic(path, &bytes))
        .map_err(|e| StoreError::io("saving a config file", e))
}

/// Runs blocking disk work without holding up a multi-threaded runtime's other tasks.
pub(crate) fn off_the_workers<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Reads `path` (`Ok(None)` if absent). A file that does not parse is an error naming it.
pub fn load_json<T: DeserializeOwned>(vfs: &dyn Vfs, path: &Path) -> StoreResult<Option<T>> {
    if !vfs.exists(path) {
        return Ok(None);
    }
    let bytes = vfs
        .read_file(path)
        .map_err(|e| StoreError::io("reading a config file", e))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StoreError::Corrupt(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::store::simfs::SimFs;

    #[test]
    fn survives_power_cuts_and_reads_java_output() {
        let fs = SimFs::default();
        let p = Path::new("/store/config/consumerOffset.json");
        let mut t: BTreeMap<String, BTreeMap<i32, i64>> = BTreeMap::new();
        t.entry("T@G".into()).or_default().insert(0, 5);
        save_json(&fs, p, &t).unwrap();
        t.entry("T@G".into()).or_default().insert(0, 9);
        save_json(&fs, p, &t).unwrap();
        fs.power_cut(true);
        let back: BTreeMap<String, BTreeMap<i32, i64>> = load_json(&fs, p).unwrap().unwrap();
        assert_eq!(back["T@G"][&0], 9);
        // fastjson's unquoted keys, as a Java broker would have written the file.
        fs.write_file_atomic(p, br#"{"T@G":{0:11,1:12}}"#).unwrap();
        let back: BTreeMap<String, BTreeMap<i32, i64>> = load_json(&fs, p).unwrap().unwrap();
        assert_eq!(back["T@G"][&1], 12);
        fs.write_file_atomic(p, b"{garbage").unwrap();
        let err = load_json::<BTreeMap<String, i32>>(&fs, p).unwrap_err();
        assert!(err.to_string().contains("consumerOffset.json"));
        assert!(
            load_json::<BTreeMap<String, i32>>(&fs, Path::new("/store/none.json"))
                .unwrap()
                .is_none()
        );
    }
}
