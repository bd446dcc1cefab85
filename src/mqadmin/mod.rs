//! `mqadmin`: Apache RocketMQ's admin tool over our [`MQAdmin`] API, with its command names and
//! options (`-n`, `-t`, `-g`, `-b`, `-c`, ...), aligned tables by default and `--json` for
//! scripts. It works against our cluster and an Apache 4.x cluster alike.
//!
//! Exit codes: 0 done; 1 the cluster refused or the operation failed (unknown topic or group,
//! permission refused, a broker's error); 2 bad arguments; 3 no name server or broker could be
//! reached.

mod broker;
mod group;
mod message;
mod namesrv;
pub mod output;
mod topic;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::{ClientConfig, ClientError, Credentials};

use output::Output;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "mqadmin",
    version,
    about = "RocketMQ administration (Apache mqadmin's commands and options)",
    after_help = "Exit codes: 0 done, 1 refused or failed, 2 bad arguments, 3 unreachable."
)]
pub struct Cli {
    /// Name server addresses, `;`-separated.
    #[arg(
        short = 'n',
        long = "namesrvAddr",
        env = "NAMESRV_ADDR",
        global = true,
        default_value = "127.0.0.1:9876"
    )]
    pub namesrv: String,
    /// Print JSON instead of tables (for scripts).
    #[arg(long, global = true)]
    pub json: bool,
    /// ACL access key (else `accessKey` of `$ROCKETMQ_HOME/conf/tools.yml`, as Java's tools).
    #[arg(long = "accessKey", env = "ROCKETMQ_ACCESS_KEY", global = true)]
    pub access_key: Option<String>,
    /// ACL secret key (else `secretKey` of `$ROCKETMQ_HOME/conf/tools.yml`).
    #[arg(
        long = "secretKey",
        env = "ROCKETMQ_SECRET_KEY",
        global = true,
        hide_env_values = true
    )]
    pub secret_key: Option<String>,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands, named as Apache's.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create or update a topic on a broker or on every master of a cluster.
    #[command(name = "updateTopic")]
    UpdateTopic(topic::UpdateTopic),
    /// Delete a topic from a cluster's masters and the name servers.
    #[command(name = "deleteTopic")]
    DeleteTopic(topic::DeleteTopic),
    /// List the topics (of one cluster with -c).
    #[command(name = "topicList")]
    TopicList(topic::TopicListCmd),
    /// A topic's route.
    #[command(name = "topicRoute")]
    TopicRoute(topic::TopicArg),
    /// A topic's queues and their offsets.
    #[command(name = "topicStatus")]
    TopicStatus(topic::TopicArg),
    /// The clusters that serve a topic.
    #[command(name = "topicClusterList")]
    TopicClusterList(topic::TopicArg),
    /// Change a topic's permission.
    #[command(name = "updateTopicPerm")]
    UpdateTopicPerm(topic::UpdateTopicPerm),
    /// Create or update a subscription group.
    #[command(name = "updateSubGroup")]
    UpdateSubGroup(group::UpdateSubGroup),
    /// Delete a subscription group.
    #[command(name = "deleteSubGroup")]
    DeleteSubGroup(group::DeleteSubGroup),
    /// A group's consumption progress (lag per queue).
    #[command(name = "consumerProgress")]
    ConsumerProgress(group::GroupArg),
    /// A consumer group's connections and subscriptions.
    #[command(name = "consumerConnection")]
    ConsumerConnection(group::GroupArg),
    /// The members of a consumer group and their running state (-i: one member's whole).
    #[command(name = "consumerStatus")]
    ConsumerStatus(group::ConsumerStatus),
    /// Move a group's offsets of a topic to a time.
    #[command(name = "resetOffsetByTime")]
    ResetOffsetByTime(group::ResetOffsetByTime),
    /// Move a group's offsets of a topic to the end (skip the backlog).
    #[command(name = "skipAccumulatedMessage")]
    SkipAccumulatedMessage(group::SkipAccumulatedMessage),
    /// A subscription group's settings on every broker.
    #[command(name = "getConsumerConfig")]
    GetConsumerConfig(group::GroupArg),
    /// The clusters and their brokers.
    #[command(name = "clusterList")]
    ClusterList(broker::ClusterList),
    /// A broker's runtime statistics.
    #[command(name = "brokerStatus")]
    BrokerStatus(broker::BrokerTarget),
    /// A broker's configuration.
    #[command(name = "getBrokerConfig")]
    GetBrokerConfig(broker::BrokerTarget),
    /// Remove a broker's write permission on the name servers.
    #[command(name = "wipeWritePerm")]
    WipeWritePerm(broker::BrokerName),
    /// Give a broker its write permission back on the name servers.
    #[command(name = "addWritePerm")]
    AddWritePerm(broker::BrokerName),
    /// Export topics and subscription groups.
    #[command(name = "exportMetadata")]
    ExportMetadata(broker::ExportMetadata),
    /// Set a KV config on the name servers.
    #[command(name = "updateKvConfig")]
    UpdateKvConfig(namesrv::UpdateKvConfig),
    /// Delete a KV config from the name servers.
    #[command(name = "deleteKvConfig")]
    DeleteKvConfig(namesrv::DeleteKvConfig),
    /// Get, put or delete a topic's order configuration.
    #[command(name = "updateOrderConf")]
    UpdateOrderConf(namesrv::UpdateOrderConf),
    /// Show messages by offset message id (or unique id with -t).
    #[command(name = "queryMsgById")]
    QueryMsgById(message::QueryMsgById),
    /// Find messages by key.
    #[command(name = "queryMsgByKey")]
    QueryMsgByKey(message::QueryMsgByKey),
    /// Find messages by unique id (the id a send returns).
    #[command(name = "queryMsgByUniqueKey")]
    QueryMsgByUniqueKey(message::QueryMsgByUniqueKey),
    /// A message's trace (its send and each consumption), when tracing is on.
    #[command(name = "queryMsgTraceById")]
    QueryMsgTraceById(message::QueryMsgTraceById),
    /// Send one message.
    #[command(name = "sendMessage")]
    SendMessage(message::SendMessage),
}

/// Why a command failed, and its exit code.
#[derive(Debug)]
pub enum Failure {
    /// Refused or failed (1).
    Failed(String),
    /// Bad arguments (2).
    Usage(String),
    /// Nothing reachable (3).
    Unreachable(String),
}

impl Failure {
    fn code(&self) -> u8 {
        match self {
            Failure::Failed(_) => 1,
            Failure::Usage(_) => 2,
            Failure::Unreachable(_) => 3,
        }
    }

    fn message(&self) -> &str {
        match self {
            Failure::Failed(m) | Failure::Usage(m) | Failure::Unreachable(m) => m,
        }
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        match &e {
            ClientError::NoNameServer(_) => Failure::Unreachable(e.to_string()),
            ClientError::Remoting(r) if r.is_retriable() => Failure::Unreachable(e.to_string()),
            ClientError::Timeout { .. } => Failure::Unreachable(e.to_string()),
            ClientError::Config(m) => Failure::Usage(m.clone()),
            _ => Failure::Failed(e.to_string()),
        }
    }
}

/// A command's result.
pub type CmdResult = Result<Output, Failure>;

/// Runs the command line in `args` (the program name first); prints the result and returns
/// the exit code.
pub async fn run_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let json = cli.json;
    match run(cli).await {
        Ok(out) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&out.to_json()).unwrap_or_default()
                );
            } else {
                print!("{}", out.render_text());
            }
            ExitCode::SUCCESS
        }
        Err(f) => {
            if json {
                println!(
                    "{}",
                    serde_json::json!({ "error": f.message(), "exitCode": f.code() })
                );
            }
            eprintln!("mqadmin: {}", f.message());
            ExitCode::from(f.code())
        }
    }
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> CmdResult {
    let credentials = credentials(&cli)?;
    let admin = MQAdmin::with_config(ClientConfig {
        namesrv_addr: cli
            .namesrv
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect(),
        credentials: credentials.clone(),
        ..ClientConfig::default()
    })?;
    let out = dispatch(&admin, cli.command, credentials).await;
    admin.shutdown();
    out
}

/// The ACL keys: from the command line or the environment, else from Java's
/// `$ROCKETMQ_HOME/conf/tools.yml` (`accessKey: ...`, `secretKey: ...`); none without either.
fn credentials(cli: &Cli) -> Result<Option<Credentials>, Failure> {
    match (&cli.access_key, &cli.secret_key) {
        (Some(a), Some(s)) => return Ok(Some(Credentials::new(a, s))),
        (Some(_), None) | (None, Some(_)) => {
            return Err(Failure::Usage(
                "give both --accessKey and --secretKey".into(),
            ))
        }
        (None, None) => {}
    }
    let Some(home) = std::env::var_os("ROCKETMQ_HOME") else {
        return Ok(None);
    };
    let path = std::path::Path::new(&home).join("conf").join("tools.yml");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    let value = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().trim_matches(['"', '\'']).to_string())
        })
    };
    match (value("accessKey"), value("secretKey")) {
        (Some(a), Some(s)) if !a.is_empty() && !s.is_empty() => Ok(Some(Credentials::new(a, s))),
        _ => Ok(None),
    }
}

async fn dispatch(admin: &MQAdmin, cmd: Command, credentials: Option<Credentials>) -> CmdResult {
    match cmd {
        Command::UpdateTopic(c) => c.run(admin).await,
        Command::DeleteTopic(c) => c.run(admin).await,
        Command::TopicList(c) => c.run(admin).await,
        Command::TopicRoute(c) => topic::topic_route(admin, &c.topic).await,
        Command::TopicStatus(c) => topic::topic_status(admin, &c.topic).await,
        Command::TopicClusterList(c) => topic::topic_cluster_list(admin, &c.topic).await,
        Command::UpdateTopicPerm(c) => c.run(admin).await,
        Command::UpdateSubGroup(c) => c.run(admin).await,
        Command::DeleteSubGroup(c) => c.run(admin).await,
        Command::ConsumerProgress(c) => group::consumer_progress(admin, &c.group).await,
        Command::ConsumerConnection(c) => group::consumer_connection(admin, &c.group).await,
        Command::ConsumerStatus(c) => c.run(admin).await,
        Command::ResetOffsetByTime(c) => c.run(admin).await,
        Command::SkipAccumulatedMessage(c) => c.run(admin).await,
        Command::GetConsumerConfig(c) => group::consumer_config(admin, &c.group).await,
        Command::ClusterList(c) => c.run(admin).await,
        Command::BrokerStatus(c) => broker::broker_status(admin, &c).await,
        Command::GetBrokerConfig(c) => broker::broker_config(admin, &c).await,
        Command::WipeWritePerm(c) => broker::write_perm(admin, &c.broker_name, false).await,
        Command::AddWritePerm(c) => broker::write_perm(admin, &c.broker_name, true).await,
        Command::ExportMetadata(c) => c.run(admin).await,
        Command::UpdateKvConfig(c) => c.run(admin).await,
        Command::DeleteKvConfig(c) => c.run(admin).await,
        Command::UpdateOrderConf(c) => c.run(admin).await,
        Command::QueryMsgById(c) => c.run(admin).await,
        Command::QueryMsgByKey(c) => c.run(admin).await,
        Command::QueryMsgByUniqueKey(c) => c.run(admin).await,
        Command::QueryMsgTraceById(c) => c.run(admin).await,
        Command::SendMessage(c) => c.run(&cli_namesrv(admin), credentials).await,
    }
}

/// The name servers the admin was given (for commands that start a producer).
fn cli_namesrv(admin: &MQAdmin) -> String {
    admin.namesrv_addrs().join(";")
}

/// The brokers a `-b`/`-c` pair names: the one address, or every master of the cluster.
pub(crate) async fn brokers_of(
    admin: &MQAdmin,
    broker: Option<&str>,
    cluster: Option<&str>,
) -> Result<Vec<String>, Failure> {
    match (broker, cluster) {
        (Some(b), _) => Ok(vec![b.to_string()]),
        (None, Some(c)) => {
            let masters = admin.cluster_masters(c).await.map_err(|e| match e {
                // An unknown cluster is an unknown name, not a bad argument.
                ClientError::Config(m) => Failure::Failed(m),
                e => e.into(),
            })?;
            if masters.is_empty() {
                return Err(Failure::Failed(format!(
                    "cluster {c:?} has no master broker"
                )));
            }
            Ok(masters)
        }
        (None, None) => Err(Failure::Usage(
            "give a broker address (-b) or a cluster name (-c)".into(),
        )),
    }
}
