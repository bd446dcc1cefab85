//! Property test: any sequence of appends, flushes, checkpoints, clean restarts and power cuts
//! (clean or tearing the last writes) reads back exactly what was acknowledged, plus possibly a
//! prefix of what was appended after it — never anything else, never out of order.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use proptest::prelude::*;
use rocketmq_broker_lite::store::{FlushDiskType, MessageStore, StoreConfig};

#[derive(Debug, Clone)]
enum Op {
    Append {
        queue: i32,
        count: usize,
        size: usize,
    },
    Batch {
        queue: i32,
        count: usize,
    },
    Flush,
    Checkpoint,
    CleanRestart,
    PowerCut {
        torn: bool,
    },
    ProcessCrash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0i32..3, 1usize..20, 0usize..600).prop_map(|(queue, count, size)| Op::Append { queue, count, size }),
        2 => (0i32..3, 1usize..8).prop_map(|(queue, count)| Op::Batch { queue, count }),
        2 => Just(Op::Flush),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::CleanRestart),
        2 => any::<bool>().prop_map(|torn| Op::PowerCut { torn }),
        1 => Just(Op::ProcessCrash),
    ]
}

fn config(sync: bool) -> StoreConfig {
    let mut c = small_config(4096);
    c.flush_disk_type = if sync {
        FlushDiskType::SyncFlush
    } else {
        FlushDiskType::AsyncFlush
    };
    c.flush_interval = Duration::from_secs(3600);
    c.consume_queue_entries_per_file = 16;
    c
}

struct Model {
    /// Per queue: every message appended and not known lost, in order.
    appended: Vec<Vec<Bytes>>,
    /// Per queue: how many of `appended` were acknowledged as durable (survive a power cut).
    acked: Vec<usize>,
    /// Per queue: how many were acknowledged as written (survive a process crash).
    written: Vec<usize>,
    counter: u64,
}

fn check(
    store: &MessageStore,
    model: &mut Model,
    why: &str,
    power_cut: bool,
) -> Result<(), TestCaseError> {
    for q in 0..3 {
        let got = read_queue(store, "T", q as i32);
        let want = &model.appended[q];
        let must = if power_cut {
            model.acked[q]
        } else {
            model.written[q].max(model.acked[q])
        };
        prop_assert!(
            got.len() >= must,
            "{why}: queue {q} lost acknowledged messages: {} < {}",
            got.len(),
            must
        );
        prop_assert!(
            got.len() <= want.len(),
            "{why}: queue {q} has messages never appended"
        );
        prop_assert_eq!(&got[..], &want[..got.len()], "{}: queue {} differs", why, q);
        // What survived is now the truth; the rest is gone for good.
        model.appended[q].truncate(got.len());
        model.acked[q] = got.len();
        model.written[q] = got.len();
        prop_assert_eq!(store.max_offset("T", q as i32), got.len() as i64);
    }
    Ok(())
}

fn q_written(store: &MessageStore, end: u64) -> bool {
    store.wait_written(end, Duration::from_secs(10))
}

fn run(ops: Vec<Op>, sync: bool, seed: u64) -> Result<(), TestCaseError> {
    let sim = SimEnv::new(seed);
    let mut store = MessageStore::open_with(config(sync), sim.env()).unwrap();
    let mut model = Model {
        appended: vec![Vec::new(); 3],
        acked: vec![0; 3],
        written: vec![0; 3],
        counter: 0,
    };
    for op in ops {
        match op {
            Op::Append { queue, count, size } => {
                for _ in 0..count {
                    model.counter += 1;
                    let body = Bytes::from(format!("{}:{}", model.counter, "b".repeat(size)));
                    let r = store
                        .put_message_blocking(&msg("T", queue, body.clone()))
                        .unwrap();
                    prop_assert_eq!(r.queue_offset, model.appended[queue as usize].len() as i64);
                    model.appended[queue as usize].push(body);
                    model.written[queue as usize] = model.appended[queue as usize].len();
                    if sync {
                        model.acked[queue as usize] = model.appended[queue as usize].len();
                    }
                }
            }
            Op::Batch { queue, count } => {
                let bodies: Vec<Bytes> = (0..count)
                    .map(|_| {
                        model.counter += 1;
                        Bytes::from(format!("batch-{}", model.counter))
                    })
                    .collect();
                let msgs: Vec<_> = bodies.iter().map(|b| msg("T", queue, b.clone())).collect();
                let r = store.put_messages(&msgs).unwrap();
                model.appended[queue as usize].extend(bodies);
                if q_written(&store, r.end_offset) {
                    model.written[queue as usize] = model.appended[queue as usize].len();
                }
                if sync {
                    store
                        .wait_durable(r.end_offset, Duration::from_secs(10))
                        .unwrap();
                    model.acked[queue as usize] = model.appended[queue as usize].len();
                }
            }
            Op::Flush => {
                store.flush().unwrap();
                for q in 0..3 {
                    model.acked[q] = model.appended[q].len();
                }
            }
            Op::Checkpoint => {
                store.wait_dispatched(Duration::from_secs(10));
                store.checkpoint().unwrap();
            }
            Op::CleanRestart => {
                store.shutdown().unwrap();
                for q in 0..3 {
                    model.acked[q] = model.appended[q].len();
                }
                drop(store);
                store = MessageStore::open_with(config(sync), sim.env()).unwrap();
                check(&store, &mut model, "clean restart", true)?;
            }
            Op::PowerCut { torn } => {
                sim.fs.power_cut(torn);
                drop(store);
                store = MessageStore::open_with(config(sync), sim.env()).unwrap();
                check(&store, &mut model, "power cut", true)?;
            }
            Op::ProcessCrash => {
                sim.fs.kill_process();
                drop(store);
                store = MessageStore::open_with(config(sync), sim.env()).unwrap();
                check(&store, &mut model, "process crash", false)?;
            }
        }
    }
    store.wait_dispatched(Duration::from_secs(10));
    check(&store, &mut model, "end", false)?;
    store.shutdown().unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("STORE_MODEL_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48),
        ..ProptestConfig::default()
    })]

    #[test]
    fn reads_back_exactly_what_was_acknowledged(
        ops in proptest::collection::vec(op(), 1..40),
        sync in any::<bool>(),
        seed in any::<u64>(),
    ) {
        run(ops, sync, seed)?;
    }
}
