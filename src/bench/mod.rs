//! `rocketmq-bench`: produce, consume and end-to-end benchmarks against any name server, or an
//! embedded name server and broker.

mod pacer;
pub mod stats;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Parser, ValueEnum};
use rocketmq_broker_lite::embedded::{EmbeddedCluster, EmbeddedOptions, TempDir};
use rocketmq_broker_lite::store::FlushDiskType;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::consumer::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumeFromWhere, DefaultMQPushConsumer,
    MessageListenerConcurrently, MessageSelector, PushConsumerConfig,
};
use rocketmq_client::producer::{DefaultMQProducer, ProducerConfig, SendResult, SendStatus};
use rocketmq_client::{ClientConfig, Message, MessageExt};
use serde_json::{json, Value};

use self::stats::{cpu_seconds, peak_rss_mib, progress, rss_mib, Recorder};

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Send as fast as allowed (or at `--rate`); latency = send to acknowledgement.
    Produce,
    /// Consume (a `--backlog` produced first, or whatever arrives).
    Consume,
    /// Send at `--rate` and consume in the same process; latency = send to listener.
    E2e,
}

/// RocketMQ benchmark: produce, consume or end to end.
#[derive(Debug, Clone, Parser)]
#[command(name = "rocketmq-bench", version, about)]
pub struct Args {
    /// produce, consume or e2e.
    #[arg(value_enum)]
    pub mode: Mode,
    /// Name server(s); without it (and without NAMESRV_ADDR) an embedded name server and
    /// broker are started in this process.
    #[arg(long, env = "NAMESRV_ADDR")]
    pub namesrv: Option<String>,
    /// Topic (with --topics N: TOPIC-0 .. TOPIC-(N-1)).
    #[arg(long, default_value = "BenchTopic")]
    pub topic: String,
    /// Number of topics.
    #[arg(long, default_value_t = 1)]
    pub topics: usize,
    /// Queues per topic (topics are created when missing).
    #[arg(long, default_value_t = 8)]
    pub queues: i32,
    /// Message body size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Producer instances (each with its own connections).
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    /// Sends in flight (over all producers).
    #[arg(long, default_value_t = 1)]
    pub inflight: usize,
    /// Messages per send (batch send when > 1).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Automatic batching: sends go through `send_async` of a producer with `auto_batch`
    /// (Java 5's defaults: 10 ms linger, 32 KiB batches); `--inflight` callers share batches.
    #[arg(long)]
    pub auto_batch: bool,
    /// Worker threads of this process's tokio runtime (0: tokio's default, one per core). The
    /// client's CPU a message depends on it: with two workers on a machine whose other core
    /// runs the broker, a quarter or more of it goes to waking and parking the second worker.
    #[arg(long, default_value_t = 0)]
    pub client_threads: usize,
    /// Fixed total rate in messages per second (latency then counts from the scheduled send
    /// time: corrected for coordinated omission).
    #[arg(long)]
    pub rate: Option<u64>,
    /// Measured seconds (after the warm-up).
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Stop after this many measured messages instead.
    #[arg(long)]
    pub count: Option<u64>,
    /// Warm-up seconds, not measured.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Consume mode: produce this many messages first, then time their consumption.
    #[arg(long)]
    pub backlog: Option<u64>,
    /// Messages per pull.
    #[arg(long, default_value_t = 32)]
    pub pull_batch: i32,
    /// Messages per listener call.
    #[arg(long, default_value_t = 1)]
    pub consume_batch: usize,
    /// Consumer group (default: a fresh one per run).
    #[arg(long)]
    pub group: Option<String>,
    /// Consume with this SQL92 selector (the broker needs `enablePropertyFilter=true`); the
    /// produced messages carry the property `bench_n`, their number modulo 10, so that
    /// `bench_n = 0` selects one in ten. With a backlog, `msgs_per_s` is then the backlog
    /// filtered per second and `delivered_per_s` the selected messages.
    #[arg(long)]
    pub sql: Option<String>,
    /// Write the summary as JSON to this file too.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// PID of the broker process, for its CPU time and RSS.
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// Flush mode of the embedded broker (ASYNC_FLUSH or SYNC_FLUSH).
    #[arg(long, default_value = "ASYNC_FLUSH")]
    pub flush: String,
    /// A label copied into the summary.
    #[arg(long)]
    pub label: Option<String>,
    /// ACL access key: every client signs its requests (a broker with `aclEnable=true`).
    #[arg(long, requires = "secret_key")]
    pub access_key: Option<String>,
    /// ACL secret key (with `--access-key`).
    #[arg(long, requires = "access_key")]
    pub secret_key: Option<String>,
    /// Every client connects with TLS (accepting any server certificate, as Java's default
    /// `tls.client.authServer=false`): name server and brokers must take TLS.
    #[arg(long)]
    pub tls: bool,
}

/// The ACL credentials of every client of the run (`--access-key`, `--secret-key`).
static CREDENTIALS: std::sync::OnceLock<Option<rocketmq_client::Credentials>> =
    std::sync::OnceLock::new();

/// Whether every client of the run connects with TLS (`--tls`).
static TLS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// The admin client of a run.
fn admin(ns: &str) -> MQAdmin {
    MQAdmin::with_config(client(ns, &format!("bench-admin-{}", std::process::id()))).expect("admin")
}

/// How late sends start against their schedule (fixed-rate runs): the harness's own share of
/// the measured latency (a pacer or worker thread waiting for a CPU).
static LATENESS: LazyLock<Recorder> = LazyLock::new(Recorder::default);

/// Time origin of the end-to-end timestamps carried in message bodies.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn nanos_since_epoch(t: Instant) -> u64 {
    t.duration_since(*EPOCH).as_nanos() as u64
}

struct Env {
    namesrv: String,
    _cluster: Option<(EmbeddedCluster, TempDir)>,
    embedded: bool,
}

async fn environment(args: &Args) -> Env {
    if let Some(ns) = &args.namesrv {
        return Env {
            namesrv: ns.clone(),
            _cluster: None,
            embedded: false,
        };
    }
    let flush = FlushDiskType::parse(&args.flush).unwrap_or_else(|| {
        eprintln!("--flush is ASYNC_FLUSH or SYNC_FLUSH");
        std::process::exit(2)
    });
    let dir = TempDir::new("rocketmq-bench").expect("temp dir");
    let c = EmbeddedCluster::start(
        dir.path(),
        EmbeddedOptions {
            flush_disk_type: flush,
            segment_size: 1 << 30,
            // `--sql` needs the broker's SQL92 filters.
            properties: args
                .sql
                .iter()
                .map(|_| ("enablePropertyFilter".to_string(), "true".to_string()))
                .collect(),
            scratch_disk: true,
            ..EmbeddedOptions::default()
        },
    )
    .await
    .expect("embedded cluster");
    eprintln!(
        "embedded name server {} and broker {} ({flush:?}); CPU figures include the broker",
        c.namesrv_addr(),
        c.broker().broker_addr()
    );
    Env {
        namesrv: c.namesrv_addr(),
        _cluster: Some((c, dir)),
        embedded: true,
    }
}

fn topics(args: &Args) -> Vec<String> {
    if args.topics <= 1 {
        vec![args.topic.clone()]
    } else {
        (0..args.topics)
            .map(|i| format!("{}-{i}", args.topic))
            .collect()
    }
}

async fn ensure_topics(admin: &MQAdmin, names: &[String], queues: i32) -> Vec<String> {
    let info = admin.cluster_info().await.expect("cluster info");
    let cluster = info
        .cluster_addr_table
        .keys()
        .next()
        .expect("no broker registered")
        .clone();
    let masters = admin.cluster_masters(&cluster).await.expect("masters");
    for t in names {
        if !matches!(admin.topic_route(t).await, Ok(Some(_))) {
            for m in &masters {
                admin
                    .create_topic_on_broker(m, t, queues, queues, 6)
                    .await
                    .expect("create topic");
            }
        }
    }
    // Wait for the brokers' start-up work (the next commit-log segment is preallocated and
    // zero-filled in the background) so that it does not count: every broker of the cluster,
    // slaves and DLedger followers included (they share the machine).
    let everyone: Vec<String> = info
        .broker_addr_table
        .values()
        .flat_map(|b| b.broker_addrs.values().cloned())
        .chain(masters.iter().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let deadline = Instant::now() + Duration::from_secs(180);
    for m in &everyone {
        while Instant::now() < deadline {
            match admin.broker_runtime_info(m).await {
                Ok(t)
                    if t.get("commitLogNextSegmentReady").map(String::as_str) != Some("false") =>
                {
                    break
                }
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
    // Wait until the name servers route every topic.
    for t in names {
        for _ in 0..200 {
            if matches!(admin.topic_route(t).await, Ok(Some(_))) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
    masters
}

fn client(ns: &str, name: &str) -> ClientConfig {
    ClientConfig {
        namesrv_addr: rocketmq_client::config::split_addrs(ns),
        instance_name: name.to_string(),
        credentials: CREDENTIALS.get().cloned().flatten(),
        tls: TLS
            .get()
            .copied()
            .unwrap_or(false)
            .then(rocketmq_client::TlsClientConfig::new),
        ..ClientConfig::default()
    }
}

async fn start_producers(args: &Args, ns: &str, topics: &[String]) -> Vec<DefaultMQProducer> {
    let mut out = Vec::new();
    for i in 0..args.producers.max(1) {
        let p = DefaultMQProducer::builder()
            .client_config(client(ns, &format!("bench-p{i}-{}", std::process::id())))
            .producer_config(ProducerConfig {
                group: format!("bench-producer-{i}"),
                send_msg_timeout: Duration::from_secs(10),
                // Measure the broker, not zlib.
                compress_msg_body_over_howmuch: usize::MAX,
                auto_batch: args.auto_batch,
                ..ProducerConfig::default()
            })
            .build()
            .expect("producer settings");
        p.start().await.expect("producer start");
        for t in topics {
            p.fetch_publish_message_queues(t).await.expect("route");
        }
        out.push(p);
    }
    out
}

/// Sends until `stop`; `stamp` puts the scheduled send time into the body (e2e).
#[allow(clippy::too_many_arguments)]
async fn run_senders(
    args: &Args,
    producers: Vec<DefaultMQProducer>,
    topics: Vec<String>,
    rec: Arc<Recorder>,
    stop: Arc<AtomicBool>,
    record_latency: bool,
    stamp: bool,
) -> Vec<tokio::task::JoinHandle<()>> {
    let body = Bytes::from(vec![b'x'; args.size.max(8)]);
    // Fixed rate: a timerfd paces the sends (see `pacer`); workers take the scheduled times from
    // a queue, so sends that wait for a free worker are measured from when they should have
    // started.
    let schedule = args.rate.map(|r| {
        let iv = Duration::from_nanos(1_000_000_000 / r.max(1) * args.batch.max(1) as u64);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
        tokio::spawn(pacer::pace(iv, tx, stop.clone()));
        Arc::new(tokio::sync::Mutex::new(rx))
    });
    let mut tasks = Vec::new();
    for w in 0..args.inflight.max(1) {
        let p = producers[w % producers.len()].clone();
        // A body of its own for each sender, as an application's messages have: one body
        // shared by every sender would have the client's cores take turns writing its reference
        // count at every send, a cost of the benchmark, not of the client.
        let (rec, stop, schedule, topics, body) = (
            rec.clone(),
            stop.clone(),
            schedule.clone(),
            topics.clone(),
            Bytes::copy_from_slice(&body),
        );
        let batch = args.batch.max(1);
        let auto_batch = args.auto_batch;
        let sql = args.sql.is_some();
        tasks.push(tokio::spawn(async move {
            let mut n = w;
            while !stop.load(Ordering::Relaxed) {
                let scheduled = match &schedule {
                    Some(rx) => match rx.lock().await.recv().await {
                        Some(at) => {
                            LATENESS.record(1, 0, Some(at.elapsed()));
                            at
                        }
                        None => return,
                    },
                    None => Instant::now(),
                };
                let topic = &topics[n % topics.len()];
                n += 1;
                let make = || {
                    if sql {
                        let mut m = Message::new(topic.clone(), body.clone());
                        let k = SQL_SEQ.fetch_add(1, Ordering::Relaxed);
                        if k.is_multiple_of(10) {
                            SQL_MATCHED.fetch_add(1, Ordering::Relaxed);
                        }
                        m.put_property("bench_n", (k % 10).to_string());
                        return m;
                    }
                    if !stamp {
                        return Message::new(topic.clone(), body.clone());
                    }
                    let mut b = body.to_vec();
                    b[..8].copy_from_slice(&nanos_since_epoch(scheduled).to_be_bytes());
                    Message::new(topic.clone(), Bytes::from(b))
                };
                // Only SEND_OK counts: a SYNC_MASTER's SLAVE_NOT_AVAILABLE or
                // FLUSH_SLAVE_TIMEOUT is a stored message, not a replicated one.
                let ok = |r: SendResult| match r.status {
                    SendStatus::SendOk => Ok(()),
                    other => Err(format!("send status {other:?}")),
                };
                let r = if auto_batch {
                    p.send_async(make())
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                } else if batch == 1 {
                    p.send(make()).await.map_err(|e| e.to_string()).and_then(ok)
                } else {
                    p.send_batch((0..batch).map(|_| make()).collect())
                        .await
                        .map_err(|e| e.to_string())
                        .and_then(ok)
                };
                match r {
                    Ok(()) => rec.record(
                        batch as u64,
                        (batch * body.len()) as u64,
                        record_latency.then(|| scheduled.elapsed()),
                    ),
                    Err(e) => {
                        rec.error();
                        if rec.errors() <= 5 {
                            eprintln!("send failed: {e}");
                        }
                    }
                }
            }
        }));
    }
    tasks
}

struct Window {
    started: Instant,
    client_cpu: Option<f64>,
    broker_cpu: Option<f64>,
    flushes: Option<u64>,
}

async fn flush_count(admin: &MQAdmin, masters: &[String]) -> Option<u64> {
    let mut total = 0;
    for m in masters {
        total += admin
            .broker_runtime_info(m)
            .await
            .ok()?
            .get("commitLogFlushCount")?
            .parse::<u64>()
            .ok()?;
    }
    Some(total)
}

/// Messages numbered for `--sql` (their `bench_n` is this modulo 10).
static SQL_SEQ: AtomicU64 = AtomicU64::new(0);
/// Of those, the ones `bench_n = 0` selects.
static SQL_MATCHED: AtomicU64 = AtomicU64::new(0);

async fn open_window(args: &Args, admin: &MQAdmin, masters: &[String]) -> Window {
    Window {
        started: Instant::now(),
        client_cpu: cpu_seconds(None),
        broker_cpu: args.broker_pid.and_then(|p| cpu_seconds(Some(p))),
        flushes: flush_count(admin, masters).await,
    }
}

async fn summarize(
    args: &Args,
    env: &Env,
    w: &Window,
    rec: &Recorder,
    admin: &MQAdmin,
    masters: &[String],
) -> Value {
    // Counts, latencies and CPU times at one moment (messages still in flight complete during
    // the awaits below).
    let secs = w.started.elapsed().as_secs_f64();
    let (msgs, bytes, latency) = rec.snapshot();
    let (client_cpu, broker_cpu) = (
        cpu_seconds(None),
        args.broker_pid.and_then(|p| cpu_seconds(Some(p))),
    );
    let per_msg_us = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if msgs > 0 => {
            Some(((b - a) * 1e6 / msgs as f64 * 100.0).round() / 100.0)
        }
        _ => None,
    };
    let flushes_now = flush_count(admin, masters).await;
    let fsync_per_ack = match (w.flushes, flushes_now) {
        (Some(a), Some(b)) if msgs > 0 => {
            Some(((b - a) as f64 / msgs as f64 * 10000.0).round() / 10000.0)
        }
        _ => None,
    };
    json!({
        "mode": format!("{:?}", args.mode).to_lowercase(),
        "label": args.label,
        "size": args.size,
        "producers": args.producers,
        "inflight": args.inflight,
        "batch": args.batch,
        "rate": args.rate,
        "topics": args.topics,
        "queues": args.queues,
        "embedded": env.embedded,
        "seconds": (secs * 1000.0).round() / 1000.0,
        "msgs": msgs,
        "msgs_per_s": (msgs as f64 / secs).round(),
        "mb_per_s": (bytes as f64 / secs / 1e6 * 10.0).round() / 10.0,
        "errors": rec.errors(),
        "latency_us": latency,
        "client_cpu_us_per_msg": per_msg_us(w.client_cpu, client_cpu),
        "broker_cpu_us_per_msg": per_msg_us(w.broker_cpu, broker_cpu),
        "client_peak_rss_mib": peak_rss_mib(None),
        "broker_peak_rss_mib": args.broker_pid.and_then(|p| peak_rss_mib(Some(p))),
        "broker_rss_mib": args.broker_pid.and_then(|p| rss_mib(Some(p))),
        "fsync_per_ack": fsync_per_ack,
        "send_start_lateness_us": if args.rate.is_some() { LATENESS.percentiles() } else { Value::Null },
    })
}

fn done(args: &Args, rec: &Recorder, started: Instant) -> bool {
    match args.count {
        Some(c) => rec.msgs() >= c,
        None => started.elapsed().as_secs_f64() >= args.duration,
    }
}

async fn measure_produce(args: &Args, env: &Env, e2e_rec: Option<Arc<Recorder>>) -> Value {
    let admin = admin(&env.namesrv);
    let names = topics(args);
    let masters = ensure_topics(&admin, &names, args.queues).await;
    let producers = start_producers(args, &env.namesrv, &names).await;
    let send_rec = Arc::new(Recorder::default());
    let stop = Arc::new(AtomicBool::new(false));
    let stamp = e2e_rec.is_some();
    let tasks = run_senders(
        args,
        producers.clone(),
        names,
        send_rec.clone(),
        stop.clone(),
        !stamp,
        stamp,
    )
    .await;
    // The recorder that the summary reports: acknowledgements, or (e2e) receipts.
    let rec = e2e_rec.unwrap_or_else(|| send_rec.clone());
    tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;
    rec.reset();
    LATENESS.reset();
    let window = open_window(args, &admin, &masters).await;
    let started = window.started;
    let stop_progress = Arc::new(AtomicBool::new(false));
    let sp = stop_progress.clone();
    let r2 = rec.clone();
    let prog =
        tokio::spawn(
            async move { progress(&r2, started, move || sp.load(Ordering::Relaxed)).await },
        );
    while !done(args, &rec, started) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let summary = summarize(args, env, &window, &rec, &admin, &masters).await;
    stop.store(true, Ordering::Relaxed);
    stop_progress.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let _ = prog.await;
    for p in producers {
        p.shutdown().await;
    }
    admin.shutdown();
    summary
}

struct Sink {
    rec: Arc<Recorder>,
    e2e: bool,
}

#[async_trait::async_trait]
impl MessageListenerConcurrently for Sink {
    async fn consume_message(
        &self,
        msgs: &[MessageExt],
        _ctx: &mut ConsumeConcurrentlyContext,
    ) -> ConsumeConcurrentlyStatus {
        let now = nanos_since_epoch(Instant::now());
        for m in msgs {
            let latency = if self.e2e && m.body.len() >= 8 {
                let sent = u64::from_be_bytes(m.body[..8].try_into().unwrap_or([0; 8]));
                Some(Duration::from_nanos(now.saturating_sub(sent)))
            } else {
                None
            };
            self.rec.record(1, m.body.len() as u64, latency);
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }
}

async fn start_consumer(
    args: &Args,
    ns: &str,
    topics: &[String],
    rec: Arc<Recorder>,
    e2e: bool,
    from: ConsumeFromWhere,
) -> DefaultMQPushConsumer {
    let group = args.group.clone().unwrap_or_else(|| {
        format!(
            "bench-consumer-{}-{}",
            std::process::id(),
            nanos_since_epoch(Instant::now())
        )
    });
    let mut c = DefaultMQPushConsumer::builder()
        .client_config(client(ns, &format!("bench-c-{}", std::process::id())))
        .consumer_config(PushConsumerConfig {
            group,
            consume_from_where: from,
            pull_batch_size: args.pull_batch,
            consume_message_batch_max_size: args.consume_batch,
            ..PushConsumerConfig::default()
        });
    for t in topics {
        c = match &args.sql {
            Some(sql) => c.subscribe_with_selector(t.clone(), MessageSelector::by_sql(sql.clone())),
            None => c.subscribe(t.clone(), "*"),
        };
    }
    let c = c.build().expect("consumer settings");
    c.register_message_listener_concurrently(Sink { rec, e2e })
        .expect("listener");
    c.start().await.expect("consumer start");
    let want = topics.len() * args.queues as usize;
    let deadline = Instant::now() + Duration::from_secs(30);
    while c
        .owned_queues()
        .iter()
        .filter(|q| topics.iter().any(|t| q.topic == *t))
        .count()
        < want
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c
}

async fn measure_consume(args: &Args, env: &Env) -> Value {
    let admin = admin(&env.namesrv);
    let names = topics(args);
    let masters = ensure_topics(&admin, &names, args.queues).await;
    let rec = Arc::new(Recorder::default());
    if let Some(n) = args.backlog {
        eprintln!("producing a backlog of {n} messages ...");
        let fill = Args {
            batch: 64,
            inflight: 4,
            rate: None,
            ..args.clone()
        };
        let producers = start_producers(&fill, &env.namesrv, &names).await;
        let sent = Arc::new(Recorder::default());
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = run_senders(
            &fill,
            producers.clone(),
            names.clone(),
            sent.clone(),
            stop.clone(),
            false,
            false,
        )
        .await;
        while sent.msgs() < n {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            let _ = t.await;
        }
        for p in producers {
            p.shutdown().await;
        }
        let total = sent.msgs();
        // The backlog filled commit-log segments: let the broker finish preallocating the next
        // one before timing the consumption.
        ensure_topics(&admin, &names, args.queues).await;
        eprintln!("backlog of {total} messages ready; consuming");
        let window = open_window(args, &admin, &masters).await;
        let started = window.started;
        let c = start_consumer(
            args,
            &env.namesrv,
            &names,
            rec.clone(),
            false,
            ConsumeFromWhere::ConsumeFromFirstOffset,
        )
        .await;
        let stop_progress = Arc::new(AtomicBool::new(false));
        let sp = stop_progress.clone();
        let r2 = rec.clone();
        let prog = tokio::spawn(async move {
            progress(&r2, started, move || sp.load(Ordering::Relaxed)).await
        });
        let deadline = Instant::now() + Duration::from_secs_f64(args.duration.max(60.0));
        // With a selector only the selected messages arrive.
        let want = if args.sql.is_some() {
            SQL_MATCHED.load(Ordering::Relaxed)
        } else {
            total
        };
        while rec.msgs() < want && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut summary = summarize(args, env, &window, &rec, &admin, &masters).await;
        // Senders fill whole batches: the backlog is `--backlog` rounded up.
        summary["backlog"] = json!(total);
        if args.sql.is_some() {
            // The work is filtering the backlog: rates and CPU per backlog message.
            let secs = summary["seconds"].as_f64().unwrap_or(0.0);
            let delivered = summary["msgs"].as_u64().unwrap_or(0);
            summary["delivered_per_s"] = summary["msgs_per_s"].clone();
            summary["msgs_per_s"] = json!(if secs > 0.0 {
                (total as f64 / secs).round()
            } else {
                0.0
            });
            for k in ["client_cpu_us_per_msg", "broker_cpu_us_per_msg"] {
                if let Some(v) = summary[k].as_f64() {
                    let per_backlog = v * delivered as f64 / total.max(1) as f64;
                    summary[k] = json!((per_backlog * 100.0).round() / 100.0);
                }
            }
            summary["selector"] = json!(args.sql);
        }
        stop_progress.store(true, Ordering::Relaxed);
        let _ = prog.await;
        c.shutdown().await;
        admin.shutdown();
        return summary;
    }
    let c = start_consumer(
        args,
        &env.namesrv,
        &names,
        rec.clone(),
        false,
        ConsumeFromWhere::ConsumeFromLastOffset,
    )
    .await;
    tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;
    rec.reset();
    LATENESS.reset();
    let window = open_window(args, &admin, &masters).await;
    let started = window.started;
    let stop_progress = Arc::new(AtomicBool::new(false));
    let sp = stop_progress.clone();
    let r2 = rec.clone();
    let prog =
        tokio::spawn(
            async move { progress(&r2, started, move || sp.load(Ordering::Relaxed)).await },
        );
    while !done(args, &rec, started) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let summary = summarize(args, env, &window, &rec, &admin, &masters).await;
    stop_progress.store(true, Ordering::Relaxed);
    let _ = prog.await;
    c.shutdown().await;
    admin.shutdown();
    summary
}

async fn measure_e2e(args: &Args, env: &Env) -> Value {
    if args.rate.is_none() {
        eprintln!("e2e needs --rate");
        std::process::exit(2);
    }
    let admin = admin(&env.namesrv);
    let names = topics(args);
    ensure_topics(&admin, &names, args.queues).await;
    admin.shutdown();
    let rec = Arc::new(Recorder::default());
    let c = start_consumer(
        args,
        &env.namesrv,
        &names,
        rec.clone(),
        true,
        ConsumeFromWhere::ConsumeFromLastOffset,
    )
    .await;
    let summary = measure_produce(args, env, Some(rec)).await;
    c.shutdown().await;
    summary
}

fn print_summary(v: &Value) {
    let lat = &v["latency_us"];
    eprintln!("---");
    eprintln!(
        "{} msgs in {} s: {} msgs/s, {} MB/s, errors {}",
        v["msgs"], v["seconds"], v["msgs_per_s"], v["mb_per_s"], v["errors"]
    );
    if !lat.is_null() {
        eprintln!(
            "latency µs: p50 {} p90 {} p99 {} p99.9 {} max {}",
            lat["p50"], lat["p90"], lat["p99"], lat["p99.9"], lat["max"]
        );
    }
    eprintln!(
        "CPU µs/msg: client {} broker {}; peak RSS MiB: client {} broker {}; fsync per ack {}",
        v["client_cpu_us_per_msg"],
        v["broker_cpu_us_per_msg"],
        v["client_peak_rss_mib"],
        v["broker_peak_rss_mib"],
        v["fsync_per_ack"]
    );
    println!("{v}");
}

/// Runs the benchmark described by the command line.
pub async fn run(args: Args) {
    let _ = CREDENTIALS.set(
        args.access_key
            .clone()
            .zip(args.secret_key.clone())
            .map(|(ak, sk)| rocketmq_client::Credentials::new(ak, sk)),
    );
    let _ = TLS.set(args.tls);
    LazyLock::force(&EPOCH);
    let env = environment(&args).await;
    let summary = match args.mode {
        Mode::Produce => measure_produce(&args, &env, None).await,
        Mode::Consume => measure_consume(&args, &env).await,
        Mode::E2e => measure_e2e(&args, &env).await,
    };
    print_summary(&summary);
    if let Some(path) = &args.json {
        if let Err(e) = std::fs::write(
            path,
            serde_json::to_vec_pretty(&summary).unwrap_or_default(),
        ) {
            eprintln!("cannot write {}: {e}", path.display());
        }
    }
    if let Some((c, _dir)) = env._cluster {
        let _ = c.shutdown().await;
    }
}
