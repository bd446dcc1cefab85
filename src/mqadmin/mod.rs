//! `mqadmin`: Apache RocketMQ's admin tool over our [`MQAdmin`] API, with its command names and
//! options (`-n`, `-t`, `-g`, `-b`, `-c`, ...), aligned tables by default and `--json` for
//! scripts. It works against our cluster and an Apache 4.x cluster alike.
//!
//! Exit codes: 0 done; 1 the cluster refused or the operation failed (unknown topic or group,
//! permission refused, a broker's error); 2 bad arguments; 3 no name server or broker could be
//! reached. A change of several brokers or name servers goes on past one that fails; if some
//! failed, it exits 1 and says which were changed ([`Failure::Partial`]) — except
//! resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset and updateTopic's order
//! configuration, which stop at the first failure as Java's (the admin API changes every broker
//! in one call).

mod acl;
pub mod args;
mod broker;
mod export;
mod group;
mod message;
mod monitor;
mod namesrv;
mod ops;
pub mod output;
mod progress;
mod pull;
mod topic;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub(crate) use args::java_bool;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::{ClientConfig, ClientError, Credentials};

use output::Output;

pub(crate) use broker::day_totals;

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
    /// ACL access key to sign with, before the command's name (else `accessKey` of
    /// `$ROCKETMQ_HOME/conf/tools.yml`, which is all Java's tool reads). After the name,
    /// `--accessKey` is the command's own option, as in Java (updateAclConfig's account).
    #[arg(long = "accessKey", env = "ROCKETMQ_ACCESS_KEY")]
    pub access_key: Option<String>,
    /// ACL secret key to sign with, before the command's name (else `secretKey` of
    /// `$ROCKETMQ_HOME/conf/tools.yml`).
    #[arg(
        long = "secretKey",
        env = "ROCKETMQ_SECRET_KEY",
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
    TopicRoute(topic::TopicRoute),
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
    ConsumerProgress(group::ConsumerProgress),
    /// A consumer group's connections and subscriptions.
    #[command(name = "consumerConnection")]
    ConsumerConnection(group::ConsumerConnection),
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
    /// A producer group's connections.
    #[command(name = "producerConnection")]
    ProducerConnection(ops::ProducerConnection),
    /// Every producer connected to a broker, by group.
    #[command(name = "producer")]
    Producer(ops::Producer),
    /// Every group's lag on one broker.
    #[command(name = "brokerConsumeStats")]
    BrokerConsumeStats(ops::BrokerConsumeStats),
    /// Traffic and backlog of every topic and group.
    #[command(name = "statsAll")]
    StatsAll(ops::StatsAll),
    /// Entries of a consume queue.
    #[command(name = "queryCq")]
    QueryCq(ops::QueryCq),
    /// Drop consume queues whose messages are all expired.
    #[command(name = "cleanExpiredCQ")]
    CleanExpiredCq(ops::Housekeeping),
    /// Delete expired commit-log files now.
    #[command(name = "deleteExpiredCommitLog")]
    DeleteExpiredCommitLog(ops::Housekeeping),
    /// Drop consume queues of topics that no longer exist.
    #[command(name = "cleanUnusedTopic")]
    CleanUnusedTopic(ops::Housekeeping),
    /// Change a broker setting at runtime.
    #[command(name = "updateBrokerConfig")]
    UpdateBrokerConfig(ops::UpdateBrokerConfig),
    /// The name servers' configuration.
    #[command(name = "getNamesrvConfig")]
    GetNamesrvConfig,
    /// Change a name-server setting at runtime.
    #[command(name = "updateNamesrvConfig")]
    UpdateNamesrvConfig(ops::UpdateNamesrvConfig),
    /// Copy a group's offsets of a topic to another group.
    #[command(name = "cloneGroupOffset")]
    CloneGroupOffset(ops::CloneGroupOffset),
    /// How the averaging strategy would share a topic's queues among clients.
    #[command(name = "allocateMQ")]
    AllocateMq(ops::AllocateMq),
    /// Send to a broker's own topic and time each send.
    #[command(name = "sendMsgStatus")]
    SendMsgStatus(ops::SendMsgStatus),
    /// Send round trips to every broker.
    #[command(name = "clusterRT")]
    ClusterRt(ops::ClusterRt),
    /// Send messages to a topic's queues in turn and time each send.
    #[command(name = "checkMsgSendRT")]
    CheckMsgSendRt(ops::CheckMsgSendRt),
    /// Report every consumer group's backlog and troubles, round after round, until stopped.
    #[command(name = "startMonitoring")]
    StartMonitoring(monitor::StartMonitoring),
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
    /// Show the message at one offset of a queue.
    #[command(name = "queryMsgByOffset")]
    QueryMsgByOffset(pull::QueryMsgByOffset),
    /// Print a topic's messages (of a time range), queue by queue.
    #[command(name = "printMsg")]
    PrintMsg(pull::PrintMsg),
    /// Print one queue's messages, or count them by tag.
    #[command(name = "printMsgByQueue")]
    PrintMsgByQueue(pull::PrintMsgByQueue),
    /// Read up to -c messages of a topic, a queue or from an offset (nothing is committed).
    #[command(name = "consumeMessage")]
    ConsumeMessage(pull::ConsumeMessage),
    /// Create or update an ACL account.
    #[command(name = "updateAclConfig")]
    UpdateAclConfig(acl::UpdateAclConfig),
    /// Delete an ACL account.
    #[command(name = "deleteAclConfig", alias = "deleteAccessConfig")]
    DeleteAclConfig(acl::DeleteAclConfig),
    /// The ACL file versions of a broker or a cluster.
    #[command(name = "clusterAclConfigVersion")]
    ClusterAclConfigVersion(acl::ClusterAclConfigVersion),
    /// Replace the ACL global white list of addresses.
    #[command(name = "updateGlobalWhiteAddr")]
    UpdateGlobalWhiteAddr(acl::UpdateGlobalWhiteAddr),
    /// Export the main settings of a cluster's brokers (configs.json).
    #[command(name = "exportConfigs")]
    ExportConfigs(export::ExportConfigs),
    /// Export a cluster's runtime figures (metrics.json).
    #[command(name = "exportMetrics")]
    ExportMetrics(export::ExportMetrics),
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
    /// A change of several brokers or name servers that some of them refused or did not
    /// answer (1): what was done (printed on standard output, or with `--json` as `done` in
    /// the error object) and what failed.
    Partial {
        /// One line per broker or name server changed.
        done: Vec<String>,
        /// One line per failure, naming the broker or name server.
        failed: Vec<String>,
    },
    /// A failure whose output (what was done, and with `--json` the failure itself) the
    /// command already printed as it went: only its message goes to standard error.
    Reported(Box<Failure>),
}

impl Failure {
    fn code(&self) -> u8 {
        match self {
            Failure::Failed(_) | Failure::Partial { .. } => 1,
            Failure::Usage(_) => 2,
            Failure::Unreachable(_) => 3,
            Failure::Reported(f) => f.code(),
        }
    }

    fn message(&self) -> String {
        match self {
            Failure::Failed(m) | Failure::Usage(m) | Failure::Unreachable(m) => m.clone(),
            Failure::Partial { done, failed } => format!(
                "{} of {} failed: {}",
                failed.len(),
                done.len() + failed.len(),
                failed.join("; ")
            ),
            Failure::Reported(f) => f.message(),
        }
    }

    /// The standard-output document of a failure with `--json`.
    fn to_json(&self) -> serde_json::Value {
        if let Failure::Reported(f) = self {
            return f.to_json();
        }
        let mut v = serde_json::json!({ "error": self.message(), "exitCode": self.code() });
        if let Failure::Partial { done, failed } = self {
            v["done"] = serde_json::json!(done);
            v["failed"] = serde_json::json!(failed);
        }
        v
    }
}

/// The outcome of one change on each of several brokers (or name servers): `done` lines for
/// those changed, `failed` ones (`target: why`) for the others, with the failure of each
/// kept for the exit code.
#[derive(Debug, Default)]
pub(crate) struct Outcomes {
    done: Vec<String>,
    failed: Vec<(String, Failure)>,
}

impl Outcomes {
    /// Records a change done.
    pub(crate) fn done(&mut self, line: String) {
        self.done.push(line);
    }

    /// Records a change that failed on `target`.
    pub(crate) fn failed(&mut self, target: &str, why: impl Into<Failure>) {
        self.failed.push((target.to_string(), why.into()));
    }

    /// Whether every change so far was done.
    pub(crate) fn all_done(&self) -> bool {
        self.failed.is_empty()
    }

    /// Every change done: the lines (with `more` after them). Otherwise, when nothing was
    /// done and every failure has the same exit code, a failure of that code naming each
    /// target (one broker unreachable stays 3); else [`Failure::Partial`] (1), which lists
    /// what was done.
    pub(crate) fn finish(mut self, more: Vec<String>) -> CmdResult {
        if self.failed.is_empty() {
            self.done.extend(more);
            return Ok(Output::Lines(self.done));
        }
        if self.done.is_empty() && self.failed.len() == 1 {
            return Err(self.failed.remove(0).1);
        }
        let code = self.failed[0].1.code();
        if self.done.is_empty() && self.failed.iter().all(|(_, f)| f.code() == code) {
            let message = self
                .failed
                .iter()
                .map(|(t, f)| format!("{t}: {}", f.message()))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(match code {
                2 => Failure::Usage(message),
                3 => Failure::Unreachable(message),
                _ => Failure::Failed(message),
            });
        }
        Err(Failure::Partial {
            done: self.done,
            failed: self
                .failed
                .iter()
                .map(|(t, f)| format!("{t}: {}", f.message()))
                .collect(),
        })
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

/// Prints `out` as the command's output (with `--json`: its document with the failure's
/// `error`, `exitCode`, `done` and `failed` added when it is an object), then gives `failure`
/// as [`Failure::Reported`]: for a command that read some brokers and not others.
pub(crate) fn print_then_fail(out: &Output, failure: Failure) -> Failure {
    if output::json_mode() {
        let mut doc = out.to_json();
        match (&mut doc, failure.to_json()) {
            (serde_json::Value::Object(o), serde_json::Value::Object(f)) => o.extend(f),
            (_, f) => doc = serde_json::json!({ "result": doc, "error": f }),
        }
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    } else {
        print!("{}", out.render_text());
    }
    Failure::Reported(Box::new(failure))
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
    let cli = match args::parse(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let json = cli.json;
    progress::set_quiet(json);
    output::set_json_mode(json);
    match run(cli).await {
        Ok(Output::Printed) => ExitCode::SUCCESS,
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
            if let Failure::Reported(_) = f {
                // Printed already.
            } else if json {
                println!("{}", f.to_json());
            } else if let Failure::Partial { done, .. } = &f {
                for l in done {
                    println!("{l}");
                }
            }
            eprintln!("mqadmin: {}", f.message());
            ExitCode::from(f.code())
        }
    }
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> CmdResult {
    let credentials = credentials(&cli)?;
    if let Ok(mut c) = CREDENTIALS.lock() {
        c.clone_from(&credentials);
    }
    let admin = MQAdmin::with_config(admin_config(
        cli.namesrv
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect(),
        credentials.clone(),
    ))?;
    let out = dispatch(&admin, cli.command, credentials).await;
    admin.shutdown();
    out
}

/// Java's `DefaultMQAdminExt.timeoutMillis`: how long mqadmin waits for each request.
pub(crate) const ADMIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The keys the command runs with (for the admins of [`each_namesrv`]).
static CREDENTIALS: std::sync::Mutex<Option<Credentials>> = std::sync::Mutex::new(None);

/// The settings of mqadmin's admin client: these name servers and keys, and Java's tool
/// timeout ([`ADMIN_TIMEOUT`]).
pub(crate) fn admin_config(namesrv: Vec<String>, credentials: Option<Credentials>) -> ClientConfig {
    ClientConfig {
        namesrv_addr: namesrv,
        credentials,
        mq_client_api_timeout: ADMIN_TIMEOUT,
        ..ClientConfig::default()
    }
}

/// One admin client per name server of `admin`, each talking to that name server only: for
/// changes of every name server that go on past one that fails. Shut down when dropped.
pub(crate) struct EachNamesrv(Vec<(String, MQAdmin)>);

impl EachNamesrv {
    /// The name servers and their admins.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &MQAdmin)> {
        self.0.iter().map(|(n, a)| (n.as_str(), a))
    }
}

impl Drop for EachNamesrv {
    fn drop(&mut self) {
        for (_, a) in &self.0 {
            a.shutdown();
        }
    }
}

/// [`EachNamesrv`] of `admin`'s name servers.
pub(crate) fn each_namesrv(admin: &MQAdmin) -> Result<EachNamesrv, Failure> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let credentials = CREDENTIALS.lock().ok().and_then(|c| c.clone());
    let mut all = EachNamesrv(Vec::new());
    for ns in admin.namesrv_addrs() {
        let mut config = admin_config(vec![ns.clone()], credentials.clone());
        config.instance_name = format!(
            "mqadmin-ns{}-{}",
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            std::process::id()
        );
        let a = MQAdmin::with_config(config)?;
        all.0.push((ns, a));
    }
    Ok(all)
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
        Command::TopicRoute(c) => topic::topic_route(admin, &c.topic, c.list).await,
        Command::TopicStatus(c) => topic::topic_status(admin, &c.topic).await,
        Command::TopicClusterList(c) => topic::topic_cluster_list(admin, &c.topic).await,
        Command::UpdateTopicPerm(c) => c.run(admin).await,
        Command::UpdateSubGroup(c) => c.run(admin).await,
        Command::DeleteSubGroup(c) => c.run(admin).await,
        Command::ConsumerProgress(c) => group::consumer_progress(admin, &c).await,
        Command::ConsumerConnection(c) => group::consumer_connection(admin, &c).await,
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
        Command::ProducerConnection(c) => c.run(admin).await,
        Command::Producer(c) => c.run(admin).await,
        Command::BrokerConsumeStats(c) => c.run(admin).await,
        Command::StatsAll(c) => c.run(admin).await,
        Command::QueryCq(c) => c.run(admin).await,
        Command::CleanExpiredCq(c) => c.run(admin, ops::Chore::CleanExpiredCq).await,
        Command::DeleteExpiredCommitLog(c) => {
            c.run(admin, ops::Chore::DeleteExpiredCommitLog).await
        }
        Command::CleanUnusedTopic(c) => c.run(admin, ops::Chore::CleanUnusedTopic).await,
        Command::UpdateBrokerConfig(c) => c.run(admin).await,
        Command::GetNamesrvConfig => ops::namesrv_config(admin).await,
        Command::UpdateNamesrvConfig(c) => c.run(admin).await,
        Command::CloneGroupOffset(c) => c.run(admin).await,
        Command::AllocateMq(c) => c.run(admin).await,
        Command::SendMsgStatus(c) => c.run(&cli_namesrv(admin), credentials).await,
        Command::ClusterRt(c) => c.run(admin, &cli_namesrv(admin), credentials).await,
        Command::CheckMsgSendRt(c) => c.run(&cli_namesrv(admin), credentials).await,
        Command::StartMonitoring(c) => c.run(admin, &cli_namesrv(admin), credentials).await,
        Command::UpdateKvConfig(c) => c.run(admin).await,
        Command::DeleteKvConfig(c) => c.run(admin).await,
        Command::UpdateOrderConf(c) => c.run(admin).await,
        Command::QueryMsgById(c) => c.run(admin, &cli_namesrv(admin), credentials).await,
        Command::QueryMsgByKey(c) => c.run(admin).await,
        Command::QueryMsgByUniqueKey(c) => c.run(admin).await,
        Command::QueryMsgTraceById(c) => c.run(admin).await,
        Command::SendMessage(c) => c.run(&cli_namesrv(admin), credentials).await,
        Command::QueryMsgByOffset(c) => c.run(admin).await,
        Command::PrintMsg(c) => c.run(admin).await,
        Command::PrintMsgByQueue(c) => c.run(admin).await,
        Command::ConsumeMessage(c) => c.run(admin).await,
        Command::UpdateAclConfig(c) => c.run(admin).await,
        Command::DeleteAclConfig(c) => c.run(admin).await,
        Command::ClusterAclConfigVersion(c) => c.run(admin).await,
        Command::UpdateGlobalWhiteAddr(c) => c.run(admin).await,
        Command::ExportConfigs(c) => c.run(admin).await,
        Command::ExportMetrics(c) => c.run(admin).await,
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
            let masters = admin.cluster_masters(c).await.map_err(unknown_cluster)?;
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

/// A failure of an admin call given a cluster name: an unknown cluster (which the admin API
/// reports as [`ClientError::Config`]) is an unknown name (1), not a bad argument (2).
pub(crate) fn unknown_cluster(e: ClientError) -> Failure {
    match e {
        ClientError::Config(m) => Failure::Failed(m),
        e => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_waits_as_long_as_javas_tools() {
        let c = admin_config(vec!["127.0.0.1:9876".into()], None);
        assert_eq!(c.mq_client_api_timeout, std::time::Duration::from_secs(5));
        assert_eq!(c.namesrv_addr, ["127.0.0.1:9876"]);
    }
}
