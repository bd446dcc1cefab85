//! How Apache mqadmin reads its command lines, so that operators' scripts work unchanged.
//!
//! Java's tool parses with commons-cli 1.2's `PosixParser` and reads the values itself:
//! - a value that starts with `-` but is no option of the command is still a value, so
//!   `resetOffsetByTime ... -s -1` gives the timestamp -1: every option that takes a value
//!   accepts negative numbers here ([`java_command`]);
//! - a long option may be written with one hyphen (`-topic T` as `--topic T`):
//!   [`java_long_options`];
//! - a boolean option's value is read with `Boolean.parseBoolean(value.trim())`: `true` in any
//!   case is true and any other text false (`java_bool`);
//! - an option given more than once is accepted and its first value read;
//! - each value loses one leading and one trailing `"` (commons-cli 1.2), then the spaces
//!   around it (the commands' `getOptionValue(..).trim()`, but for the few they read
//!   untrimmed): `java_value`.

use std::any::TypeId;
use std::convert::Infallible;
use std::ffi::{OsStr, OsString};

use clap::builder::{
    EnumValueParser, PossibleValue, RangedI64ValueParser, RangedU64ValueParser, StringValueParser,
    TypedValueParser, ValueParser,
};
use clap::{Arg, ArgAction, CommandFactory, FromArgMatches};

use super::namesrv::OrderMethod;
use super::Cli;

/// Java's `Boolean.parseBoolean(value.trim())`: `true` in any letter case, with spaces around
/// it or not, is true; any other text (`yes`, `1`, `False`, ...) is false. Never an error.
pub(crate) fn java_bool(value: &str) -> Result<bool, Infallible> {
    Ok(java_trim(value).eq_ignore_ascii_case("true"))
}

/// Java's `String.trim()`: characters up to U+0020 dropped at both ends, and no others.
fn java_trim(value: &str) -> &str {
    value.trim_matches(|c: char| c <= ' ')
}

/// An option's value as a Java command reads it: commons-cli 1.2 drops one leading `"` and one
/// trailing `"` (`Util.stripLeadingAndTrailingQuotes`, each on its own), then the command
/// calls `String.trim()` (which drops characters up to U+0020 at both ends, and no others)
/// when `trim`.
pub(crate) fn java_value(raw: &str, trim: bool) -> &str {
    let v = raw.strip_prefix('"').unwrap_or(raw);
    let v = v.strip_suffix('"').unwrap_or(v);
    if trim {
        java_trim(v)
    } else {
        v
    }
}

/// The options whose value Java's command reads without `trim()`, by command and argument id:
/// consumerProgress `-s` (`"true".equalsIgnoreCase(value)`), statsAll `-t` (compared with each
/// topic's name), sendMsgStatus `-s`/`-c` and clusterList `-i` (`Integer.parseInt(value)`,
/// `Long.parseLong(value)`: a space is a `NumberFormatException`).
const UNTRIMMED: &[(&str, &str)] = &[
    ("consumerProgress", "show_client_ip"),
    ("statsAll", "topic"),
    ("sendMsgStatus", "size"),
    ("sendMsgStatus", "count"),
    ("clusterList", "interval"),
];

/// A value parser that hands `inner` the value as Java's command reads it ([`java_value`]).
#[derive(Clone)]
struct JavaValue<P> {
    inner: P,
    trim: bool,
}

impl<P: TypedValueParser> TypedValueParser for JavaValue<P> {
    type Value = P::Value;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<Self::Value, clap::Error> {
        match value.to_str() {
            Some(v) => self
                .inner
                .parse_ref(cmd, arg, OsStr::new(java_value(v, self.trim))),
            None => self.inner.parse_ref(cmd, arg, value),
        }
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        self.inner.possible_values()
    }
}

/// `inner` reading the values as Java's command does ([`java_value`]).
fn java<P: TypedValueParser>(inner: P, trim: bool) -> Option<ValueParser> {
    Some(ValueParser::new(JavaValue { inner, trim }))
}

/// `arg` reading its values as Java's command `name` does: through [`java_value`] (trimmed
/// unless [`UNTRIMMED`]) and, when the option is given more than once, its first value (each
/// occurrence is kept and `getOptionValue` returns the first); a flag may be repeated. A
/// boolean value is read by [`java_bool`], as every boolean of Java's commands.
fn java_arg(name: &str, arg: Arg) -> Arg {
    let named = arg.get_short().is_some() || arg.get_long().is_some();
    if !named || !arg.get_action().takes_values() {
        return arg;
    }
    let trim = !UNTRIMMED.contains(&(name, arg.get_id().as_str()));
    let t = arg.get_value_parser().type_id();
    let parser = if t == TypeId::of::<String>() {
        java(StringValueParser::new(), trim)
    } else if t == TypeId::of::<i32>() {
        java(RangedI64ValueParser::<i32>::new(), trim)
    } else if t == TypeId::of::<i64>() {
        java(RangedI64ValueParser::<i64>::new(), trim)
    } else if t == TypeId::of::<u64>() {
        java(RangedU64ValueParser::<u64>::new(), trim)
    } else if t == TypeId::of::<usize>() {
        java(RangedU64ValueParser::<usize>::new(), trim)
    } else if t == TypeId::of::<bool>() {
        let inner: fn(&str) -> Result<bool, Infallible> = java_bool;
        java(inner, trim)
    } else if t == TypeId::of::<OrderMethod>() {
        java(EnumValueParser::<OrderMethod>::new(), trim)
    } else {
        None
    };
    let arg = match parser {
        Some(p) => arg.value_parser(p),
        None => arg,
    };
    if matches!(arg.get_action(), ArgAction::Set) {
        arg.action(ArgAction::Append)
    } else {
        arg
    }
}

/// The command line's grammar, with Java's reading of values: every option that takes a value
/// accepts a negative number as its value (commons-cli takes any token that is not one of the
/// command's options as the value of the option before it), and values are read as
/// `java_arg` says.
pub fn java_command() -> clap::Command {
    fn negatives(arg: Arg) -> Arg {
        if arg.get_action().takes_values() {
            arg.allow_negative_numbers(true)
        } else {
            arg
        }
    }
    Cli::command()
        .args_override_self(true)
        .mut_args(|a| java_arg("", negatives(a)))
        .mut_subcommands(|sc| {
            let name = sc.get_name().to_string();
            sc.args_override_self(true)
                .mut_args(|a| java_arg(&name, negatives(a)))
        })
}

/// `args` (the program name first) with the command's name in any letter case written as ours
/// is (`updatetopic` is `updateTopic`, as Java matches names), and each `-name` after it that
/// names a long option of the command, or a global one, written `--name`, as Java's
/// `PosixParser` reads a token whose whole text after its hyphen is an option's name. Tokens
/// after `--`, and those before the command's name, are left as they are.
pub fn java_long_options<I, T>(cmd: &clap::Command, args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    // Java's mqadmin takes the command's name as its first argument; ours may follow global
    // options (`-n addr`, `--json`).
    let Some((at, sub)) = find_command(cmd, &args) else {
        return args;
    };
    let longs: Vec<&str> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .chain(sub.get_arguments())
        .flat_map(|a| {
            a.get_long()
                .into_iter()
                .chain(a.get_all_aliases().unwrap_or_default())
        })
        .collect();
    let mut out = Vec::with_capacity(args.len());
    let mut rest = false;
    for (i, a) in args.into_iter().enumerate() {
        if i == at {
            // The command's name as we spell it (Java's matching ignores case).
            out.push(OsString::from(sub.get_name()));
            continue;
        }
        let long = match a.to_str() {
            Some("--") => {
                rest = true;
                None
            }
            Some(s) if !rest && i > at && s.len() > 2 && !s.starts_with("--") => s
                .strip_prefix('-')
                .filter(|name| longs.contains(name))
                .map(|name| OsString::from(format!("--{name}"))),
            _ => None,
        };
        out.push(long.unwrap_or(a));
    }
    out
}

/// The position of the command's name in `args` (the program name first), past the global
/// options before it and their values, and the command.
fn find_command<'a>(
    cmd: &'a clap::Command,
    args: &[OsString],
) -> Option<(usize, &'a clap::Command)> {
    let takes_value = |token: &str| {
        cmd.get_arguments().any(|a| {
            a.get_action().takes_values()
                && (token
                    .strip_prefix("--")
                    .is_some_and(|l| a.get_long() == Some(l))
                    || token
                        .strip_prefix('-')
                        .is_some_and(|s| s.len() == 1 && a.get_short() == s.chars().next()))
        })
    };
    let mut i = 1;
    while let Some(token) = args.get(i).and_then(|a| a.to_str()) {
        if !token.starts_with('-') {
            // Java's `MQAdminStartup.findSubCommand` compares names in upper case.
            return cmd
                .find_subcommand(token)
                .or_else(|| {
                    cmd.get_subcommands().find(|s| {
                        s.get_name().eq_ignore_ascii_case(token)
                            || s.get_all_aliases().any(|a| a.eq_ignore_ascii_case(token))
                    })
                })
                .map(|sub| (i, sub));
        }
        i += if takes_value(token) { 2 } else { 1 };
    }
    None
}

/// Parses `args` (the program name first) as Apache mqadmin would read them: see the module
/// documentation.
pub fn parse<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut cmd = java_command();
    let args = java_long_options(&cmd, args);
    let matches = cmd.try_get_matches_from_mut(args)?;
    Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The matches of `mqadmin <args>` read as Java would, and of its command.
    fn matches(args: &[&str]) -> Result<clap::ArgMatches, clap::Error> {
        let mut cmd = java_command();
        let all = java_long_options(&cmd, std::iter::once("mqadmin").chain(args.iter().copied()));
        cmd.try_get_matches_from_mut(all)
    }

    /// The value of `id` in the matches of `args`' command.
    fn value<T: Clone + Send + Sync + 'static>(args: &[&str], id: &str) -> T {
        let m = matches(args).unwrap_or_else(|e| panic!("{args:?} refused: {e}"));
        let (_, sub) = m.subcommand().expect("a command");
        sub.get_one::<T>(id)
            .unwrap_or_else(|| panic!("no {id} in {args:?}"))
            .clone()
    }

    #[test]
    fn booleans_are_read_as_javas_parse_boolean() {
        for (text, want) in [
            ("true", true),
            ("TRUE", true),
            ("True", true),
            (" tRuE ", true),
            ("false", false),
            ("yes", false),
            ("1", false),
            ("", false),
        ] {
            assert_eq!(java_bool(text), Ok(want), "{text:?}");
        }
        let topic = ["updateTopic", "-c", "C", "-t", "T"];
        let with = |extra: &[&'static str]| [&topic[..], extra].concat();
        assert!(value::<bool>(&with(&["-o", "TRUE"]), "order"));
        assert!(!value::<bool>(&with(&["-o", "yes"]), "order"));
        assert!(!value::<bool>(&with(&[]), "order"));
        assert!(value::<bool>(&with(&["-u", "True"]), "unit"));
        assert!(value::<bool>(&with(&["-s", "TRUE"]), "has_unit_sub"));
        assert!(!value::<bool>(&with(&["-s", "no"]), "has_unit_sub"));
        let group = ["updateSubGroup", "-c", "C", "-g", "G"];
        for (id, flag) in [
            ("consume_enable", "-s"),
            ("consume_from_min_enable", "-m"),
            ("consume_broadcast_enable", "-d"),
            ("notify_consumer_ids_changed", "-a"),
        ] {
            assert!(value::<bool>(&[&group[..], &[flag, "TRUE"]].concat(), id));
            assert!(!value::<bool>(&[&group[..], &[flag, "off"]].concat(), id));
        }
        for (args, id, want) in [
            (
                vec!["deleteSubGroup", "-c", "C", "-g", "G", "-r", "TRUE"],
                "remove_offset",
                true,
            ),
            (
                vec![
                    "resetOffsetByTime",
                    "-g",
                    "G",
                    "-t",
                    "T",
                    "-s",
                    "now",
                    "-f",
                    "FALSE",
                ],
                "force",
                false,
            ),
            (
                vec![
                    "resetOffsetByTime",
                    "-g",
                    "G",
                    "-t",
                    "T",
                    "-s",
                    "now",
                    "-f",
                    "nope",
                ],
                "force",
                false,
            ),
            (
                vec!["skipAccumulatedMessage", "-g", "G", "-t", "T", "-f", "True"],
                "force",
                true,
            ),
            (
                vec!["brokerConsumeStats", "-b", "B", "-o", "TRUE"],
                "order",
                true,
            ),
            (
                vec!["printMsg", "-t", "T", "-d", "FALSE"],
                "print_body",
                false,
            ),
            (
                vec!["printMsg", "-t", "T", "-d", "whatever"],
                "print_body",
                false,
            ),
            (
                vec![
                    "printMsgByQueue",
                    "-t",
                    "T",
                    "-a",
                    "B",
                    "-i",
                    "0",
                    "-p",
                    "TRUE",
                ],
                "print_msg",
                true,
            ),
            (
                vec![
                    "printMsgByQueue",
                    "-t",
                    "T",
                    "-a",
                    "B",
                    "-i",
                    "0",
                    "-d",
                    "TRUE",
                ],
                "print_body",
                true,
            ),
            (
                vec![
                    "printMsgByQueue",
                    "-t",
                    "T",
                    "-a",
                    "B",
                    "-i",
                    "0",
                    "-f",
                    "TRUE",
                ],
                "by_tag",
                true,
            ),
            (
                vec![
                    "updateAclConfig",
                    "-c",
                    "C",
                    "-a",
                    "A",
                    "-s",
                    "S",
                    "-m",
                    "TRUE",
                ],
                "admin",
                true,
            ),
            (
                vec!["sendMessage", "-t", "T", "-p", "B", "-m", "TRUE"],
                "msg_trace_enable",
                true,
            ),
            (vec!["clusterRT", "-p", "TRUE"], "print_as_tlog", true),
            (
                vec!["queryMsgById", "-i", "X", "-s", "TRUE"],
                "resend",
                true,
            ),
        ] {
            assert_eq!(value::<bool>(&args, id), want, "{args:?}");
        }
    }

    #[test]
    fn negative_numbers_are_values() {
        let reset = ["resetOffsetByTime", "-g", "G", "-t", "T", "-s", "-1"];
        assert_eq!(value::<String>(&reset, "timestamp"), "-1");
        let topic = ["updateTopic", "-c", "C", "-t", "T", "-r", "-1", "-w", "-2"];
        assert_eq!(value::<i32>(&topic, "read"), -1);
        assert_eq!(value::<i32>(&topic, "write"), -2);
        let cq = ["queryCq", "-t", "T", "-q", "-1", "-i", "-5", "-c", "-3"];
        assert_eq!(value::<i64>(&cq, "index"), -5);
        assert_eq!(value::<i32>(&cq, "count"), -3);
        let stats = ["brokerConsumeStats", "-b", "B", "-l", "-10"];
        assert_eq!(value::<i64>(&stats, "level"), -10);
        let send = ["sendMessage", "-t", "T", "-p", "x", "-b", "B", "-i", "-1"];
        assert_eq!(value::<i32>(&send, "queue"), -1);
        let by_offset = [
            "queryMsgByOffset",
            "-t",
            "T",
            "-b",
            "B",
            "-i",
            "0",
            "-o",
            "-1",
        ];
        assert_eq!(value::<i64>(&by_offset, "offset"), -1);
        let sub = [
            "updateSubGroup",
            "-c",
            "C",
            "-g",
            "G",
            "-i",
            "-1",
            "-r",
            "-1",
        ];
        assert_eq!(value::<i64>(&sub, "broker_id"), -1);
        assert_eq!(value::<i32>(&sub, "retry_max_times"), -1);
        // An option's name is still an option, as in Java.
        assert!(matches(&["resetOffsetByTime", "-g", "G", "-t", "-s", "1"]).is_err());
    }

    #[test]
    fn long_options_take_one_hyphen_as_in_java() {
        let args = [
            "topicRoute",
            "-topic",
            "T",
            "-list",
            "-namesrvAddr",
            "1.2.3.4:9876",
        ];
        let m = matches(&args).unwrap();
        assert_eq!(m.get_one::<String>("namesrv").unwrap(), "1.2.3.4:9876");
        let (_, sub) = m.subcommand().unwrap();
        assert_eq!(sub.get_one::<String>("topic").unwrap(), "T");
        assert!(sub.get_flag("list"));
        // Aliases too, and Java's names where ours differ.
        let conn = [
            "consumerConnection",
            "-consumerGroup",
            "G",
            "-brokerAddr",
            "B",
        ];
        assert_eq!(value::<String>(&conn, "group"), "G");
        assert_eq!(value::<String>(&conn, "broker"), "B");
        assert!(value::<bool>(
            &["consumerStatus", "-g", "G", "--jstack"],
            "jstack"
        ));
        // A token that is no long option is left alone (`-ofalse` is `-o false`).
        let topic = ["updateTopic", "-c", "C", "-t", "T", "-oTRUE"];
        assert!(value::<bool>(&topic, "order"));
        // Global options may come before the command's name.
        let before = ["-n", "1.2.3.4:9876", "--json", "topicRoute", "-topic", "T"];
        assert_eq!(value::<String>(&before, "topic"), "T");
        // Nothing after `--` is rewritten.
        let out = java_long_options(&java_command(), ["mqadmin", "topicRoute", "--", "-topic"]);
        assert_eq!(out[3], "-topic");
    }

    #[test]
    fn broker_and_cluster_together_as_java_reads_them() {
        // No OptionGroup in Java: both accepted, -b used.
        for args in [
            vec!["updateSubGroup", "-b", "B", "-c", "C", "-g", "G"],
            vec!["deleteSubGroup", "-b", "B", "-c", "C", "-g", "G"],
            vec![
                "updateTopicPerm",
                "-b",
                "B",
                "-c",
                "C",
                "-t",
                "T",
                "-p",
                "6",
            ],
            vec!["brokerStatus", "-b", "B", "-c", "C"],
            vec!["getBrokerConfig", "-b", "B", "-c", "C"],
            vec!["exportMetadata", "-b", "B", "-c", "C"],
            vec!["cleanExpiredCQ", "-b", "B", "-c", "C"],
            vec!["deleteExpiredCommitLog", "-b", "B", "-c", "C"],
            vec!["cleanUnusedTopic", "-b", "B", "-c", "C"],
            vec![
                "updateBrokerConfig",
                "-b",
                "B",
                "-c",
                "C",
                "-k",
                "K",
                "-v",
                "V",
            ],
        ] {
            assert_eq!(value::<String>(&args, "broker"), "B", "{args:?}");
        }
        // Java's OptionGroup makes them exclusive: refused.
        for args in [
            vec!["updateTopic", "-b", "B", "-c", "C", "-t", "T"],
            vec![
                "updateAclConfig",
                "-b",
                "B",
                "-c",
                "C",
                "-a",
                "A",
                "-s",
                "S",
            ],
            vec!["deleteAclConfig", "-b", "B", "-c", "C", "-a", "A"],
            vec!["clusterAclConfigVersion", "-b", "B", "-c", "C"],
            vec!["updateGlobalWhiteAddr", "-b", "B", "-c", "C", "-g", "G"],
        ] {
            assert!(matches(&args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn javas_other_options_are_accepted() {
        let progress = ["consumerProgress", "-g", "G", "-s", "TRUE"];
        assert_eq!(value::<String>(&progress, "show_client_ip"), "TRUE");
        assert_eq!(
            value::<String>(&["consumerStatus", "-g", "G", "-b", "B"], "broker"),
            "B"
        );
        let by_id = [
            "queryMsgById",
            "-i",
            "X",
            "-s",
            "true",
            "-u",
            "U",
            "-g",
            "G",
        ];
        assert_eq!(value::<String>(&by_id, "unit_name"), "U");
        // -g without -d (and -d without -g) is ignored by Java, not refused.
        assert!(matches(&["queryMsgByUniqueKey", "-i", "X", "-t", "T", "-g", "G"]).is_ok());
        assert!(matches(&["queryMsgByUniqueKey", "-i", "X", "-t", "T", "-d", "D"]).is_ok());
        // sendMessage -b without -i: a plain send in Java.
        assert!(matches(&["sendMessage", "-t", "T", "-p", "x", "-b", "B"]).is_ok());
        assert_eq!(
            value::<String>(&["clusterRT", "-m", "room1"], "machine_room"),
            "room1"
        );
        assert!(matches(&["exportMetadata", "-c", "C", "-t", "-g"]).is_ok());
    }

    /// `mqadmin <args>` parsed as [`parse`] does, or the error's text.
    fn cli(args: &[&str]) -> Result<Cli, String> {
        parse(std::iter::once("mqadmin").chain(args.iter().copied())).map_err(|e| e.to_string())
    }

    #[test]
    fn a_command_name_is_matched_in_any_letter_case_as_in_java() {
        assert_eq!(value::<String>(&["TOPICROUTE", "-t", "T"], "topic"), "T");
        assert_eq!(
            value::<String>(&["topicroute", "-topic", "T"], "topic"),
            "T"
        );
        let n = ["-n", "1.1.1.1:9876", "updatetopic", "-c", "C", "-t", "T"];
        assert_eq!(value::<String>(&n, "cluster"), "C");
        // An alias too, and the name is then ours.
        let (name, _) = matches(&["DELETEACCESSCONFIG", "-b", "B", "-a", "A"])
            .unwrap()
            .subcommand()
            .map(|(n, m)| (n.to_string(), m.clone()))
            .unwrap();
        assert_eq!(name, "deleteAclConfig");
        assert!(matches(&["noSuchCommand"]).is_err());
    }

    #[test]
    fn a_repeated_option_is_accepted_and_its_first_value_read_as_in_java() {
        // commons-cli keeps every occurrence and getOptionValue gives the first.
        let route = ["topicRoute", "-t", "A", "-t", "B", "--topic", "C"];
        assert_eq!(value::<String>(&route, "topic"), "A");
        match cli(&route).unwrap().command {
            super::super::Command::TopicRoute(r) => assert_eq!(r.topic, "A"),
            c => panic!("{c:?}"),
        }
        let topic = ["updateTopic", "-c", "C", "-t", "T", "-r", "4", "-r", "5"];
        assert_eq!(value::<i32>(&topic, "read"), 4);
        let order = [
            "updateTopic",
            "-c",
            "C",
            "-t",
            "T",
            "-o",
            "true",
            "-o",
            "false",
        ];
        assert!(value::<bool>(&order, "order"));
        // A flag given twice, and an option of a group (-b) given twice.
        assert!(matches(&["topicRoute", "-t", "T", "-l", "-l"]).is_ok());
        let acl = [
            "updateAclConfig",
            "-b",
            "B1",
            "-b",
            "B2",
            "-a",
            "A",
            "-s",
            "S",
        ];
        assert_eq!(value::<String>(&acl, "broker"), "B1");
        // The global -n too.
        let n = ["topicList", "-n", "1.1.1.1:9876", "-n", "2.2.2.2:9876"];
        assert_eq!(cli(&n).unwrap().namesrv, "1.1.1.1:9876");
        // Still refused: two options of one of Java's OptionGroups.
        assert!(matches(&["updateTopic", "-b", "B", "-c", "C", "-c", "D", "-t", "T"]).is_err());
    }

    #[test]
    fn values_are_trimmed_and_unquoted_as_java_reads_them() {
        let route = ["topicRoute", "-t", " T\t"];
        assert_eq!(value::<String>(&route, "topic"), "T");
        let topic = [
            "updateTopic",
            "-c",
            "C ",
            "-t",
            "T ",
            "-r",
            " 4",
            "-w",
            "2 ",
            "-p",
            " 6 ",
            "-o",
            " true ",
        ];
        assert_eq!(value::<String>(&topic, "cluster"), "C");
        assert_eq!(value::<String>(&topic, "topic"), "T");
        assert_eq!(value::<i32>(&topic, "read"), 4);
        assert_eq!(value::<i32>(&topic, "write"), 2);
        assert_eq!(value::<i32>(&topic, "perm"), 6);
        assert!(value::<bool>(&topic, "order"));
        // i64, u64 and usize values, attached values and `--name=value`.
        let cq = [
            "queryCq",
            "-t",
            "T",
            "-q",
            "1 ",
            "-i",
            " 5",
            "-c3 ",
            "--broker= B ",
        ];
        assert_eq!(value::<i64>(&cq, "index"), 5);
        assert_eq!(value::<i32>(&cq, "count"), 3);
        assert_eq!(value::<String>(&cq, "broker"), "B");
        let stats = ["brokerConsumeStats", "-b", "B", "-t", " 3000 "];
        assert_eq!(value::<u64>(&stats, "timeout_ms"), 3000);
        let rt = ["clusterRT", "-a", " 5 ", "-m", " room "];
        assert_eq!(value::<usize>(&rt, "amount"), 5);
        assert_eq!(value::<String>(&rt, "machine_room"), "room");
        assert!(cli(&["updateOrderConf", "-t", "T", "-m", " get "]).is_ok());
        let ids = ["queryMsgById", "-i", " A, B "];
        let m = matches(&ids).unwrap();
        let (_, sub) = m.subcommand().unwrap();
        let got: Vec<&String> = sub.get_many::<String>("ids").unwrap().collect();
        assert_eq!(got, ["A", "B"]);
        assert_eq!(
            cli(&["-n", " 1.2.3.4:9876 ", "topicList"]).unwrap().namesrv,
            "1.2.3.4:9876"
        );
        // commons-cli 1.2 strips a leading and a trailing `"` from each value first.
        let quoted = ["sendMessage", "-t", "\"T\"", "-p", "\"body", "-k", "K\" "];
        assert_eq!(value::<String>(&quoted, "topic"), "T");
        assert_eq!(value::<String>(&quoted, "body"), "body");
        assert_eq!(value::<String>(&quoted, "keys"), "K\"");
        // The values Java reads untrimmed stay as they are.
        let progress = ["consumerProgress", "-g", "G", "-s", " true"];
        assert_eq!(value::<String>(&progress, "show_client_ip"), " true");
        assert_eq!(value::<String>(&["statsAll", "-t", "T "], "topic"), "T ");
        assert!(matches(&["sendMsgStatus", "-b", "B", "-s", " 10"]).is_err());
        assert!(matches(&["sendMsgStatus", "-b", "B", "-c", "10 "]).is_err());
        assert!(matches(&["clusterList", "-i", " 1"]).is_err());
    }

    #[test]
    fn java_value_strips_quotes_then_trims_as_java() {
        for (raw, want) in [
            ("T", "T"),
            (" T ", "T"),
            ("\tT\n", "T"),
            ("\"T\"", "T"),
            ("\"T", "T"),
            ("T\"", "T"),
            ("\" T \"", "T"),
            (" \"T\" ", "\"T\""),
            ("\"", ""),
            ("\"\"", ""),
            // Java's trim stops at characters above U+0020.
            ("\u{a0}T\u{a0}", "\u{a0}T\u{a0}"),
        ] {
            assert_eq!(java_value(raw, true), want, "{raw:?}");
        }
        assert_eq!(java_value(" \"T \"", false), " \"T ");
    }

    #[test]
    fn every_value_is_read_by_javas_rules() {
        use std::any::TypeId;
        let cmd = java_command();
        let known = [
            TypeId::of::<String>(),
            TypeId::of::<i32>(),
            TypeId::of::<i64>(),
            TypeId::of::<u64>(),
            TypeId::of::<usize>(),
            TypeId::of::<bool>(),
            TypeId::of::<super::super::namesrv::OrderMethod>(),
        ];
        for sub in cmd.get_subcommands().chain(std::iter::once(&cmd)) {
            for a in sub.get_arguments() {
                if a.get_action().takes_values() {
                    let t = a.get_value_parser().type_id();
                    assert!(
                        known.iter().any(|k| t == *k),
                        "{} {}: {t:?} is read without Java's rules",
                        sub.get_name(),
                        a.get_id()
                    );
                }
            }
        }
        for (name, id) in UNTRIMMED {
            let sub = cmd.find_subcommand(name).expect(name);
            assert!(sub.get_arguments().any(|a| a.get_id() == id), "{name} {id}");
        }
    }

    #[test]
    fn acl_commands_take_javas_long_option_names() {
        let update = [
            "updateAclConfig",
            "--clusterName",
            "C",
            "--accessKey",
            "newUser01",
            "--secretKey",
            "newSecret01",
            "--whiteRemoteAddress",
            "192.168.0.*",
            "--defaultTopicPerm",
            "DENY",
            "--defaultGroupPerm",
            "SUB",
            "--topicPerms",
            "T=PUB",
            "--groupPerms",
            "G=SUB",
            "--admin",
            "true",
        ];
        assert_eq!(value::<String>(&update, "account_access_key"), "newUser01");
        assert_eq!(
            value::<String>(&update, "account_secret_key"),
            "newSecret01"
        );
        assert_eq!(
            value::<String>(&update, "white_remote_address"),
            "192.168.0.*"
        );
        assert!(value::<bool>(&update, "admin"));
        // The one-hyphen spelling, as PosixParser reads it.
        let one = [
            "updateAclConfig",
            "-b",
            "B",
            "-accessKey",
            "A",
            "-secretKey",
            "S",
        ];
        assert_eq!(value::<String>(&one, "account_access_key"), "A");
        assert_eq!(value::<String>(&one, "account_secret_key"), "S");
        for name in ["deleteAclConfig", "deleteAccessConfig"] {
            let delete = [name, "--brokerAddr", "B", "--accessKey", "A"];
            assert_eq!(value::<String>(&delete, "account_access_key"), "A");
        }
        // Java's required options: -a and -s, -g.
        assert!(matches(&["updateAclConfig", "-b", "B", "-a", "A"]).is_err());
        assert!(matches(&["updateAclConfig", "-b", "B", "-s", "S"]).is_err());
        assert!(matches(&["deleteAclConfig", "-b", "B"]).is_err());
        assert!(matches(&["updateGlobalWhiteAddr", "-b", "B"]).is_err());
        let white = [
            "updateGlobalWhiteAddr",
            "-b",
            "B",
            "--globalWhiteRemoteAddresses",
            "10.0.0.*",
            "--aclFileFullPath",
            "/x.yml",
        ];
        assert_eq!(value::<String>(&white, "addresses"), "10.0.0.*");
        assert_eq!(value::<String>(&white, "acl_file"), "/x.yml");
        // The keys mqadmin signs with (not Java's: it reads conf/tools.yml only) go before
        // the command's name.
        let signed = [
            "--accessKey",
            "ops",
            "--secretKey",
            "opsSecret",
            "updateAclConfig",
            "-b",
            "B",
            "--accessKey",
            "A",
            "--secretKey",
            "S",
        ];
        let keys = cli(&signed).unwrap();
        assert_eq!(keys.access_key.as_deref(), Some("ops"));
        assert_eq!(keys.secret_key.as_deref(), Some("opsSecret"));
        assert_eq!(value::<String>(&signed, "account_access_key"), "A");
        assert_eq!(value::<String>(&signed, "account_secret_key"), "S");
    }

    #[test]
    fn tlog_time_is_gmt_plus_8() {
        assert_eq!(super::super::ops::gmt8_time(0), "1970-01-01 08:00:00");
        assert_eq!(
            super::super::ops::gmt8_time(1_709_251_199_000),
            "2024-03-01 07:59:59"
        );
    }
}
