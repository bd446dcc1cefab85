//! Message commands: queryMsgById, queryMsgByKey, queryMsgByUniqueKey, sendMessage.

use clap::Args;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::{ClientConfig, ClientError, Credentials, Message, MessageExt, MessageQueue};

use super::output::{Output, Table};
use super::topic::{format_time, no_topic};
use super::{java_bool, CmdResult, Failure};

/// The body shown of a message, at most.
const BODY_SHOWN: usize = 4096;

/// A message's properties as Java's `Map.toString()` writes them between its braces:
/// `k=v, k=v`.
pub(crate) fn properties_text(m: &MessageExt) -> String {
    let props: Vec<String> = m
        .message
        .properties
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    props.join(", ")
}

/// A message's details (as Java's `printMsg`), one pair a line.
pub(crate) fn describe(m: &MessageExt) -> Output {
    let body = &m.message.body;
    let shown = String::from_utf8_lossy(&body[..body.len().min(BODY_SHOWN)]).into_owned();
    Output::Pairs(vec![
        ("OffsetID".into(), m.offset_msg_id.clone()),
        ("MsgId".into(), m.msg_id.clone()),
        ("Topic".into(), m.message.topic.clone()),
        ("Tags".into(), m.message.tags().unwrap_or_default().into()),
        (
            "Keys".into(),
            m.message.keys_str().unwrap_or_default().into(),
        ),
        ("Queue ID".into(), m.queue_id.to_string()),
        ("Queue Offset".into(), m.queue_offset.to_string()),
        ("CommitLog Offset".into(), m.commit_log_offset.to_string()),
        ("Reconsume Times".into(), m.reconsume_times.to_string()),
        ("Born Timestamp".into(), format_time(m.born_timestamp)),
        ("Store Timestamp".into(), format_time(m.store_timestamp)),
        ("Born Host".into(), m.born_host.to_string()),
        ("Store Host".into(), m.store_host.to_string()),
        ("System Flag".into(), m.sys_flag.to_string()),
        ("Properties".into(), format!("{{{}}}", properties_text(m))),
        ("Body Size".into(), body.len().to_string()),
        (
            "Message Body".into(),
            if body.len() > BODY_SHOWN {
                format!("{shown}... ({} bytes more)", body.len() - BODY_SHOWN)
            } else {
                shown
            },
        ),
    ])
}

/// Java's name of a send status (`SendStatus.name()`: `SEND_OK`, ...).
pub(crate) fn send_status_name(s: rocketmq_client::producer::SendStatus) -> &'static str {
    use rocketmq_client::producer::SendStatus;
    match s {
        SendStatus::SendOk => "SEND_OK",
        SendStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
        SendStatus::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
        SendStatus::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
    }
}

/// A ConsumeMessageDirectlyResult as Java's `toString` fields.
fn direct_result_output(
    res: rocketmq_remoting::protocol::body::ConsumeMessageDirectlyResult,
) -> Output {
    Output::Pairs(vec![
        ("order".into(), res.order.to_string()),
        ("autoCommit".into(), res.auto_commit.to_string()),
        (
            "consumeResult".into(),
            res.consume_result.map_or("", |c| c.as_str()).into(),
        ),
        ("remark".into(), res.remark.unwrap_or_default()),
        ("spentTimeMills".into(), res.spent_time_mills.to_string()),
    ])
}

/// queryMsgById.
#[derive(Debug, Args)]
pub struct QueryMsgById {
    /// Offset message ids (comma-separated); with -t, unique ids are accepted too.
    #[arg(short = 'i', long = "msgId", value_delimiter = ',', required = true)]
    ids: Vec<String>,
    /// Topic, to look ids up as unique ids when they are not offset ids.
    #[arg(short = 't', long = "topic")]
    topic: Option<String>,
    /// With -d: the consumer group whose member consumes each message now (as Java's, -g
    /// without -d, or -d without -g, is ignored).
    #[arg(short = 'g', long = "consumerGroup")]
    group: Option<String>,
    /// With -g: the member (client id) that consumes them.
    #[arg(short = 'd', long = "clientId")]
    client_id: Option<String>,
    /// Send each message again (to its topic) instead of showing it: `true` in any case; any
    /// other text does nothing (Java's `-s`). -g with -d wins.
    #[arg(short = 's', long = "sendMessage", value_parser = java_bool)]
    resend: Option<bool>,
    /// With -s: the unit name of the producer that sends them again (its client id ends in
    /// `@<unit name>`).
    #[arg(short = 'u', long = "unitName")]
    unit_name: Option<String>,
}

impl QueryMsgById {
    /// The ids given (Java's `StringUtils.split` of `-i` on `,`, blank ones skipped).
    fn ids(&self) -> impl Iterator<Item = &str> {
        self.ids.iter().map(|i| i.trim()).filter(|i| !i.is_empty())
    }

    pub(crate) async fn run(
        self,
        admin: &MQAdmin,
        namesrv: &str,
        credentials: Option<Credentials>,
    ) -> CmdResult {
        if let (Some(g), Some(d)) = (&self.group, &self.client_id) {
            let mut out = Vec::new();
            for id in self.ids() {
                let res = admin.consume_message_directly(g, d, id).await?;
                out.push(direct_result_output(res));
            }
            return Ok(Output::Many(out));
        }
        match self.resend {
            Some(true) => return self.resend(admin, namesrv, credentials).await,
            Some(false) => return Ok(Output::Many(Vec::new())),
            None => {}
        }
        let lookup = admin.lookup();
        let mut out = Vec::new();
        for id in self.ids() {
            match lookup.view_message(id).await {
                Ok(m) => out.push(describe(&m)),
                Err(ClientError::InvalidMessage(_)) if self.topic.is_some() => {
                    let topic = self.topic.as_deref().unwrap_or_default();
                    let r = lookup
                        .query_message_by_unique_key(topic, id)
                        .await
                        .map_err(no_topic(topic))?;
                    if r.messages.is_empty() {
                        return Err(Failure::Failed(format!("no message with id {id:?}")));
                    }
                    out.extend(r.messages.iter().map(describe));
                }
                Err(ClientError::InvalidMessage(e)) => {
                    return Err(Failure::Usage(format!(
                        "{e} (give the topic with -t to look it up as a unique id)"
                    )))
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(if out.len() == 1 {
            out.remove(0)
        } else {
            Output::Many(out)
        })
    }

    /// -s true: each message sent again by a producer of group `ReSendMsgById` (with -u's unit
    /// name), as it is stored (its properties, so its unique id, kept), as Java's.
    async fn resend(
        &self,
        admin: &MQAdmin,
        namesrv: &str,
        credentials: Option<Credentials>,
    ) -> CmdResult {
        let client = ClientConfig {
            unit_name: self.unit_name.clone(),
            ..ClientConfig::default()
        };
        let mut builder = DefaultMQProducer::builder()
            .client_config(client)
            .group("ReSendMsgById")
            .namesrv_addr(namesrv);
        if let Some(c) = credentials {
            builder = builder.credentials(c.access_key, c.secret_key);
        }
        let producer = builder.build()?;
        producer.start().await?;
        let lookup = admin.lookup();
        let mut lines = Vec::new();
        let mut result = Ok(());
        for id in self.ids() {
            let m = match lookup.view_message(id).await {
                Ok(m) => m,
                Err(e) => {
                    result = Err(Failure::from(e));
                    break;
                }
            };
            lines.push(format!("prepare resend msg. originalMsgId={id}"));
            match producer.send(m.message.clone()).await {
                Ok(r) => lines.push(format!(
                    "SendResult [sendStatus={}, msgId={}, offsetMsgId={}, messageQueue=MessageQueue \
                     [topic={}, brokerName={}, queueId={}], queueOffset={}]",
                    send_status_name(r.status),
                    r.msg_id,
                    r.offset_msg_id,
                    r.message_queue.topic,
                    r.message_queue.broker_name,
                    r.message_queue.queue_id,
                    r.queue_offset
                )),
                Err(e) => {
                    result = Err(Failure::from(e));
                    break;
                }
            }
        }
        producer.shutdown().await;
        match result {
            Ok(()) => Ok(Output::Lines(lines)),
            Err(f) => Err(super::print_then_fail(&Output::Lines(lines), f)),
        }
    }
}

/// queryMsgByKey.
#[derive(Debug, Args)]
pub struct QueryMsgByKey {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Key.
    #[arg(short = 'k', long = "msgKey")]
    key: String,
    /// Earliest store time (ms since the epoch).
    #[arg(short = 'b', long = "beginTimestamp", default_value_t = 0)]
    begin: i64,
    /// Latest store time (ms since the epoch).
    #[arg(short = 'e', long = "endTimestamp", default_value_t = i64::MAX)]
    end: i64,
    /// Most messages per broker.
    #[arg(short = 'c', long = "maxNum", default_value_t = 64)]
    max: i32,
}

impl QueryMsgByKey {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let r = admin
            .lookup()
            .query_message(&self.topic, &self.key, self.max, self.begin, self.end)
            .await
            .map_err(no_topic(&self.topic))?;
        let mut t = Table::new(&["Message ID", "QID", "Offset"]);
        for m in &r.messages {
            t.row(vec![
                m.msg_id.clone(),
                m.queue_id.to_string(),
                m.queue_offset.to_string(),
            ]);
        }
        Ok(Output::Table(t))
    }
}

/// queryMsgByUniqueKey.
#[derive(Debug, Args)]
pub struct QueryMsgByUniqueKey {
    /// Unique message id (what a send returns).
    #[arg(short = 'i', long = "msgId")]
    id: String,
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Every message found (Java's `-a`; as Java's, the lookup keeps only the copy stored
    /// first of a message a retried send stored more than once).
    #[arg(short = 'a', long = "showAll")]
    all: bool,
    /// With -d: the consumer group whose member consumes the message now (as Java's, -g
    /// without -d, or -d without -g, is ignored).
    #[arg(short = 'g', long = "consumerGroup")]
    group: Option<String>,
    /// With -g: the member (client id) that consumes it.
    #[arg(short = 'd', long = "clientId")]
    client_id: Option<String>,
}

impl QueryMsgByUniqueKey {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let r = admin
            .lookup()
            .query_message_by_unique_key(&self.topic, &self.id)
            .await
            .map_err(no_topic(&self.topic))?;
        if let (Some(g), Some(d)) = (&self.group, &self.client_id) {
            let m = r
                .messages
                .first()
                .ok_or_else(|| Failure::Failed(format!("no message with id {:?}", self.id)))?;
            let res = admin
                .consume_message_directly(g, d, &m.offset_msg_id)
                .await?;
            return Ok(direct_result_output(res));
        }
        let mut msgs: Vec<Output> = r.messages.iter().map(describe).collect();
        if msgs.is_empty() {
            return Err(Failure::Failed(format!("no message with id {:?}", self.id)));
        }
        Ok(if self.all {
            Output::Many(msgs)
        } else {
            msgs.remove(0)
        })
    }
}

/// sendMessage.
#[derive(Debug, Args)]
pub struct SendMessage {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Body (UTF-8 text).
    #[arg(short = 'p', long = "body")]
    body: String,
    /// Keys.
    #[arg(short = 'k', long = "key")]
    keys: Option<String>,
    /// Tags.
    #[arg(short = 'c', long = "tags")]
    tags: Option<String>,
    /// Broker name (with -i: that queue; alone it is ignored, as Java's).
    #[arg(short = 'b', long = "broker")]
    broker: Option<String>,
    /// Queue id (with -b; a negative one is ignored, as Java's).
    #[arg(short = 'i', long = "qid", requires = "broker")]
    queue: Option<i32>,
    /// Trace the send (`true` in any case; any other text is false, as Java's).
    #[arg(short = 'm', long = "msgTraceEnable", default_value = "false", action = clap::ArgAction::Set, value_parser = java_bool)]
    msg_trace_enable: bool,
}

impl SendMessage {
    pub(crate) async fn run(self, namesrv: &str, credentials: Option<Credentials>) -> CmdResult {
        let mut builder = DefaultMQProducer::builder()
            .group("SELF_TEST_P_GROUP")
            .namesrv_addr(namesrv)
            .enable_msg_trace(self.msg_trace_enable);
        if let Some(c) = credentials {
            builder = builder.credentials(c.access_key, c.secret_key);
        }
        let producer = builder.build()?;
        producer.start().await?;
        let mut msg = Message::new(&self.topic, self.body.into_bytes());
        if let Some(t) = &self.tags {
            msg.set_tags(t);
        }
        if let Some(k) = &self.keys {
            msg.set_keys(k.split(' ').filter(|s| !s.is_empty()));
        }
        let sent = match (&self.broker, self.queue) {
            (Some(b), Some(q)) if q >= 0 => {
                producer
                    .send_to_queue(msg, &MessageQueue::new(&self.topic, b, q))
                    .await
            }
            _ => producer.send(msg).await,
        };
        producer.shutdown().await;
        let r = sent.map_err(no_topic(&self.topic))?;
        let mut t = Table::new(&["Broker Name", "QID", "Send Result", "MsgId"]);
        t.row(vec![
            r.message_queue.broker_name.to_string(),
            r.message_queue.queue_id.to_string(),
            send_status_name(r.status).to_string(),
            r.msg_id.clone(),
        ]);
        Ok(Output::Table(t))
    }
}

/// queryMsgTraceById.
#[derive(Debug, Args)]
pub struct QueryMsgTraceById {
    /// The message's id (what its send returned).
    #[arg(short = 'i', long = "msgId")]
    id: String,
    /// The trace topic (default `RMQ_SYS_TRACE_TOPIC`).
    #[arg(short = 't', long = "traceTopic")]
    trace_topic: Option<String>,
}

impl QueryMsgTraceById {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let views = admin
            .query_msg_trace_by_id(&self.id, self.trace_topic.as_deref())
            .await?;
        if views.is_empty() {
            return Err(Failure::Failed(format!(
                "no trace of message {:?} (is tracing on?)",
                self.id
            )));
        }
        let mut t = Table::new(&[
            "Type",
            "Group",
            "ClientHost",
            "Time",
            "CostTime(ms)",
            "Status",
            "Topic",
            "Tags",
            "Keys",
        ]);
        for v in &views {
            t.row(vec![
                v.trace_type.to_string(),
                v.group_name.clone(),
                v.client_host.clone(),
                format_time(v.timestamp),
                v.cost_time.to_string(),
                v.status().to_string(),
                v.topic.clone(),
                v.tags.clone().unwrap_or_default(),
                v.keys.clone().unwrap_or_default(),
            ]);
        }
        Ok(Output::Table(t))
    }
}
