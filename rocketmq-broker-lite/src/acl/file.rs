//! `plain_acl.yml` as Apache 4.9.8 writes it: `globalWhiteRemoteAddresses`, `accounts` (each
//! with `accessKey`, `secretKey`, `whiteRemoteAddress`, `admin`, `defaultTopicPerm`,
//! `defaultGroupPerm`, `topicPerms`, `groupPerms`), and `dataVersion`.

use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

use super::{AccountConfig, PlainAcl};

/// A scalar as the text Java's `JSONObject.getString` gives (numbers and booleans too).
fn text(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn texts(y: &Yaml, key: &str) -> Result<Vec<String>, String> {
    match y {
        Yaml::BadValue | Yaml::Null => Ok(Vec::new()),
        Yaml::Array(items) => items
            .iter()
            .map(|i| text(i).ok_or_else(|| format!("`{key}` holds a value that is not text")))
            .collect(),
        _ => Err(format!("`{key}` must be a list")),
    }
}

/// Milliseconds since the epoch now.
pub(crate) fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `dataVersion` of the file (Java's `DataVersion`: bumped by each change made through the
/// ACL admin requests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DataVersion {
    /// Changes made.
    pub counter: i64,
    /// When the last was made (ms since the epoch).
    pub timestamp: i64,
}

/// The contents of a `plain_acl.yml`, as text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclFile {
    /// `globalWhiteRemoteAddresses`.
    pub global_white: Vec<String>,
    /// `accounts`.
    pub accounts: Vec<AccountConfig>,
    /// `dataVersion` (its first element).
    pub version: DataVersion,
}

impl AclFile {
    /// The rules the file states.
    pub fn rules(&self) -> Result<PlainAcl, String> {
        PlainAcl::new(&self.global_white, &self.accounts)
    }

    /// Counts a change (Java's `DataVersion.nextVersion`: counter + 1, timestamp now).
    pub fn bump(&mut self) {
        self.version.counter += 1;
        self.version.timestamp = now_millis();
    }

    /// The file's text (comments are not kept, as Java's writer does not keep them).
    pub fn render(&self) -> String {
        fn q(s: &str) -> String {
            let mut out = String::with_capacity(s.len() + 2);
            out.push('"');
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
        let list = |out: &mut String, indent: &str, key: &str, items: &[String]| {
            out.push_str(&format!("{indent}{key}:"));
            if items.is_empty() {
                out.push_str(" []\n");
            } else {
                out.push('\n');
                for i in items {
                    out.push_str(&format!("{indent}  - {}\n", q(i)));
                }
            }
        };
        let mut out = String::new();
        list(
            &mut out,
            "",
            "globalWhiteRemoteAddresses",
            &self.global_white,
        );
        out.push_str("accounts:");
        if self.accounts.is_empty() {
            out.push_str(" []");
        }
        out.push('\n');
        for a in &self.accounts {
            out.push_str(&format!("  - accessKey: {}\n", q(&a.access_key)));
            out.push_str(&format!("    secretKey: {}\n", q(&a.secret_key)));
            if let Some(w) = &a.white_remote_address {
                out.push_str(&format!("    whiteRemoteAddress: {}\n", q(w)));
            }
            out.push_str(&format!("    admin: {}\n", a.admin));
            if let Some(p) = &a.default_topic_perm {
                out.push_str(&format!("    defaultTopicPerm: {}\n", q(p)));
            }
            if let Some(p) = &a.default_group_perm {
                out.push_str(&format!("    defaultGroupPerm: {}\n", q(p)));
            }
            list(&mut out, "    ", "topicPerms", &a.topic_perms);
            list(&mut out, "    ", "groupPerms", &a.group_perms);
        }
        out.push_str(&format!(
            "dataVersion:\n  - counter: {}\n    timestamp: {}\n",
            self.version.counter, self.version.timestamp
        ));
        out
    }
}

/// Parses the text of a `plain_acl.yml` into rules; an error says what is wrong.
pub fn parse(yaml: &str) -> Result<PlainAcl, String> {
    parse_file(yaml)?.rules()
}

/// Parses the text of a `plain_acl.yml`, without checking its rules (a file without data
/// reads as empty).
pub fn parse_file(yaml: &str) -> Result<AclFile, String> {
    Ok(parse_text(yaml)?.unwrap_or_default())
}

/// Parses the text of an ACL file, without checking its rules; `None` when it holds no data
/// (empty, or an empty map), which Java's `PlainPermissionManager` skips ("No data in file").
/// Without `dataVersion`, the version is counter 0 at the time of reading, as Java's
/// `new DataVersion()`.
pub fn parse_text(yaml: &str) -> Result<Option<AclFile>, String> {
    let docs = YamlLoader::load_from_str(yaml).map_err(|e| format!("not YAML: {e}"))?;
    let empty = Yaml::Null;
    let doc = docs.first().unwrap_or(&empty);
    match doc {
        Yaml::Null => return Ok(None),
        Yaml::Hash(h) if h.is_empty() => return Ok(None),
        Yaml::Hash(_) => {}
        _ => return Err("the file must hold a map".into()),
    }
    let global = texts(
        &doc["globalWhiteRemoteAddresses"],
        "globalWhiteRemoteAddresses",
    )?;
    let accounts = match &doc["accounts"] {
        Yaml::BadValue | Yaml::Null => Vec::new(),
        Yaml::Array(a) => a.clone(),
        _ => return Err("`accounts` must be a list".into()),
    };
    let mut configs = Vec::with_capacity(accounts.len());
    for a in &accounts {
        if !matches!(a, Yaml::Hash(_)) {
            return Err("each of `accounts` must be a map".into());
        }
        configs.push(AccountConfig {
            access_key: text(&a["accessKey"]).unwrap_or_default(),
            secret_key: text(&a["secretKey"]).unwrap_or_default(),
            white_remote_address: text(&a["whiteRemoteAddress"]),
            admin: match &a["admin"] {
                Yaml::Boolean(b) => *b,
                Yaml::String(s) => s.eq_ignore_ascii_case("true"),
                _ => false,
            },
            default_topic_perm: text(&a["defaultTopicPerm"]),
            default_group_perm: text(&a["defaultGroupPerm"]),
            topic_perms: texts(&a["topicPerms"], "topicPerms")?,
            group_perms: texts(&a["groupPerms"], "groupPerms")?,
        });
    }
    let v = match &doc["dataVersion"] {
        Yaml::Array(a) => a.first().cloned().unwrap_or(Yaml::BadValue),
        other => other.clone(),
    };
    let num = |y: &Yaml| match y {
        Yaml::Integer(i) => *i,
        other => text(other).and_then(|t| t.parse().ok()).unwrap_or(0),
    };
    let version = if matches!(v, Yaml::Hash(_)) {
        DataVersion {
            counter: num(&v["counter"]),
            timestamp: num(&v["timestamp"]),
        }
    } else {
        DataVersion {
            counter: 0,
            timestamp: now_millis(),
        }
    };
    Ok(Some(AclFile {
        global_white: global,
        accounts: configs,
        version,
    }))
}

/// Reads and parses `path`.
pub fn load(path: &Path) -> Result<PlainAcl, String> {
    load_file(path)?
        .rules()
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads and parses `path` (an error names the file).
pub fn load_file(path: &Path) -> Result<AclFile, String> {
    Ok(load_text(path)?.unwrap_or_default())
}

/// Reads and parses `path`; `None` when it holds no data (see [`parse_text`]).
pub fn load_text(path: &Path) -> Result<Option<AclFile>, String> {
    if path.is_dir() {
        return Err(format!("cannot read {}: it is a directory", path.display()));
    }
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    parse_text(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Replaces `path` with `file`'s text durably (a temporary file, synced, renamed).
pub fn save(path: &Path, file: &AclFile) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let fail = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    // The file holds secret keys: the replacement keeps the permissions of the file it
    // replaces (an operator's 0600 must not become the umask's 0644), and a new one is 0600.
    let mode = std::fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o7777);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(fail)?;
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(fail)?;
    f.write_all(file.render().as_bytes()).map_err(fail)?;
    f.sync_all().map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(fail)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(fail)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file holds secret keys: saving it keeps the mode it had (the temporary file it is
    /// replaced with used to get the umask's 0644), and a new file is 0600.
    #[test]
    fn saving_keeps_the_files_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let rules = parse_text(JAVA_SAMPLE).unwrap().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let kept = dir.path().join("plain_acl.yml");
        std::fs::write(&kept, JAVA_SAMPLE).unwrap();
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o600)).unwrap();
        save(&kept, &rules).unwrap();
        assert_eq!(mode(&kept), 0o600);
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o640)).unwrap();
        save(&kept, &rules).unwrap();
        assert_eq!(mode(&kept), 0o640);
        let new = dir.path().join("new_acl.yml");
        save(&new, &rules).unwrap();
        assert_eq!(mode(&new), 0o600);
    }

    const JAVA_SAMPLE: &str = r#"
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"#;

    #[test]
    fn javas_sample_file_loads() {
        let acl = parse(JAVA_SAMPLE).unwrap();
        assert_eq!(acl.global_white.len(), 2);
        let a = &acl.accounts["RocketMQ"];
        assert_eq!(a.secret_key, "12345678");
        assert_eq!(a.topic_perms.len(), 3);
        assert!(a.group_perms.contains_key("%RETRY%groupB"));
        assert!(acl.accounts["rocketmq2"].admin);
        assert!(parse("").unwrap().accounts.is_empty());
    }

    #[test]
    fn a_file_written_reads_back_the_same() {
        let mut f = parse_file(JAVA_SAMPLE).unwrap();
        f.accounts[0].secret_key = "with \"quotes\" and \\ # and: colons".into();
        f.global_white.clear();
        f.bump();
        let back = parse_file(&f.render()).unwrap();
        assert_eq!(back, f);
        assert!(back.rules().is_ok());
        assert_eq!(
            parse_file(&AclFile::default().render()).unwrap(),
            AclFile::default()
        );
    }

    #[test]
    fn broken_files_are_refused_with_a_reason() {
        for (bad, why) in [
            ("accounts: [1, 2", "YAML"),
            ("- a\n- b\n", "map"),
            ("accounts: nope\n", "list"),
            (
                "accounts:\n  - accessKey: short\n    secretKey: 12345678\n",
                "longer than 6",
            ),
            ("globalWhiteRemoteAddresses: [300.1.1.1]\n", "Netaddress"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }
}
