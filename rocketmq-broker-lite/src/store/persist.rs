//! JSON files replaced atomically (temporary file, sync, rename, directory sync): consumer
//! offsets, topic configs, subscription groups, delay offsets; each with a `.bak` copy of its
//! previous contents, as Java keeps.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::warn;

use super::error::{StoreError, StoreResult};
use super::vfs::Vfs;
use rocketmq_remoting::protocol::json::{self, JsonStyle};

/// Writes `value` as fastjson-style JSON (what a Java broker writes) to `path`, atomically.
///
/// The previous contents, if any, are first copied to `<path>.bak` (as Java's
/// `MixAll.string2File` does; [`load_json`] falls back to it, and so does a Java broker started
/// on the store later). The write syncs the file and its directory. Called from a request
/// handler on a worker of a multi-threaded runtime (creating a topic on send, a retry or
/// dead-letter topic on send-back, an admin update), it runs in `block_in_place`: the worker's
/// other tasks move to another thread instead of waiting for the disk with it.
pub fn save_json<T: Serialize>(vfs: &dyn Vfs, path: &Path, value: &T) -> StoreResult<()> {
    let bytes = json::to_vec(value, JsonStyle::Fastjson)
        .map_err(|e| StoreError::Corrupt(format!("cannot encode {}: {e}", path.display())))?;
    off_the_workers(|| {
        if vfs.exists(path) {
            let prev = vfs.read_file(path)?;
            // An empty file (one Java's non-atomic write left) is no backup worth keeping.
            if !prev.iter().all(u8::is_ascii_whitespace) {
                vfs.write_file_atomic(&bak_path(path), &prev)?;
            }
        }
        vfs.write_file_atomic(path, &bytes)
    })
    .map_err(|e| StoreError::io("saving a config file", e))
}

/// `<path>.bak`.
fn bak_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".bak");
    PathBuf::from(p)
}

/// Runs blocking disk work without holding up a multi-threaded runtime's other tasks.
pub(crate) fn off_the_workers<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Reads `path`, falling back to `<path>.bak` when the file is missing, empty or unreadable,
/// as Java's `ConfigManager.load`/`loadBak` do (Java's `MixAll.string2File` deletes the file
/// before renaming the new one over it: a crash in between leaves only the backup). `Ok(None)`
/// when neither holds anything. A file that does not parse, with no backup to use, is an error
/// naming it (where Java would start empty), as is a backup that does not parse.
pub fn load_json<T: DeserializeOwned>(vfs: &dyn Vfs, path: &Path) -> StoreResult<Option<T>> {
    let main = read_json(vfs, path);
    if let Ok(Some(v)) = main {
        return Ok(Some(v));
    }
    let bak = bak_path(path);
    match (main, read_json(vfs, &bak)?) {
        (Ok(_), Some(v)) => {
            warn!(file = %path.display(), backup = %bak.display(), "the file is missing or empty: loaded its backup");
            Ok(Some(v))
        }
        (Err(e), Some(v)) => {
            warn!(file = %path.display(), backup = %bak.display(), error = %e, "the file cannot be read: loaded its backup");
            Ok(Some(v))
        }
        (Ok(_), None) => Ok(None),
        (Err(e), None) => Err(e),
    }
}

/// Reads `path` (`Ok(None)` if absent or empty).
fn read_json<T: DeserializeOwned>(vfs: &dyn Vfs, path: &Path) -> StoreResult<Option<T>> {
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
        // Without a backup, an unreadable file is an error naming it.
        let bak = Path::new("/store/config/consumerOffset.json.bak");
        if fs.exists(bak) {
            fs.remove_file(bak).unwrap();
        }
        let err = load_json::<BTreeMap<String, i32>>(&fs, p).unwrap_err();
        assert!(err.to_string().contains("consumerOffset.json"));
        assert!(
            load_json::<BTreeMap<String, i32>>(&fs, Path::new("/store/none.json"))
                .unwrap()
                .is_none()
        );
    }

    type Offsets = BTreeMap<String, BTreeMap<String, BTreeMap<i32, i64>>>;

    /// Java's `ConfigManager.load`: a missing, empty or unparseable file is read from its
    /// `.bak` (which Java's `MixAll.string2File` leaves: it deletes the file before renaming the
    /// new one over it, so a crash in between leaves none).
    #[test]
    fn falls_back_to_the_bak_file_as_java_does() {
        let fs = SimFs::default();
        let p = Path::new("/store/config/consumerOffset.json");
        let bak = Path::new("/store/config/consumerOffset.json.bak");
        // Java-pretty JSON with fastjson's unquoted keys.
        fs.write_file_atomic(
            bak,
            b"{\n\t\"offsetTable\":{\n\t\t\"T@G\":{0:5\n\t\t}\n\t}\n}",
        )
        .unwrap();
        let want = |v: Option<Offsets>| v.unwrap()["offsetTable"]["T@G"][&0];
        // Missing.
        assert_eq!(want(load_json(&fs, p).unwrap()), 5);
        // Empty.
        fs.write_file_atomic(p, b"").unwrap();
        assert_eq!(want(load_json(&fs, p).unwrap()), 5);
        // Unparseable.
        fs.write_file_atomic(p, b"{\"offsetTable\":{\"T@").unwrap();
        assert_eq!(want(load_json(&fs, p).unwrap()), 5);
        // A good file wins over its backup.
        fs.write_file_atomic(p, br#"{"offsetTable":{"T@G":{0:7}}}"#)
            .unwrap();
        assert_eq!(want(load_json(&fs, p).unwrap()), 7);
        // An unreadable backup of a missing file is an error, as Java's `loadBak` fails.
        fs.remove_file(p).unwrap();
        fs.write_file_atomic(bak, b"{garbage").unwrap();
        let err = load_json::<Offsets>(&fs, p).unwrap_err();
        assert!(err.to_string().contains("consumerOffset.json.bak"), "{err}");
    }

    #[test]
    fn saving_keeps_the_previous_file_as_bak() {
        let fs = SimFs::default();
        let p = Path::new("/store/config/topics.json");
        let bak = Path::new("/store/config/topics.json.bak");
        let mut t: BTreeMap<String, i32> = BTreeMap::new();
        t.insert("a".into(), 1);
        save_json(&fs, p, &t).unwrap();
        assert!(!fs.exists(bak), "nothing to back up yet");
        t.insert("b".into(), 2);
        save_json(&fs, p, &t).unwrap();
        let old: BTreeMap<String, i32> = json::from_slice(&fs.read_file(bak).unwrap()).unwrap();
        assert_eq!(old.len(), 1);
        // Both survive a power cut (the backup is written as the file is: durably).
        fs.power_cut(true);
        let old: BTreeMap<String, i32> = json::from_slice(&fs.read_file(bak).unwrap()).unwrap();
        assert_eq!(old.len(), 1);
        let new: BTreeMap<String, i32> = load_json(&fs, p).unwrap().unwrap();
        assert_eq!(new.len(), 2);
    }
}
