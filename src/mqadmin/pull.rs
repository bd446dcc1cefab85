//! Commands that read messages by pulling them as Java's tools do (group `TOOLS_CONSUMER`
//! unless told otherwise; nothing is committed): queryMsgByOffset, printMsg, printMsgByQueue,
//! consumeMessage.

use std::collections::BTreeMap;
use std::io::Write;

use clap::Args;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::{MessageExt, MessageQueue, PullStatus};
use serde_json::Value;

use super::group::parse_timestamp;
use super::message::{describe, properties_text};
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

/// What [`read_queue`] hands its caller as it reads.
enum Event {
    /// The offsets it reads from and up to (before the first pull).
    Start { from: i64, max: i64 },
    /// The messages of one pull that match.
    Batch(Vec<MessageExt>),
}

/// What reading one queue gave.
struct Read {
    /// The first offset read.
    from: i64,
    /// The offset reading stopped before.
    to: i64,
    /// Messages kept (each handed to the caller batch by batch, not held here).
    count: usize,
    /// Why reading stopped (a pull status, or `LIMIT`/`END_TIME`/`END_OFFSET`, or `ERROR`).
    status: &'static str,
    /// Why the queue could not be read to its end (the messages before it were handed over).
    error: Option<Failure>,
}

/// Reads `mq` from `from` (its min offset, or the offset stored at `span.begin` when `None`)
/// up to its max offset, handing each pull's messages that match the span to `batch` as they
/// arrive (at most [`PULL_BATCH`] at a time, at most `limit` in all). A failure after some
/// batches is kept in [`Read::error`] with what was read before it.
async fn read_queue(
    admin: &MQAdmin,
    mq: &MessageQueue,
    span: &Span<'_>,
    from: Option<i64>,
    limit: usize,
    batch: &mut dyn FnMut(Event) -> Result<(), Failure>,
) -> Read {
    let lookup = admin.lookup();
    let bounds = async {
        let max = lookup.max_offset(mq).await?;
        let offset = match (from, span.begin) {
            (Some(o), _) => o,
            (None, Some(t)) => lookup.search_offset(mq, t).await?,
            (None, None) => lookup.min_offset(mq).await?,
        };
        Ok::<_, Failure>((max, offset))
    };
    let (max, mut offset) = match bounds.await {
        Ok(b) => b,
        Err(e) => {
            return Read {
                from: 0,
                to: 0,
                count: 0,
                status: "ERROR",
                error: Some(e),
            }
        }
    };
    let start = offset;
    let mut count = 0usize;
    let mut status = "END_OFFSET";
    let mut error = None;
    if let Err(e) = batch(Event::Start { from: start, max }) {
        error = Some(e);
        status = "ERROR";
        offset = max;
    }
    'pull: while offset < max {
        if count >= limit {
            status = "LIMIT";
            break;
        }
        let want = (max - offset).clamp(1, PULL_BATCH) as i32;
        let pulled = match span.group {
            Some(g) => admin.pull_as(g, mq, span.expression, offset, want).await,
            None => admin.pull(mq, span.expression, offset, want).await,
        };
        let r = match pulled {
            Ok(r) => r,
            Err(e) => {
                status = "ERROR";
                error = Some(e.into());
                break;
            }
        };
        match r.status {
            PullStatus::Found => {
                let mut kept = Vec::with_capacity(r.messages.len());
                let mut stop = None;
                for m in r.messages {
                    if span.end.is_some_and(|e| m.store_timestamp > e) {
                        stop = Some(("END_TIME", m.queue_offset));
                        break;
                    }
                    if span.begin.is_some_and(|b| m.store_timestamp < b) {
                        continue;
                    }
                    if count + kept.len() >= limit {
                        stop = Some(("LIMIT", m.queue_offset));
                        break;
                    }
                    kept.push(m);
                }
                count += kept.len();
                if !kept.is_empty() {
                    if let Err(e) = batch(Event::Batch(kept)) {
                        status = "ERROR";
                        error = Some(e);
                        break;
                    }
                }
                if let Some((s, at)) = stop {
                    status = s;
                    offset = at;
                    break 'pull;
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
    Read {
        from: start,
        to: offset.min(max).max(start),
        count,
        status,
        error,
    }
}

/// A queue's row of the queue table.
fn queue_row(mq: &MessageQueue, r: &Read) -> Vec<String> {
    vec![
        mq.broker_name.to_string(),
        mq.queue_id.to_string(),
        r.from.to_string(),
        r.to.to_string(),
        r.count.to_string(),
        match &r.error {
            Some(e) => format!("ERROR: {}", e.message()),
            None => r.status.to_string(),
        },
    ]
}

/// A message as Java's tools print it after `MSGID: <id> ` (`MessageExt.toString()`, the body
/// given by its length rather than byte by byte).
fn java_message_string(m: &MessageExt) -> String {
    format!(
        "MessageExt [brokerName={}, queueId={}, storeSize={}, queueOffset={}, sysFlag={}, \
         bornTimestamp={}, bornHost={}, storeTimestamp={}, storeHost={}, msgId={}, \
         commitLogOffset={}, bodyCRC={}, reconsumeTimes={}, preparedTransactionOffset={}, \
         toString()=Message{{topic='{}', flag={}, properties={{{}}}, body.length={}, \
         transactionId='{}'}}]",
        m.broker_name,
        m.queue_id,
        m.store_size,
        m.queue_offset,
        m.sys_flag,
        m.born_timestamp,
        m.born_host,
        m.store_timestamp,
        m.store_host,
        m.offset_msg_id,
        m.commit_log_offset,
        m.body_crc,
        m.reconsume_times,
        m.prepared_transaction_offset,
        m.message.topic,
        m.message.flag,
        properties_text(m),
        m.message.body.len(),
        m.message.transaction_id.as_deref().unwrap_or("null"),
    )
}

/// Where printMsg and printMsgByQueue write as they read: Java's lines as text; with `--json`
/// one document, `{"Messages": [...], <the other sections>}`, its messages written one by
/// one. Only counts and one row per queue are kept, never the messages.
pub(crate) struct MessageStream<W: Write> {
    out: W,
    json: bool,
    /// Messages written so far (JSON: whether a comma goes before the next).
    written: usize,
    /// Whether the JSON `Messages` array was opened.
    opened: bool,
}

fn write_failed(e: std::io::Error) -> Failure {
    Failure::Failed(format!("cannot write the messages: {e}"))
}

impl<W: Write> MessageStream<W> {
    pub(crate) fn new(out: W, json: bool) -> Self {
        MessageStream {
            out,
            json,
            written: 0,
            opened: false,
        }
    }

    /// A line of text (nothing with `--json`).
    fn text(&mut self, line: &str) -> Result<(), Failure> {
        if self.json {
            return Ok(());
        }
        writeln!(self.out, "{line}").map_err(write_failed)
    }

    /// Opens the JSON document's `Messages` array (with `--json`).
    fn open_messages(&mut self) -> Result<(), Failure> {
        if self.json && !self.opened {
            self.opened = true;
            write!(self.out, "{{\n  \"Messages\": [").map_err(write_failed)?;
        }
        Ok(())
    }

    /// Writes a batch of messages: text as Java's `MSGID: ... BODY: ...` lines, JSON as
    /// objects of the message table's columns.
    fn messages(&mut self, msgs: &[MessageExt], body: bool) -> Result<(), Failure> {
        self.open_messages()?;
        for m in msgs {
            if self.json {
                let mut t = message_table(body);
                t.row(message_row(m, body));
                let v = Output::Table(t).to_json();
                let sep = if self.written == 0 { "" } else { "," };
                write!(self.out, "{sep}\n    {}", v[0]).map_err(write_failed)?;
            } else {
                let shown = if body {
                    String::from_utf8_lossy(&m.message.body).into_owned()
                } else {
                    "NOT PRINT BODY".to_string()
                };
                writeln!(
                    self.out,
                    "MSGID: {} {} BODY: {shown}",
                    m.msg_id,
                    java_message_string(m)
                )
                .map_err(write_failed)?;
            }
            self.written += 1;
        }
        self.out.flush().map_err(write_failed)
    }

    /// Ends the document (with `--json`): the messages array (when `messages`), then each of
    /// `sections`, then the failure if any, as `--json` prints one.
    fn finish(
        mut self,
        messages: bool,
        sections: Vec<(&str, Table)>,
        failure: Option<&Failure>,
    ) -> Result<(), Failure> {
        if !self.json {
            return self.out.flush().map_err(write_failed);
        }
        let mut fields: Vec<String> = Vec::new();
        if messages {
            self.open_messages()?;
            let end = if self.written == 0 { "]" } else { "\n  ]" };
            write!(self.out, "{end}").map_err(write_failed)?;
        } else {
            write!(self.out, "{{").map_err(write_failed)?;
        }
        for (name, t) in sections {
            let v = serde_json::to_string(&Output::Table(t).to_json()).unwrap_or_default();
            fields.push(format!("{}: {v}", Value::from(name)));
        }
        if let Some(f) = failure {
            if let Value::Object(o) = f.to_json() {
                for (k, v) in o {
                    fields.push(format!("{}: {v}", Value::from(k)));
                }
            }
        }
        for (i, f) in fields.iter().enumerate() {
            let sep = if i == 0 && !messages { "" } else { "," };
            write!(self.out, "{sep}\n  {f}").map_err(write_failed)?;
        }
        writeln!(self.out, "\n}}").map_err(write_failed)?;
        self.out.flush().map_err(write_failed)
    }
}

/// The outcome of reading several queues while printing: done when every queue was read,
/// else each failing queue named, the output already written ([`Failure::Reported`]).
fn queues_outcome(failed: Vec<String>, read: usize) -> Option<Failure> {
    if failed.is_empty() {
        return None;
    }
    Some(Failure::Failed(format!(
        "{} of {} queues could not be read (the others were printed): {}",
        failed.len(),
        read,
        failed.join("; ")
    )))
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
    /// Print the bodies (`true` in any case; any other text is false, as Java's).
    #[arg(short = 'd', long = "printBody", default_value = "true", value_parser = super::java_bool, action = clap::ArgAction::Set)]
    print_body: bool,
}

impl PrintMsg {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let stream = MessageStream::new(std::io::stdout(), super::output::json_mode());
        self.print(admin, stream).await
    }

    /// Reads every queue, printing each pull's messages as they arrive (Java's
    /// `PrintMessageSubCommand`); a queue that fails is reported and the next one read.
    pub(crate) async fn print<W: Write>(
        self,
        admin: &MQAdmin,
        mut stream: MessageStream<W>,
    ) -> CmdResult {
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
        let mut failed = Vec::new();
        let bar = super::progress::bar(queues.len(), "reading queues");
        stream.open_messages()?;
        for mq in &queues {
            bar.inc(1);
            let body = self.print_body;
            let mut write_err = None;
            let r = read_queue(admin, mq, &span, None, usize::MAX, &mut |event| {
                match event {
                    Event::Start { from, max } => {
                        stream.text(&format!("minOffset={from}, maxOffset={max}, {mq}"))
                    }
                    Event::Batch(batch) => stream.messages(&batch, body),
                }
                .inspect_err(|e| write_err = Some(e.message()))
            })
            .await;
            if let Some(e) = write_err {
                return Err(Failure::Failed(e));
            }
            match &r.error {
                Some(e) => {
                    eprintln!("mqadmin: {mq}: {}", e.message());
                    failed.push(format!("{mq}: {}", e.message()));
                }
                None => stream.text(&format!(
                    "{mq} print msg finished. status={}, offset={}",
                    r.status, r.to
                ))?,
            }
            stream.text(&"-".repeat(56))?;
            qt.row(queue_row(mq, &r));
        }
        let failure = queues_outcome(failed, queues.len());
        stream.finish(true, vec![("Queues", qt)], failure.as_ref())?;
        match failure {
            Some(f) => Err(Failure::Reported(Box::new(f))),
            None => Ok(Output::Printed),
        }
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
    /// List the messages (`true` in any case; any other text is false, as Java's).
    #[arg(short = 'p', long = "printMsg", default_value = "false", value_parser = super::java_bool, action = clap::ArgAction::Set)]
    print_msg: bool,
    /// With -p: print the bodies too (`true` in any case; any other text is false).
    #[arg(short = 'd', long = "printBody", default_value = "false", value_parser = super::java_bool, action = clap::ArgAction::Set)]
    print_body: bool,
    /// Count the messages by tag (`true` in any case; any other text is false).
    #[arg(short = 'f', long = "calculate", default_value = "false", value_parser = super::java_bool, action = clap::ArgAction::Set)]
    by_tag: bool,
}

impl PrintMsgByQueue {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let stream = MessageStream::new(std::io::stdout(), super::output::json_mode());
        self.print(admin, stream).await
    }

    /// Reads the queue, printing each pull's messages (with -p) as they arrive and counting
    /// tags (with -f) without keeping the messages (Java's `PrintMessageByQueueCommand`).
    pub(crate) async fn print<W: Write>(
        self,
        admin: &MQAdmin,
        mut stream: MessageStream<W>,
    ) -> CmdResult {
        check_charset(&self.charset)?;
        let mq = queue_of(admin, &self.topic, &self.broker, self.queue_id).await?;
        let span = Span {
            group: None,
            expression: &self.expression,
            begin: time_arg(self.begin.as_deref())?,
            end: time_arg(self.end.as_deref())?,
        };
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        let (print_msg, print_body) = (self.print_msg, self.print_body);
        if print_msg {
            stream.open_messages()?;
        }
        let r = read_queue(admin, &mq, &span, None, usize::MAX, &mut |event| {
            let Event::Batch(batch) = event else {
                return Ok(());
            };
            if self.by_tag {
                count_tags(&mut counts, &batch);
            }
            if print_msg {
                stream.messages(&batch, print_body)?;
            }
            Ok(())
        })
        .await;
        let mut qt = queue_table();
        qt.row(queue_row(&mq, &r));
        let tags = tag_table(counts);
        if !stream.json && self.by_tag {
            for row in &tags.rows {
                stream.text(&format!("Tag: {:<30} Count: {}", row[0], row[1]))?;
            }
        }
        let mut sections = vec![("Queue", qt)];
        if self.by_tag {
            sections.push(("Tags", tags));
        }
        let failure = r.error.map(|e| match e {
            Failure::Unreachable(m) => Failure::Unreachable(format!("{mq}: {m}")),
            e => Failure::Failed(format!("{mq}: {}", e.message())),
        });
        stream.finish(print_msg, sections, failure.as_ref())?;
        match failure {
            Some(f) => Err(Failure::Reported(Box::new(f))),
            None => Ok(Output::Printed),
        }
    }
}

/// Adds the messages' tags to `counts` (Java's `-f`: messages without a tag are not counted).
fn count_tags(counts: &mut BTreeMap<String, u64>, msgs: &[MessageExt]) {
    for m in msgs {
        if let Some(t) = m.message.tags().filter(|t| !t.trim().is_empty()) {
            *counts.entry(t.to_string()).or_default() += 1;
        }
    }
}

/// Messages per tag, most first.
fn tag_table(counts: BTreeMap<String, u64>) -> Table {
    let mut sorted: Vec<(String, u64)> = counts.into_iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut t = Table::new(&["Tag", "Count"]);
    for (tag, n) in sorted {
        t.row(vec![tag, n.to_string()]);
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
            let mut kept = Vec::new();
            let r = read_queue(admin, mq, &span, self.offset, left, &mut |event| {
                if let Event::Batch(batch) = event {
                    kept.extend(batch);
                }
                Ok(())
            })
            .await;
            if let Some(e) = r.error {
                return Err(e);
            }
            left -= r.count;
            bar.inc(r.count as u64);
            qt.row(queue_row(mq, &r));
            for m in &kept {
                mt.row(message_row(m, true));
            }
        }
        Ok(Output::Sections(vec![
            ("Queues".into(), qt),
            ("Messages".into(), mt),
        ]))
    }
}
