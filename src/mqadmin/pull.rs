//! Commands that read messages by pulling them as Java's tools do (group `TOOLS_CONSUMER`
//! unless told otherwise; nothing is committed): queryMsgByOffset, printMsg, printMsgByQueue,
//! consumeMessage.

use std::collections::BTreeMap;

use clap::Args;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::{MessageExt, MessageQueue, PullStatus};

use super::group::parse_timestamp;
use super::message::describe;
use super::output::{Output, Table};
use super::topic::{format_time, no_topic};
use super::{CmdResult, Failure};

/// Messages asked for per pull (Java's tools ask for 32).
const PULL_BATCH: i64 = 32;

/// Java's name of a pull status.
fn status_name(s: PullStatus) -> &'static str {
    match s {
        PullStatus::Found => "FOUND",
        PullStatus::NoNewMsg => "NO_NEW_MSG",
        PullStatus::NoMatchedMsg => "NO_MATCHED_MSG",
        PullStatus::OffsetIllegal => "OFFSET_ILLEGAL",
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A `-b`/`-e`-style time: milliseconds, `yyyy-MM-dd#HH:mm:ss:SSS` (local time) or `now`.
fn time_arg(s: Option<&str>) -> Result<Option<i64>, Failure> {
    s.map(|s| parse_timestamp(s.trim()).map(|t| if t == -1 { now_ms() } else { t }))
        .transpose()
}

/// Only UTF-8 bodies are shown as text (Java's `-c charsetName`).
fn check_charset(c: &str) -> Result<(), Failure> {
    if matches!(c.to_ascii_uppercase().as_str(), "UTF-8" | "UTF8") {
        Ok(())
    } else {
        Err(Failure::Usage(format!(
            "charset {c:?} is not supported: bodies are shown as UTF-8"
        )))
    }
}

/// The table of messages read (with their bodies when `body`).
fn message_table(body: bool) -> Table {
    let mut cols = vec![
        "Broker Name",
        "QID",
        "Offset",
        "MsgId",
        "Tags",
        "Keys",
        "Store Timestamp",
        "Body Size",
    ];
    if body {
        cols.push("Body");
    }
    Table::new(&cols)
}

fn message_row(m: &MessageExt, body: bool) -> Vec<String> {
    let mut row = vec![
        m.broker_name.clone(),
        m.queue_id.to_string(),
        m.queue_offset.to_string(),
        m.msg_id.clone(),
        m.message.tags().unwrap_or_default().to_string(),
        m.message.keys_str().unwrap_or_default().to_string(),
        format_time(m.store_timestamp),
        m.message.body.len().to_string(),
    ];
    if body {
        row.push(String::from_utf8_lossy(&m.message.body).into_owned());
    }
    row
}

/// The table of the queues read.
fn queue_table() -> Table {
    Table::new(&[
        "Broker Name",
        "QID",
        "Min Offset",
        "Max Offset",
        "Messages",
        "Status",
    ])
}

/// What to read of one queue.
struct Span<'a> {
    /// The group pulled as (`TOOLS_CONSUMER` when `None`).
    group: Option<&'a str>,
    /// Tag expression.
    expression: &'a str,
    /// Earliest store time kept (ms).
    begin: Option<i64>,
    /// Latest store time kept (ms): reading stops at the first message stored later.
    end: Option<i64>,
}

/// What reading one queue gave.
struct Read {
    /// The first offset read.
    from: i64,
    /// The offset reading stopped before.
    to: i64,
    /// Messages kept.
    messages: Vec<MessageExt>,
    /// Why reading stopped (a pull status, or `LIMIT`/`END_TIME`/`END_OFFSET`).
    status: &'static str,
}

/// Reads `mq` from `from` (its min offset, or the offset stored at `span.begin` when `None`)
/// up to its max offset, keeping at most `limit` messages that match the span.
async fn read_queue(
    admin: &MQAdmin,
    mq: &MessageQueue,
    span: &Span<'_>,
    from: Option<i64>,
    limit: usize,
) -> Result<Read, Failure> {
    let lookup = admin.lookup();
    let max = lookup.max_offset(mq).await?;
    let mut offset = match (from, span.begin) {
        (Some(o), _) => o,
        (None, Some(t)) => lookup.search_offset(mq, t).await?,
        (None, None) => lookup.min_offset(mq).await?,
    };
    let start = offset;
    let mut messages = Vec::new();
    let mut status = "END_OFFSET";
    'pull: while offset < max {
        if messages.len() >= limit {
            status = "LIMIT";
            break;
        }
        let want = (max - offset).clamp(1, PULL_BATCH) as i32;
        let r = match span.group {
            Some(g) => admin.pull_as(g, mq, span.expression, offset, want).await?,
            None => admin.pull(mq, span.expression, offset, want).await?,
        };
        match r.status {
            PullStatus::Found => {
                for m in r.messages {
                    if span.end.is_some_and(|e| m.store_timestamp > e) {
                        status = "END_TIME";
                        offset = m.queue_offset;
                        break 'pull;
                    }
                    if span.begin.is_some_and(|b| m.store_timestamp < b) {
                        continue;
                    }
                    if messages.len() >= limit {
                        status = "LIMIT";
                        offset = m.queue_offset;
                        break 'pull;
                    }
                    messages.push(m);
                }
            }
            PullStatus::NoMatchedMsg => {}
            s @ (PullStatus::NoNewMsg | PullStatus::OffsetIllegal) => {
                status = status_name(s);
                break;
            }
        }
        if r.next_begin_offset <= offset {
            // The broker did not move on: stop rather than loop.
            status = status_name(r.status);
            break;
        }
        offset = r.next_begin_offset;
    }
    Ok(Read {
        from: start,
        to: offset.min(max).max(start),
        messages,
        status,
    })
}

/// The queue `queue_id` of broker `broker` of `topic`, once the route shows that the broker
/// serves the topic.
async fn queue_of(
    admin: &MQAdmin,
    topic: &str,
    broker: &str,
    queue_id: i32,
) -> Result<MessageQueue, Failure> {
    let queues = admin
        .subscribe_queues(topic)
        .await
        .map_err(no_topic(topic))?;
    if !queues.iter().any(|q| q.broker_name == broker) {
        return Err(Failure::Failed(format!(
            "broker {broker:?} does not serve topic {topic:?}"
        )));
    }
    if queue_id < 0 {
        return Err(Failure::Usage(format!("bad queue id {queue_id}")));
    }
    Ok(MessageQueue::new(topic, broker, queue_id))
}

/// queryMsgByOffset: the message at one offset of a queue.
#[derive(Debug, Args)]
pub struct QueryMsgByOffset {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Broker name.
    #[arg(short = 'b', long = "brokerName")]
    broker: String,
    /// Queue id.
    #[arg(short = 'i', long = "queueId")]
    queue_id: i32,
    /// Queue offset.
    #[arg(short = 'o', long = "offset")]
    offset: i64,
}

impl QueryMsgByOffset {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let mq = queue_of(admin, &self.topic, &self.broker, self.queue_id).await?;
        let r = admin.pull(&mq, "*", self.offset, 1).await?;
        match r.messages.first() {
            Some(m) if r.status == PullStatus::Found => Ok(describe(m)),
            _ => Err(Failure::Failed(format!(
                "no message at offset {} of {mq} ({}; the queue holds offsets {}..{})",
                self.offset,
                status_name(r.status),
                r.min_offset,
                r.max_offset
            ))),
        }
    }
}

/// printMsg: every message of a topic (of a time range), queue by queue.
#[derive(Debug, Args)]
pub struct PrintMsg {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Charset of the bodies (UTF-8 only).
    #[arg(short = 'c', long = "charsetName", default_value = "UTF-8")]
    charset: String,
    /// Tag expression (`*`, or tags joined by `||`).
    #[arg(short = 's', long = "subExpression", default_value = "*")]
    expression: String,
    /// Earliest store time: ms, or yyyy-MM-dd#HH:mm:ss:SSS (local time).
    #[arg(short = 'b', long = "beginTimestamp")]
    begin: Option<String>,
    /// Latest store time: ms, or yyyy-MM-dd#HH:mm:ss:SSS (local time).
    #[arg(short = 'e', long = "endTimestamp")]
    end: Option<String>,
    /// Print the bodies (true|false).
    #[arg(short = 'd', long = "printBody", default_value = "true", value_parser = clap::value_parser!(bool), action = clap::ArgAction::Set)]
    print_body: bool,
}

impl PrintMsg {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        check_charset(&self.charset)?;
        let span = Span {
            group: None,
            expression: &self.expression,
            begin: time_arg(self.begin.as_deref())?,
            end: time_arg(self.end.as_deref())?,
        };
        let queues = admin
            .subscribe_queues(&self.topic)
            .await
            .map_err(no_topic(&self.topic))?;
        let mut qt = queue_table();
        let mut mt = message_table(self.print_body);
        let bar = super::progress::bar(queues.len(), "reading queues");
        for mq in &queues {
            bar.inc(1);
            let r = read_queue(admin, mq, &span, None, usize::MAX).await?;
            qt.row(vec![
                mq.broker_name.to_string(),
                mq.queue_id.to_string(),
                r.from.to_string(),
                r.to.to_string(),
                r.messages.len().to_string(),
                r.status.to_string(),
            ]);
            for m in &r.messages {
                mt.row(message_row(m, self.print_body));
            }
        }
        Ok(Output::Sections(vec![
            ("Queues".into(), qt),
            ("Messages".into(), mt),
        ]))
    }
}

/// printMsgByQueue: the messages of one queue, optionally counted by tag.
#[derive(Debug, Args)]
pub struct PrintMsgByQueue {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Broker name.
    #[arg(short = 'a', long = "brokerName")]
    broker: String,
    /// Queue id.
    #[arg(short = 'i', long = "queueId")]
    queue_id: i32,
    /// Charset of the bodies (UTF-8 only).
    #[arg(short = 'c', long = "charsetName", default_value = "UTF-8")]
    charset: String,
    /// Tag expression (`*`, or tags joined by `||`).
    #[arg(short = 's', long = "subExpression", default_value = "*")]
    expression: String,
    /// Earliest store time: ms, or yyyy-MM-dd#HH:mm:ss:SSS (local time).
    #[arg(short = 'b', long = "beginTimestamp")]
    begin: Option<String>,
    /// Latest store time: ms, or yyyy-MM-dd#HH:mm:ss:SSS (local time).
    #[arg(short = 'e', long = "endTimestamp")]
    end: Option<String>,
    /// List the messages (true|false).
    #[arg(short = 'p', long = "printMsg", default_value = "false", value_parser = clap::value_parser!(bool), action = clap::ArgAction::Set)]
    print_msg: bool,
    /// With -p: print the bodies too (true|false).
    #[arg(short = 'd', long = "printBody", default_value = "false", value_parser = clap::value_parser!(bool), action = clap::ArgAction::Set)]
    print_body: bool,
    /// Count the messages by tag (true|false).
    #[arg(short = 'f', long = "calculate", default_value = "false", value_parser = clap::value_parser!(bool), action = clap::ArgAction::Set)]
    by_tag: bool,
}

impl PrintMsgByQueue {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        check_charset(&self.charset)?;
        let mq = queue_of(admin, &self.topic, &self.broker, self.queue_id).await?;
        let span = Span {
            group: None,
            expression: &self.expression,
            begin: time_arg(self.begin.as_deref())?,
            end: time_arg(self.end.as_deref())?,
        };
        let r = read_queue(admin, &mq, &span, None, usize::MAX).await?;
        let mut qt = queue_table();
        qt.row(vec![
            mq.broker_name.to_string(),
            mq.queue_id.to_string(),
            r.from.to_string(),
            r.to.to_string(),
            r.messages.len().to_string(),
            r.status.to_string(),
        ]);
        let mut sections = vec![("Queue".to_string(), qt)];
        if self.print_msg {
            let mut mt = message_table(self.print_body);
            for m in &r.messages {
                mt.row(message_row(m, self.print_body));
            }
            sections.push(("Messages".into(), mt));
        }
        if self.by_tag {
            sections.push(("Tags".into(), tag_counts(&r.messages)));
        }
        Ok(Output::Sections(sections))
    }
}

/// Messages per tag, most first (Java's `-f`: messages without a tag are not counted).
fn tag_counts(msgs: &[MessageExt]) -> Table {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for m in msgs {
        if let Some(t) = m.message.tags().filter(|t| !t.trim().is_empty()) {
            *counts.entry(t).or_default() += 1;
        }
    }
    let mut sorted: Vec<(&str, u64)> = counts.into_iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut t = Table::new(&["Tag", "Count"]);
    for (tag, n) in sorted {
        t.row(vec![tag.to_string(), n.to_string()]);
    }
    t
}

/// consumeMessage: read (and print) up to -c messages of a topic, of one broker, one queue or
/// from one offset; nothing is committed.
#[derive(Debug, Args)]
pub struct ConsumeMessage {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Broker name (alone: its queues only).
    #[arg(short = 'b', long = "brokerName")]
    broker: Option<String>,
    /// Queue id (needs -b).
    #[arg(short = 'i', long = "queueId")]
    queue_id: Option<i32>,
    /// Queue offset to start from (needs -i).
    #[arg(short = 'o', long = "offset")]
    offset: Option<i64>,
    /// Consumer group to pull as (default `TOOLS_CONSUMER`).
    #[arg(short = 'g', long = "consumerGroup")]
    group: Option<String>,
    /// Earliest store time: ms, or yyyy-MM-dd#HH:mm:ss:SSS (local time).
    #[arg(short = 's', long = "beginTimestamp")]
    begin: Option<String>,
    /// Latest store time: ms, or yyyy-MM-dd#HH:mm:ss:SSS (local time).
    #[arg(short = 'e', long = "endTimestamp")]
    end: Option<String>,
    /// How many messages at most.
    #[arg(
        short = 'c',
        long = "MessageNumber",
        default_value_t = 128,
        allow_negative_numbers = true
    )]
    count: i64,
}

impl ConsumeMessage {
    /// Java's checks, in Java's order and words.
    fn validate(&self) -> Result<(Option<i64>, Option<i64>), Failure> {
        if self.count <= 0 {
            return Err(Failure::Usage(
                "Please input a positive messageNumber!".into(),
            ));
        }
        if self.queue_id.is_some() && self.broker.is_none() {
            return Err(Failure::Usage(
                "Please set the brokerName before queueId!".into(),
            ));
        }
        if self.offset.is_some() && self.queue_id.is_none() {
            return Err(Failure::Usage("Please set queueId before offset!".into()));
        }
        let now = now_ms();
        let begin = time_arg(self.begin.as_deref())?;
        if begin.is_some_and(|b| b < 0 || b > now) {
            return Err(Failure::Usage(
                "Please set the beginTimestamp before now!".into(),
            ));
        }
        let end = time_arg(self.end.as_deref())?;
        if end.is_some_and(|e| e < 0 || e > now) {
            return Err(Failure::Usage(
                "Please set the endTimestamp before now!".into(),
            ));
        }
        if let (Some(b), Some(e)) = (begin, end) {
            if b > e {
                return Err(Failure::Usage(
                    "Please make sure that the beginTimestamp is less than or equal to the endTimestamp"
                        .into(),
                ));
            }
        }
        Ok((begin, end))
    }

    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let (begin, end) = self.validate()?;
        let span = Span {
            group: self.group.as_deref(),
            expression: "*",
            begin,
            end,
        };
        let queues = match (&self.broker, self.queue_id) {
            (Some(b), Some(q)) => vec![queue_of(admin, &self.topic, b, q).await?],
            (b, _) => {
                let all = admin
                    .subscribe_queues(&self.topic)
                    .await
                    .map_err(no_topic(&self.topic))?;
                let qs: Vec<MessageQueue> = all
                    .into_iter()
                    .filter(|q| b.as_ref().is_none_or(|b| &q.broker_name == b))
                    .collect();
                if qs.is_empty() {
                    return Err(Failure::Failed(format!(
                        "broker {:?} does not serve topic {:?}",
                        b.as_deref().unwrap_or_default(),
                        self.topic
                    )));
                }
                qs
            }
        };
        let mut left = self.count as usize;
        let mut qt = queue_table();
        let mut mt = message_table(true);
        let bar = super::progress::bar(self.count as usize, "consuming");
        for mq in &queues {
            if left == 0 {
                break;
            }
            let r = read_queue(admin, mq, &span, self.offset, left).await?;
            left -= r.messages.len();
            bar.inc(r.messages.len() as u64);
            qt.row(vec![
                mq.broker_name.to_string(),
                mq.queue_id.to_string(),
                r.from.to_string(),
                r.to.to_string(),
                r.messages.len().to_string(),
                r.status.to_string(),
            ]);
            for m in &r.messages {
                mt.row(message_row(m, true));
            }
        }
        Ok(Output::Sections(vec![
            ("Queues".into(), qt),
            ("Messages".into(), mt),
        ]))
    }
}
