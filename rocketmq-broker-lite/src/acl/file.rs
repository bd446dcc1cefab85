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

/// Parses the text of a `plain_acl.yml` into rules; an error says what is wrong.
pub fn parse(yaml: &str) -> Result<PlainAcl, String> {
    let docs = YamlLoader::load_from_str(yaml).map_err(|e| format!("not YAML: {e}"))?;
    let empty = Yaml::Null;
    let doc = docs.first().unwrap_or(&empty);
    if !matches!(doc, Yaml::Hash(_) | Yaml::Null) {
        return Err("the file must hold a map".into());
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
    PlainAcl::new(&global, &configs)
}

/// Reads and parses `path`.
pub fn load(path: &Path) -> Result<PlainAcl, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
