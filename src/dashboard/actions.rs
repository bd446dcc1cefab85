//! What the dashboard changes in the cluster: a test message sent (with a producer of its own,
//! started on the first send), and a group's offsets reset by time.

use rocketmq_client::admin::ResetOutcome;
use rocketmq_client::producer::{DefaultMQProducer, SendResult};
use rocketmq_client::{ClientError, Message};
use serde::Deserialize;

use super::error::PageError;
use super::time::parse_time;
use super::AppState;

/// The producer group of test messages.
pub const PRODUCER_GROUP: &str = "DASHBOARD_TEST_PRODUCER";

/// The send form.
#[derive(Debug, Default, Clone, Deserialize)]
pub(crate) struct SendForm {
    /// Topic.
    #[serde(default)]
    pub topic: String,
    /// Tags (one tag, as Java's `setTags`).
    #[serde(default)]
    pub tags: String,
    /// Keys, separated by spaces.
    #[serde(default)]
    pub keys: String,
    /// User properties, one `key=value` a line.
    #[serde(default)]
    pub properties: String,
    /// Body (UTF-8 text).
    #[serde(default)]
    pub body: String,
}

/// The reset form.
#[derive(Debug, Default, Clone, Deserialize)]
pub(crate) struct ResetForm {
    /// Consumer group.
    #[serde(default)]
    pub group: String,
    /// Topic.
    #[serde(default)]
    pub topic: String,
    /// `beginning`, `end` or `time`.
    #[serde(default)]
    pub to: String,
    /// With `time`: the time (read in the host's local time zone, as Java's tools read it).
    #[serde(default)]
    pub time: String,
    /// Present when "force" is ticked.
    pub force: Option<String>,
}

/// The user properties of the send form: `key=value` lines; blank lines skipped; reserved
/// (system) keys refused.
pub(crate) fn parse_properties(text: &str) -> Result<Vec<(String, String)>, PageError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(PageError::bad_input(format!(
                "property line {} ({line:?}) is not key=value",
                i + 1
            )));
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() {
            return Err(PageError::bad_input(format!(
                "property line {} has no key",
                i + 1
            )));
        }
        if v.is_empty() {
            // An empty value never reaches the broker (the property decoders drop the pair).
            return Err(PageError::bad_input(format!(
                "property line {} ({k:?}) has no value",
                i + 1
            )));
        }
        if Message::is_reserved_property(k) {
            return Err(PageError::bad_input(format!(
                "{k:?} is a system property: choose another key"
            )));
        }
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

/// The message the form describes.
pub(crate) fn message_of(form: &SendForm) -> Result<Message, PageError> {
    let topic = form.topic.trim();
    if topic.is_empty() {
        return Err(PageError::bad_input("give the topic"));
    }
    if form.body.is_empty() {
        return Err(PageError::bad_input(
            "give a body (RocketMQ refuses empty bodies)",
        ));
    }
    let mut msg = Message::new(topic, form.body.clone().into_bytes());
    if !form.tags.trim().is_empty() {
        msg.set_tags(form.tags.trim());
    }
    let keys: Vec<&str> = form.keys.split_whitespace().collect();
    if !keys.is_empty() {
        msg.set_keys(keys);
    }
    for (k, v) in parse_properties(&form.properties)? {
        msg.put_property(k, v);
    }
    Ok(msg)
}

/// The test producer, started on first use.
async fn producer(st: &AppState) -> Result<DefaultMQProducer, PageError> {
    let mut slot = st.producer.lock().await;
    if let Some(p) = slot.as_ref() {
        return Ok(p.clone());
    }
    let mut b = DefaultMQProducer::builder()
        .group(PRODUCER_GROUP)
        .namesrv_addr(&st.namesrv);
    if let Some(c) = &st.credentials {
        b = b.credentials(c.access_key.clone(), c.secret_key.clone());
    }
    let p = b
        .build()
        .map_err(|e| PageError::from_client("making the test producer", &e))?;
    p.start()
        .await
        .map_err(|e| PageError::from_client("starting the test producer", &e))?;
    *slot = Some(p.clone());
    Ok(p)
}

/// Sends the form's message; the broker's answer.
pub(crate) async fn send_test_message(
    st: &AppState,
    form: &SendForm,
) -> Result<SendResult, PageError> {
    let msg = message_of(form)?;
    let topic = msg.topic.clone();
    let p = producer(st).await?;
    p.send(msg).await.map_err(|e| match e {
        ClientError::NoRoute { .. } => PageError::not_found(format!(
            "topic {topic:?} does not exist (create it first, e.g. mqadmin updateTopic)"
        )),
        e => PageError::from_client(&format!("sending to {topic:?}"), &e),
    })
}

/// The time a reset moves to: 0 for the beginning, -1 for the end, else the time given.
pub(crate) fn reset_timestamp(form: &ResetForm) -> Result<i64, PageError> {
    match form.to.trim() {
        "beginning" | "" => Ok(0),
        "end" => Ok(-1),
        "time" => parse_time(&form.time).map_err(PageError::bad_input),
        other => Err(PageError::bad_input(format!(
            "{other:?}: move to beginning, end or time"
        ))),
    }
}

/// Resets the form's group on the form's topic.
pub(crate) async fn reset_offsets(
    st: &AppState,
    form: &ResetForm,
) -> Result<ResetOutcome, PageError> {
    let (group, topic) = (form.group.trim(), form.topic.trim());
    if group.is_empty() || topic.is_empty() {
        return Err(PageError::bad_input("give the group and the topic"));
    }
    let timestamp = reset_timestamp(form)?;
    // Skipping to the end moves forward, which only a forced reset does.
    let force = form.force.is_some() || timestamp == -1;
    st.admin
        .reset_offset_by_time(topic, group, timestamp, force)
        .await
        .map_err(|e| match e {
            ClientError::NoRoute { .. } => {
                PageError::not_found(format!("topic {topic:?} does not exist"))
            }
            e => PageError::from_client(&format!("resetting {group:?} on {topic:?}"), &e),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    #[test]
    fn the_send_form_becomes_a_message() {
        let form = SendForm {
            topic: " T ".into(),
            tags: "TagA".into(),
            keys: "k1  k2".into(),
            properties: "color = blue\n\nsize=L\n".into(),
            body: "hello".into(),
        };
        let m = message_of(&form).unwrap();
        assert_eq!(m.topic, "T");
        assert_eq!(m.tags(), Some("TagA"));
        assert_eq!(m.keys().collect::<Vec<_>>(), vec!["k1", "k2"]);
        assert_eq!(m.property("color"), Some("blue"));
        assert_eq!(m.property("size"), Some("L"));
        for (bad, why) in [
            (
                SendForm {
                    topic: "".into(),
                    body: "x".into(),
                    ..SendForm::default()
                },
                "give the topic",
            ),
            (
                SendForm {
                    topic: "T".into(),
                    ..SendForm::default()
                },
                "give a body",
            ),
            (
                SendForm {
                    topic: "T".into(),
                    body: "x".into(),
                    properties: "oops".into(),
                    ..SendForm::default()
                },
                "not key=value",
            ),
            (
                SendForm {
                    topic: "T".into(),
                    body: "x".into(),
                    properties: "UNIQ_KEY=1".into(),
                    ..SendForm::default()
                },
                "system property",
            ),
        ] {
            let e = message_of(&bad).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(e.message.contains(why), "{}", e.message);
        }
    }

    #[test]
    fn reset_targets() {
        let f = |to: &str, time: &str| ResetForm {
            to: to.into(),
            time: time.into(),
            ..ResetForm::default()
        };
        assert_eq!(reset_timestamp(&f("beginning", "")), Ok(0));
        assert_eq!(reset_timestamp(&f("end", "")), Ok(-1));
        assert_eq!(reset_timestamp(&f("time", "1970-01-01 00:00:01")), Ok(1000));
        assert_eq!(
            reset_timestamp(&f("time", "soon")).unwrap_err().status,
            StatusCode::BAD_REQUEST
        );
        assert!(reset_timestamp(&f("middle", "")).is_err());
    }

    #[test]
    fn property_lines_need_a_key_and_a_value() {
        assert_eq!(
            parse_properties("a = 1\n\n b=2 ").unwrap(),
            vec![("a".to_string(), "1".to_string()), ("b".into(), "2".into())]
        );
        for bad in ["=1", "a=", "a = ", "a", "TAGS=x"] {
            let e = parse_properties(bad).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{bad:?}");
        }
        assert!(parse_properties("a=")
            .unwrap_err()
            .message
            .contains("has no value"));
    }
}
