//! Several ACL files, as Apache 4.9.8's `PlainPermissionManager` and `AclFileWatchService`
//! keep them: the default file (`rocketmq.acl.plain.file`, `conf/plain_acl.yml`) and every
//! `*.yml`/`*.yaml` file under the ACL directory (`conf/acl`, searched recursively; its
//! `tools.yml`, the admin tool's own credentials, is not one), each with its own accounts,
//! `globalWhiteRemoteAddresses` and `dataVersion`.
//!
//! Order, as Java's: the directory's files first (here sorted by path, which Java leaves to the
//! file system), then the default file when it is not among them. An access key defined in
//! several files is taken from the first and the others are logged and ignored. The global white
//! lists of all files add up.
//!
//! A reload looks at every file (new, changed by its modification time or size, gone) and
//! re-reads only the changed ones; a file that does not load is logged and the rules it stated
//! before stay in force (a new broken file states nothing), as Java's per-file reload keeps
//! them. At start every file must load.

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use tracing::{info, warn};

use super::file::{self, AclFile, DataVersion};
use super::PlainAcl;

/// Where the ACL files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclPaths {
    /// The default file (new accounts go there; global white addresses by default).
    pub default_file: PathBuf,
    /// The directory searched for more files.
    pub dir: PathBuf,
}

/// `path` made absolute (against the working directory) and without `.`/`..` parts, as Java's
/// `MixAll.dealFilePath` over an absolute path.
pub fn normalize(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn is_acl_name(p: &Path) -> bool {
    p.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("yml") || e.eq_ignore_ascii_case("yaml"))
}

/// The files found by [`AclPaths::list`], and what was passed over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// The ACL files, in order.
    pub files: Vec<PathBuf>,
    /// Entries named like ACL files that are not files (Java reads no data from them).
    pub skipped: Vec<String>,
}

impl AclPaths {
    /// The default file and the directory, made absolute.
    pub fn new(default_file: &Path, dir: &Path) -> Self {
        Self {
            default_file: normalize(default_file),
            dir: normalize(dir),
        }
    }

    /// The admin tool's credentials, never ACL rules: `tools.yml` in the directory (Java's
    /// watcher) and beside it (`$ROCKETMQ_HOME/conf/tools.yml`, Java's loader).
    fn is_tools_file(&self, p: &Path) -> bool {
        p == self.dir.join("tools.yml")
            || self.dir.parent().is_some_and(|d| p == d.join("tools.yml"))
    }

    /// Where `p` comes in the order: the directory's files by path, then the default file.
    fn order_key(&self, p: &Path) -> (bool, PathBuf) {
        (
            p == self.default_file && !p.starts_with(&self.dir),
            p.to_path_buf(),
        )
    }

    /// The ACL files now: those under the directory (an absent directory has none), then the
    /// default file if it exists. An unreadable directory is an error.
    pub fn list(&self) -> Result<Listing, String> {
        let mut listing = Listing::default();
        let mut seen = HashSet::new();
        if self.dir.exists() {
            self.walk(&self.dir, &mut listing, &mut seen)?;
        }
        if self.default_file.is_file() && !listing.files.contains(&self.default_file) {
            listing.files.push(self.default_file.clone());
        }
        listing.files.sort_by_key(|p| self.order_key(p));
        Ok(listing)
    }

    fn walk(
        &self,
        dir: &Path,
        listing: &mut Listing,
        seen: &mut HashSet<PathBuf>,
    ) -> Result<(), String> {
        // A directory reached twice (symbolic links) is not read again.
        let real = std::fs::canonicalize(dir)
            .map_err(|e| format!("cannot read the ACL directory {}: {e}", dir.display()))?;
        if !seen.insert(real) {
            return Ok(());
        }
        let entries = std::fs::read_dir(dir)
            .map_err(|e| format!("cannot read the ACL directory {}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry
                .map_err(|e| format!("cannot read the ACL directory {}: {e}", dir.display()))?;
            let path = entry.path();
            if self.is_tools_file(&path) {
                continue;
            }
            if is_acl_name(&path) {
                // Java takes the name before looking whether it is a directory, reads no data
                // from it and goes on.
                if path.is_file() {
                    listing.files.push(path);
                } else {
                    listing.skipped.push(format!(
                        "{} is named like an ACL file but is not a file; skipped",
                        path.display()
                    ));
                }
            } else if path.is_dir() {
                self.walk(&path, listing, seen)?;
            }
        }
        Ok(())
    }
}

/// What a file's modification time and size were when it was read.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(p: &Path) -> Stamp {
    std::fs::metadata(p)
        .ok()
        .and_then(|m| Some((m.modified().ok()?, m.len())))
}

/// One loaded file.
#[derive(Debug, Clone)]
struct Entry {
    path: PathBuf,
    stamp: Stamp,
    /// `None`: no data (Java skips it, and its version is not listed).
    file: Option<AclFile>,
    /// The file's rules alone.
    rules: PlainAcl,
}

impl Entry {
    fn read(path: &Path) -> Result<Self, String> {
        let stamp = stamp(path);
        let file = file::load_text(path)?;
        let rules = match &file {
            Some(f) => f.rules().map_err(|e| format!("{}: {e}", path.display()))?,
            None => PlainAcl::default(),
        };
        Ok(Self {
            path: path.to_path_buf(),
            stamp,
            file,
            rules,
        })
    }
}

/// What a reload did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reload {
    /// The files re-read, added or dropped.
    pub changed: Vec<PathBuf>,
    /// Why files (or the directory) could not be read; their rules in force stay.
    pub errors: Vec<String>,
}

/// The ACL files loaded, and the rules they state together.
#[derive(Debug, Clone)]
pub struct AclFiles {
    paths: AclPaths,
    entries: Vec<Entry>,
    /// The default file's version as last read (Java's deprecated `dataVersion`).
    default_version: DataVersion,
    /// Notes already logged (a skipped entry, a directory that cannot be read), not repeated
    /// on every look.
    noted: HashSet<String>,
}

impl AclFiles {
    /// Loads every file; any that does not load (or a missing default file, or an unreadable
    /// directory) is an error naming it.
    pub fn load(paths: AclPaths) -> Result<Self, String> {
        if !paths.default_file.is_file() {
            return Err(match std::fs::metadata(&paths.default_file) {
                Err(e) => format!("cannot read {}: {e}", paths.default_file.display()),
                Ok(_) => format!(
                    "cannot read {}: it is not a file",
                    paths.default_file.display()
                ),
            });
        }
        let listing = paths.list()?;
        let mut files = Self {
            paths,
            entries: Vec::new(),
            default_version: DataVersion {
                counter: 0,
                timestamp: file::now_millis(),
            },
            noted: HashSet::new(),
        };
        files.note(&listing.skipped);
        for p in &listing.files {
            files.entries.push(Entry::read(p)?);
        }
        files.track_default_version();
        Ok(files)
    }

    /// Where the files are.
    pub fn paths(&self) -> &AclPaths {
        &self.paths
    }

    fn note(&mut self, notes: &[String]) {
        for n in notes {
            if self.noted.insert(n.clone()) {
                warn!("{n}");
            }
        }
    }

    fn track_default_version(&mut self) {
        if let Some(v) = self.version_of(&self.paths.default_file) {
            self.default_version = v;
        }
    }

    fn version_of(&self, path: &Path) -> Option<DataVersion> {
        self.entries
            .iter()
            .find(|e| e.path == path)
            .and_then(|e| e.file.as_ref())
            .map(|f| f.version)
    }

    /// The files loaded, in order.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.entries.iter().map(|e| e.path.as_path())
    }

    /// The rules of all files together: every global white address; each access key from the
    /// first file defining it (the others are logged, as Java's "The accesssKey {} is repeated
    /// in multiple ACL files").
    pub fn rules(&self) -> PlainAcl {
        let mut acl = PlainAcl::default();
        let mut owner: HashMap<&str, &Path> = HashMap::new();
        for e in &self.entries {
            acl.global_white
                .extend(e.rules.global_white.iter().cloned());
            let mut keys: Vec<&String> = e.rules.accounts.keys().collect();
            keys.sort();
            for k in keys {
                match owner.get(k.as_str()) {
                    Some(first) => warn!(
                        access_key = %k,
                        kept = %first.display(),
                        ignored = %e.path.display(),
                        "the accessKey is repeated in multiple ACL files; the first is kept"
                    ),
                    None => {
                        owner.insert(k, &e.path);
                        acl.accounts.insert(k.clone(), e.rules.accounts[k].clone());
                    }
                }
            }
        }
        acl
    }

    /// The file that holds `access_key` (the first defining it).
    pub fn owner(&self, access_key: &str) -> Option<&Path> {
        self.entries
            .iter()
            .find(|e| e.rules.accounts.contains_key(access_key))
            .map(|e| e.path.as_path())
    }

    /// The default file's `dataVersion` (GET_BROKER_CLUSTER_ACL_INFO's `version`).
    pub fn version(&self) -> DataVersion {
        self.default_version
    }

    /// Each file's `dataVersion`, by path (GET_BROKER_CLUSTER_ACL_INFO's `allAclFileVersion`;
    /// files without data are not listed, as in Java).
    pub fn versions(&self) -> Vec<(&Path, DataVersion)> {
        self.entries
            .iter()
            .filter_map(|e| Some((e.path.as_path(), e.file.as_ref()?.version)))
            .collect()
    }

    /// Looks at every file and re-reads those new or changed; drops those gone.
    pub fn reload(&mut self) -> Reload {
        let mut out = Reload::default();
        let listing = match self.paths.list() {
            Ok(l) => l,
            Err(e) => {
                if self.noted.insert(e.clone()) {
                    out.errors.push(e);
                }
                return out;
            }
        };
        self.noted
            .retain(|n| !n.starts_with("cannot read the ACL directory"));
        self.note(&listing.skipped);
        let mut old: HashMap<PathBuf, Entry> = std::mem::take(&mut self.entries)
            .into_iter()
            .map(|e| (e.path.clone(), e))
            .collect();
        for p in &listing.files {
            let prev = old.remove(p);
            let now = stamp(p);
            if let Some(prev) = prev.as_ref().filter(|e| e.stamp == now) {
                self.entries.push(prev.clone());
                continue;
            }
            match Entry::read(p) {
                Ok(e) => {
                    out.changed.push(p.clone());
                    self.entries.push(e);
                }
                Err(why) => {
                    out.errors.push(why);
                    // The rules it stated before stay; not read again until it changes.
                    let kept = match prev {
                        Some(prev) => Entry { stamp: now, ..prev },
                        None => Entry {
                            path: p.clone(),
                            stamp: now,
                            file: None,
                            rules: PlainAcl::default(),
                        },
                    };
                    self.entries.push(kept);
                }
            }
        }
        out.changed.extend(old.into_keys());
        self.track_default_version();
        out
    }

    /// The file an UPDATE_GLOBAL_WHITE_ADDRS_CONFIG names (`aclFileFullPath`; the default file
    /// when empty): it must be one of the ACL files (Java: it exists, is not a directory and is
    /// under `ROCKETMQ_HOME`).
    pub fn resolve(&self, acl_file_full_path: Option<&str>) -> Result<PathBuf, String> {
        let given = acl_file_full_path.map(str::trim).unwrap_or("");
        let path = if given.is_empty() {
            self.paths.default_file.clone()
        } else {
            normalize(Path::new(given))
        };
        if !path.is_file() {
            return Err(format!(
                "{} does not exist or is a directory",
                path.display()
            ));
        }
        if path == self.paths.default_file || self.paths.list()?.files.contains(&path) {
            Ok(path)
        } else {
            Err(format!(
                "{} is not an ACL file (the default file, or a *.yml/*.yaml file under {})",
                path.display(),
                self.paths.dir.display()
            ))
        }
    }

    /// Changes the file at `path` as the ACL admin requests do: reads it (absent: empty),
    /// applies `change`, checks its rules, counts the change in its `dataVersion`, writes it
    /// atomically and takes it in. Nothing changes on an error.
    pub fn edit(
        &mut self,
        path: &Path,
        change: impl FnOnce(&mut AclFile) -> Result<(), String>,
    ) -> Result<(), String> {
        let path = normalize(path);
        let mut f = if path.exists() {
            file::load_file(&path)?
        } else {
            AclFile::default()
        };
        change(&mut f)?;
        let rules = f.rules()?;
        f.bump();
        file::save(&path, &f)?;
        let entry = Entry {
            stamp: stamp(&path),
            path: path.clone(),
            file: Some(f),
            rules,
        };
        match self.entries.iter_mut().find(|e| e.path == path) {
            Some(e) => *e = entry,
            None => {
                self.entries.push(entry);
                let paths = &self.paths;
                self.entries.sort_by_key(|e| paths.order_key(&e.path));
            }
        }
        self.track_default_version();
        info!(file = %path.display(), "ACL file changed by an admin request");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn account(ak: &str, sk: &str) -> String {
        format!("accounts:\n  - accessKey: {ak}\n    secretKey: \"{sk}\"\n")
    }

    struct Layout {
        _dir: tempfile::TempDir,
        conf: PathBuf,
        paths: AclPaths,
    }

    fn layout() -> Layout {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("conf");
        let paths = AclPaths::new(&conf.join("plain_acl.yml"), &conf.join("acl"));
        write(&paths.default_file, &account("defaultUser", "12345678"));
        Layout {
            _dir: dir,
            conf,
            paths,
        }
    }

    #[test]
    fn files_are_found_recursively_in_javas_order() {
        let l = layout();
        let acl = l.conf.join("acl");
        write(&acl.join("b.yml"), "");
        write(&acl.join("a.yaml"), "");
        write(&acl.join("sub/c.yml"), "");
        write(&acl.join("notes.txt"), "");
        write(&acl.join("tools.yml"), "accessKey: x\n");
        write(&l.conf.join("tools.yml"), "accessKey: x\n");
        std::fs::create_dir_all(acl.join("dir.yml")).unwrap();
        let listing = l.paths.list().unwrap();
        assert_eq!(
            listing.files,
            vec![
                acl.join("a.yaml"),
                acl.join("b.yml"),
                acl.join("sub/c.yml"),
                l.paths.default_file.clone(),
            ]
        );
        assert_eq!(listing.skipped.len(), 1, "{:?}", listing.skipped);
        assert!(listing.skipped[0].contains("dir.yml"));
        // No directory: only the default file.
        std::fs::remove_dir_all(&acl).unwrap();
        assert_eq!(
            l.paths.list().unwrap().files,
            vec![l.paths.default_file.clone()]
        );
    }

    #[test]
    fn accounts_and_white_lists_add_up_and_the_first_key_wins() {
        let l = layout();
        let acl = l.conf.join("acl");
        write(
            &acl.join("a.yml"),
            &format!(
                "globalWhiteRemoteAddresses: [10.1.1.*]\n{}{}",
                account("defaultUser", "fromAfile"),
                account("sharedUser", "secretA1").replace("accounts:\n", "")
            ),
        );
        write(
            &acl.join("b.yml"),
            &format!(
                "globalWhiteRemoteAddresses: [10.2.2.*]\n{}",
                account("sharedUser", "secretB1")
            ),
        );
        write(&acl.join("empty.yml"), "");
        let files = AclFiles::load(l.paths.clone()).unwrap();
        let rules = files.rules();
        assert_eq!(rules.global_white.len(), 2);
        assert_eq!(rules.accounts["sharedUser"].secret_key, "secretA1");
        // The directory's files come before the default file, as in Java.
        assert_eq!(rules.accounts["defaultUser"].secret_key, "fromAfile");
        assert_eq!(files.owner("sharedUser"), Some(acl.join("a.yml").as_path()));
        // Files without data have no version.
        let versions: Vec<_> = files.versions().into_iter().map(|(p, _)| p).collect();
        assert_eq!(versions.len(), 3);
        assert!(!versions.contains(&acl.join("empty.yml").as_path()));
    }

    #[test]
    fn a_broken_file_keeps_its_rules_and_the_others_reload() {
        let l = layout();
        let acl = l.conf.join("acl");
        write(&acl.join("a.yml"), &account("userAAAA", "12345678"));
        let mut files = AclFiles::load(l.paths.clone()).unwrap();
        // Broken at start: refused, naming the file.
        write(&acl.join("bad.yml"), "accounts: [ {accessKey: x");
        let e = AclFiles::load(l.paths.clone()).unwrap_err();
        assert!(e.contains("bad.yml"), "{e}");
        write(&acl.join("a.yml"), "accounts: nope\n");
        write(&l.paths.default_file, &account("otherUser", "12345678"));
        let r = files.reload();
        assert_eq!(r.errors.len(), 2, "{r:?}");
        assert!(r.errors.iter().any(|e| e.contains("a.yml")), "{r:?}");
        assert_eq!(r.changed, vec![l.paths.default_file.clone()]);
        let rules = files.rules();
        assert!(rules.accounts.contains_key("userAAAA"), "kept");
        assert!(rules.accounts.contains_key("otherUser"));
        assert!(!rules.accounts.contains_key("defaultUser"));
        // Unchanged since: not reported again.
        assert_eq!(files.reload(), Reload::default());
        // Gone: its rules go.
        std::fs::remove_file(acl.join("a.yml")).unwrap();
        std::fs::remove_file(acl.join("bad.yml")).unwrap();
        let r = files.reload();
        assert!(r.errors.is_empty(), "{r:?}");
        assert!(!files.rules().accounts.contains_key("userAAAA"));
    }

    #[test]
    fn an_unreadable_directory_is_an_error_not_a_panic() {
        let l = layout();
        let acl = l.conf.join("acl");
        write(&acl.join("x.yml"), &account("dirUser1", "12345678"));
        let mut files = AclFiles::load(l.paths.clone()).unwrap();
        // `conf/acl` becomes a file: it cannot be listed.
        std::fs::remove_dir_all(&acl).unwrap();
        write(&acl, "not a directory");
        let e = AclFiles::load(l.paths.clone()).unwrap_err();
        assert!(e.contains("cannot read the ACL directory"), "{e}");
        let r = files.reload();
        assert_eq!(r.errors.len(), 1, "{r:?}");
        assert!(r.changed.is_empty());
        assert!(files.rules().accounts.contains_key("dirUser1"), "kept");
        assert!(files.reload().errors.is_empty(), "logged once");
        // A directory that forbids reading (not for root, who reads anyway).
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::remove_file(&acl).unwrap();
            let sub = acl.join("locked");
            write(&sub.join("y.yml"), &account("lockedUser", "12345678"));
            assert!(files.reload().errors.is_empty());
            std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o000)).unwrap();
            if std::fs::read_dir(&sub).is_err() {
                let e = AclFiles::load(l.paths.clone()).unwrap_err();
                assert!(e.contains("cannot read the ACL directory"), "{e}");
                assert_eq!(files.reload().errors.len(), 1);
                assert!(files.rules().accounts.contains_key("lockedUser"), "kept");
            }
            std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    #[test]
    fn edits_go_to_the_named_file_and_count_its_version() {
        let l = layout();
        let a = l.conf.join("acl/a.yml");
        write(&a, &account("userAAAA", "12345678"));
        let mut files = AclFiles::load(l.paths.clone()).unwrap();
        files
            .edit(&a, |f| {
                f.global_white = vec!["10.9.9.9".into()];
                Ok(())
            })
            .unwrap();
        assert_eq!(file::load_file(&a).unwrap().version.counter, 1);
        assert_eq!(
            file::load_file(&l.paths.default_file)
                .unwrap()
                .version
                .counter,
            0
        );
        assert_eq!(files.rules().global_white.len(), 1);
        assert_eq!(files.version().counter, 0);
        // A bad change is refused and changes nothing.
        let e = files
            .edit(&a, |f| {
                f.global_white = vec!["nope".into()];
                Ok(())
            })
            .unwrap_err();
        assert!(e.contains("nope") || e.contains("Netaddress"), "{e}");
        assert_eq!(file::load_file(&a).unwrap().version.counter, 1);
        // Which files an admin request may name.
        assert_eq!(files.resolve(None).unwrap(), l.paths.default_file);
        assert_eq!(files.resolve(Some("")).unwrap(), l.paths.default_file);
        let dotted = l.conf.join("acl/../acl/a.yml");
        assert_eq!(files.resolve(Some(dotted.to_str().unwrap())).unwrap(), a);
        for bad in [
            l.conf.join("acl/missing.yml"),
            l.conf.join("acl"),
            l.conf.join("broker.conf"),
        ] {
            write(&l.conf.join("broker.conf"), "x=y\n");
            assert!(
                files.resolve(Some(bad.to_str().unwrap())).is_err(),
                "{bad:?}"
            );
        }
    }
}
