//! `mqadmin` end to end: the producer and monitoring commands (producer, checkMsgSendRT,
//! startMonitoring), each run as a process against an embedded cluster and checked by its
//! effect.

mod common;

use std::io::BufRead;
use std::sync::Arc;
use std::time::Duration;

use common::mqadmin_ok as ok;
use common::*;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::consumer::{concurrently_fn, ConsumeConcurrentlyStatus};
use rocketmq_client::{Message, MessageQueue, PullStatus};
use serde_json::Value;

/// The name of the (first) broker `clusterList` prints.
async fn broker_name(ns: &str) -> String {
    ok(ns, &["clusterList"]).await[0]["Broker Name"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The rows `producer -b addr --json` prints for `group`.
async fn producer_rows(ns: &str, addr: &str, group: &str) -> Vec<Value> {
    ok(ns, &["producer", "-b", addr])
        .await
        .as_array()
        .expect("a table")
        .iter()
        .filter(|r| r["Producer Group"] == group)
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_lists_a_brokers_producers_by_group() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let addr = c.broker().broker_addr();
    let p = producer(&ns, "cli-producer-list").await;
    // A producer heartbeats the brokers it knows: those of a topic it sent to.
    p.send(Message::new("CliProducerList", "x")).await.unwrap();
    let client_id = p.client_id().expect("running");
    wait_until(Duration::from_secs(30), "the producer listed", || {
        let (ns, addr) = (ns.clone(), addr.clone());
        async move {
            !producer_rows(&ns, &addr, "cli-producer-list")
                .await
                .is_empty()
        }
    })
    .await;
    let rows = producer_rows(&ns, &addr, "cli-producer-list").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["ClientId"], client_id.as_str());
    assert!(
        row["RemoteIP"].as_str().unwrap().starts_with("/127.0.0.1:"),
        "{row}"
    );
    assert!(!row["Language"].as_str().unwrap().is_empty(), "{row}");
    assert!(row["Version"].as_i64().unwrap() > 0, "{row}");
    assert!(row["LastUpdateTimestamp"].as_i64().unwrap() > 0, "{row}");

    // The text form: a `#` header and the group's row.
    let (code, out, err) = mqadmin_text(&ns, &["producer", "-b", &addr]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("#Producer Group"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("cli-producer-list") && l.contains(&client_id)),
        "{out}"
    );

    // A producer that shuts down unregisters: the group is gone.
    p.shutdown().await;
    wait_until(Duration::from_secs(30), "the producer gone", || {
        let (ns, addr) = (ns.clone(), addr.clone());
        async move {
            producer_rows(&ns, &addr, "cli-producer-list")
                .await
                .is_empty()
        }
    })
    .await;

    // -b is required; a broker nobody answers at is unreachable.
    let (code, _, err) = mqadmin(&ns, &["producer"]).await;
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = mqadmin(&ns, &["producer", "-b", &dead_addr()]).await;
    assert_eq!(code, 3, "{err}");
}

/// The store's messages of `mq` (up to 32), through the admin's pull.
async fn stored(admin: &MQAdmin, mq: &MessageQueue) -> Vec<Vec<u8>> {
    let r = admin.pull(mq, "*", 0, 32).await.unwrap();
    if r.status != PullStatus::Found {
        return Vec::new();
    }
    r.messages
        .into_iter()
        .map(|m| m.message.body.to_vec())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_msg_send_rt_sends_to_each_queue_in_turn_and_times_each_send() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "CliRt", 4).await;
    let broker = broker_name(&ns).await;

    let (code, out, err) = mqadmin_text(
        &ns,
        &["checkMsgSendRT", "-t", "CliRt", "-a", "5", "-s", "64"],
    )
    .await;
    assert_eq!(code, 0, "{err}\n{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 7, "{out}");
    // Java's header, then one line per send: broker, queue, result, RT (ms).
    assert_eq!(
        lines[0],
        format!(
            "{:<32}  {:<4}  {:<20}    #RT",
            "#Broker Name", "#QID", "#Send Result"
        )
    );
    let mut queues = Vec::new();
    for l in &lines[1..6] {
        let cells: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(cells.len(), 4, "{l}");
        assert_eq!(cells[0], broker, "{l}");
        assert_eq!(cells[2], "true", "{l}");
        cells[3].parse::<u64>().expect("RT in ms");
        queues.push(cells[1].parse::<i32>().unwrap());
    }
    assert_eq!(queues, [0, 1, 2, 3, 0], "{out}");
    let avg = lines[6].strip_prefix("Avg RT: ").expect("the average");
    assert_eq!(avg.split_once('.').map(|(_, d)| d.len()), Some(2), "{avg}");
    avg.parse::<f64>().unwrap();

    // The messages are stored where the lines say: 64 bytes of `a` each.
    let admin = MQAdmin::connect(&ns).unwrap();
    let mut counts = Vec::new();
    for q in 0..4 {
        let mq = MessageQueue::new("CliRt", broker.as_str(), q);
        assert_eq!(
            admin.queue_offset(&mq, true).await.unwrap(),
            queues.iter().filter(|&&x| x == q).count() as i64
        );
        let bodies = stored(&admin, &mq).await;
        assert!(bodies.iter().all(|b| b == &vec![b'a'; 64]), "{q}");
        counts.push(bodies.len());
    }
    assert_eq!(counts, [2, 1, 1, 1]);

    // With --json: one document; the round robin starts over at queue 0.
    let doc = ok(
        &ns,
        &["checkMsgSendRT", "-t", "CliRt", "-a", "3", "-s", "10"],
    )
    .await;
    let results = doc["results"].as_array().expect("results");
    let qids: Vec<i64> = results.iter().map(|r| r["QID"].as_i64().unwrap()).collect();
    assert_eq!(qids, [0, 1, 2], "{doc}");
    assert!(results
        .iter()
        .all(|r| r["Send Result"] == true && r["Broker Name"] == broker.as_str()));
    assert!(doc["Avg RT"].as_f64().is_some(), "{doc}");
    for (q, want) in [(0, 3), (1, 2), (2, 2), (3, 1)] {
        let mq = MessageQueue::new("CliRt", broker.as_str(), q);
        assert_eq!(admin.queue_offset(&mq, true).await.unwrap(), want, "{q}");
    }
    // A send that cannot be made (an empty body, as Java's checks refuse) is `false`, and
    // the command exits 1.
    let (code, doc, _) = mqadmin(
        &ns,
        &["checkMsgSendRT", "-t", "CliRt", "-a", "2", "-s", "0"],
    )
    .await;
    assert_eq!(code, 1, "{doc}");
    assert!(doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["Send Result"] == false));
    let (code, _, err) = mqadmin(&ns, &["checkMsgSendRT", "-a", "1"]).await;
    assert_eq!(code, 2, "{err}");
    admin.shutdown();
}

/// The JSON objects of `startMonitoring --json`'s lines.
fn json_lines(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A running `mqadmin startMonitoring`: its standard output's lines as they come; killed if
/// the test ends before it exits.
struct Monitor {
    child: std::process::Child,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Monitor {
    fn spawn(ns: &str, args: &[&str]) -> Self {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mqadmin"))
            .args(["-n", ns, "startMonitoring"])
            .args(args)
            .env_remove("NAMESRV_ADDR")
            .env_remove("ROCKETMQ_HOME")
            .env_remove("ROCKETMQ_ACCESS_KEY")
            .env_remove("ROCKETMQ_SECRET_KEY")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("mqadmin runs");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(stdout).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Monitor { child, lines }
    }

    /// Waits (up to `limit`) for a line that `want` accepts; the lines before it are dropped.
    async fn line(&mut self, limit: Duration, what: &str, want: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(l)) if want(&l) => return l,
                Ok(Some(_)) => {}
                Ok(None) => panic!("startMonitoring ended before printing {what}"),
                Err(_) => panic!("timed out after {limit:?} waiting for {what}"),
            }
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_monitoring_reports_backlogs_and_offset_moves_until_stopped() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "CliMon", 1).await;
    let broker = broker_name(&ns).await;
    let p = producer(&ns, "cli-mon-p").await;
    for i in 0..4 {
        p.send(Message::new("CliMon", format!("done{i}")))
            .await
            .unwrap();
    }
    for i in 0..6 {
        p.send(Message::new("CliMon", format!("hold{i}")))
            .await
            .unwrap();
    }
    // A member online that consumed the first 4 and holds the other 6 in its listener, so the
    // group's committed offset stays at 4: 6 messages undone.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let g = gate.clone();
    let cons = push_builder(&ns, "cli-mon-c")
        .subscribe("CliMon", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(concurrently_fn(move |msgs, _| {
        let gate = g.clone();
        let hold = msgs.iter().any(|m| m.message.body.starts_with(b"hold"));
        async move {
            if hold {
                let _ = gate.acquire().await;
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    }))
    .unwrap();
    cons.start().await.unwrap();
    let admin = MQAdmin::connect(&ns).unwrap();
    wait_until(Duration::from_secs(30), "offset 4 committed", || {
        let admin = admin.clone();
        async move {
            admin
                .group_offsets("cli-mon-c", "CliMon")
                .await
                .is_ok_and(|o| o.queues.len() == 1 && o.queues[0].consumer_offset == 4)
        }
    })
    .await;
    // The monitor finds groups by their retry topics on the name server.
    wait_until(
        Duration::from_secs(30),
        "the group's retry topic listed",
        || {
            let admin = admin.clone();
            async move {
                admin
                    .topic_list()
                    .await
                    .is_ok_and(|l| l.topic_list.iter().any(|t| t == "%RETRY%cli-mon-c"))
            }
        },
    )
    .await;

    // Two quick rounds, then it exits by itself.
    let (code, out, err) = mqadmin_text(
        &ns,
        &[
            "--json",
            "startMonitoring",
            "--initialDelay",
            "0",
            "--roundInterval",
            "100",
            "--rounds",
            "2",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}\n{out}");
    let events = json_lines(&out);
    let named = |n: &str| events.iter().filter(|e| e["event"] == n).count();
    assert_eq!(named("beginRound"), 2, "{out}");
    assert_eq!(named("endRound"), 2, "{out}");
    let undone: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["event"] == "reportUndoneMsgs"
                && e["consumerGroup"] == "cli-mon-c"
                && e["topic"] == "CliMon"
        })
        .collect();
    assert_eq!(undone.len(), 2, "one per round: {out}");
    for u in undone {
        assert_eq!(u["undoneMsgsTotal"], 6, "{u}");
        assert_eq!(u["undoneMsgsSingleMQ"], 6, "{u}");
        assert!(u["undoneMsgsDelayTimeMills"].as_i64().unwrap() >= 0, "{u}");
    }

    // Java's text (its log lines), one round.
    let (code, out, err) = mqadmin_text(
        &ns,
        &["startMonitoring", "-initialDelay", "0", "--rounds", "1"],
    )
    .await;
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(
        out.contains("[MONITOR] =========================================beginRound"),
        "{out}"
    );
    assert!(
        out.contains(
            "[MONITOR] reportUndoneMsgs: UndoneMsgs [consumerGroup=cli-mon-c, topic=CliMon, \
             undoneMsgsTotal=6, undoneMsgsSingleMQ=6, undoneMsgsDelayTimeMills="
        ),
        "{out}"
    );
    assert!(
        out.contains("[MONITOR] =========================================endRound"),
        "{out}"
    );

    // Until stopped: a broker's offset correction is reported as Java's delete event, and
    // SIGTERM ends it cleanly.
    let mut m = Monitor::spawn(&ns, &["--initialDelay", "0", "--roundInterval", "300"]);
    m.line(Duration::from_secs(60), "a round", |l| {
        l.contains("beginRound")
    })
    .await;
    // A pull far past the queue's end: the broker moves the offset and records the event.
    let mq = MessageQueue::new("CliMon", broker.as_str(), 0);
    let r = admin
        .pull_as("cli-mon-ghost", &mq, "*", 1000, 1)
        .await
        .unwrap();
    assert_ne!(r.status, PullStatus::Found);
    let event = m
        .line(Duration::from_secs(60), "the delete event", |l| {
            l.contains("reportDeleteMsgsEvent") && l.contains("consumerGroup=cli-mon-ghost")
        })
        .await;
    assert!(
        event.contains(&format!(
            "[MONITOR] reportDeleteMsgsEvent: DeleteMsgsEvent [offsetMovedEvent=OffsetMovedEvent \
             [consumerGroup=cli-mon-ghost, messageQueue=MessageQueue [topic=CliMon, \
             brokerName={broker}, queueId=0], offsetRequest=1000, offsetNew="
        )),
        "{event}"
    );
    let pid = rustix::process::Pid::from_raw(m.child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let mut status = None;
    wait_until(Duration::from_secs(30), "the monitor exits", || {
        status = m.child.try_wait().unwrap();
        let exited = status.is_some();
        async move { exited }
    })
    .await;
    assert_eq!(status.unwrap().code(), Some(0));

    let (code, _, err) = mqadmin(&ns, &["startMonitoring", "--roundInterval", "0"]).await;
    assert_eq!(code, 2, "{err}");

    gate.close();
    cons.shutdown().await;
    p.shutdown().await;
    admin.shutdown();
}
