//! Allocation strategies: the Java output for the same input (vectors computed by an
//! independent Python implementation, `fixtures/allocate_vectors.py`), and partition properties.

use std::collections::BTreeSet;

use proptest::prelude::*;
use rocketmq_client::consumer::{
    AllocateMessageQueueAveragely, AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig, AllocateMessageQueueConsistentHash, AllocateMessageQueueStrategy,
};
use rocketmq_client::MessageQueue;

fn queues(n: usize) -> Vec<MessageQueue> {
    let mut v: Vec<MessageQueue> = (0..n)
        .map(|j| {
            MessageQueue::new(
                "TopicTest",
                format!("broker-{}", (b'a' + (j / 4) as u8) as char),
                (j % 4) as i32,
            )
        })
        .collect();
    v.sort();
    v
}

fn clients(c: usize) -> Vec<String> {
    let mut v: Vec<String> = (0..c)
        .map(|k| format!("10.0.0.{}@{}#{}", k + 1, 1000 + k, 7 * k))
        .collect();
    v.sort();
    v
}

fn strategy(name: &str) -> Box<dyn AllocateMessageQueueStrategy> {
    match name {
        "avg" => Box::new(AllocateMessageQueueAveragely),
        "circle" => Box::new(AllocateMessageQueueAveragelyByCircle),
        "chash" => Box::new(AllocateMessageQueueConsistentHash::default()),
        other => panic!("unknown strategy {other}"),
    }
}

#[test]
fn matches_java_vectors() {
    let text = include_str!("fixtures/allocate_vectors.txt");
    let mut checked = 0;
    for line in text.lines() {
        let parts: Vec<&str> = line.splitn(5, ' ').collect();
        let (name, n, c, i) = (
            parts[0],
            parts[1].parse::<usize>().unwrap(),
            parts[2].parse::<usize>().unwrap(),
            parts[3].parse::<usize>().unwrap(),
        );
        let want: Vec<usize> = parts
            .get(4)
            .map(|s| {
                s.split(',')
                    .filter(|x| !x.is_empty())
                    .map(|x| x.parse().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        let mqs = queues(n);
        let cids = clients(c);
        let got = strategy(name).allocate("g", &cids[i], &mqs, &cids);
        let want: Vec<MessageQueue> = want.into_iter().map(|j| mqs[j].clone()).collect();
        assert_eq!(got, want, "{line}");
        checked += 1;
    }
    assert_eq!(checked, 165);
}

#[test]
fn by_config_and_closures() {
    let mqs = queues(4);
    let cids = clients(2);
    let fixed = AllocateMessageQueueByConfig {
        queues: vec![mqs[3].clone()],
    };
    assert_eq!(
        fixed.allocate("g", &cids[0], &mqs, &cids),
        vec![mqs[3].clone()]
    );
    let first_only =
        |_: &str, cid: &str, mqs: &[MessageQueue], cids: &[String]| -> Vec<MessageQueue> {
            if cid == cids[0] {
                mqs.to_vec()
            } else {
                Vec::new()
            }
        };
    assert_eq!(first_only.allocate("g", &cids[0], &mqs, &cids).len(), 4);
    assert_eq!(first_only.name(), "CUSTOM");
}

proptest! {
    #[test]
    fn strategies_partition_the_queues(n in 1usize..40, c in 1usize..9, which in 0usize..3) {
        let name = ["avg", "circle", "chash"][which];
        let s = strategy(name);
        let mqs = queues(n);
        let cids = clients(c);
        let mut seen = BTreeSet::new();
        let mut total = 0;
        for cid in &cids {
            let mine = s.allocate("g", cid, &mqs, &cids);
            total += mine.len();
            seen.extend(mine);
        }
        prop_assert_eq!(total, n, "{} gave some queue twice", name);
        prop_assert_eq!(seen.len(), n, "{} left some queue out", name);
        // A consumer that is not a member gets nothing.
        prop_assert!(s.allocate("g", "stranger", &mqs, &cids).is_empty());
    }

    #[test]
    fn averagely_is_balanced(n in 1usize..64, c in 1usize..12) {
        let mqs = queues(n);
        let cids = clients(c);
        let sizes: Vec<usize> = cids.iter().map(|cid| AllocateMessageQueueAveragely.allocate("g", cid, &mqs, &cids).len()).collect();
        let (min, max) = (*sizes.iter().min().unwrap(), *sizes.iter().max().unwrap());
        prop_assert!(max - min <= 1, "{:?}", sizes);
    }
}
