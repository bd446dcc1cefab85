//! How Apache mqadmin reads its command lines, so that operators' scripts work unchanged.
//!
//! Java's tool parses with commons-cli 1.2's `PosixParser` and reads the values itself:
//! - a value that starts with `-` but is no option of the command is still a value, so
//!   `resetOffsetByTime ... -s -1` gives the timestamp -1: every option that takes a value
//!   accepts negative numbers here ([`java_command`]);
//! - a long option may be written with one hyphen (`-topic T` as `--topic T`):
//!   [`java_long_options`];
//! - a boolean option's value is read with `Boolean.parseBoolean(value.trim())`: `true` in any
//!   case is true and any other text false ([`java_bool`]).

use std::ffi::OsString;

use clap::{CommandFactory, FromArgMatches};

use super::Cli;

/// Java's `Boolean.parseBoolean(value.trim())`: `true` in any letter case, with spaces around
/// it or not, is true; any other text (`yes`, `1`, `False`, ...) is false. Never an error.
pub(crate) fn java_bool(value: &str) -> Result<bool, std::convert::Infallible> {
    Ok(value.trim().eq_ignore_ascii_case("true"))
}

/// The command line's grammar, with Java's reading of values: every option that takes a value
/// accepts a negative number as its value (commons-cli takes any token that is not one of the
/// command's options as the value of the option before it).
pub fn java_command() -> clap::Command {
    fn negatives(arg: clap::Arg) -> clap::Arg {
        if arg.get_action().takes_values() {
            arg.allow_negative_numbers(true)
        } else {
            arg
        }
    }
    Cli::command()
        .mut_args(negatives)
        .mut_subcommands(|sc| sc.mut_args(negatives))
}

/// `args` (the program name first) with each `-name` after the command's name that names a
/// long option of the command, or a global one, written `--name`, as Java's `PosixParser` reads
/// a token whose whole text after its hyphen is an option's name. Tokens after `--`, and those
/// before the command's name, are left as they are.
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
            return cmd.find_subcommand(token).map(|sub| (i, sub));
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

    #[test]
    fn tlog_time_is_gmt_plus_8() {
        assert_eq!(super::super::ops::gmt8_time(0), "1970-01-01 08:00:00");
        assert_eq!(
            super::super::ops::gmt8_time(1_709_251_199_000),
            "2024-03-01 07:59:59"
        );
    }
}
